"""A chunk's SELECT into Arrow (the rows of DESIGN.md §2's chunk read, between its
watermarks): connectorx on a connection in clear, else the compiled text splitter
(``textrows``) on the TLS connection, else (no C compiler at install) a pymysql streaming
cursor. Every reader gives the binlog decoder's values (``sql_values``)."""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from sparkcdc.errors import SchemaChangedError, SnapshotError
from sparkcdc.model.dialect import ChunkSelect
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.row_values import arrow_schema, arrow_type
from sparkcdc.model.schema import PLUGIN_TEXT_TYPES, Column, TableSchema
from sparkcdc.mysql.chunks import textrows
from sparkcdc.mysql.chunks.sql_values import (
    SESSION_TIME_ZONE_SQL,
    parse_time,
    sql_converter,
    to_sql_param,
)
from sparkcdc.mysql.protocol.connection import ConnectionSettings

log = logging.getLogger(__name__)

FETCH_ROWS = 10_000

# Server errors that mean the table lost a column or vanished under the snapshot.
_ER_BAD_FIELD = 1054
_ER_NO_SUCH_TABLE = 1146


def chunk_where(key_column: str, start: Any, end: Any) -> tuple[str, list[Any]]:
    """The WHERE clause (or '') selecting the chunk ``[start, end)`` (None: unbounded; the
    chunk without a start holds the NULL keys too), and its parameters.

    >>> chunk_where("id", None, 10)
    ('WHERE (`id` IS NULL OR `id` < %s)', [10])
    >>> chunk_where("id", 10, None)
    ('WHERE `id` >= %s', [10])
    """
    # the clause runs with parameters (or is formatted with them for connectorx)
    k = quote_mysql(key_column, pyformat=True)
    if start is None and end is None:
        return "", []
    if start is None:
        return f"WHERE ({k} IS NULL OR {k} < %s)", [to_sql_param(end)]
    if end is None:
        return f"WHERE {k} >= %s", [to_sql_param(start)]
    return f"WHERE {k} >= %s AND {k} < %s", [to_sql_param(start), to_sql_param(end)]


def _chunk_select(spec: ChunkSelect) -> tuple[str, list[Any]]:
    """The chunk's SELECT, with ``%s`` for its parameters (pymysql's paramstyle)."""
    schema = spec.schema
    where, params = chunk_where(spec.key_column, spec.start, spec.end)
    names = ", ".join(quote_mysql(c.name, pyformat=True) for c in schema.columns)
    table = quote_mysql_table(schema.database, schema.table, pyformat=True)
    return f"SELECT {names} FROM {table} {where}", params


def select_text(conn: Any, spec: ChunkSelect) -> pa.Table:
    """The chunk's rows split into Arrow by the compiled splitter (``textrows``)."""
    query, params = _chunk_select(spec)
    with conn.cursor() as cur:
        sql = cur.mogrify(query, params)  # exactly what pymysql's execute would send
    return textrows.select_text(conn, sql, spec.schema.columns)


def select_pymysql(conn: Any, spec: ChunkSelect) -> pa.Table:
    """The chunk's rows over a pymysql streaming (unbuffered) cursor."""
    query, params = _chunk_select(spec)
    converters = [sql_converter(c) for c in spec.schema.columns]
    target = arrow_schema(spec.schema.columns)
    batches: list[pa.RecordBatch] = []
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(query, params)
        while True:
            rows = cur.fetchmany(FETCH_ROWS)
            if not rows:
                break
            arrays = []
            for i, (convert, field) in enumerate(zip(converters, target, strict=True)):
                values = [r[i] for r in rows]
                if convert is not None:
                    values = [None if v is None else convert(v) for v in values]
                arrays.append(pa.array(values, type=field.type))
            batches.append(pa.RecordBatch.from_arrays(arrays, schema=target))
    return pa.Table.from_batches(batches, schema=target)


def connectorx_available() -> bool:
    try:
        import connectorx  # noqa: F401
    except ImportError:
        return False
    return True


def _cx_expr(column: Column) -> str:
    name = quote_mysql(column.name)
    # connectorx cannot read negative TIME, and reads DECIMAL into decimal128(38, 10)
    # through a 96-bit decimal: exact up to 28 digits with at most 10 after the point;
    # wider ones come as text
    if (
        column.data_type == "time"
        or column.data_type in PLUGIN_TEXT_TYPES
        or (column.data_type in ("decimal", "numeric") and not _cx_exact_decimal(column))
    ):
        return f"CAST({name} AS CHAR) AS {name}"
    return name


def _cx_exact_decimal(column: Column) -> bool:
    target = arrow_type(column)
    return bool(pa.types.is_decimal128(target)) and target.precision <= 28 and target.scale <= 10


