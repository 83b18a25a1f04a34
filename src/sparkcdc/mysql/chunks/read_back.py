"""A column of a source table read back by key: the sink's key columns and the column, in
the decoder's value form, page by page (keyset pagination on the primary key, a plain
non-locking SELECT per page), for a column added with values the binlog did not carry."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.schema import Column as SchemaColumn
from sparkcdc.model.schema import TableSchema
from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL, sql_converter, to_sql_param
from sparkcdc.mysql.protocol.connection import KeptConnection

READ_BACK_ROWS = 50_000  # keys per SELECT, and per update of the sink


def read_column_pages(
    settings: Any, schema: TableSchema, keys: Sequence[SchemaColumn], column: SchemaColumn
) -> Any:
    """The column and the sink's key columns of every source row, in the decoder's value
    form, in pages of ``READ_BACK_ROWS`` rows (keyset pagination on the primary key, a
    plain non-locking SELECT per page; a page whose connection the server dropped is read
    again on a new one)."""
    order = list(schema.primary_key) or [k.name for k in keys]
    by_name = {c.name: c for c in schema.columns}
    wanted = [*keys, column]
    selected = [*[by_name[o] for o in order], *wanted]
    converters = [sql_converter(c) for c in selected]
    # the statement runs with parameters (pymysql formats it with %)
    names = ", ".join(quote_mysql(c.name, pyformat=True) for c in selected)
    table = quote_mysql_table(schema.database, schema.table, pyformat=True)
    ordered = ", ".join(quote_mysql(o, pyformat=True) for o in order)

    def page(after: tuple[Any, ...] | None, conn: Any) -> list[tuple[Any, ...]]:
        where, params = "", []
        if after is not None:
            holes = ", ".join("%s" for _ in order)
            where = f"WHERE ({ordered}) > ({holes})"
            params = [to_sql_param(v) for v in after]
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT {names} FROM {table} {where} ORDER BY {ordered} LIMIT {READ_BACK_ROWS}",
                params,
            )
            return list(cur.fetchall())

    after: tuple[Any, ...] | None = None
    conn = KeptConnection.to(settings)
    conn.session(SESSION_TIME_ZONE_SQL)
    try:
        while True:
            raw = conn.run(functools.partial(page, after))
            if not raw:
                return
            rows = [
                tuple(
                    v if v is None or f is None else f(v)
                    for v, f in zip(r, converters, strict=True)
                )
                for r in raw
            ]
            after = tuple(raw[-1][: len(order)])
            yield [r[len(order) :] for r in rows]
            if len(raw) < READ_BACK_ROWS:
                return
    finally:
        conn.close()
