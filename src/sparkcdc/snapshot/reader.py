"""The chunk read of DESIGN.md §2: SELECT between two watermarks, then backfill.

1. ``LW`` = current binlog position (``SHOW MASTER STATUS``, a transaction boundary).
2. ``SELECT`` the chunk ``[start, end)`` (NULL keys in the first chunk) into Arrow:
   connectorx on a connection in clear, else the compiled text splitter (``textrows``) on
   the TLS connection, else (no C compiler at install) a pymysql streaming cursor.
3. ``HW`` = current binlog position.
4. If ``HW > LW``: read the binlog ``[LW, HW)`` for this table and apply, in order, every
   row change whose image has its chunk key in the chunk: the before image's row is
   removed, the after image's row is put (a key-changing update is thus a delete of the
   old key and an insert of the new one, each judged by its own range).

The result is the chunk's state at ``HW``: an Arrow table in the table's column order
whose values are those the binlog decoder yields (see ``rowvalues``), plus ``(LW, HW)``.
If a DDL on the table falls inside ``[LW, HW)`` the chunk is read again with the new
schema (a few times at most).

Rows are identified by the primary key; a table without one (chunked by a configured
chunk key column) by the whole row, so two identical rows touched by the same backfill
collapse into one.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from sparkcdc.errors import SchemaChangedError, SnapshotError
from sparkcdc.model.events import ImageColumns, RowChanges, SchemaChange
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import (
    PLUGIN_TEXT_TYPES,
    Column,
    TableSchema,
    with_tinyint1,
)
from sparkcdc.mysql.admin.catalog import load_schema
from sparkcdc.mysql.admin.server import (
    committed_position,
    current_position,
    prepared_xa,
    server_info,
)
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.protocol.connection import ConnectionSettings, KeptConnection, sql_connection
from sparkcdc.mysql.stream.binlog_range import read_range
from sparkcdc.snapshot import textrows
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.keys import KeyOrder, chunk_membership, key_order
from sparkcdc.snapshot.rowvalues import (
    SESSION_TIME_ZONE_SQL,
    arrow_schema,
    arrow_type,
    is_integer,
    parse_time,
    sql_converter,
    to_sql_param,
)

log = logging.getLogger(__name__)

Row = tuple[Any, ...]
Change = tuple[Row | None, Row | None]
FETCH_ROWS = 10_000
DDL_RETRIES = 3
XA_WAIT_S = 60.0  # how long a chunk read waits for XA transactions around it to finish
XA_POLL_S = 0.2


# ------------------------------------------------------------------------------ backfill


def apply_backfill(
    rows_by_key: dict[Any, Row],
    events: Iterable[Change],
    in_range: Callable[[Row], bool],
    key_of: Callable[[Row], Any],
) -> dict[Any, Row]:
    """The chunk's rows after applying binlog changes ``(before, after)`` in order.

    A before image in the chunk removes its row; an after image in the chunk puts its row.
    Images outside the chunk are ignored (their own chunk takes care of them). Returns a
    new dict; ``rows_by_key`` is left untouched.

    >>> rows = {1: (1, "a"), 2: (2, "b")}
    >>> ev = [((1, "a"), (1, "A")), ((2, "b"), None), (None, (9, "z")), ((1, "A"), (7, "A"))]
    >>> apply_backfill(rows, ev, lambda r: r[0] < 8, lambda r: r[0])
    {7: (7, 'A')}
    """
    out = dict(rows_by_key)
    for before, after in events:
        if before is not None and in_range(before):
            out.pop(key_of(before), None)
        if after is not None and in_range(after):
            out[key_of(after)] = after
    return out


# -------------------------------------------------------------------------------- result


@dataclass(frozen=True)
class ChunkResult:
    """A chunk's rows at ``high`` (decoder-form values), with its watermarks."""

    chunk: ChunkRange
    schema: TableSchema  # the schema the rows were read with
    rows: pa.Table
    low: BinlogPosition
    high: BinlogPosition
    backfill_changes: int = 0
    reader: str = "pymysql"
    select_seconds: float = 0.0
    # DDL on the table between the batch's binlog end and ``high``: the rows have its effect
    # before the binlog part of the stream gets to it, so the chunk carries it along
    ddl: tuple[SchemaChange, ...] = ()

    @property
    def row_count(self) -> int:
        return int(self.rows.num_rows)


