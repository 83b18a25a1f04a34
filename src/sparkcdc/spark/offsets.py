"""The offsets of the CDC sources (``mysql-cdc``, ``postgres-cdc``) and the plan of a batch:
its partitions (change stream shares, chunk groups per table) and the checks that a batch
follows its predecessor. An offset holds the stream position under the dialect's
``offset_key`` (``binlog``, ``wal``) as the position's ``to_offset()``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.sql.datasource import InputPartition

from sparkcdc.errors import SourceError
from sparkcdc.model.dialect import Position, SourceDialect
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.options import ServerIdRange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.tables import TablePredicate
from sparkcdc.snapshot.coordinator import SnapshotProgress


@dataclass(frozen=True)
class BinlogRangePartition(InputPartition):
    """One binlog range ``[start, end)`` of one batch; offsets and filter as JSON text."""

    start: str
    end: str
    server_id: int
    filter_state: str = ""  # InterleavingFilter state while tables are under snapshot
    key_columns: str = ""  # {table: chunk key column}
    tables: str = ""  # JSON [[database, table], ...] captured, when tables were added
    versions: str = ""  # TableVersions JSON when the binlog lacks column metadata
    share: int = 0  # this partition's share of the range (mysql/stream/binlog_range.py Share) ...
    shares: int = 1  # ... of this many
    # JSON [database, ...]: databases of tables the start offset names (its snapshot
    # progress, or its "tables") that the query no longer captures, e.g. dropped while
    # it was stopped: a DROP DATABASE of one stops the read as for captured tables
    vanished: str = ""
    # JSON [[database, table], ...]: tables the start offset names that the query no longer
    # captures (dropped or renamed while it was stopped): their DDL is delivered (a DROP
    # TABLE reaches the sink as if the query had run), a row change of one stops the read
    gone: str = ""
    # JSON [schema, ...]: the captured tables' schemas as of ``start``, for a stream that
    # carries no DDL (spark/start_schemas.py); "" where it does
    schemas: str = ""


@dataclass(frozen=True)
class ChunkPartition(InputPartition):
    """Consecutive snapshot chunks of one table, read in order (or taken from staging on a
    replay). Several chunks per task spread Spark's per-task cost; adjacent ones are read
    together in groups (``_staged_chunks``), each chunk staged on its own."""

    chunks: tuple[str, ...]  # ChunkRange JSON
    key_column: str
    collation: str | None
    server_id: int
    since: str = ""  # the batch's end offset (JSON): DDL after it comes with the chunk
    schema: str = ""  # the table's schema (JSON) when it was added while the query ran


def offset_position(offset: dict[str, Any], dialect: SourceDialect[Any]) -> Any:
    """The stream position ``offset`` holds, as ``dialect``'s position."""
    return dialect.position_from_offset(offset[dialect.offset_key])


def offset_identity(offset: dict[str, Any]) -> ServerIdentity | None:
    raw = offset.get("server")
    return None if raw is None else ServerIdentity.from_offset(raw)


def make_offset(
    position: Position,
    snapshot: dict[str, Any] | None = None,
    identity: ServerIdentity | None = None,
    failover: dict[str, Any] | None = None,
    tables: Iterable[tuple[str, str]] = (),
    *,
    key: str,
) -> dict[str, Any]:
    """An offset as Spark logs it, the position under ``key`` (the dialect's
    ``offset_key``). ``tables``: the captured (database, table)s, for an
    offset without snapshot progress (which names them): a restarted query learns from it
    which tables it captured, whose changes and DROP (or DROP DATABASE) must reach the sink
    or stop it even when they no longer exist (DESIGN.md §2.1)."""
    out: dict[str, Any] = {key: position.to_offset()}
    if identity is not None:
        out["server"] = identity.to_offset()
    if failover is not None:
        out["failover"] = failover  # {"from": <identity offset>, "gtids": <GTID set>}
    if snapshot is not None:
        out["snapshot"] = snapshot
    elif tables:
        out["tables"] = [[db, t] for db, t in sorted(set(tables))]
    return out


