"""The chunk read of DESIGN.md §2: SELECT between two watermarks, then backfill.

1. ``LW`` = a position before which every transaction is committed (``ChunkReader.low``).
2. ``SELECT`` the chunk ``[start, end)`` (NULL keys in the first chunk) into Arrow: the
   source's ``ChunkReader.select`` (MySQL: ``mysql/chunks/select.py``).
3. ``HW`` = the end of the change stream now (``ChunkReader.high``).
4. If ``HW > LW``: read the stream ``[LW, HW)`` for this table (``read_backfill``) and
   apply, in order, every row change whose image has its chunk key in the chunk: the
   before image's row is removed, the after image's row is put (a key-changing update is
   thus a delete of the old key and an insert of the new one, each judged by its own range).

The result is the chunk's state at ``HW``: an Arrow table in the table's column order
whose values are those the binlog decoder yields (``model/row_values.py``), plus ``(LW, HW)``.
If a DDL on the table falls inside ``[LW, HW)`` the chunk is read again with the new
schema (a few times at most).

Rows are identified by the primary key; a table without one (chunked by a configured
chunk key column) by the whole row, so two identical rows touched by the same backfill
collapse into one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.errors import SnapshotError
from sparkcdc.model.dialect import ChunkSelect, RangeRead, SourceDialect
from sparkcdc.model.events import ImageColumns, RowChanges, SchemaChange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.row_values import is_integer
from sparkcdc.model.schema import TableSchema
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.keys import KeyOrder, chunk_membership, key_order

log = logging.getLogger(__name__)

Row = tuple[Any, ...]
Change = tuple[Row | None, Row | None]
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


class _SchemaChangedError(Exception):
    pass


def _backfill_changes(
    dialect: SourceDialect[Any],
    server_id: int,
    schema: TableSchema,
    low: Any,
    high: Any,
    settled: list[Any],
) -> list[Change]:
    """The table's row changes in ``[low, high)``; where a transaction whose rows came
    before took effect in it (MySQL: XA COMMIT / ROLLBACK) is appended to ``settled``."""
    db, name = schema.database, schema.table
    changes: list[Change] = []
    # by the identity of the images' columns: one mapper per table shape
    mappers: dict[int, tuple[ImageColumns, Callable[[Sequence[Any]], Row]]] = {}
    # ``schema`` was read at the low watermark and a DDL in the range reads the chunk again:
    # it is the schema of every row image of the range
    for item in dialect.read_backfill(schema, low, high, server_id, settled):
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
    target = base.schema  # the source's value form, as its chunk SELECT gave it
    rows = list(result.values())
    arrays = [pa.array([r[i] for r in rows], type=f.type) for i, f in enumerate(target)]
    return pa.concat_tables([kept, pa.Table.from_arrays(arrays, schema=target)])


# --------------------------------------------------------------------------------- reader


@dataclass(frozen=True)
class ChunkRead:
    """How a task reads a table's chunks: built once where the partition is read, frozen
    and picklable. ``schema``: the one the stream planned the table with; ``since``: the
    batch's end in the change stream (DDL between it and a chunk's low watermark comes
    with the chunk); ``server_id``: the stream reader id of the backfill; ``skip``: the
    source's chunk readers not to use (``ChunkSelect.skip``); ``xa_wait_s``: how long to
    wait for transactions around the read to settle (``ChunkReader.unsettled``)."""

    schema: TableSchema
    key_column: str
    collation: str | None
    server_id: int
    since: BinlogPosition | None = None
    skip: frozenset[str] = frozenset()
    xa_wait_s: float = XA_WAIT_S


def read_chunk(
    dialect: SourceDialect[Any], spec: ChunkRead, chunk: ChunkRange, conn: Any = None
) -> ChunkResult:
    """Read one chunk exactly as of its high watermark (DESIGN.md §2).

    The chunk is read with the table's schema at its low watermark. Where that differs from
    ``spec.schema`` (the one the stream planned with), the DDL statements on the table from
    ``spec.since`` (the batch's end in the stream) to the low watermark come along in the
    result, so a consumer learns of them no later than of the rows they shaped.

    ``conn``: an open SQL connection to the table's database to use (a task reading several
    chunks keeps one: opening one costs more than reading a chunk); by default a session
    of the dialect's is opened and closed.

    >>> spec = ChunkRead(schema, "id", collation=None, server_id=5401)  # doctest: +SKIP
    >>> result = read_chunk(dialect, spec, chunk)                  # doctest: +SKIP
    >>> result.low <= result.high                                  # doctest: +SKIP
    True
    """
    if conn is None:
        session = dialect.session(spec.schema.database)
        try:
            return session.run(lambda c: read_chunk(dialect, spec, chunk, c))
        finally:
            session.close()
    schema, key_column, since = spec.schema, spec.key_column, spec.since
    reader = dialect.chunk_reader(conn)
    ddl_left, deadline = DDL_RETRIES, time.monotonic() + spec.xa_wait_s
    while True:
        # LW: a position before which every transaction is committed, taken BEFORE the
        # SELECT starts (not the stream's end: MySQL writes a transaction to the binlog
        # before InnoDB commits it, so one just below that position could be invisible to the
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
        low = reader.low()
        # the table as it is at LW (a DDL after it shows in [LW, HW) and reads again), typed
        # as the source's options say
        current = dialect.load_schema(conn, schema.database, schema.table)
        ddl: tuple[SchemaChange, ...] = ()
        if current != schema and since is not None and since < low:
            ddl = _schema_changes(dialect, spec.server_id, current, since, low)
            if ddl:
                log.info(
                    "chunk %d of %s is read after %d DDL statement(s) its batch's binlog "
                    "range does not reach; it carries them",
                    chunk.index,
                    schema.qualified_name,
                    len(ddl),
                )
        started = time.perf_counter()
        select = ChunkSelect(current, key_column, chunk.start, chunk.end, chunk.index, spec.skip)
        base, read_by = reader.select(select)
        select_seconds = time.perf_counter() - started
        high = reader.high()
        pending = reader.unsettled()
        if pending:
            _xa_wait(schema, chunk, pending, deadline)
            continue
        if not low < high:
            return ChunkResult(chunk, current, base, low, high, 0, read_by, select_seconds, ddl)
        settled: list[Any] = []
        try:
            changes = _backfill_changes(dialect, spec.server_id, current, low, high, settled)
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
        if settled:
            _xa_wait(schema, chunk, [f"finished at {p}" for p in settled], deadline)
            continue
        order = key_order(spec.collation, dialect.key_ranking(conn))
        rows = merge_backfill(base, current, changes, chunk, key_column, order)
        return ChunkResult(
            chunk, current, rows, low, high, len(changes), read_by, select_seconds, ddl
        )


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
    dialect: SourceDialect[Any],
    spec: ChunkRead,
    chunks: Sequence[ChunkRange],
    conn: Any = None,
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
        return [read_chunk(dialect, spec, chunks[0], conn)]
    span = ChunkRange(chunks[0].table, chunks[0].index, chunks[0].start, chunks[-1].end)
    whole = read_chunk(dialect, spec, span, conn)
    if not read_together(whole.schema, key_column, chunks):  # a DDL changed the key's type
        again = replace(spec, schema=whole.schema)
        return [read_chunk(dialect, again, chunk, conn) for chunk in chunks]
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
    dialect: SourceDialect[Any], server_id: int, schema: TableSchema, start: Any, end: Any
) -> tuple[SchemaChange, ...]:
    """The DDL statements on the table in ``[start, end)``."""
    db, name = schema.database, schema.table
    spec = RangeRead(start, end, server_id, frozenset({(db, name)}), rows=False)
    return tuple(
        item
        for item in dialect.read_range(spec)
        if isinstance(item, SchemaChange) and item.database == db and item.table == name
    )