# --------------------------------------------------------------------------------- SELECT


def chunk_where(key_column: str, chunk: ChunkRange) -> tuple[str, list[Any]]:
    """The WHERE clause (or '') selecting a chunk, and its parameters.

    >>> chunk_where("id", ChunkRange("a.t", 0, None, 10))
    ('WHERE (`id` IS NULL OR `id` < %s)', [10])
    >>> chunk_where("id", ChunkRange("a.t", 1, 10, None))
    ('WHERE `id` >= %s', [10])
    """
    # the clause runs with parameters (or is formatted with them for connectorx)
    k = quote_mysql(key_column, pyformat=True)
    if chunk.start is None and chunk.end is None:
        return "", []
    if chunk.start is None:
        return f"WHERE ({k} IS NULL OR {k} < %s)", [to_sql_param(chunk.end)]
    if chunk.end is None:
        return f"WHERE {k} >= %s", [to_sql_param(chunk.start)]
    return f"WHERE {k} >= %s AND {k} < %s", [to_sql_param(chunk.start), to_sql_param(chunk.end)]


def _chunk_select(schema: TableSchema, key_column: str, chunk: ChunkRange) -> tuple[str, list[Any]]:
    """The chunk's SELECT, with ``%s`` for its parameters (pymysql's paramstyle)."""
    where, params = chunk_where(key_column, chunk)
    names = ", ".join(quote_mysql(c.name, pyformat=True) for c in schema.columns)
    table = quote_mysql_table(schema.database, schema.table, pyformat=True)
    return f"SELECT {names} FROM {table} {where}", params


def select_text(conn: Any, schema: TableSchema, key_column: str, chunk: ChunkRange) -> pa.Table:
    """The chunk's rows split into Arrow by the compiled splitter (``textrows``)."""
    query, params = _chunk_select(schema, key_column, chunk)
    with conn.cursor() as cur:
        sql = cur.mogrify(query, params)  # exactly what pymysql's execute would send
    return textrows.select_text(conn, sql, schema.columns)


def select_pymysql(conn: Any, schema: TableSchema, key_column: str, chunk: ChunkRange) -> pa.Table:
    """The chunk's rows over a pymysql streaming (unbuffered) cursor."""
    query, params = _chunk_select(schema, key_column, chunk)
    converters = [sql_converter(c) for c in schema.columns]
    target = arrow_schema(schema.columns)
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


def select_connectorx(
    conn: Any,
    settings: ConnectionSettings,
    schema: TableSchema,
    key_column: str,
    chunk: ChunkRange,
) -> pa.Table:
    """The chunk's rows read by connectorx straight into Arrow."""
    import connectorx as cx

    where, params = chunk_where(key_column, chunk)
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


# ------------------------------------------------------------------------------ backfill IO


def _image_mapper(schema: TableSchema, columns: ImageColumns) -> Callable[[Sequence[Any]], Row]:
    """Row images (``columns`` order) → tuples in ``schema`` order, by name (the range
    reader names every column, from the binlog or the schema versions, and passes only
    complete images)."""
    index = {name: i for i, name in enumerate(columns.names)}
    positions = [index.get(n) for n in schema.column_names]

    def convert(image: Sequence[Any]) -> Row:
        return tuple(None if p is None else image[p] for p in positions)

    return convert


def _is_table(database: str, table: str, d: str, t: str) -> bool:
    return d == database and t == table


class _SchemaChangedError(Exception):
    pass


