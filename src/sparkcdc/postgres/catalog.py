"""What the PostgreSQL source reads of its tables from the system catalogs.

Tables are ``(schema, table)`` pairs: the ``(database, table)`` of the layers above is the
schema here (one source connects to one database, as Flink CDC's ``database-name``).
Columns are typed by ``postgres/types`` from their type OID and typmod, the form the
replication stream's Relation messages give, so the schema read here and the rows read
there agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from sparkcdc.errors import SourceError
from sparkcdc.model.schema import Column, TableSchema, create_table_sql
from sparkcdc.model.tables import TableFilter
from sparkcdc.postgres.replication import quote_identifier
from sparkcdc.postgres.types import DecimalHandlingMode, TypeCatalog, column_type

_TABLE_KINDS = "('r', 'p')"  # ordinary and partitioned tables


class SqlRows:
    """A psycopg connection as the type catalog's ``SqlRunner`` (rows as text)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def query(self, command: str) -> list[tuple[str | None, ...]]:
        rows = self.conn.execute(command).fetchall()
        return [tuple(None if v is None else _text(v) for v in row) for row in rows]


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


def quote_table(schema: str, table: str) -> str:
    """``"schema"."table"``."""
    return f"{quote_identifier(schema)}.{quote_identifier(table)}"


def match_tables(conn: psycopg.Connection[Any], tables: TableFilter) -> list[tuple[str, str]]:
    """The database's tables (schema, table) that ``tables`` matches, sorted."""
    rows = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE c.relkind IN {_TABLE_KINDS} AND NOT c.relispartition "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp\\_%%'"
    ).fetchall()
    return sorted((str(s), str(t)) for s, t in rows if tables.matches(str(s), str(t)))


def _oid(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(
        "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN {_TABLE_KINDS}",
        [schema, table],
    ).fetchone()
    if row is None:
        raise SourceError(
            f"table {quote_table(schema, table)} does not exist in PostgreSQL database "
            f"{conn.info.dbname!r} (or is no table): check schema-name and table-name"
        )
    return int(row[0])


def load_schema(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE,
) -> TableSchema:
    """A table's columns (in attnum order) and primary key, typed as the stream types them."""
    oid = _oid(conn, schema, table)
    attributes = conn.execute(
        "SELECT a.attname, a.atttypid, a.atttypmod, NOT a.attnotnull, t.typname, "
        "format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        [oid],
    ).fetchall()
    catalog = TypeCatalog.builtin().load(SqlRows(conn), (int(a[1]) for a in attributes))
    columns = tuple(
        Column(
            str(name),
            str(type_name),
            str(formatted),
            bool(nullable),
            column_type(
                catalog, int(type_oid), int(typmod), where=f"{schema}.{table}.{name}", mode=mode
            ).spark_type,
        )
        for name, type_oid, typmod, nullable, type_name, formatted in attributes
    )
    primary = _index_columns(conn, oid, "i.indisprimary")
    return TableSchema(schema, table, columns, primary[0] if primary else ())


def _index_columns(conn: psycopg.Connection[Any], oid: int, which: str) -> list[tuple[str, ...]]:
    rows = conn.execute(
        "SELECT i.indexrelid, array_agg(a.attname ORDER BY k.ord) FROM pg_index i "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        f"WHERE i.indrelid = %s AND {which} AND i.indpred IS NULL "
        "GROUP BY i.indexrelid ORDER BY i.indexrelid",
        [oid],
    ).fetchall()
    return [tuple(str(c) for c in columns) for _, columns in rows]


def unique_keys(conn: psycopg.Connection[Any], schema: str, table: str) -> list[tuple[str, ...]]:
    """The table's unique keys (not partial, on columns only), primary key included."""
    return _index_columns(conn, _oid(conn, schema, table), "i.indisunique AND i.indexprs IS NULL")


def shared_keys(
    conn: psycopg.Connection[Any], schema: str, table: str, columns: Sequence[str], limit: int
) -> list[tuple[Any, ...]]:
    """Up to ``limit`` values of ``columns`` that several rows share, with their count."""
    listed = ", ".join(quote_identifier(c) for c in columns)
    rows = conn.execute(
        f"SELECT {listed}, count(*) FROM {quote_table(schema, table)} "
        f"GROUP BY {listed} HAVING count(*) > 1 LIMIT {int(limit)}"
    ).fetchall()
    return [tuple(row) for row in rows]


def estimated_rows(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    """``pg_class.reltuples`` (-1, a table never vacuumed or analyzed, counts as 0)."""
    row = conn.execute(
        "SELECT c.reltuples FROM pg_class c WHERE c.oid = %s", [_oid(conn, schema, table)]
    ).fetchone()
    assert row is not None
    return max(0, int(row[0]))


def create_table_statement(schema: TableSchema) -> str:
    """``CREATE TABLE "s"."t" (...)`` in PostgreSQL's SQL, from the columns' own types.

    >>> from sparkcdc.model.schema import Column
    >>> create_table_statement(TableSchema("public", "t", (
    ...     Column("id", "int4", "integer", False, "INT"),
    ...     Column("n", "text", "text", True, "STRING")), ("id",)))
    'CREATE TABLE "public"."t" ("id" integer NOT NULL, "n" text, PRIMARY KEY ("id"))'
    """
    return create_table_sql(schema, quote_identifier, quote_table)


def lock_for_schema_read(conn: psycopg.Connection[Any], names: Iterable[tuple[str, str]]) -> None:
    """Take ACCESS SHARE locks on ``names`` in the open transaction: no DDL on them commits
    until it ends (each DDL takes ACCESS EXCLUSIVE), so schemas read and a position taken
    inside it agree."""
    listed = ", ".join(quote_table(s, t) for s, t in names)
    if listed:
        conn.execute(f"LOCK TABLE {listed} IN ACCESS SHARE MODE")
