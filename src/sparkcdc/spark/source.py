"""The ``mysql-cdc`` PySpark streaming source (the only camelCase code is here).

Offsets are ``{"binlog": <BinlogPosition.to_offset()>, "server": <ServerIdentity>}``,
always on transaction boundaries. Batch ``k`` reads ``[B_{k-1}, B_k)`` in one partition
on an executor; a replayed batch reads the same range and yields the same rows.

Before a batch is planned the offsets are checked against the server that answers
(``mysql/continuity.py``): another server, a reset or restored binlog, or a binlog behind
the offset stops the query with a clear error; a failover to a server whose GTID state
holds the offset's GTID set is followed by GTID.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, partial, wraps
from typing import Any, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sparkcdc.errors import ConfigError, SnapshotError, SourceError, SparkCdcError
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.options import SNAPSHOT_MODES, ServerIdRange, SourceOptions
from sparkcdc.model.position import BinlogPosition, GtidSet
from sparkcdc.model.schema import TableSchema, schema_from_json, schema_to_json, with_tinyint1
from sparkcdc.mysql import catalog, server
from sparkcdc.mysql.binlog_range import SchemaChange, Share, read_range
from sparkcdc.mysql.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.continuity import Continuity, ServerView, judge
from sparkcdc.mysql.tablemeta import TableVersions
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.coordinator import SnapshotCoordinator, SnapshotProgress, SnapshotSettings
from sparkcdc.snapshot.filter import InterleavingFilter
from sparkcdc.snapshot.interleave import filter_changes
from sparkcdc.snapshot.reader import read_chunks, read_together
from sparkcdc.snapshot.splitter import chunk_key_column
from sparkcdc.snapshot.staging import ChunkStaging, StagedChunk
from sparkcdc.snapshot.storage import StateStore
from sparkcdc.spark.changelog import (
    ENVELOPE_DDL,
    Builder,
    EnvelopeBuilder,
    SnapshotRows,
    TablesBuilder,
    TypedChangelogBuilder,
    typed_ddl,
)
from sparkcdc.spark.compat import AvailableNowBase, chunk_budget, default_read_limit

log = logging.getLogger(__name__)

FORMAT_NAME = "mysql-cdc"


@dataclass(frozen=True)
class CapturePlan:
    """What one stream captures: its tables (with schemas) and its output shape."""

    tables: tuple[TableSchema, ...]
    shape: str = "auto"  # changelog.shape: auto (typed for one table) | typed | tables | envelope
    schema_seq: int = 0  # the binlog position (as seq) the schemas were read at
    # that position as an offset, and whether the server logs column metadata
    # (binlog_row_metadata=FULL); without it rows decode with the schema versions
    schema_offset: str = ""
    full_metadata: bool = True
    started_tables: int = 0  # how many of ``tables`` the query started with (0: all)

    @property
    def typed(self) -> bool:
        if self.shape == "auto":
            return len(self.tables) == 1
        return self.shape == "typed"

    def spark_ddl(self) -> str:
        if self.shape == "tables":
            return TablesBuilder(self.tables).spark_ddl()
        return typed_ddl(self.tables[0]) if self.typed else ENVELOPE_DDL

    def builder(self) -> Builder:
        if self.typed:
            return TypedChangelogBuilder(self.tables[0], self.schema_seq)
        if self.shape == "tables":
            # the tables the query started with: those that join later travel as text
            return TablesBuilder(self._started_with)
        return EnvelopeBuilder()

    @cached_property
    def _started_with(self) -> tuple[TableSchema, ...]:
        return self.tables[: self.started_tables] if self.started_tables else self.tables

    def includes(self, database: str, table: str) -> bool:
        return (database, table) in self._names

    @cached_property
    def _names(self) -> frozenset[tuple[str, str]]:
        return frozenset((t.database, t.table) for t in self.tables)


def connection_settings(options: SourceOptions) -> ConnectionSettings:
    return ConnectionSettings(
        host=options.hostname,
        port=options.port,
        user=options.username,
        password=options.password.get_secret_value(),
        connect_timeout_s=options.connect_timeout_s,
        read_timeout_s=max(options.heartbeat_interval_s * 3, 60.0),
        tls=options.tls_settings(),
    )


SCHEMA_READ_ATTEMPTS = 5


def _load_schema(conn: Any, database: str, table: str, options: SourceOptions) -> TableSchema:
    """A captured table's schema, TINYINT(1) typed as the source options say."""
    schema = catalog.load_schema(conn, database, table)
    return with_tinyint1(schema, as_boolean=options.tinyint1_as_boolean)