def _backfill_changes(
    settings: ConnectionSettings,
    server_id: int,
    schema: TableSchema,
    low: BinlogPosition,
    high: BinlogPosition,
    xa_done: list[BinlogPosition] | None = None,
) -> list[Change]:
    """The table's row changes in ``[low, high)``; XA COMMIT/ROLLBACK positions in it are
    appended to ``xa_done``."""

    def on_xa(kind: str, position: BinlogPosition) -> None:
        if kind == "complete" and xa_done is not None:
            xa_done.append(position)

    db, name = schema.database, schema.table
    changes: list[Change] = []
    # by the identity of the images' columns: one mapper per table shape
    mappers: dict[int, tuple[ImageColumns, Callable[[Sequence[Any]], Row]]] = {}
    # ``schema`` was read at the low watermark and a DDL in the range reads the chunk again:
    # it is the schema of every row image of the range
    versions = TableVersions.of([schema])
    wanted = partial(_is_table, db, name)
    for item in read_range(settings, server_id, low, high, wanted, versions, on_xa=on_xa):
        if isinstance(item, SchemaChange):
            raise _SchemaChangedError(item.statement)
        if not isinstance(item, RowChanges) or item.database != db or item.table != name:
            continue
        cached = mappers.get(id(item.columns))
        if cached is None or cached[0] is not item.columns:
            cached = mappers[id(item.columns)] = (item.columns, _image_mapper(schema, item.columns))
        mapper = cached[1]
        for before, after in item.rows:
            old = None if before is None else mapper(before)
            changes.append((old, None if after is None else mapper(after)))
    return changes


def merge_backfill(
    base: pa.Table,
    schema: TableSchema,
    changes: Sequence[Change],
    chunk: ChunkRange,
    key_column: str,
    order: KeyOrder,
) -> pa.Table:
    """``base`` (the SELECT) with ``changes`` applied: only touched rows leave Arrow.

    Whether an image's key lies in the chunk is decided by ``order`` for all images at
    once (the server, in one query, for collations Python cannot order).
    """
    names = schema.column_names
    key_idx = names.index(key_column)
    identity = [names.index(c) for c in schema.primary_key] or list(range(len(names)))
    member = chunk_membership(
        order,
        chunk.start,
        chunk.end,
        [img[key_idx] for change in changes for img in change if img is not None],
    )

    def row_in_range(row: Row) -> bool:
        return member[row[key_idx]]

    def key_of(row: Row) -> Any:
        return tuple(row[i] for i in identity)

    touched = {
        key_of(img) for change in changes for img in change if img is not None and row_in_range(img)
    }
    if not touched:
        return base
    id_columns = [base.column(i).to_pylist() for i in identity]
    base_keys = list(zip(*id_columns, strict=True)) if id_columns else []
    hit = [k in touched for k in base_keys]
    mask = pa.array(hit, type=pa.bool_())
    touched_rows = base.filter(mask)
    before_rows = list(zip(*(c.to_pylist() for c in touched_rows.columns), strict=True))
    result = apply_backfill({key_of(r): r for r in before_rows}, changes, row_in_range, key_of)
    kept = base.filter(pc.invert(mask))
    if not result:
        return kept
    target = arrow_schema(schema.columns)
    rows = list(result.values())
    arrays = [pa.array([r[i] for r in rows], type=f.type) for i, f in enumerate(target)]
    return pa.concat_tables([kept, pa.Table.from_arrays(arrays, schema=target)])


# --------------------------------------------------------------------------------- reader


@dataclass(frozen=True)
class ChunkRead:
    """How a task reads a table's chunks: built once where the partition is read, frozen
    and picklable. ``schema``: the one the stream planned the table with; ``since``: the
    batch's binlog end (DDL between it and a chunk's low watermark comes with the chunk);
    ``server_id``: the replication connection's for the backfill; ``use_connectorx`` None:
    where it is installed; ``xa_wait_s``: how long to wait for XA transactions around it."""

    schema: TableSchema
    key_column: str
    collation: str | None
    server_id: int
    since: BinlogPosition | None = None
    tinyint1_as_boolean: bool = True
    use_connectorx: bool | None = None
    use_text: bool = True
    xa_wait_s: float = XA_WAIT_S


