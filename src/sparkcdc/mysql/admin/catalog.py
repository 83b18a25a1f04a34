"""Which tables a job captures, and their schemas, read from information_schema."""

from __future__ import annotations

from typing import Any

from sparkcdc.errors import ConfigError, SnapshotError
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.tables import TableFilter

_SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")


def match_tables(conn: Any, tables: TableFilter) -> list[tuple[str, str]]:
    """Base tables the filter captures, sorted.

    Raises ConfigError listing what exists when nothing matches.
    """
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN %s "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME",
            (_SYSTEM_DATABASES,),
        )
        rows = [(str(db), str(name)) for db, name in cur.fetchall()]
    matched = [(db, t) for db, t in rows if tables.matches(db, t)]
    if not matched:
        # the tables of the databases the patterns name are the likely intended ones
        near = [(db, t) for db, t in rows if tables.matches_database(db)] or rows
        shown = ", ".join(f"{db}.{t}" for db, t in near[:20]) or "(none)"
        more = f" and {len(near) - 20} more" if len(near) > 20 else ""
        raise ConfigError(
            f"{tables.describe()} matches no table (regular expressions that must match the "
            f"whole database and table name). Tables that exist"
            f"{' in the databases it names' if near is not rows else ''}: {shown}{more}"
        )
    return matched


def load_schema(conn: Any, database: str, table: str) -> TableSchema:
    """The current schema of one table from information_schema."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, "
            "CHARACTER_SET_NAME "
            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        rows = cur.fetchall()
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' "
            "ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        primary_key = tuple(str(r[0]) for r in cur.fetchall())
    if not rows:
        raise SnapshotError(f"table {database}.{table} does not exist (or has no columns)")
    columns = tuple(
        Column.from_mysql(
            str(name),
            _text(data_type),
            _text(column_type),
            nullable == "YES",
            table=f"{database}.{table}",
            charset=None if charset is None else _text(charset),
        )
        for name, data_type, column_type, nullable, _key, charset in rows
    )
    return TableSchema(database, table, columns, primary_key)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def unique_keys(conn: Any, database: str, table: str) -> list[tuple[str, ...]]:
    """The column lists of the table's unique indexes (its primary key among them)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 "
            "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            (database, table),
        )
        indexes: dict[str, list[str]] = {}
        for index, column in cur.fetchall():
            indexes.setdefault(_text(index), []).append(_text(column))
    return [tuple(columns) for columns in indexes.values()]


def estimated_rows(conn: Any, database: str, table: str) -> int:
    """InnoDB's estimate of the table's row count (0 when unknown)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (database, table),
        )
        row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0