def _cx_column(array: pa.ChunkedArray, column: Column) -> pa.ChunkedArray:
    target = arrow_type(column)
    if column.data_type == "time":
        values = [None if v is None else parse_time(v) for v in array.to_pylist()]
        return pa.chunked_array([pa.array(values, type=target)], type=target)
    if column.data_type == "bit":
        bits = [None if v is None else int.from_bytes(v, "big") for v in array.to_pylist()]
        return pa.chunked_array([pa.array(bits, type=target)], type=target)
    if column.data_type in PLUGIN_TEXT_TYPES:  # read as text (_cx_expr): back to binlog bytes
        convert = sql_converter(column)
        assert convert is not None
        raw = [None if v is None else convert(v) for v in array.to_pylist()]
        return pa.chunked_array([pa.array(raw, type=target)], type=target)
    if array.type == target:
        return array
    return pc.cast(array, target)


def select_connectorx(conn: Any, settings: ConnectionSettings, spec: ChunkSelect) -> pa.Table:
    """The chunk's rows read by connectorx straight into Arrow."""
    import connectorx as cx

    schema = spec.schema
    where, params = chunk_where(spec.key_column, spec.start, spec.end)
    if params:
        where = where % tuple(conn.escape(p) for p in params)
    exprs = ", ".join(_cx_expr(c) for c in schema.columns)
    sql = f"SELECT {exprs} FROM {quote_mysql_table(schema.database, schema.table)} {where}"
    user = urllib.parse.quote(settings.user, safe="")
    password = urllib.parse.quote(settings.password, safe="")
    url = f"mysql://{user}:{password}@{settings.host}:{settings.port}/{schema.database}"
    table = cx.read_sql(url, sql, return_type="arrow", pre_execution_query=SESSION_TIME_ZONE_SQL)
    columns = [_cx_column(table.column(i), c) for i, c in enumerate(schema.columns)]
    return pa.Table.from_arrays(columns, schema=arrow_schema(schema.columns))


def select_chunk(
    conn: Any, settings: ConnectionSettings, spec: ChunkSelect
) -> tuple[pa.Table, str]:
    """The chunk's rows and the reader that read them: connectorx on a connection in
    clear (where installed), else the compiled text splitter (``textrows``) where it is
    built, else pymysql. ``spec.skip`` names readers not to use (tests compare them)."""
    try:
        return _select(conn, settings, spec)
    except pymysql.MySQLError as exc:
        raise _changed_shape(spec.schema, spec.index, exc) from None


def _select(conn: Any, settings: ConnectionSettings, spec: ChunkSelect) -> tuple[pa.Table, str]:
    # connectorx 0.4.6 cannot be trusted with TLS: with ``ssl-mode=REQUIRED`` (or
    # VERIFY_CA and ``ssl-ca``) each read opens two connections, one TLS and one plain
    # (measured by the server's Connections and Ssl_accepts counters). It reads only what
    # would be read in clear anyway, on a connection that did not negotiate TLS (ssl-mode
    # disabled, or preferred against a server without TLS); TLS chunks are read on the
    # TLS connection itself. In clear connectorx is the faster of the two.
    use_text = "text" not in spec.skip
    if (
        "connectorx" not in spec.skip
        and connectorx_available()
        and not getattr(conn, "_secure", False)
    ):
        try:
            return select_connectorx(conn, settings, spec), "connectorx"
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # connectorx panics surface as BaseException
            log.info(
                "connectorx cannot read %s (%s); using %s",
                spec.schema.qualified_name,
                type(exc).__name__,
                "the text reader" if use_text and textrows.available(conn) else "pymysql",
            )
    return select_on(conn, spec)


def select_on(conn: Any, spec: ChunkSelect) -> tuple[pa.Table, str]:
    """The chunk's rows read on ``conn`` itself (its TLS, if it has any) and the reader that
    read them: the compiled text splitter where it is built, else pymysql."""
    if "text" not in spec.skip and textrows.available(conn):
        return select_text(conn, spec), "text"
    return select_pymysql(conn, spec), "pymysql"


def _changed_shape(schema: TableSchema, index: int, exc: pymysql.MySQLError) -> Exception:
    code = exc.args[0] if exc.args else None
    if code == _ER_BAD_FIELD:  # a restart of the query (pipelines restart by themselves)
        return SchemaChangedError(
            f"table {schema.qualified_name} lost a column (renamed or dropped) while its snapshot "
            f"ran (chunk {index}: {exc.args[1]}). Restart the query: it re-reads the "
            "table's schema and continues the snapshot with it"
        )
    if code == _ER_NO_SUCH_TABLE:
        return SnapshotError(
            f"table {schema.qualified_name} was dropped while its snapshot ran (chunk "
            f"{index}). Remove it from table-name, or re-create it, and restart the query"
        )
    return exc
