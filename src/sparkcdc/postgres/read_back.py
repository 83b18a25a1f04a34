"""An added column's values read back by key (``SourceDialect.read_column``): the rows a
pipeline's sink had before ``ADD COLUMN`` hold the column's DEFAULT, which the WAL never
carries (pipeline/evolution/fills.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import psycopg

from sparkcdc.errors import SourceError
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.postgres.catalog import SqlRows, quote_table
from sparkcdc.postgres.replication import PostgresEndpoint, quote_identifier
from sparkcdc.postgres.session import KeptSession
from sparkcdc.postgres.types import DecimalHandlingMode, TypeCatalog, column_type
from sparkcdc.postgres.values import decode_text_column

READ_BACK_ROWS = 10_000


def read_column_pages(
    endpoint: PostgresEndpoint,
    schema: TableSchema,
    keys: Sequence[Column],
    column: Column,
    mode: DecimalHandlingMode,
) -> Iterator[list[tuple[Any, ...]]]:
    """``keys`` then ``column`` of every row, in the stream's value form, in pages of
    ``READ_BACK_ROWS`` (keyset pagination on the primary key; a page whose connection the
    server dropped is read again on a new one)."""
    order = list(schema.primary_key) or [k.name for k in keys]
    if not order:
        raise SourceError(f"table {schema.qualified_name} has no key to read a column back by")
    wanted = [k.name for k in keys] + [column.name]
    table = quote_table(schema.database, schema.table)
    ordered = ", ".join(quote_identifier(o) for o in order)
    # by position: a key column is selected twice (as the order's and as one of ``keys``)
    positions = ", ".join(str(i + 1) for i in range(len(order)))
    texts = ", ".join(f"{quote_identifier(n)}::text" for n in wanted)
    session = KeptSession(endpoint)
    try:
        types = session.run(lambda conn: _types(conn, schema, wanted, mode))
        after: tuple[Any, ...] | None = None
        while True:
            where, params = "", list[Any]()
            if after is not None:
                where = f"WHERE ({ordered}) > ({', '.join('%s' for _ in order)})"
                params = list(after)
            sql = (
                f"SELECT {ordered}, {texts} FROM {table} {where} "
                f"ORDER BY {positions} LIMIT {READ_BACK_ROWS}"
            )
            rows = session.run(partial(_page, sql, params))
            if not rows:
                return
            after = tuple(rows[-1][: len(order)])
            values = [
                decode_text_column(
                    [r[len(order) + i] for r in rows], mapped, f"{schema.qualified_name}.{n}"
                ).to_pylist()
                for i, (n, mapped) in enumerate(zip(wanted, types, strict=True))
            ]
            yield list(zip(*values, strict=True))
    finally:
        session.close()


def _page(sql: str, params: list[Any], conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, params).fetchall())


def _types(
    conn: psycopg.Connection[Any],
    schema: TableSchema,
    names: Sequence[str],
    mode: DecimalHandlingMode,
) -> list[Any]:
    rows = conn.execute(
        "SELECT a.attname, a.atttypid, a.atttypmod FROM pg_attribute a "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        [quote_table(schema.database, schema.table)],
    ).fetchall()
    found = {str(name): (int(oid), int(typmod)) for name, oid, typmod in rows}
    missing = [n for n in names if n not in found]
    if missing:
        raise SourceError(
            f"table {schema.qualified_name} has no column {missing[0]!r} now: it was renamed "
            "or dropped since it was added, so its values cannot be read back"
        )
    catalog = TypeCatalog.builtin().load(SqlRows(conn), (found[n][0] for n in names))
    return [
        column_type(catalog, *found[n], where=f"{schema.qualified_name}.{n}", mode=mode)
        for n in names
    ]