def offset_tables(
    offset: dict[str, Any], matches: TablePredicate | None = None
) -> set[tuple[str, str]]:
    """The (database, table)s an offset names (those ``matches`` keeps): its snapshot
    progress's, or its ``tables``.

    Snapshot progress keys are ``database.table``, and either name may hold a dot: a key
    stands for each way of splitting it that ``matches`` keeps."""
    keep = matches or _any_table
    named = {pair for key in offset.get("snapshot") or {} for pair in _splits(key) if keep(*pair)}
    return named | {(db, t) for db, t in offset.get("tables") or () if keep(db, t)}


def offset_databases(offset: dict[str, Any], matches: TablePredicate | None = None) -> set[str]:
    """The databases of the tables an offset names (those ``matches`` keeps)."""
    return {db for db, _ in offset_tables(offset, matches)}


def _splits(qualified: str) -> list[tuple[str, str]]:
    """Every (database, table) whose ``database.table`` is ``qualified``.

    >>> _splits("a.b.t")
    [('a', 'b.t'), ('a.b', 't')]
    """
    return [(qualified[:i], qualified[i + 1 :]) for i, c in enumerate(qualified) if c == "."]


def _any_table(database: str, table: str) -> bool:
    return True


def snapshot_running(offset: dict[str, Any]) -> bool:
    return any(
        not SnapshotProgress.from_offset(p).pure_binlog
        for p in (offset.get("snapshot") or {}).values()
    )


def snapshot_read(offset: dict[str, Any]) -> bool:
    """Whether every chunk of the snapshot ``offset`` names is read (some perhaps in the
    batch that ends at it): what is left of the snapshot is the filter of the next batch.

    >>> snapshot_read({"snapshot": {"a.t": {"next": 3, "prev": 0, "total": 3}}})
    True
    """
    return all(
        SnapshotProgress.from_offset(p).read_all for p in (offset.get("snapshot") or {}).values()
    )


def same_server(a: ServerIdentity | None, b: ServerIdentity | None) -> bool:
    return a == b or (a is not None and b is not None and a.same_server(b))


@dataclass(frozen=True)
class AvailableNowTarget:
    """Where a ``Trigger.AvailableNow`` run stops reading the binlog: the server's binlog
    end when the run started (``prepareForTriggerAvailableNow``)."""

    position: Any  # the dialect's position
    identity: ServerIdentity | None


def distance(start: Any, end: Any) -> str:
    """How far ``end`` is ahead of ``start``, for progress lines.

    >>> distance(BinlogPosition("b.000001", 4), BinlogPosition("b.000001", 1004))
    '1,000 bytes'
    """
    if not isinstance(start, BinlogPosition) or not isinstance(end, BinlogPosition):
        return f"from {start} to {end}"
    if start.file == end.file:
        return f"{max(end.pos - start.pos, 0):,} bytes"
    return f"{end.file_number - start.file_number} binlog file(s)"


T = TypeVar("T")
MAX_CHUNKS_PER_TASK = 128  # by default (tasks_per_table): ~1M rows at the default chunk size
# adjacent chunks a task reads under one pair of watermarks (snapshot.reader.read_chunks):
# about four default chunks; bounds a task's memory to this many rows
READ_GROUP_ROWS = 32_768


RESTART = "restart"  # a table's progress in the offset of the batch its snapshot restarts


def restarted(snapshot: dict[str, Any], table: str) -> bool:
    """Whether ``table``'s snapshot starts over in the batch that ends at ``snapshot`` (a
    re-snapshot: its chunks are pending again, from chunk 0, as a newly added table's).

    >>> restarted({"a.t": {"next": 2, "prev": 0, "total": None, "restart": True}}, "a.t")
    True
    """
    return bool(snapshot.get(table, {}).get(RESTART))


def check_successor(start: dict[str, Any], end: dict[str, Any]) -> None:
    """``end`` must have been planned from ``start``; else the state belongs to another query."""
    before, after = start.get("snapshot"), end.get("snapshot")
    if before is None and after is None:
        return

    def planned_from(table: str) -> bool:
        assert before is not None and after is not None
        previous = before.get(table, {"next": 0, "prev": 0})  # a newly added table
        if restarted(after, table):
            previous = {"next": 0, "prev": 0}
        return bool(
            SnapshotProgress.from_offset(after[table]).prev
            == SnapshotProgress.from_offset(previous).next
        )

    if before is None or after is None or not all(planned_from(t) for t in after):
        raise SourceError(
            "the mysql-cdc state under state.location does not belong to this query's "
            "checkpoint (it was reused by another query or cleaned): give each query its own "
            "state.location, or start over with a new checkpoint and an empty state.location"
        )