def plan_capture(options: SourceOptions, settings: ConnectionSettings) -> CapturePlan:
    """The captured tables' schemas and the binlog position they hold at.

    The schemas are read between two positions; a DDL on a captured table between them
    would leave it unclear which side of it they were read on, so they are read again.
    """
    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        names = catalog.match_tables(conn, options.table_filter())
        captured = frozenset(names)
        for _attempt in range(SCHEMA_READ_ATTEMPTS):
            before = server.current_position(conn, info, with_gtids=False)
            tables = tuple(_load_schema(conn, db, t, options) for db, t in names)
            read_at = server.current_position(conn, info, with_gtids=False)
            racing = before < read_at and any(
                True
                for _ in read_range(
                    settings, ServerIdRange.parse(options.server_id, 1).pick(0), before,
                    read_at, partial(_captured, captured), rows=False,
                )
            )  # fmt: skip
            if not racing:
                break
        else:
            raise SourceError(
                f"the captured tables' schemas changed during each of {SCHEMA_READ_ATTEMPTS} "
                "attempts to read them (DDL running in a loop?); start the query again later"
            )
        metadata = server.variables(conn, "binlog_row_metadata").get("binlog_row_metadata")
    if options.scan_startup_mode in SNAPSHOT_MODES:  # every table can be cut into chunks
        for schema in tables:
            chunk_key_column(schema, options.chunk_key_column)
    if options.changelog_shape == "typed" and len(tables) != 1:
        raise ConfigError(
            f"changelog.shape=typed needs exactly one table, but the patterns match "
            f"{len(tables)}: {', '.join(t.qualified_name for t in tables[:10])}. Narrow the "
            "patterns or use changelog.shape=envelope"
        )
    return CapturePlan(
        tables,
        options.changelog_shape,
        read_at.seq(),
        json.dumps(read_at.to_offset()),
        metadata is not None and metadata.upper() == "FULL",
    )


def startup_position(options: SourceOptions, settings: ConnectionSettings) -> BinlogPosition:
    """Where a new query starts reading, by ``scan.startup.mode``."""
    mode = options.scan_startup_mode
    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        if mode == "latest-offset":
            return server.current_position(conn, info)
        if mode == "earliest-offset":
            return server.earliest_position(conn, info)
        if mode == "specific-offset":
            gtids = (
                GtidSet.parse(options.specific_offset_gtid_set)
                if options.specific_offset_gtid_set
                else None
            )
            if options.specific_offset_file and options.specific_offset_pos is not None:
                return BinlogPosition(
                    options.specific_offset_file, options.specific_offset_pos, gtids
                )
            raise ConfigError(
                "scan.startup.specific-offset.gtid-set alone is not supported yet; give "
                "scan.startup.specific-offset.file and .pos as well"
            )
        if mode == "timestamp":
            assert options.startup_timestamp_millis is not None
            return server.position_for_timestamp(
                conn, settings, info, options.startup_timestamp_millis
            )
    raise ConfigError(
        f"scan.startup.mode={mode} is not available in this version; use latest-offset, "
        "earliest-offset, specific-offset or timestamp"
    )


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
    share: int = 0  # this partition's share of the range (mysql/binlog_range.py Share) ...
    shares: int = 1  # ... of this many


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


def _captured(tables: frozenset[tuple[str, str]], database: str, table: str) -> bool:
    return (database, table) in tables


def _position(offset: dict[str, Any]) -> BinlogPosition:
    return BinlogPosition.from_offset(offset["binlog"])


def _identity(offset: dict[str, Any]) -> ServerIdentity | None:
    raw = offset.get("server")
    return None if raw is None else ServerIdentity.from_offset(raw)


def _offset(
    position: BinlogPosition,
    snapshot: dict[str, Any] | None = None,
    identity: ServerIdentity | None = None,
    failover: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"binlog": position.to_offset()}
    if identity is not None:
        out["server"] = identity.to_offset()
    if failover is not None:
        out["failover"] = failover  # {"from": <identity offset>, "gtids": <GTID set>}
    if snapshot is not None:
        out["snapshot"] = snapshot
    return out


def _snapshot_running(offset: dict[str, Any]) -> bool:
    return any(
        not SnapshotProgress.from_offset(p).pure_binlog
        for p in (offset.get("snapshot") or {}).values()
    )


def _same_server(a: ServerIdentity | None, b: ServerIdentity | None) -> bool:
    return a == b or (a is not None and b is not None and a.same_server(b))


@dataclass(frozen=True)
class AvailableNowTarget:
    """Where a ``Trigger.AvailableNow`` run stops reading the binlog: the server's binlog
    end when the run started (``prepareForTriggerAvailableNow``)."""

    position: BinlogPosition
    identity: ServerIdentity


def _distance(start: BinlogPosition, end: BinlogPosition) -> str:
    """How far ``end`` is ahead of ``start``, for progress lines."""
    if start.file == end.file:
        return f"{max(end.pos - start.pos, 0):,} bytes"
    return f"{end.file_number - start.file_number} binlog file(s)"


