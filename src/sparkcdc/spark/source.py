"""The ``mysql-cdc`` and ``postgres-cdc`` PySpark streaming sources: their driver side (the
only camelCase code is here).

Offsets are ``{<offset_key>: <position.to_offset()>, "server": <ServerIdentity>}`` (the
dialect's key and position: ``binlog`` for MySQL, ``wal`` for PostgreSQL's LSN), always on
transaction boundaries. Batch ``k`` reads ``[B_{k-1}, B_k)`` in one or more partitions on
executors (``spark/offsets.py`` plans them: binlog shares, snapshot chunk groups; what a task
reads is ``spark/partition_reader.py``'s); a replayed batch reads the same range and yields
the same rows. What a query captures is ``spark/capture.py``'s. The database is reached only
through its dialect (``model/dialect.py``, DESIGN.md §10).

Before a batch is planned the offsets are checked against the server that answers (the
dialect's ``StreamFollower``): another server, a reset or restored binlog, or a binlog behind
the offset stops the query with a clear error; a failover to a server whose GTID state
holds the offset's GTID set (and, right after a snapshot's last chunks, their HWs' sets) is
followed by GTID.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sparkcdc.errors import (
    ConfigError,
    SourceError,
)
from sparkcdc.model.dialect import StreamFollower, dialect_for, options_for
from sparkcdc.model.options import SNAPSHOT_MODES, ServerIdRange, SourceOptions
from sparkcdc.model.schema import TableSchema, schema_to_json
from sparkcdc.snapshot.coordinator import SnapshotCoordinator, SnapshotProgress, SnapshotSettings
from sparkcdc.snapshot.storage import StateStore
from sparkcdc.spark.batch_records import BatchHold, SnapshotBatchRecord
from sparkcdc.spark.capture import CapturePlan, plan_capture
from sparkcdc.spark.compat import (
    AvailableNowBase,
    binlog_budget,
    chunk_budget,
    default_read_limit,
)
from sparkcdc.spark.offsets import (
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
from sparkcdc.spark.partition_reader import PartitionReader
from sparkcdc.spark.planning_errors import message_first, quiet_runner_shutdown
from sparkcdc.spark.start_schemas import StartSchemas

log = logging.getLogger(__name__)

FORMAT_NAME = "mysql-cdc"
POSTGRES_FORMAT_NAME = "postgres-cdc"


def stream_id(options: SourceOptions) -> str:
    """The state directory of a query under ``state.location`` (one source per query)."""
    name = f"{options.format_name}_{options.hostname}_{options.port}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


quiet_runner_shutdown()


_LAST_END = ("offsets", "last-end.json")
_VERSIONS = ("schema", "versions.json")
DISCOVERY_INTERVAL_S = 2.0  # how often scan.newly-added-table.enabled looks for new tables


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
        # the driver's watch over the server: which one answers, where offsets are on it
        self.follower: StreamFollower[Any] = self.dialect.follower()
        self._planned: dict[str, Any] | None = None  # the last offset latestOffset returned
        self._recorded: bool | None = None  # a SnapshotBatchRecord is there (None: unknown)
        self._versions: str | None = None  # a stream without its rows' column metadata only
        self._schemas_at: StartSchemas | None = None  # a stream without DDL only
        self._target: AvailableNowTarget | None = None  # set by Trigger.AvailableNow
        # the first batch this query plans reads a share of the budgets (scan.first-batch.share)
        self._opening = True

    # The coordinator holds a live connection: it stays on the driver.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_coordinator"] = None
        state["_schemas_at"] = None
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
                self.dialect, self.dialect.session(), self.plan.tables, settings, self.store
            )
        return self._coordinator

    def _observe(self) -> Any:
        """The follower's view of the server, the captured tables' schemas at its end kept
        where the stream carries no DDL (``StartSchemas``)."""
        view = self.follower.observe()
        schemas = self.follower.schemas_of(view)
        if schemas is not None:
            self._kept_schemas().note(self.follower.end_of(view), schemas)
        return view

    def _kept_schemas(self) -> StartSchemas:
        """The start schemas kept so far, read from ``state.location`` once a run (a
        restarted query may plan the batch its last run logged before it observes)."""
        if self._schemas_at is None:
            self._schemas_at = StartSchemas(self.store if self.options.state_location else None)
        return self._schemas_at

    def _start_schemas(self, begin: Any) -> str:
        """The schemas (JSON) as of a range's start for its reader to compare the stream's
        first columns with; "" where the stream carries its DDL, and for a typed stream,
        whose reader compares with its plan's schema (it restarts at each change)."""
        return "" if self.plan.typed else self._kept_schemas().at(begin)

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
                position = self.follower.end_of(view)
                self._initial = make_offset(
                    position, self.coordinator.initial(), view.identity, key=self.dialect.offset_key
                )
            else:
                position = self.follower.mark(view, self.dialect.startup_position())
                self._initial = make_offset(
                    position,
                    identity=view.identity,
                    tables=self._tables(),
                    key=self.dialect.offset_key,
                )
            self.follower.trust(json.dumps(self._initial, sort_keys=True))
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

    # -- which server: identity, reset, rewind, failover (the dialect's StreamFollower) --

    def _locate(self, offset: dict[str, Any], view: Any) -> tuple[Any, bool]:
        """Where ``offset`` is on the server of ``view``, and whether that is another
        server it was followed to (``StreamFollower.locate``; raises when it is no place
        there). A failover while a snapshot runs stops the query: its chunk plan and
        watermarks are places on the old server."""
        key = json.dumps(
            {k: offset.get(k) for k in (self.dialect.offset_key, "server")}, sort_keys=True
        )
        position, identity = offset_position(offset, self.dialect), offset_identity(offset)

        def highs() -> list[Any]:
            if not snapshot_running(offset):
                return []
            if not snapshot_read(offset):
                raise SourceError(
                    f"the source failed over from {identity} to {view.where()} while a "
                    f"snapshot is running (offset {position}): chunks are left to read, and "
                    "the plan and watermarks of those read are places on the old server. "
                    "Start the query over with a new checkpoint and an empty state.location "
                    "(scan.startup.mode=initial)"
                )
            return self.coordinator.last_highs(offset["snapshot"])

        return self.follower.locate(key, position, identity, view, highs)

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

        added = self.follower.run(new_tables)
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
                self._versions = self.dialect.versions_with(self._versions, added)

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
        self._target = AvailableNowTarget(self.follower.end_of(view), view.identity)
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
        return (
            same_server(offset_identity(base), target.identity)
            and offset_position(base, self.dialect) >= target.position
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
        at = (
            None
            if self.options.scan_startup_mode == "snapshot"
            else offset_position(base, self.dialect)
        )
        return self.coordinator.read_as_of(snapshot, at)

    def _target_on(self, view: Any) -> Any:
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
            target = AvailableNowTarget(self.follower.end_of(view), view.identity)
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
        opening, self._opening = self._opening, False
        share = self.options.first_batch_share if opening else 1
        chunks = chunk_budget(limit, self.options.chunks_per_batch, self.options.chunk_size, share)
        identity = offset_identity(base)
        failover: dict[str, Any] | None = None
        if view is None or located is None:
            position = offset_position(base, self.dialect)  # the binlog never advances
        else:
            here, moved = located
            # the end carries its GTID set, so a failover can be followed from it
            position = self.follower.end_of(view)
            if self._target is not None and not self._chunks_pending(base):
                position = min(position, self._target_on(view))  # the run's binlog ends there
            position = self.follower.continued(position, here)
            position = max(position, here)
            place = self._placer(base, view) if moved else None
            position = self._bounded(
                here, position, view, (limit, share), base.get("snapshot"), place
            )
            identity = view.identity
            if moved and identity != offset_identity(base):
                # the batch that crosses over says so in the checkpoint's offset log
                failover = {
                    "from": base.get("server"),
                    "gtids": str(offset_position(base, self.dialect).gtids),
                }
        snapshot = base.get("snapshot")
        if snapshot is None:
            self._planned = make_offset(
                position, None, identity, failover, self._tables(), key=self.dialect.offset_key
            )
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
                offset_position(base, self.dialect),
                distance(offset_position(base, self.dialect), position),
            )
        self._planned = make_offset(
            position, advanced, identity, failover, key=self.dialect.offset_key
        )
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
        here: Any,
        end: Any,
        view: Any,
        limit: tuple[Any, int],
        snapshot: dict[str, Any] | None,
        place: Callable[[Any], Any] | None = None,
    ) -> Any:
        """The batch's binlog end: ``end``, or a transaction boundary before it when the
        range is more than the batch's binlog budget (``scan.binlog.max-bytes-per-batch``,
        or Spark's read limit; ``limit`` is that and the share of it the batch reads, 1 but
        for the query's first: ``scan.first-batch.share``).
        A backlog (a query stopped for a day, a snapshot that ran
        for hours) is then read in bounded batches, each committed on its own, rather than
        as one batch whose rows all wait in the executors.

        Where may a batch end? At a transaction boundary (``StreamFollower.cut``: the one
        the budget reaches first, with its GTID set). And, while a snapshot
        runs, at or past the HWs of the chunks the previous batch read (DESIGN.md §2: every
        chunk's HW is at or before the binlog end of the batch after its own, which the
        next filter and the snapshot's end count on); the chunks of this batch have LWs at
        or past the server's end, so past any end before it. ``place`` maps those HWs to
        this server after a failover (``StreamFollower.high_on``).
        """
        read_limit, share = limit
        budget = binlog_budget(read_limit, self.options.binlog_max_bytes_per_batch, share)

        def high() -> Any | None:
            # the HWs are staged metadata (a read each, a GET on an object store): asked
            # only of a range over budget
            last = None if snapshot is None else self.coordinator.last_high(snapshot)
            return place(last) if last is not None and place is not None else last

        cut = self.follower.cut(here, end, view, budget, high)
        if cut is not end:
            log.info(
                "mysql-cdc: %s of binlog waits; this batch reads up to %s "
                "(scan.binlog.max-bytes-per-batch)",
                distance(here, end),
                cut,
            )
        return cut

    def _binlog_range(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> tuple[Any, Any, Callable[[Any], Any] | None]:
        """The batch's binlog range as places on the server that answers now, and how
        ``start``'s chunk HWs map there (None: they are places there already).

        A batch latestOffset just planned on one server is known good. Any other (a replay
        after a restart, or the batch of a failover) is checked here, before any row is
        read; ends taken on a server we failed over from are followed by GTID. The rows of
        the batch all take the seq base of its start (see ``after_failover``).
        """
        begin, stop = offset_position(start, self.dialect), offset_position(end, self.dialect)
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
        return begin, self.follower.continued(stop, begin), self._placer(start, view)

    def _placer(self, offset: dict[str, Any], view: Any) -> Callable[[Any], Any] | None:
        """How the HWs staged for ``offset``'s batch map to the server of ``view``, which
        ``offset`` was followed to by GTID (None: they need no mapping, or have none)."""
        identity = offset_identity(offset)
        if identity is None or same_server(identity, view.identity):
            return None
        return partial(self.follower.high_on, view, identity)

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
                self.options.binlog_partitions,
                begin,
                stop,
                self.parallelism,
                self.server_ids,
                self.dialect.compiled_rows(),
            )
            parts.extend(
                BinlogRangePartition(
                    json.dumps(make_offset(begin, key=self.dialect.offset_key)),
                    json.dumps(make_offset(stop, key=self.dialect.offset_key)),
                    self.server_ids.pick(index),  # a replication connection each
                    flt,
                    keys,
                    tables,
                    versions,
                    index,
                    shares,
                    json.dumps(vanished) if vanished else "",
                    json.dumps(gone) if gone else "",
                    self._start_schemas(begin),
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

    def table_versions(self, start: Any) -> str:
        """The captured tables' schema versions by position (the dialect's JSON) where the
        change stream logs rows without their columns' metadata; "" otherwise. Built once
        per run from ``start`` (the run's first batch start), and kept under
        ``state.location`` for the next run (``SourceDialect.schema_versions``)."""
        if self._versions is not None:
            return "" if self.plan.full_metadata else self._versions
        if self.plan.full_metadata:
            if self.options.state_location:  # kept versions would go stale under FULL
                self.store.delete(self.store.path(*_VERSIONS))
            self._versions = ""
            return ""
        saved = ""
        if self.options.state_location:
            raw = self.store.read(self.store.path(*_VERSIONS))
            saved = raw.decode() if raw is not None else ""
        read_at = self.dialect.position_from_offset(json.loads(self.plan.schema_offset))
        self._versions = self.dialect.schema_versions(
            start, read_at, self.plan.tables, self.server_ids.pick(0), saved
        )
        if self.options.state_location:
            self.store.overwrite(self.store.path(*_VERSIONS), self._versions.encode())
        return self._versions

    @message_first
    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed every batch up to ``end``: the source may let go of what lies
        before it (a PostgreSQL slot's WAL: ``SourceDialect.commit``), and of staged chunks."""
        self.dialect.commit(offset_position(end, self.dialect))
        if self._schemas_at is not None:
            self._schemas_at.release(
                offset_position(end, self.dialect), self.dialect.position_from_offset
            )
        snapshot = end.get("snapshot")
        if snapshot is not None:
            self.coordinator.release(snapshot)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """On an executor: the rows of one partition (``spark/partition_reader.py``)."""
        reader = PartitionReader(self.options, self.plan, self.dialect, lambda: self.store)
        yield from reader.read(partition)

    def stop(self) -> None:
        self.follower.close()
        if self._coordinator is not None:
            self._coordinator.close()


class MySqlCdcDataSource(DataSource):
    """``spark.readStream.format("mysql-cdc")`` with Flink CDC's option names."""

    # set on the class sparkcdc.register() registers (the session's); else the CPU count
    default_parallelism: int | None = None

    @message_first
    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source_options = options_for(self.name(), dict(options))
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


class PostgresCdcDataSource(MySqlCdcDataSource):
    """``spark.readStream.format("postgres-cdc")`` with Flink CDC's PostgreSQL option names:
    the same driver and executor sides over the PostgreSQL dialect (DESIGN.md §12)."""

    @classmethod
    def name(cls) -> str:
        return POSTGRES_FORMAT_NAME