# binlog bytes a partition decodes under scan.binlog.partitions=auto: with the pure-Python
# decoder, and with the compiled one
SHARE_BYTES = 4 << 20
COMPILED_SHARE_BYTES = 8 << 20


def binlog_shares(
    setting: str,
    begin: Any,
    stop: Any,
    parallelism: int,
    server_ids: ServerIdRange,
    compiled: bool,
) -> int:
    """How many Spark partitions decode the binlog range ``[begin, stop)`` of one batch.

    ``setting`` is ``scan.binlog.partitions``: a number, or ``auto``. Each partition more
    opens a replication connection and reads the whole range again; what is shared is the
    decoding and everything Spark does with a partition's rows after it (its Arrow batches
    taken in, a pipeline's cache of the batch built): one task does that on one core. So
    ``auto`` is one partition per ``SHARE_BYTES`` of binlog with the pure-Python decoder,
    and per ``COMPILED_SHARE_BYTES`` where the source's compiled row decoder decodes
    (``compiled``: the dialect's ``compiled_rows()``), up to the session's parallelism (a
    range that spans binlog files counts as large), so that small batches stay one
    partition. Measured here on a
    catch-up of 300,000 changes (33 MB of binlog) with the kernel: the pipeline's read job
    4.8-5.0 s in one partition, 3.4-3.7 s in two. Never more than the ``server-id`` range
    has ids: each partition is a replica of its own.

    >>> ids = ServerIdRange(5400, 5408)
    >>> a, b = BinlogPosition("b.000001", 4), BinlogPosition("b.000001", 4 + 9 * SHARE_BYTES)
    >>> binlog_shares("auto", a, b, 2, ids, False), binlog_shares("auto", a, a, 2, ids, False)
    (2, 1)
    >>> c = BinlogPosition("b.000001", 4 + COMPILED_SHARE_BYTES - 1)
    >>> binlog_shares("auto", a, b, 8, ids, True), binlog_shares("auto", a, c, 8, ids, True)
    (4, 1)
    >>> binlog_shares("3", a, b, 2, ServerIdRange(5400, 5401), True)
    2

    Another source's stream (a PostgreSQL slot has one reader) is read in one partition.
    """
    if not isinstance(begin, BinlogPosition) or not isinstance(stop, BinlogPosition):
        return 1
    if setting != "auto":
        wanted = int(setting)
    elif begin.file != stop.file:
        wanted = parallelism
    else:
        share = COMPILED_SHARE_BYTES if compiled else SHARE_BYTES
        wanted = min(parallelism, (stop.pos - begin.pos) // share)
    return max(1, min(wanted, server_ids.size))


def tasks_per_table(counts: Sequence[int], parallelism: int, per_task: int | None) -> list[int]:
    """How many Spark tasks read each table's chunks of a batch (``counts`` chunks each).

    ``per_task`` (``chunks-per-partition`` set): that many chunks a task. By default the
    batch's chunks are spread over ``parallelism`` tasks, each table getting its share (at
    least one task) and no task more than ``MAX_CHUNKS_PER_TASK`` chunks: a task of a
    Python source costs Spark ~30-60 ms besides its rows, paid once per core this way.

    >>> tasks_per_table([248], 2, None), tasks_per_table([248], 2, 16)
    ([2], [16])
    >>> tasks_per_table([200, 48, 1, 0], 2, None)
    [2, 1, 1, 0]
    """
    if per_task is not None:
        return [-(-n // per_task) for n in counts]
    total = sum(counts)
    return [
        min(n, max(-(-n // MAX_CHUNKS_PER_TASK), round(parallelism * n / total), 1)) if n else 0
        for n in counts
    ]


def spread(items: Sequence[T], parts: int) -> list[Sequence[T]]:
    """``items`` cut into ``parts`` consecutive runs whose sizes differ by one at most.

    >>> spread([1, 2, 3, 4, 5], 2)
    [[1, 2, 3], [4, 5]]
    """
    size, extra = divmod(len(items), parts) if parts else (0, 0)
    runs: list[Sequence[T]] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        runs.append(items[start:end])
        start = end
    return runs