def stream_id(options: SourceOptions) -> str:
    """The state directory of a query under ``state.location`` (one source per query)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"mysql-cdc_{options.hostname}_{options.port}")


_SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
_SHUTDOWN_ERRORS = (EOFError, BrokenPipeError, ConnectionResetError)


def _quiet_runner_shutdown() -> None:
    """In the process that runs this source for Spark (pyspark's streaming source runner),
    drop the traceback Python prints at exit when the JVM closed the runner's socket on
    stopping the query: the runner reads EOF, fails to report it over the closed socket,
    and a chain of EOFError / BrokenPipeError reaches the console of a run that ended well.
    Any other exception is printed as before; so is this chain in any other process."""
    import sys

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is None or spec.name != _SOURCE_RUNNER:
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        chain: BaseException | None = exc
        while chain is not None and isinstance(chain, _SHUTDOWN_ERRORS):
            chain = chain.__context__
        if chain is None:
            return  # only the closed socket: nothing went wrong
        previous(kind, exc, tb)

    sys.excepthook = hook


_quiet_runner_shutdown()


class BatchHold:
    """A request that the source plan no new batch, kept as a file under the query's
    ``state.location`` (``hold/requested``): while it is there, ``latestOffset`` answers
    with the offset Spark has, so the query idles between triggers.

    The pipeline runner sets it before it stops a query, and waits for the trigger in
    flight to end: ``query.stop()`` during a batch cancels the batch's Spark jobs, and the
    sink's writer then fails with an ``InterruptedException`` (a Java and a Python stack on
    the console) in a run that did nothing wrong. It clears the hold when it starts.

    >>> hold = BatchHold("/tmp/sparkcdc-doctest-hold")
    >>> hold.set(); hold.held
    True
    >>> hold.clear(); hold.held
    False
    """

    def __init__(self, state_location: str) -> None:
        self.store = StateStore.open(state_location, "hold")
        self.path = self.store.path("requested")

    @property
    def held(self) -> bool:
        return self.store.exists(self.path)

    def set(self) -> None:
        self.store.overwrite(self.path, b"")

    def clear(self) -> None:
        self.store.delete(self.path)


_LAST_END = ("offsets", "last-end.json")
_VERSIONS = ("schema", "versions.json")
T = TypeVar("T")
MAX_CHUNKS_PER_TASK = 128  # by default (tasks_per_table): ~1M rows at the default chunk size
DISCOVERY_INTERVAL_S = 2.0  # how often scan.newly-added-table.enabled looks for new tables
# adjacent chunks a task reads under one pair of watermarks (snapshot.reader.read_chunks):
# about four default chunks; bounds a task's memory to this many rows
READ_GROUP_ROWS = 32_768


def _check_successor(start: dict[str, Any], end: dict[str, Any]) -> None:
    """``end`` must have been planned from ``start``; else the state belongs to another query."""
    before, after = start.get("snapshot"), end.get("snapshot")
    if before is None and after is None:
        return

    def planned_from(table: str) -> bool:
        assert before is not None and after is not None
        previous = before.get(table, {"next": 0, "prev": 0})  # a newly added table
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


SHARE_BYTES = 4 << 20  # binlog bytes a partition decodes under scan.binlog.partitions=auto


def binlog_shares(
    setting: str,
    begin: BinlogPosition,
    stop: BinlogPosition,
    parallelism: int,
    server_ids: ServerIdRange,
) -> int:
    """How many Spark partitions decode the binlog range ``[begin, stop)`` of one batch.

    ``setting`` is ``scan.binlog.partitions``: a number, or ``auto``: one partition per
    ``SHARE_BYTES`` of binlog, up to the session's parallelism (a range that spans binlog
    files counts as large), so that small batches stay one partition (each one more opens a
    replication connection and reads the whole range again; only decoding is shared). Never
    more than the ``server-id`` range has ids: each partition is a replica of its own.

    >>> ids = ServerIdRange(5400, 5408)
    >>> a, b = BinlogPosition("b.000001", 4), BinlogPosition("b.000001", 4 + 9 * SHARE_BYTES)
    >>> binlog_shares("auto", a, b, 2, ids), binlog_shares("auto", a, a, 2, ids)
    (2, 1)
    >>> binlog_shares("3", a, b, 2, ServerIdRange(5400, 5401))
    2
    """
    if setting != "auto":
        wanted = int(setting)
    elif begin.file != stop.file:
        wanted = parallelism
    else:
        wanted = min(parallelism, (stop.pos - begin.pos) // SHARE_BYTES)
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


F = TypeVar("F", bound=Callable[..., Any])


def message_first(method: F) -> F:
    """Our errors, from a method Spark calls in its planning processes, reported as our
    message: the user's ``load()`` / ``start()`` raises ``[PYTHON_DATA_SOURCE_ERROR] ...:
    sparkcdc.errors.SourceError: <what to do>`` instead of a Python traceback that ends in it.

    pyspark's worker (``pyspark.util.handle_worker_exception``) reports an exception as
    ``traceback.format_exc()``, or only its last line when ``SPARK_HIDE_TRACEBACK`` is set in
    the worker's environment, which it reads when it reports. The methods marked run in the
    process that creates a Python data source or runs one streaming source's driver side
    (``pyspark.sql.worker.create_data_source``, ``python_streaming_source_runner``), never in
    the workers that run tasks and users' UDFs, so other errors keep their tracebacks there.
    """

    @wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except SparkCdcError:
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return run  # type: ignore[return-value]


class MySqlCdcStreamReader(DataSourceStreamReader, AvailableNowBase):  # type: ignore[misc]
    def __init__(
        self,
        options: SourceOptions,
        plan: CapturePlan,
        server_ids: ServerIdRange,
        parallelism: int = 1,
    ):
        self.options = options
        self.plan = plan
        self.server_ids = server_ids
        self.parallelism = max(1, parallelism)  # the session's, for spreading chunks
        self.settings = connection_settings(options)
        self.snapshot = options.scan_startup_mode in SNAPSHOT_MODES
        self._coordinator: SnapshotCoordinator | None = None
        self._last_end: dict[str, Any] | None = None
        self._initial: dict[str, Any] | None = None
        self._discovered_at = 0.0
        self._added: dict[str, TableSchema] = {}  # tables that joined while the query ran
        # driver-side continuity memory: file tags per (server, file), offsets checked in
        # full (with their file's tag) and where offsets of a failed-over server land
        self._tags: dict[tuple[str, str], str | None] = {}
        self._checked: set[str] = set()
        self._located: dict[str, BinlogPosition] = {}
        self._planned: dict[str, Any] | None = None  # the last offset latestOffset returned
        self._versions: TableVersions | None = None  # binlog without column metadata only
        self._target: AvailableNowTarget | None = None  # set by Trigger.AvailableNow
        self._poll_conn: Any = None  # the driver's connection for latestOffset

    # The coordinator holds a live connection: it stays on the driver.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_coordinator"] = None
        state["_poll_conn"] = None
        return state

    @property
    def store(self) -> StateStore:
        return StateStore.open(self.options.state_location or "", stream_id(self.options))

    @property
    def coordinator(self) -> SnapshotCoordinator:
        if self._coordinator is None:
            settings = SnapshotSettings(
                self.options.chunk_size,
                self.options.chunk_key_column,
                self.options.chunks_per_batch,
                self.options.factor_lower,
                self.options.factor_upper,
            )
            self._coordinator = SnapshotCoordinator(
                lambda: sql_connection(self.settings), self.plan.tables, settings, self.store
            )
        return self._coordinator

    def _remember(self, end: dict[str, Any]) -> None:
        """Keep the last offset Spark logged: the base of the next one (Spark 4.1 does not
        pass it to latestOffset, and a restarted query learns it only from here)."""
        self._last_end = end
        if self.snapshot:
            self.store.overwrite(self.store.path(*_LAST_END), json.dumps(end).encode())

    def _initial_offset(self) -> dict[str, Any]:
        # Spark may ask latestOffset() before initialOffset(): both must see one start.
        if self._initial is None:
            with sql_connection(self.settings) as conn:
                view = self._view(conn)
            if self.snapshot:
                position = self._stamp(view, view.end)
                self._initial = _offset(position, self.coordinator.initial(), view.identity)
            else:
                position = startup_position(self.options, self.settings)
                if position.file in dict(view.files):
                    position = self._stamp(view, position)
                self._initial = _offset(position, identity=view.identity)
            self._checked.add(json.dumps(self._initial, sort_keys=True))
            log.info(
                "mysql-cdc: a new query starts at %s (%s) on %s",
                position,
                self.options.scan_startup_mode,
                view.where(),
            )
            # a binlog without column metadata: keep the schema this query starts with, the
            # one a later run needs for the rows before a DDL made while no run was reading
            self.table_versions(position)
        return self._initial

    # -- which server: identity, reset, rewind, failover (mysql/continuity.py) -----------

    def _view(self, conn: Any) -> ServerView:
        return ServerView.observe(conn, self.settings.endpoint)

    def _tag(self, view: ServerView, file: str) -> str | None:
        key = (json.dumps(view.identity.to_offset(), sort_keys=True), file)
        if key not in self._tags:
            self._tags[key] = server.file_tag(self.settings, file)
        return self._tags[key]

    def _stamp(self, view: ServerView, position: BinlogPosition) -> BinlogPosition:
        """``position`` on the server of ``view`` with the tag of its file."""
        return position.with_file_tag(self._tag(view, position.file))

    def _locate(self, offset: dict[str, Any], view: ServerView) -> tuple[BinlogPosition, bool]:
        """Where ``offset`` is on the server of ``view``, and whether that is another
        server it was followed to by GTID. Raises ``ServerContinuityError`` when the offset
        is no place there. An offset is checked in full (its file's tag too) once per
        process; the cheap checks (identity, files, end, GTID state) every time."""
        key = json.dumps({k: offset.get(k) for k in ("binlog", "server")}, sort_keys=True)
        located = self._located.get(key + json.dumps(view.identity.to_offset()))
        if located is not None:
            return located, True
        position, identity = _position(offset), _identity(offset)
        tag_of = None if key in self._checked else partial(self._tag, view)
        verdict = judge(position, identity, view, tag_of)
        self._checked.add(key)
        if verdict is Continuity.ADOPT:
            log.warning(
                "mysql-cdc: the offset %s carries no server identity (written by an older "
                "sparkcdc); it is taken as a place on %s, which answers now, and later offsets "
                "carry that identity",
                position,
                view.where(),
            )
        if verdict is not Continuity.FAILOVER:
            return position, False
        assert position.gtids is not None and identity is not None  # judge's FAILOVER
        if _snapshot_running(offset):
            raise SourceError(
                f"the source failed over from {identity} to {view.where()} while a snapshot "
                f"is running (offset {position}): its chunks' watermarks are places on the old "
                "server and cannot be followed by GTID. Start the query over with a new "
                "checkpoint and an empty state.location (scan.startup.mode=initial)"
            )
        found = server.position_after_gtids(self.settings, position.gtids, view.end)
        found = self._stamp(view, found).after_failover(position)
        log.warning(
            "mysql-cdc: followed failover from server %s to %s at GTID %s: offset %s there is "
            "%s here",
            identity,
            view.where(),
            position.gtids,
            position,
            found,
        )
        self._located[key + json.dumps(view.identity.to_offset())] = found
        return found, True

    def _base(self) -> dict[str, Any]:
        if self._last_end is None and self.snapshot:
            raw = self.store.read(self.store.path(*_LAST_END))
            if raw is not None:
                self._last_end = json.loads(raw)  # a restarted query
        if self._last_end is None:
            self._last_end = self._initial_offset()
        return self._last_end

    def _discover(self) -> None:
        """scan.newly-added-table.enabled: tables that started matching the patterns since
        the query started join it as more pending chunks (DESIGN.md §2); their binlog events
        are filtered by chunk like every other table's, so nothing is missed or doubled."""
        now = time.monotonic()
        if now - self._discovered_at < DISCOVERY_INTERVAL_S:
            return
        self._discovered_at = now
        with sql_connection(self.settings) as conn:
            names = catalog.match_tables(conn, self.options.table_filter())
            known = {(t.database, t.table) for t in self.plan.tables}
            added = tuple(
                _load_schema(conn, db, t, self.options) for db, t in names if (db, t) not in known
            )
        for schema in added:
            log.info("mysql-cdc: table %s now matches; its snapshot starts", schema.qualified_name)
            self.coordinator.schemas[schema.qualified_name] = schema
            self._added[schema.qualified_name] = schema
        if added:
            self.plan = replace(
                self.plan,
                tables=self.plan.tables + added,
                started_tables=self.plan.started_tables or len(self.plan.tables),
            )
            if self._versions is not None and not self.plan.full_metadata:
                # read now; its binlog rows before its chunks complete are dropped anyway
                grown = {**self._versions.versions}
                for schema in added:
                    grown[(schema.database, schema.table)] = [(-1, schema)]
                self._versions = TableVersions(grown)

    @message_first
    def initialOffset(self) -> dict[str, Any]:
        return self._initial_offset()

    # -- admission control and Trigger.AvailableNow (PySpark >= 4.2, spark/compat.py) ----

    def getDefaultReadLimit(self) -> Any:
        """``chunks-per-batch`` chunks a batch, as Spark's ``ReadMaxRows`` of that many
        chunks' rows; the binlog is never cut (a batch ends where the server was when it was
        planned, DESIGN.md §2), so a stream without a snapshot reads all available."""
        chunks = self.options.chunks_per_batch if self.snapshot else 0
        return default_read_limit(chunks, self.options.chunk_size)

    @message_first
    def prepareForTriggerAvailableNow(self) -> None:
        """A ``Trigger.AvailableNow`` run starts: note what is available now.

        Available now is the binlog up to the server's end at this moment, T, and every row
        the captured tables hold, that is, for a table under snapshot, *all* its chunks. The
        chunk plan is computed lazily and may not exist yet, but it needs not: its chunks
        cover the whole key range (the first is ``(-inf, c1)``, the last ``[cn, +inf)``),
        whatever their boundaries turn out to be, so "every chunk planned at start" is "the
        snapshot complete". Tables that match the patterns now (newly-added-table) are
        looked for once, here; a table created later waits for the next run.

        The run then takes bounded batches (the read limit, ``chunks-per-batch``) as any
        trigger does, each batch's binlog end B_k taken when it is planned, so that every
        chunk task of it has LW >= B_k (DESIGN.md §2). Chunks read after T are read as they
        are when read: their rows are the table at their HW > T (a lock-free snapshot cannot
        read the past). Stopping the binlog at T would then leave the sink at no single
        point in time (those keys at their HW, the rest at T), so the batch after the last
        chunks reads the binlog to where the server is when it is planned, past every
        chunk's HW: the run ends on one consistent cut of the source, and it does end, since
        that position is fixed once the last chunk is read. Tables past their snapshot read
        the binlog up to T and no further; once no chunk is left and the binlog is at T (or
        past it), ``latestOffset`` returns its start and Spark stops the query.
        """
        with sql_connection(self.settings) as conn:
            view = self._view(conn)
        self._target = AvailableNowTarget(self._stamp(view, view.end), view.identity)
        if self.snapshot and self.options.newly_added_table and not self.plan.typed:
            self._discovered_at = 0.0
            self._discover()
        log.info("mysql-cdc: Trigger.AvailableNow reads up to %s on %s", view.end, view.where())

    def _chunks_pending(self, base: dict[str, Any]) -> bool:
        """Whether ``base``'s successor still has chunks to read or filter by."""
        snapshot = base.get("snapshot")
        if snapshot is None:
            return False
        return _snapshot_running(base) or any(t not in snapshot for t in self.coordinator.schemas)

    def _caught_up(self, base: dict[str, Any], target: AvailableNowTarget) -> bool:
        """Everything the AvailableNow run started with is read once ``base`` is read."""
        if self._chunks_pending(base):
            return False
        if self.options.scan_startup_mode == "snapshot":
            return True
        return _same_server(_identity(base), target.identity) and _position(base) >= (
            target.position
        )

    def _target_on(self, view: ServerView) -> BinlogPosition:
        """The run's binlog target as a place on the server of ``view``: a server that
        took over since the run started is read to its end as of now."""
        target = self._target
        assert target is not None
        if not _same_server(target.identity, view.identity):
            log.warning(
                "mysql-cdc: the source moved from %s to %s during a Trigger.AvailableNow run; "
                "the run reads up to %s there",
                target.identity,
                view.where(),
                view.end,
            )
            target = AvailableNowTarget(self._stamp(view, view.end), view.identity)
            self._target = target
        return target.position

    @message_first
    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        # PySpark 4.1 calls latestOffset(); 4.2 passes the batch's start and a read limit
        base = start if start is not None else self._base()
        if self.options.state_location and BatchHold(self.options.state_location).held:
            return base  # no new data: the query idles between batches until stopped
        if self._target is not None and self._caught_up(base, self._target):
            return base  # Spark ends the AvailableNow run
        chunks = chunk_budget(limit, self.options.chunks_per_batch, self.options.chunk_size)
        identity = _identity(base)
        failover: dict[str, Any] | None = None
        if self.options.scan_startup_mode == "snapshot":
            position = _position(base)  # snapshot only: the binlog never advances
        else:
            view = self._view(self._poll_connection())
            here, moved = self._locate(base, view)
            # the end carries its GTID set, so a failover can be followed from it
            position = self._stamp(view, view.end)
            if self._target is not None and not self._chunks_pending(base):
                position = min(position, self._target_on(view))  # the run's binlog ends there
            position = replace(position, seq_file_base=here.seq_file_base)
            position = max(position, here)
            identity = view.identity
            if moved and identity != _identity(base):
                # the batch that crosses over says so in the checkpoint's offset log
                failover = {"from": base.get("server"), "gtids": str(_position(base).gtids)}
        snapshot = base.get("snapshot")
        if snapshot is None:
            self._planned = _offset(position, identity=identity, failover=failover)
            return self._planned
        # typed: one fixed table; AvailableNow: the tables found when the run started
        if self.options.newly_added_table and not self.plan.typed and self._target is None:
            self._discover()
        advanced = self.coordinator.advance(snapshot, chunks)
        if any(not SnapshotProgress.from_offset(p).pure_binlog for p in advanced.values()):
            log.info(
                "mysql-cdc progress: %s; binlog at %s (%s behind the server)",
                self.coordinator.describe(advanced),
                _position(base),
                _distance(_position(base), position),
            )
        self._planned = _offset(position, advanced, identity, failover)
        return self._planned

    def _binlog_range(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> tuple[BinlogPosition, BinlogPosition]:
        """The batch's binlog range as places on the server that answers now.

        A batch latestOffset just planned on one server is known good. Any other (a replay
        after a restart, or the batch of a failover) is checked here, before any row is
        read; ends taken on a server we failed over from are followed by GTID. The rows of
        the batch all take the seq base of its start (see ``after_failover``).
        """
        begin, stop = _position(start), _position(end)
        if self.options.scan_startup_mode == "snapshot":
            return begin, stop
        fresh = self._planned is not None and end == self._planned
        before, after = _identity(start), _identity(end)
        same = before == after or (
            before is not None and after is not None and before.same_server(after)
        )
        if fresh and same:
            return begin, stop
        with sql_connection(self.settings) as conn:
            view = self._view(conn)
        if not fresh:
            stop, _ = self._locate(end, view)
        begin, moved = self._locate(start, view)
        if moved:
            stop = replace(stop, seq_file_base=begin.seq_file_base)
        return begin, stop

    @message_first
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            # Spark 4.1 tells a restarted source the last logged offset this way
            # (PythonMicroBatchStream.setLatestSeenOffset): the base of the next offset.
            self._remember(end)
            return []
        _check_successor(start, end)
        begin, stop = self._binlog_range(start, end)  # raises before anything is read
        self._remember(end)
        parts: list[InputPartition] = []
        snapshot = start.get("snapshot")
        if begin < stop:
            flt, keys = "", ""
            if snapshot is not None:
                coordinator = self.coordinator
                flt = json.dumps(coordinator.filter_state(snapshot, begin))
                keys = json.dumps({t: coordinator.key_column(t) for t in coordinator.schemas})
            tables = ""
            if self._added:  # executors know the tables of the query's start only
                tables = json.dumps([[t.database, t.table] for t in self.plan.tables])
            versions = self.table_versions(begin)
            shares = binlog_shares(
                self.options.binlog_partitions, begin, stop, self.parallelism, self.server_ids
            )
            parts.extend(
                BinlogRangePartition(
                    json.dumps(_offset(begin)),
                    json.dumps(_offset(stop)),
                    self.server_ids.pick(index),  # a replication connection each
                    flt,
                    keys,
                    tables,
                    "" if versions is None else json.dumps(versions.to_json()),
                    index,
                    shares,
                )
                for index in range(shares)
            )
        if snapshot is not None:
            coordinator = self.coordinator
            # prev == start's next (checked)
            progress = {t: SnapshotProgress.from_offset(raw) for t, raw in end["snapshot"].items()}
            counts = tasks_per_table(
                [p.next - p.prev for p in progress.values()],
                self.parallelism,
                self.options.chunks_per_partition,
            )
            for (table, p), count in zip(progress.items(), counts, strict=True):
                chunks = coordinator.chunks_between(table, p.prev, p.next)
                for run in spread(chunks, count):
                    parts.append(
                        ChunkPartition(
                            tuple(c.to_json() for c in run),
                            coordinator.key_column(table),
                            coordinator.collation(table),
                            self.server_ids.pick(1 + len(parts)),
                            json.dumps(end),
                            json.dumps(schema_to_json(self._added[table]))
                            if table in self._added
                            else "",
                        )
                    )
        return parts

    def table_versions(self, start: BinlogPosition) -> TableVersions | None:
        """The captured tables' schema versions by position, when the server logs rows
        without column metadata (``binlog_row_metadata`` not FULL); None otherwise.

        Built once per run from ``start`` (the run's first batch start) on: the DDL statements
        on captured tables between ``start`` and the position the plan read the schemas at
        are found in the binlog. None: the plan's schema holds from ``start``. One: the
        version saved under ``state.location`` by the run that stopped at it holds before it,
        the plan's after it. Two or more: the schema between them was never read; stop.
        Later DDL stops the run (read_range), and the next run learns its schema this way.
        """
        if self._versions is not None:
            return None if self.plan.full_metadata else self._versions
        if self.plan.full_metadata:
            if self.options.state_location:  # kept versions would go stale under FULL
                self.store.delete(self.store.path(*_VERSIONS))
            self._versions = TableVersions({})
            return None
        saved: TableVersions | None = None
        if self.options.state_location:
            raw = self.store.read(self.store.path(*_VERSIONS))
            saved = TableVersions.from_json(json.loads(raw)) if raw is not None else None
        read_at = BinlogPosition.from_offset(json.loads(self.plan.schema_offset))
        ddl: dict[tuple[str, str], list[BinlogPosition]] = {}
        if start < read_at:
            captured = self.plan.includes
            for change in read_range(
                self.settings, self.server_ids.pick(0), start, read_at, captured, rows=False
            ):
                assert isinstance(change, SchemaChange)
                ddl.setdefault((change.database, change.table), []).append(change.position)
        versions: dict[tuple[str, str], list[tuple[int, TableSchema]]] = {}
        for schema in self.plan.tables:
            key = (schema.database, schema.table)
            known = list(saved.versions.get(key, [])) if saved is not None else []
            changes = ddl.get(key, [])
            if len(changes) > 1:
                raise SourceError(
                    f"table {schema.qualified_name} changed {len(changes)} times (at "
                    f"{changes[0]} and {changes[1]}) in the binlog this query has yet to read, "
                    "and the server logs rows without column metadata (binlog_row_metadata is "
                    "not FULL): the rows between those changes cannot be decoded exactly. "
                    "SET GLOBAL binlog_row_metadata='FULL' and take a new snapshot "
                    "(scan.startup.mode=initial with a new checkpoint and state.location)"
                )
            if changes:
                before = TableVersions({key: known}).at(*key, start.seq())
                if before is None:
                    raise SourceError(
                        f"table {schema.qualified_name} changed at {changes[0]} in the binlog "
                        "this query has yet to read, and the server logs rows without column "
                        "metadata (binlog_row_metadata is not FULL), but no schema of the "
                        "table before that change was kept (give the query a state.location, "
                        "which keeps them). SET GLOBAL binlog_row_metadata='FULL' and take a "
                        "new snapshot, or start from latest-offset"
                    )
                known = [*(v for v in known if v[0] < changes[0].seq()), (changes[0].seq(), schema)]
            elif not known or known[-1][1] != schema:
                known = [*known, (start.seq(), schema)]
            versions[key] = known
        self._versions = TableVersions(versions)
        if self.options.state_location:
            data = json.dumps(self._versions.to_json()).encode()
            self.store.overwrite(self.store.path(*_VERSIONS), data)
        return self._versions

    def read(self, partition: InputPartition) -> Any:
        if isinstance(partition, ChunkPartition):
            yield from self._read_chunk(partition)
            return
        assert isinstance(partition, BinlogRangePartition)
        start = _position(json.loads(partition.start))
        end = _position(json.loads(partition.end))
        includes: Callable[[str, str], bool] = self.plan.includes
        if partition.tables:
            captured = frozenset((db, t) for db, t in json.loads(partition.tables))
            includes = partial(_captured, captured)
        versions = (
            TableVersions.from_json(json.loads(partition.versions)) if partition.versions else None
        )
        share = Share(partition.share, partition.shares)
        changes: Any = read_range(
            self.settings, partition.server_id, start, end, includes, versions, share=share
        )
        if not partition.filter_state:
            yield from self.plan.builder().batches(changes)
            return
        # string chunk keys of collations only the server orders are ranked over SQL
        flt = InterleavingFilter.from_state(
            json.loads(partition.filter_state), partial(sql_connection, self.settings)
        )
        try:
            changes = filter_changes(changes, flt, json.loads(partition.key_columns))
            yield from self.plan.builder().batches(changes)
        finally:
            flt.close()

    def _read_chunk(self, partition: ChunkPartition) -> Any:
        with contextlib.ExitStack() as stack:
            yield from self._read_chunks(partition, stack)

    def _read_chunks(self, partition: ChunkPartition, stack: contextlib.ExitStack) -> Any:
        builder = self.plan.builder()
        for chunk, staged in self._staged_chunks(partition, stack):
            if staged.rows is None:
                raise SnapshotError(
                    f"chunk {chunk.index} of {chunk.table} was committed and released already, "
                    "yet Spark asks for it again: the checkpoint and state.location disagree; "
                    "start with a new checkpoint and state location"
                )
            schema = staged.meta.schema
            rows = SnapshotRows(
                schema.database,
                schema.table,
                schema.column_names,
                staged.rows,
                staged.meta.high.seq(),
                staged.meta.ddl,
                schema.columns,
            )
            yield from builder.snapshot_batches(rows)

    def _staged_chunks(
        self, partition: ChunkPartition, stack: contextlib.ExitStack
    ) -> Iterator[tuple[ChunkRange, StagedChunk]]:
        """The partition's chunks in order, each staged: loaded if it was, else read and
        staged. Adjacent chunks not staged yet are read together (``read_chunks``), up to
        ``READ_GROUP_ROWS`` rows' worth of chunks."""
        chunks = [ChunkRange.from_json(text) for text in partition.chunks]
        if not chunks:
            return
        staging = ChunkStaging(self.store)
        limit = max(1, READ_GROUP_ROWS // max(1, self.options.chunk_size))
        since = _position(json.loads(partition.since)) if partition.since else None
        schema = (  # a partition's chunks are of one table
            schema_from_json(json.loads(partition.schema))
            if partition.schema
            else next(t for t in self.plan.tables if t.qualified_name == chunks[0].table)
        )
        conn: Any = None  # one SQL connection for the task's chunks, opened when needed
        group: list[ChunkRange] = []

        def read_group() -> Iterator[tuple[ChunkRange, StagedChunk]]:
            nonlocal conn
            if conn is None:
                conn = stack.enter_context(sql_connection(self.settings, schema.database))
            results = read_chunks(
                self.settings,
                schema,
                group,
                key_column=partition.key_column,
                collation=partition.collation,
                server_id=partition.server_id,
                since=since,
                conn=conn,
                tinyint1_as_boolean=self.options.tinyint1_as_boolean,
            )
            group.clear()
            for result in results:
                if partition.schema and result.chunk.index == 0:
                    # a table that joined the running query: its CREATE TABLE (at the first
                    # chunk's low watermark) tells consumers its columns before its rows
                    from sparkcdc.mysql.ddl import create_table_statement  # sqlglot: 35 ms

                    create = SchemaChange(
                        schema.database,
                        schema.table,
                        create_table_statement(result.schema),
                        int(time.time()),
                        result.low,
                    )
                    result = replace(result, ddl=(*result.ddl, create))
                yield result.chunk, staging.stage(result)

        for chunk in chunks:
            staged = staging.load(chunk)
            joins = staged is None and (
                not group
                or (
                    len(group) < limit
                    and read_together(schema, partition.key_column, [*group, chunk])
                )
            )
            if not joins and group:
                yield from read_group()
            if staged is None:
                group.append(chunk)
            else:
                yield chunk, staged
        if group:
            yield from read_group()

    @message_first
    def commit(self, end: dict[str, Any]) -> None:
        snapshot = end.get("snapshot")
        if snapshot is not None:
            self.coordinator.release(snapshot)

    def _poll_connection(self) -> Any:
        """The driver's SQL connection for ``latestOffset``'s look at the server: kept open
        between polls (a login, and a TLS handshake, saved at every trigger), checked with a
        ping and opened again when the server dropped it."""
        conn = self._poll_conn
        if conn is not None:
            try:
                conn.ping(reconnect=False)
                return conn
            except Exception:  # closed by the server (wait_timeout, a restart, a failover)
                self._close_poll_connection()
        self._poll_conn = sql_connection(self.settings)
        return self._poll_conn

    def _close_poll_connection(self) -> None:
        conn, self._poll_conn = self._poll_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def stop(self) -> None:
        self._close_poll_connection()
        if self._coordinator is not None:
            self._coordinator.close()


class MySqlCdcDataSource(DataSource):
    """``spark.readStream.format("mysql-cdc")`` with Flink CDC's option names."""

    # set on the class sparkcdc.register() registers (the session's); else the CPU count
    default_parallelism: int | None = None

    @message_first
    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source_options = SourceOptions.from_options(dict(options))
        # resolved once: a random default id must stay the same for the whole query
        self.server_ids = ServerIdRange.parse(
            self.source_options.server_id, 1 + max(self.source_options.chunks_per_batch, 8)
        )
        wanted = self.source_options.binlog_partitions
        if wanted != "auto" and int(wanted) > self.server_ids.size:
            raise ConfigError(
                f"scan.binlog.partitions={wanted} needs as many replication connections, each "
                f"with a server id of its own, but server-id {self.server_ids} has "
                f"{self.server_ids.size}: give server-id a range of at least {wanted} ids "
                f"(e.g. '{self.server_ids.low}-{self.server_ids.low + int(wanted)}'), or fewer "
                "partitions"
            )
        self._plan: CapturePlan | None = None

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    @property
    def plan(self) -> CapturePlan:
        """The captured tables, once the server is known to be ready for CDC: a server that
        is not (a missing grant, binlog_format) stops with the validator's message and the
        statement that fixes it, not with the first query that failed."""
        from sparkcdc.mysql.validator import check_source

        if self._plan is None:
            settings = connection_settings(self.source_options)
            check_source(settings)
            self._plan = plan_capture(self.source_options, settings)
        return self._plan

    @message_first
    def schema(self) -> str:
        return self.plan.spark_ddl()

    @message_first
    def streamReader(self, schema: Any) -> MySqlCdcStreamReader:
        parallelism = self.default_parallelism or os.cpu_count() or 1
        return MySqlCdcStreamReader(self.source_options, self.plan, self.server_ids, parallelism)
