"""The ``mysql-cdc`` PySpark streaming source (the only camelCase code is here).

Offsets are ``{"binlog": <BinlogPosition.to_offset()>, "server": <ServerIdentity>}``,
always on transaction boundaries. Batch ``k`` reads ``[B_{k-1}, B_k)`` in one or more
partitions on executors (``spark/offsets.py`` plans them: binlog shares, snapshot chunk
groups); a replayed batch reads the same range and yields the same rows. What a query
captures and where it starts is ``spark/capture.py``'s; this module is the Spark adapter.

Before a batch is planned the offsets are checked against the server that answers
(``mysql/stream/continuity.py``): another server, a reset or restored binlog, or a binlog behind
the offset stops the query with a clear error; a failover to a server whose GTID state
holds the offset's GTID set (and, right after a snapshot's last chunks, their HWs' sets) is
followed by GTID.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from functools import partial, wraps
from typing import Any, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sparkcdc.errors import (
    ConfigError,
    DifferentServerError,
    SnapshotError,
    SourceError,
    SparkCdcError,
)
from sparkcdc.model.dialect import RangeRead, dialect_for
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.options import SNAPSHOT_MODES, ServerIdRange, SourceOptions
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import TableSchema, schema_from_json, schema_to_json
from sparkcdc.mysql.admin import server
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.dialect import connection_settings
from sparkcdc.mysql.protocol.connection import KeptConnection
from sparkcdc.mysql.stream import positions
from sparkcdc.mysql.stream.continuity import Continuity, ServerView, judge
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.coordinator import SnapshotCoordinator, SnapshotProgress, SnapshotSettings
from sparkcdc.snapshot.filter import InterleavingFilter
from sparkcdc.snapshot.interleave import filter_changes
from sparkcdc.snapshot.reader import read_chunks, read_together
from sparkcdc.snapshot.staging import ChunkStaging, StagedChunk
from sparkcdc.snapshot.storage import StateStore
from sparkcdc.spark.capture import CapturePlan, plan_capture
from sparkcdc.spark.changelog.decoded import SnapshotRows
from sparkcdc.spark.compat import (
    AvailableNowBase,
    binlog_budget,
    chunk_budget,
    default_read_limit,
)
from sparkcdc.spark.offsets import (
    READ_GROUP_ROWS,
    RESTART,
    AvailableNowTarget,
    BinlogRangePartition,
    ChunkPartition,
    binlog_shares,
    check_successor,
    distance,
    make_offset,
    offset_databases,
    offset_identity,
    offset_position,
    offset_tables,
    restarted,
    same_server,
    snapshot_read,
    snapshot_running,
    spread,
    tasks_per_table,
)

log = logging.getLogger(__name__)

FORMAT_NAME = "mysql-cdc"


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

    def __init__(self, state_location: str, hadoop: Mapping[str, str] | None = None) -> None:
        self.store = StateStore.open(state_location, "hold", hadoop)
        self.path = self.store.path("requested")

    @property
    def held(self) -> bool:
        return self.store.exists(self.path)

    def set(self) -> None:
        self.store.overwrite(self.path, b"")

    def clear(self) -> None:
        self.store.delete(self.path)


class SnapshotBatchRecord:
    """The source's word to a pipeline's batch writer on the newest batch it planned: when
    that batch reads snapshot chunks of one table and nothing else (no binlog range, and
    not a table that joined the running query, whose first chunk brings its CREATE TABLE),
    ``planned/snapshot-batch.json`` under the query's ``state.location`` names the table
    and the batch's end offset; otherwise there is no such file.

    Every row of such a batch is a snapshot row of that table unless a chunk brings a
    schema change made between the batch's planning and the chunk's read, which only the
    read finds; the writer checks each row for that as it writes (``BatchWriter``).

    >>> record = SnapshotBatchRecord("/tmp/sparkcdc-doctest-planned")
    >>> record.write({"binlog": {"file": "b.1", "pos": 4}}, "app.t")
    >>> record.read()
    ({'binlog': {'file': 'b.1', 'pos': 4}}, 'app.t')
    >>> record.clear(); record.read() is None
    True
    """

    def __init__(self, state_location: str, hadoop: Mapping[str, str] | None = None) -> None:
        self.store = StateStore.open(state_location, "planned", hadoop)
        self.path = self.store.path("snapshot-batch.json")

    def write(self, end: dict[str, Any], table: str) -> None:
        self.store.overwrite(self.path, json.dumps({"end": end, "table": table}).encode())

    def clear(self) -> None:
        self.store.delete(self.path)

    def read(self) -> tuple[dict[str, Any], str] | None:
        """The recorded batch's end offset and table (qualified name); None: no record."""
        raw = self.store.read(self.path)
        if raw is None:
            return None
        record = json.loads(raw)
        return record["end"], str(record["table"])