def read_chunk(
    settings: ConnectionSettings, spec: ChunkRead, chunk: ChunkRange, conn: Any = None
) -> ChunkResult:
    """Read one chunk exactly as of its high watermark (DESIGN.md §2).

    The chunk is read with the table's schema at its low watermark. Where that differs from
    ``spec.schema`` (the one the stream planned with), the DDL statements on the table from
    ``spec.since`` (the batch's binlog end) to the low watermark come along in the result,
    so a consumer learns of them no later than of the rows they shaped.

    ``conn``: an open SQL connection to the table's database to use (a task reading several
    chunks keeps one: opening one costs more than reading a chunk); by default one is opened
    and closed.

    >>> spec = ChunkRead(schema, "id", collation=None, server_id=5401)  # doctest: +SKIP
    >>> result = read_chunk(settings, spec, chunk)                 # doctest: +SKIP
    >>> result.low <= result.high                                  # doctest: +SKIP
    True
    """
    schema, key_column, collation = spec.schema, spec.key_column, spec.collation
    server_id, since, use_connectorx = spec.server_id, spec.since, spec.use_connectorx
    if use_connectorx is None:
        use_connectorx = connectorx_available()
    owned = conn is None
    if conn is None:
        conn = sql_connection(settings, schema.database)
    try:
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        info = server_info(conn)
        ddl_left, deadline = DDL_RETRIES, time.monotonic() + spec.xa_wait_s
        while True:
            # LW: a position before which every transaction is committed, taken BEFORE the
            # SELECT starts (not SHOW MASTER STATUS: a transaction is in the binlog before
            # InnoDB commits it, so one just below that position could be invisible to the
            # SELECT, outside [LW, HW) and dropped by the interleaving filter forever).
            # Why the chunk is then its state at HW, exactly (DESIGN.md §2):
            # - a transaction before LW was committed before the SELECT began: it is seen;
            # - one in [LW, HW) may or may not be seen by the SELECT; the backfill replays
            #   it in binlog order with full row images, which gives the same state either
            #   way (a put or remove of whole rows by key is idempotent, and the last
            #   change of a key in [LW, HW) decides it);
            # - one at or after HW is not seen (seen means committed, so binlogged before
            #   the SELECT's read view, before HW was taken) and not replayed.
            # The interleaving rule only needs HW: events of this chunk's keys at or after
            # HW come from later batches' binlog partitions; earlier ones are dropped there
            # because the chunk was not complete. An earlier LW changes neither.
            # XA (MariaDB >= 10.5 binlogs an XA PREPARE with its rows; they take effect at
            # XA COMMIT, later): a read is kept only when no XA transaction was prepared and
            # unfinished at HW and none finished in [LW, HW); then every XA transaction
            # with rows before HW finished before LW and its effect (commit or rollback)
            # is in the SELECT.
            low = committed_position(conn, info)
            # the table as it is at LW (a DDL after it shows in [LW, HW) and reads again)
            current = with_tinyint1(  # typed as the source's option says
                load_schema(conn, schema.database, schema.table),
                as_boolean=spec.tinyint1_as_boolean,
            )
            ddl: tuple[SchemaChange, ...] = ()
            if current != schema and since is not None and since < low:
                ddl = _schema_changes(settings, server_id, current, since, low)
                if ddl:
                    log.info(
                        "chunk %d of %s is read after %d DDL statement(s) its batch's binlog "
                        "range does not reach; it carries them",
                        chunk.index,
                        schema.qualified_name,
                        len(ddl),
                    )
            started = time.perf_counter()
            try:
                base, reader = _select(
                    conn, settings, current, key_column, chunk, use_connectorx, spec.use_text
                )
            except pymysql.MySQLError as exc:
                raise _changed_shape(current, chunk, exc) from None
            select_seconds = time.perf_counter() - started
            # with its GTID set: a failover right after the batch that read this chunk
            # places the HW on the new server by it (DESIGN.md §2.7)
            high = current_position(conn, info)
            pending = prepared_xa(conn) if info.is_mariadb else None
            if pending:
                _xa_wait(schema, chunk, pending, deadline)
                continue
            if not low < high:
                return ChunkResult(chunk, current, base, low, high, 0, reader, select_seconds, ddl)
            xa_done: list[BinlogPosition] = []
            try:
                changes = _backfill_changes(settings, server_id, current, low, high, xa_done)
            except _SchemaChangedError as exc:
                ddl_left -= 1
                if ddl_left <= 0:
                    raise SnapshotError(
                        f"table {schema.qualified_name} changed shape {DDL_RETRIES} times while "
                        f"chunk {chunk.index} was read; pause DDL on it or re-snapshot the table"
                    ) from None
                log.info(
                    "table %s changed during chunk %d (%s); reading it again",
                    schema.qualified_name,
                    chunk.index,
                    exc,
                )
                continue
            if xa_done:
                _xa_wait(schema, chunk, [f"finished at {p}" for p in xa_done], deadline)
                continue
            order = key_order(collation, KeptConnection.over(conn))
            rows = merge_backfill(base, current, changes, chunk, key_column, order)
            return ChunkResult(
                chunk, current, rows, low, high, len(changes), reader, select_seconds, ddl
            )
    finally:
        if owned:
            conn.close()