_LAST_END = ("offsets", "last-end.json")
_VERSIONS = ("schema", "versions.json")
DISCOVERY_INTERVAL_S = 2.0  # how often scan.newly-added-table.enabled looks for new tables
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


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


def _refuse_ddl_of(
    changes: Iterable[RowChanges | SchemaChange], gone: frozenset[tuple[str, str]], table: str
) -> Iterator[RowChanges | SchemaChange]:
    """``changes`` of a typed stream, stopped at a DDL statement on a table it captured
    before it stopped and no longer captures (``gone``): its typed changelog holds one
    table's changes and has no row for it."""
    for change in changes:
        if isinstance(change, SchemaChange) and (change.database, change.table) in gone:
            raise SourceError(
                f"at {change.where} the statement {change.statement!r} changed "
                f"{change.database}.{change.table}, which this query captured when it last "
                "stopped and which has not existed since it started again (dropped or renamed "
                f"meanwhile). The query now captures only {table}, whose typed changelog has "
                "no room for another table's schema change (a DROP TABLE must reach the "
                "sink). Set changelog.shape=envelope (the shape changelog.shape=auto gave the "
                "query when it captured several tables) to go on from this checkpoint"
            )
        yield change


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
        self.dialect = dialect_for(options)
        self.settings = connection_settings(options)
        self.snapshot = options.scan_startup_mode in SNAPSHOT_MODES
        self._coordinator: SnapshotCoordinator | None = None
        self._last_end: dict[str, Any] | None = None
        self._initial: dict[str, Any] | None = None
        self._discovered_at = 0.0
        self._added: dict[str, TableSchema] = {}  # tables that joined while the query ran
        # scan.resnapshot.tables: tables whose snapshot starts over once their first one is
        # done (as pending chunks, from chunk 0); each leaves the set when its restart is planned
        self._resnapshot = {
            t.strip() for t in (options.resnapshot_tables or "").split(",") if t.strip()
        }
        # driver-side continuity memory: file tags per (server, file), offsets checked in
        # full (with their file's tag) and where offsets of a failed-over server land
        self._tags: dict[tuple[str, str], str | None] = {}
        self._checked: set[str] = set()
        self._located: dict[str, BinlogPosition] = {}
        self._highs: dict[tuple[str, str], BinlogPosition] = {}  # chunk HWs' sets followed
        self._planned: dict[str, Any] | None = None  # the last offset latestOffset returned
        self._recorded: bool | None = None  # a SnapshotBatchRecord is there (None: unknown)
        self._versions: TableVersions | None = None  # binlog without column metadata only
        self._target: AvailableNowTarget | None = None  # set by Trigger.AvailableNow
        # the driver's connection for latestOffset's look at the server, kept between polls
        # (a login, and a TLS handshake, saved at every trigger); made at the first poll
        self._poll: KeptConnection | None = None

    # The coordinator holds a live connection: it stays on the driver.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_coordinator"] = None
        state["_poll"] = None
        return state

    @property
    def store(self) -> StateStore:
        return StateStore.open(
            self.options.state_location or "", stream_id(self.options), self.options.state_hadoop()
        )

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
                KeptConnection.to(self.settings), self.plan.tables, settings, self.store
            )
        return self._coordinator

    def _tables(self) -> set[tuple[str, str]]:
        """The (database, table)s this query captures now."""
        return {(t.database, t.table) for t in self.plan.tables}

    def _remember(self, end: dict[str, Any]) -> None:
        """Keep the last offset Spark logged: the base of the next one (Spark 4.1 does not
        pass it to latestOffset, and a restarted query learns it only from here)."""
        self._last_end = end
        if self.snapshot:
            self.store.overwrite(self.store.path(*_LAST_END), json.dumps(end).encode())

    def _initial_offset(self) -> dict[str, Any]:
        # Spark may ask latestOffset() before initialOffset(): both must see one start.
        if self._initial is None:
            view = self._observe()
            if self.snapshot:
                position = self._stamp(view, view.end)
                self._initial = make_offset(position, self.coordinator.initial(), view.identity)
            else:
                position = self.dialect.startup_position()
                if position.file in dict(view.files):
                    position = self._stamp(view, position)
                self._initial = make_offset(position, identity=view.identity, tables=self._tables())
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

    # -- which server: identity, reset, rewind, failover (mysql/stream/continuity.py) -----------

    def _view(self, conn: Any) -> ServerView:
        return ServerView.observe(conn, self.settings.endpoint)

    def _tag(self, view: ServerView, file: str) -> str | None:
        key = (json.dumps(view.identity.to_offset(), sort_keys=True), file)
        if key not in self._tags:
            self._tags[key] = positions.file_tag(self.settings, file)
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
        position, identity = offset_position(offset), offset_identity(offset)
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
        highs: list[BinlogPosition] = []
        if snapshot_running(offset):
            if not snapshot_read(offset):
                raise SourceError(
                    f"the source failed over from {identity} to {view.where()} while a "
                    f"snapshot is running (offset {position}): chunks are left to read, and "
                    "the plan and watermarks of those read are places on the old server. "
                    "Start the query over with a new checkpoint and an empty state.location "
                    "(scan.startup.mode=initial)"
                )
            # every chunk is read; the last batch's HWs (after the offset) are followed
            # by their GTID sets: each is checked here, before anything is planned
            highs = self.coordinator.last_highs(offset["snapshot"])
            for high in highs:
                self._high_on(view, identity, high)
        found = positions.position_after_gtids(self.settings, position.gtids, view.end)
        # the chunk rows carry their HW's seq: new events sort after the latest of them
        latest = max([position, *highs], key=lambda p: p.seq())
        found = self._stamp(view, found).after_failover(latest)
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

    def _high_on(
        self, view: ServerView, old: ServerIdentity, high: BinlogPosition
    ) -> BinlogPosition:
        """A chunk's HW, taken on the server ``old`` we failed over from, as a place on the
        server of ``view``: right after the transactions of its GTID set, as an offset is
        followed. The chunk saw those transactions; a server that lacks one of them lost
        a change the chunk's rows hold, and the query stops (DESIGN.md, "A failover right
        after the snapshot")."""
        # chunks read while the server was idle share a set: one dump each set
        key = (json.dumps(view.identity.to_offset(), sort_keys=True), str(high.gtids))
        found = self._highs.get(key)
        if found is not None:
            return found
        if high.gtids is None or not server.gtid_state_contains(view.gtid_state, high.gtids):
            have = (
                "has no GTID set to follow it by (read before sparkcdc kept one, or while "
                "the binlog kept moving)"
                if high.gtids is None
                else f"has GTID set {high.gtids}, which the GTID state of the new server "
                f"({view.gtid_state or 'empty'}) does not hold: transactions the chunk's "
                "rows hold were lost in the failover"
            )
            raise DifferentServerError(
                f"the source failed over from {old} to {view.where()} right after the batch "
                f"that read the snapshot's last chunks; a chunk's high watermark {high} "
                f"{have}. The rows already delivered may hold changes the new server does "
                "not have. Start the query over with a new checkpoint and an empty "
                "state.location (scan.startup.mode=initial) on the new server"
            )
        found = positions.position_after_gtids(self.settings, high.gtids, view.end)
        self._highs[key] = found
        return found

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
        known = {(t.database, t.table) for t in self.plan.tables}

        def new_tables(conn: Any) -> tuple[TableSchema, ...]:
            names = [
                (db, t)
                for db, t in self.dialect.match_tables(conn, self.options.table_filter())
                if (db, t) not in known
            ]
            if names:  # a new database may be one the binlog filters leave out
                self.dialect.check_databases(conn, (db for db, _ in names))
            return tuple(self.dialect.load_schema(conn, db, t) for db, t in names)

        added = self._on_server(new_tables)
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
        chunks' rows; a stream without a snapshot says its binlog bound,
        ``scan.binlog.max-bytes-per-batch``, as ``ReadMaxBytes`` (``_bounded``)."""
        chunks = self.options.chunks_per_batch if self.snapshot else 0
        return default_read_limit(
            chunks, self.options.chunk_size, self.options.binlog_max_bytes_per_batch
        )

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
        that position is fixed once the last chunk is read (where no chunk saw the server
        move, the cut is there already: ``_snapshot_read_at``). Tables past their snapshot read
        the binlog up to T and no further; once no chunk is left and the binlog is at T (or
        past it), ``latestOffset`` returns its start and Spark stops the query.
        """
        view = self._observe()
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
        return snapshot_running(base) or any(t not in snapshot for t in self.coordinator.schemas)

    def _caught_up(self, base: dict[str, Any], target: AvailableNowTarget) -> bool:
        """Everything the AvailableNow run started with is read once ``base`` is read."""
        if self._resnapshot and base.get("snapshot") is not None:
            return False  # a snapshot to take again
        if self._chunks_pending(base) and not self._snapshot_read_at(base):
            return False
        if self.options.scan_startup_mode == "snapshot":
            return True
        return same_server(offset_identity(base), target.identity) and offset_position(base) >= (
            target.position
        )

    def _snapshot_read_at(self, base: dict[str, Any]) -> bool:
        """Whether ``base`` has every chunk read, the rows read being the tables as of its
        binlog end: no chunk of its batch saw the server move past that end (the server was
        idle while they were read). The batch after the last chunks, which reads the binlog
        up to where the server is then, past every chunk's HW, would then read nothing but
        what was written since: the run ends at ``base``, already a consistent cut
        (DESIGN.md, "Trigger.AvailableNow and the Spark lines"). Snapshot mode reads no
        binlog at all: every chunk read is all."""
        snapshot = base.get("snapshot")
        if snapshot is None:
            return False
        at = None if self.options.scan_startup_mode == "snapshot" else offset_position(base)
        return self.coordinator.read_as_of(snapshot, at)

    def _target_on(self, view: ServerView) -> BinlogPosition:
        """The run's binlog target as a place on the server of ``view``: a server that
        took over since the run started is read to its end as of now."""
        target = self._target
        assert target is not None
        if not same_server(target.identity, view.identity):
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
        state = self.options.state_location
        if state and BatchHold(state, self.options.state_hadoop()).held:
            return base  # no new data: the query idles between batches until stopped
        binlog = self.options.scan_startup_mode != "snapshot"  # snapshot only: no binlog
        # the offset is a place on the server that answers, or the query stops: before
        # anything else, the AvailableNow "caught up" too (a reset or another server's
        # binlog may end before the offset, which must not read as "nothing new")
        view = self._observe() if binlog else None
        located = None if view is None else self._locate(base, view)
        if self._target is not None and self._caught_up(base, self._target):
            return base  # Spark ends the AvailableNow run
        chunks = chunk_budget(limit, self.options.chunks_per_batch, self.options.chunk_size)
        identity = offset_identity(base)
        failover: dict[str, Any] | None = None
        if view is None or located is None:
            position = offset_position(base)  # the binlog never advances
        else:
            here, moved = located
            # the end carries its GTID set, so a failover can be followed from it
            position = self._stamp(view, view.end)
            if self._target is not None and not self._chunks_pending(base):
                position = min(position, self._target_on(view))  # the run's binlog ends there
            position = replace(position, seq_file_base=here.seq_file_base)
            position = max(position, here)
            place = self._placer(base, view) if moved else None
            position = self._bounded(here, position, view, limit, base.get("snapshot"), place)
            identity = view.identity
            if moved and identity != offset_identity(base):
                # the batch that crosses over says so in the checkpoint's offset log
                failover = {"from": base.get("server"), "gtids": str(offset_position(base).gtids)}
        snapshot = base.get("snapshot")
        if snapshot is None:
            self._planned = make_offset(position, None, identity, failover, self._tables())
            return self._planned
        # typed: one fixed table; AvailableNow: the tables found when the run started
        if self.options.newly_added_table and not self.plan.typed and self._target is None:
            self._discover()
        snapshot, restarting = self._restart(snapshot)
        advanced = self.coordinator.advance(snapshot, chunks)
        for table in restarting:
            advanced[table][RESTART] = True
        if any(not SnapshotProgress.from_offset(p).pure_binlog for p in advanced.values()):
            log.info(
                "mysql-cdc progress: %s; binlog at %s (%s behind the server)",
                self.coordinator.describe(advanced),
                offset_position(base),
                distance(offset_position(base), position),
            )
        self._planned = make_offset(position, advanced, identity, failover)
        return self._planned

    def _restart(
        self, snapshot: dict[str, dict[str, Any]]
    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """``snapshot`` with the tables of ``scan.resnapshot.tables`` whose snapshot is done
        (read in batches before the last: no batch of the old plan is left to replay or
        commit) back at chunk 0, and those tables. Their chunk plans and staged chunks are
        removed: the restart plans the table as it is now. The batch that restarts a table
        drops its binlog events (``partitions``), as for a newly added table: its chunks,
        read after that batch's binlog end, hold them (DESIGN.md, "A sink table removed
        behind the pipeline's back")."""
        restarting = []
        for table in sorted(self._resnapshot):
            if table not in self.coordinator.schemas:
                raise SourceError(
                    f"scan.resnapshot.tables names {table}, which this query does not capture "
                    f"(it captures {', '.join(sorted(self.coordinator.schemas))}): name "
                    "captured tables as database.table"
                )
            raw = snapshot.get(table)
            if raw is None or not SnapshotProgress.from_offset(raw).pure_binlog:
                continue  # its first snapshot is still running: restarted once it is done
            self.coordinator.forget(table)
            self.store.remove_table("plan", table)
            self.store.remove_table("chunks", table)
            restarting.append(table)
            self._resnapshot.discard(table)
            log.info("mysql-cdc: the snapshot of %s starts again (scan.resnapshot.tables)", table)
        if not restarting:
            return snapshot, []
        fresh = SnapshotProgress().to_offset()
        return {**snapshot, **{t: fresh for t in restarting}}, restarting

    def _bounded(
        self,
        here: BinlogPosition,
        end: BinlogPosition,
        view: ServerView,
        limit: Any,
        snapshot: dict[str, Any] | None,
        place: Callable[[BinlogPosition], BinlogPosition] | None = None,
    ) -> BinlogPosition:
        """The batch's binlog end: ``end``, or a transaction boundary before it when the
        range is more than the batch's binlog budget (``scan.binlog.max-bytes-per-batch``,
        or Spark's read limit). A backlog (a query stopped for a day, a snapshot that ran
        for hours) is then read in bounded batches, each committed on its own, rather than
        as one batch whose rows all wait in the executors.

        Where may a batch end? At a transaction boundary, with its GTID set: the one the
        budget reaches first (``positions.transaction_cut``: ``here``'s set grown by the GTIDs
        read up to it, or asked of MariaDB where ``here`` has none). And, while a snapshot
        runs, at or past the HWs of the chunks the previous batch read (DESIGN.md §2: every
        chunk's HW is at or before the binlog end of the batch after its own, which the
        next filter and the snapshot's end count on); the chunks of this batch have LWs at
        or past the server's end, so past any end before it. ``place`` maps those HWs to
        this server after a failover (``_high_on``).
        """
        budget = binlog_budget(limit, self.options.binlog_max_bytes_per_batch)
        waiting = server.binlog_bytes(here, end, view.files)
        if budget <= 0 or waiting <= budget:
            return end
        # the HWs are staged metadata (a read each, a GET on an object store): only now
        high = None if snapshot is None else self.coordinator.last_high(snapshot)
        if high is not None and place is not None:
            high = place(high)
        if high is not None:
            budget = max(budget, server.binlog_bytes(here, high, view.files))
        if waiting <= budget:
            return end
        cut = positions.transaction_cut(self.settings, here, end, budget)
        if cut is None:
            return end
        if cut.gtids is None and view.identity.flavor == "mariadb":
            file, pos = cut.file, cut.pos
            cut = cut.with_gtids(
                self._on_server(lambda conn: server.mariadb_gtid_at(conn, file, pos))
            )
        cut = replace(self._stamp(view, cut), seq_file_base=end.seq_file_base)
        log.info(
            "mysql-cdc: %s of binlog waits; this batch reads up to %s "
            "(scan.binlog.max-bytes-per-batch)",
            distance(here, end),
            cut,
        )
        return cut

    def _binlog_range(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> tuple[BinlogPosition, BinlogPosition, Callable[[BinlogPosition], BinlogPosition] | None]:
        """The batch's binlog range as places on the server that answers now, and how
        ``start``'s chunk HWs map there (None: they are places there already).

        A batch latestOffset just planned on one server is known good. Any other (a replay
        after a restart, or the batch of a failover) is checked here, before any row is
        read; ends taken on a server we failed over from are followed by GTID. The rows of
        the batch all take the seq base of its start (see ``after_failover``).
        """
        begin, stop = offset_position(start), offset_position(end)
        if self.options.scan_startup_mode == "snapshot":
            return begin, stop, None
        fresh = self._planned is not None and end == self._planned
        before, after = offset_identity(start), offset_identity(end)
        same = before == after or (
            before is not None and after is not None and before.same_server(after)
        )
        if fresh and same:
            return begin, stop, None
        view = self._observe()
        if not fresh:
            stop, _ = self._locate(end, view)
        begin, moved = self._locate(start, view)
        if not moved:
            return begin, stop, None
        return begin, replace(stop, seq_file_base=begin.seq_file_base), self._placer(start, view)

    def _placer(
        self, offset: dict[str, Any], view: ServerView
    ) -> Callable[[BinlogPosition], BinlogPosition] | None:
        """How the HWs staged for ``offset``'s batch map to the server of ``view``, which
        ``offset`` was followed to by GTID (None: they need no mapping, or have none)."""
        identity = offset_identity(offset)
        if identity is None or same_server(identity, view.identity):
            return None
        return partial(self._high_on, view, identity)

    @message_first
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            # Spark 4.1 tells a restarted source the last logged offset this way
            # (PythonMicroBatchStream.setLatestSeenOffset): the base of the next offset.
            self._remember(end)
            return []
        check_successor(start, end)
        begin, stop, place = self._binlog_range(start, end)  # raises before anything is read
        self._remember(end)
        parts: list[InputPartition] = []
        snapshot = start.get("snapshot")
        if begin < stop:
            flt, keys = "", ""
            if snapshot is not None:
                coordinator = self.coordinator
                # a table whose snapshot starts over in this batch: its events are dropped,
                # the chunks read after this batch's binlog end hold them (``_restart``)
                fresh = SnapshotProgress().to_offset()
                again = {t: fresh for t in end["snapshot"] if restarted(end["snapshot"], t)}
                flt = json.dumps(coordinator.filter_state({**snapshot, **again}, begin, place))
                keys = json.dumps({t: coordinator.key_column(t) for t in coordinator.schemas})
            tables = ""
            if self._added:  # executors know the tables of the query's start only
                tables = json.dumps([[t.database, t.table] for t in self.plan.tables])
            # what the start offset names and the query no longer captures, though its
            # patterns still match it: dropped or renamed while the query was stopped (a
            # table taken out of the patterns on purpose is not waited for)
            matches = self.options.table_filter().matches
            captured = self._tables()
            gone = sorted(offset_tables(start, matches) - captured)
            vanished = sorted(offset_databases(start, matches) - {db for db, _ in captured})
            if gone and self.plan.typed and self.options.changelog_shape == "auto":
                raise SourceError(
                    f"this query last ran capturing {', '.join(f'{d}.{t}' for d, t in gone)} "
                    "too, which no longer exist (dropped or renamed while it was stopped); it "
                    f"now matches only {self.plan.tables[0].qualified_name}, and "
                    "changelog.shape=auto would switch its frame from the envelope to that "
                    "table's typed changelog under the same checkpoint, which has no room for "
                    "the other tables' changes (a DROP TABLE must reach the sink). Set "
                    "changelog.shape=envelope to go on from this checkpoint in the shape it was "
                    "written in, or start the query with a new checkpoint"
                )
            versions = self.table_versions(begin)
            shares = binlog_shares(
                self.options.binlog_partitions, begin, stop, self.parallelism, self.server_ids
            )
            parts.extend(
                BinlogRangePartition(
                    json.dumps(make_offset(begin)),
                    json.dumps(make_offset(stop)),
                    self.server_ids.pick(index),  # a replication connection each
                    flt,
                    keys,
                    tables,
                    "" if versions is None else json.dumps(versions.to_json()),
                    index,
                    shares,
                    json.dumps(vanished) if vanished else "",
                    json.dumps(gone) if gone else "",
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
            self._record_snapshot_batch(end, parts, progress)
        else:
            self._record_snapshot_batch(end, parts, {})
        return parts

    def _record_snapshot_batch(
        self,
        end: dict[str, Any],
        parts: list[InputPartition],
        progress: dict[str, SnapshotProgress],
    ) -> None:
        """Keep the SnapshotBatchRecord true for the batch just planned."""
        if not self.options.state_location or self.options.changelog_shape != "tables":
            return  # only a pipeline's batch writer reads it
        tables = [t for t, p in progress.items() if p.next > p.prev]
        alone = (
            len(tables) == 1
            and tables[0] not in self._added
            and all(isinstance(p, ChunkPartition) for p in parts)
        )
        if not alone and self._recorded is False:
            return  # no record to clear: nothing to open (a store per binlog batch)
        record = SnapshotBatchRecord(self.options.state_location, self.options.state_hadoop())
        if alone:
            record.write(end, tables[0])
        else:
            record.clear()
        self._recorded = alone

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
            spec = RangeRead(
                start, read_at, self.server_ids.pick(0), frozenset(self._tables()), rows=False
            )
            for change in self.dialect.read_range(spec):
                assert isinstance(change, SchemaChange) and change.position is not None
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
        start = offset_position(json.loads(partition.start))
        end = offset_position(json.loads(partition.end))
        captured = frozenset(self._tables())
        if partition.tables:
            captured = frozenset((db, t) for db, t in json.loads(partition.tables))
        # the databases of the stream's tables: those it captures now, and those its start
        # offset names (a table whose database was dropped while the query was stopped is
        # in no plan)
        databases = {db for db, _ in captured}
        if partition.vanished:
            databases |= set(json.loads(partition.vanished))
        # tables the start offset names that no longer exist for the query: their DDL is
        # delivered (a DROP TABLE made while it was stopped), their rows cannot be
        gone = frozenset((db, t) for db, t in json.loads(partition.gone or "[]"))
        spec = RangeRead(
            start,
            end,
            partition.server_id,
            captured,
            gone,
            frozenset(databases),
            # a typed stream restarts at the cut-over's own RENAME and reads the new schema
            # then: the copies' statements would only restart it more often
            follow_copies=self.options.online_schema_changes and not self.plan.typed,
            refuse_row_changing_ddl=self.options.ddl_row_changes == "fail",
            versions=partition.versions,
            share=partition.share,
            shares=partition.shares,
        )
        changes: Any = self.dialect.read_range(spec)
        if gone and self.plan.typed:
            changes = _refuse_ddl_of(changes, gone, self.plan.tables[0].qualified_name)
        if not partition.filter_state:
            yield from self.plan.builder().batches(changes)
            return
        # string chunk keys of collations only the server orders are ranked over SQL
        flt = InterleavingFilter.from_state(
            json.loads(partition.filter_state), KeptConnection.to(self.settings)
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
        since = offset_position(json.loads(partition.since)) if partition.since else None
        schema = (  # a partition's chunks are of one table
            schema_from_json(json.loads(partition.schema))
            if partition.schema
            else next(t for t in self.plan.tables if t.qualified_name == chunks[0].table)
        )
        # one SQL connection for the task's chunks, opened when needed; a group of chunks a
        # lost connection cut short is read again, whole, on a new one
        conn = KeptConnection.to(self.settings, schema.database)
        stack.callback(conn.close)
        group: list[ChunkRange] = []

        def read_group() -> Iterator[tuple[ChunkRange, StagedChunk]]:
            read = partial(
                read_chunks,
                self.settings,
                schema,
                group,
                key_column=partition.key_column,
                collation=partition.collation,
                server_id=partition.server_id,
                since=since,
                tinyint1_as_boolean=self.options.tinyint1_as_boolean,
            )
            results = conn.run(lambda c: read(conn=c))
            group.clear()
            for result in results:
                if partition.schema and result.chunk.index == 0:
                    # a table that joined the running query: its CREATE TABLE (at the first
                    # chunk's low watermark) tells consumers its columns before its rows
                    from sparkcdc.mysql.ddl.schema_changes import (
                        create_table_statement,  # sqlglot: 35 ms
                    )

                    create = SchemaChange.from_binlog(
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

    def _observe(self) -> ServerView:
        """The server as the driver sees it now (``_on_server``)."""
        return self._on_server(self._view)

    def _on_server(self, work: Callable[[Any], T]) -> T:
        """``work`` on the driver's kept connection, done again on a new one when the
        server has dropped it (wait_timeout, a KILL, a restart, a failover)."""
        if self._poll is None:
            self._poll = KeptConnection.to(self.settings)
        return self._poll.run(work)

    def stop(self) -> None:
        if self._poll is not None:
            self._poll.close()
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
        if self._plan is None:
            dialect = dialect_for(self.source_options)
            dialect.check_server()
            self._plan = plan_capture(self.source_options, dialect)
        return self._plan

    @message_first
    def schema(self) -> str:
        return self.plan.spark_ddl()

    @message_first
    def streamReader(self, schema: Any) -> MySqlCdcStreamReader:
        parallelism = self.default_parallelism or os.cpu_count() or 1
        return MySqlCdcStreamReader(self.source_options, self.plan, self.server_ids, parallelism)