def read_together(schema: TableSchema, key_column: str, group: Sequence[ChunkRange]) -> bool:
    """Whether ``group`` can be read as one range (``read_chunks``): one chunk, or adjacent
    chunks of a table whose chunk key is an integer (the rows are split again in Arrow,
    exactly as the server compares them)."""
    if len(group) == 1:
        return True
    key = next((c for c in schema.columns if c.name == key_column), None)
    return (
        key is not None
        and is_integer(key)
        and all(
            a.table == b.table and a.end is not None and a.end == b.start
            for a, b in pairwise(group)
        )
    )


def read_chunks(
    settings: ConnectionSettings, spec: ChunkRead, chunks: Sequence[ChunkRange], conn: Any = None
) -> list[ChunkResult]:
    """Adjacent chunks (``read_together``) read under one pair of watermarks.

    One SELECT of their whole range between one LW and one HW, one backfill, then the rows
    are split by chunk: each chunk's result is what ``read_chunk`` would give for it read
    in that same window, and each is staged on its own. Reading a chunk costs ~1 ms of
    watermark, schema and connection work besides its rows; a group pays it once. DDL
    carried (see ``read_chunk``) comes with the first chunk, whose rows are emitted first.
    """
    key_column = spec.key_column
    if not read_together(spec.schema, key_column, chunks):
        raise ValueError("read_chunks needs adjacent chunks of an integer chunk key")
    if len(chunks) == 1:
        return [read_chunk(settings, spec, chunks[0], conn)]
    span = ChunkRange(chunks[0].table, chunks[0].index, chunks[0].start, chunks[-1].end)
    whole = read_chunk(settings, spec, span, conn)
    if not read_together(whole.schema, key_column, chunks):  # a DDL changed the key's type
        again = replace(spec, schema=whole.schema)
        return [read_chunk(settings, again, chunk, conn) for chunk in chunks]
    keys = whole.rows.column(whole.schema.column_names.index(key_column))
    results = []
    for i, chunk in enumerate(chunks):
        mask = _in_chunk(keys, chunk)
        results.append(
            replace(
                whole, chunk=chunk, rows=whole.rows.filter(mask), ddl=whole.ddl if i == 0 else ()
            )
        )
    return results


def _in_chunk(keys: pa.ChunkedArray, chunk: ChunkRange) -> pa.ChunkedArray:
    """Which integer keys lie in ``chunk`` (NULL keys belong to the first chunk)."""
    if chunk.start is None:
        below = pc.less(keys, pa.scalar(chunk.end, keys.type))
        return pc.or_kleene(pc.is_null(keys), below)
    mask = pc.greater_equal(keys, pa.scalar(chunk.start, keys.type))
    if chunk.end is not None:
        mask = pc.and_kleene(mask, pc.less(keys, pa.scalar(chunk.end, keys.type)))
    return pc.fill_null(mask, False)


def _xa_wait(schema: TableSchema, chunk: ChunkRange, xa: list[str], deadline: float) -> None:
    """XA transactions overlap the chunk's read: wait a little to read it again, or stop."""
    if time.monotonic() >= deadline:
        raise SnapshotError(
            f"chunk {chunk.index} of {schema.qualified_name} cannot be read exactly: XA "
            f"transaction(s) {', '.join(xa[:5])} were prepared but not finished around its "
            "read (their rows sit in the binlog at XA PREPARE and take effect at XA COMMIT). "
            "Finish them (XA COMMIT or XA ROLLBACK; XA RECOVER lists them) and restart the "
            "query: the snapshot resumes at this chunk"
        )
    log.info(
        "chunk %d of %s overlaps XA transaction(s) %s; reading it again",
        chunk.index,
        schema.qualified_name,
        ", ".join(xa[:5]),
    )
    time.sleep(XA_POLL_S)  # waiting for another client's XA COMMIT: nothing to wait on


def _schema_changes(
    settings: ConnectionSettings,
    server_id: int,
    schema: TableSchema,
    start: BinlogPosition,
    end: BinlogPosition,
) -> tuple[SchemaChange, ...]:
    """The DDL statements on the table in ``[start, end)``."""
    db, name = schema.database, schema.table
    return tuple(
        item
        for item in read_range(
            settings, server_id, start, end, lambda d, t: d == db and t == name, rows=False
        )
        if isinstance(item, SchemaChange) and item.database == db and item.table == name
    )


# Server errors that mean the table lost a column or vanished under the snapshot.
_ER_BAD_FIELD = 1054
_ER_NO_SUCH_TABLE = 1146


def _changed_shape(schema: TableSchema, chunk: ChunkRange, exc: pymysql.MySQLError) -> Exception:
    code = exc.args[0] if exc.args else None
    if code == _ER_BAD_FIELD:  # a restart of the query (pipelines restart by themselves)
        return SchemaChangedError(
            f"table {schema.qualified_name} lost a column (renamed or dropped) while its snapshot "
            f"ran (chunk {chunk.index}: {exc.args[1]}). Restart the query: it re-reads the "
            "table's schema and continues the snapshot with it"
        )
    if code == _ER_NO_SUCH_TABLE:
        return SnapshotError(
            f"table {schema.qualified_name} was dropped while its snapshot ran (chunk "
            f"{chunk.index}). Remove it from table-name, or re-create it, and restart the query"
        )
    return exc


def _select(
    conn: Any,
    settings: ConnectionSettings,
    schema: TableSchema,
    key_column: str,
    chunk: ChunkRange,
    use_connectorx: bool,
    use_text: bool,
) -> tuple[pa.Table, str]:
    """The chunk's rows and the reader that read them: connectorx on a connection in
    clear, else the compiled text splitter (``textrows``) where it is built, else pymysql.
    ``use_connectorx`` / ``use_text`` False skip those readers (tests compare them)."""
    # connectorx 0.4.6 cannot be trusted with TLS: with ``ssl-mode=REQUIRED`` (or
    # VERIFY_CA and ``ssl-ca``) each read opens two connections, one TLS and one plain
    # (measured by the server's Connections and Ssl_accepts counters). It reads only what
    # would be read in clear anyway, on a connection that did not negotiate TLS (ssl-mode
    # disabled, or preferred against a server without TLS); TLS chunks are read on the
    # TLS connection itself. In clear connectorx is the faster of the two (~1.1M vs ~0.9M
    # rows/s of bench/snapshot.py's table, 8,096-row chunks, measured here).
    if use_connectorx and not getattr(conn, "_secure", False):
        try:
            return select_connectorx(conn, settings, schema, key_column, chunk), "connectorx"
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # connectorx panics surface as BaseException
            log.info(
                "connectorx cannot read %s (%s); using %s",
                schema.qualified_name,
                type(exc).__name__,
                "the text reader" if use_text and textrows.available(conn) else "pymysql",
            )
    return select_on(conn, schema, key_column, chunk, use_text)


def select_on(
    conn: Any, schema: TableSchema, key_column: str, chunk: ChunkRange, use_text: bool = True
) -> tuple[pa.Table, str]:
    """The chunk's rows read on ``conn`` itself (its TLS, if it has any) and the reader that
    read them: the compiled text splitter where it is built, else pymysql."""
    if use_text and textrows.available(conn):
        return select_text(conn, schema, key_column, chunk), "text"
    return select_pymysql(conn, schema, key_column, chunk), "pymysql"
