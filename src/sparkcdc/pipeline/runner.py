"""Runs a pipeline: session, plan, sink, streaming query, progress, status.

``run_pipeline`` blocks until the query ends: never by itself in continuous mode (stop it
with Ctrl-C: the last batch is complete or replayed on the next run), or once everything the
source had when the run started is in the sink (``available_now``).

Each run keeps ``<checkpoint>/status.json`` current (what ``sparkcdc status`` shows):
phase, per-table chunks, binlog position, last batch, rows written.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from sparkcdc.errors import ConfigError, SchemaChangedError, SinkError, SparkCdcError
from sparkcdc.locations import Location, blind_executors, state_options
from sparkcdc.model.dialect import ReaderClaim
from sparkcdc.model.options import SNAPSHOT_MODES, ServerIdRange
from sparkcdc.model.schema import TableSchema
from sparkcdc.model.text import redacted_uri
from sparkcdc.pipeline.batch_writer import BatchWriter, WriteRules, initial_state
from sparkcdc.pipeline.checkpoint import (
    WrittenTables,
    claim_state,
    logged_end,
    open_checkpoint,
)
from sparkcdc.pipeline.config import PipelineConfig
from sparkcdc.pipeline.evolution.persistence import Divergences, SchemaHistory
from sparkcdc.pipeline.evolution.state import SchemaState
from sparkcdc.pipeline.lease import CheckpointLease
from sparkcdc.pipeline.preflight import check_pipeline, probe_locations, raise_errors
from sparkcdc.pipeline.progress import (
    POLL_S,
    Progress,
    StreamOffsets,
    offset_caught_up,
    snapshot_done,
    table_snapshot_done,
)
from sparkcdc.pipeline.resnapshot import LOST_TABLE, Resnapshots, last_logged
from sparkcdc.pipeline.routes import PipelinePlan, plan_pipeline
from sparkcdc.pipeline.run_plan import RunLocations, RunPlan
from sparkcdc.pipeline.status import StatusWriter, committed_offset
from sparkcdc.sinks.base import Sink, SinkContext, SinkTable
from sparkcdc.spark.streams import query_error

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from sparkcdc.spark.batch_records import BatchHold
    from sparkcdc.spark.capture import CapturePlan

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    """What one run did."""

    batches: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # source table → change rows
    sink_tables: tuple[str, ...] = ()
    last_offset: dict[str, Any] | None = None
    event_lag_s: float | None = None  # commit of the last batch's newest change → its write
    stopped_by: str | None = None  # the signal that stopped the run ("SIGINT", "SIGTERM")

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


MAX_SCHEMA_RESTARTS = 100


def run_pipeline(
    config: PipelineConfig,
    *,
    available_now: bool = False,
    out: TextIO | None = None,
    spark: Any = None,
    on_batch: Callable[[int, dict[str, int]], None] | None = None,
    max_seconds: float | None = None,
    spark_log: str | None = None,
    master: str | None = None,
    py_files: Sequence[str] = (),
) -> RunSummary:
    """Run ``config`` until stopped, or (``available_now``) until caught up with the source.

    ``spark``: an existing session (it must have the connector jars, see
    ``spark_session(connectors=True)``); by default one is made on ``master`` (see
    ``session_master``), its JVM logging to the file ``spark_log`` if given (else to the
    console, as Spark's defaults say), with ``py_files`` (a zip of sparkcdc for
    the executors of a cluster) added to ``spark.submit.pyFiles``. When the source stops
    because rows after a schema change need the new schema read (a binlog without column
    metadata), the pipeline starts again from its checkpoint, as a typed stream's
    ``await_restarting`` does.
    """
    plan = RunPlan.build(
        config,
        available_now=available_now,
        master=master,
        py_files=py_files,
        spark_log=spark_log,
    )
    started = time.monotonic()
    restarts = 0
    while True:
        spent = time.monotonic() - started
        left = None if max_seconds is None else max(0.0, max_seconds - spent)
        try:
            return _run_once(plan, spark, out or sys.stdout, on_batch, left)
        except SchemaChangedError as exc:
            if restarts >= MAX_SCHEMA_RESTARTS:
                raise
            restarts += 1
            log.info("%s; restarting the pipeline to read the new schema", exc)


@dataclass(frozen=True)
class _Held:
    """What a run holds once its checks passed: its session (and the wait for its sources'
    registration), its locations, the checkpoint's lease and its server ids (both kept as it
    polls), the tables it captures."""

    spark: Any
    where: RunLocations
    lease: CheckpointLease
    ids: ReaderClaim | None
    capture: CapturePlan
    sources_ready: Callable[[], None]  # waits until the session's sources are registered


def _run_once(
    plan: RunPlan,
    spark: Any,
    out: TextIO,
    on_batch: Callable[[int, dict[str, int]], None] | None,
    max_seconds: float | None,
) -> RunSummary:
    """One run of ``plan``: the source and the pipeline checked, the session set up, the
    locations probed, the checkpoint leased and the server ids claimed, then ``_run_leased``."""
    from sparkcdc.spark.capture import plan_capture

    plan.dialect.check_server()
    capture = plan_capture(plan.options, plan.dialect)
    _check_pipeline(plan, capture)
    opened = plan.session.opening(spark)  # its sources registered meanwhile (_start waits)
    spark = opened.spark
    try:
        hadoop = plan.hadoop(spark)
        probe_locations(plan.config, hadoop)  # as validate does: exit 2, not an OSError mid-run
        where = plan.locations(hadoop)
        lease = CheckpointLease.take(where.checkpoint)  # before anything under it is touched
        ids: ReaderClaim | None = None
        try:
            if plan.options.server_id:  # a random default range is the source's, unknown here
                ids = plan.dialect.claim_readers(ServerIdRange.parse(plan.options.server_id))
            held = _Held(spark, where, lease, ids, capture, opened.ready)
            return _run_leased(plan, held, out, on_batch, max_seconds)
        finally:
            if ids is not None:
                ids.close()
            lease.release()
    finally:
        with contextlib.suppress(Exception):  # _start raised its error; or the run failed
            opened.ready()  # the registration ends within the run


def _check_pipeline(plan: RunPlan, capture: CapturePlan) -> None:
    """The pipeline's checks against the captured tables: errors raise, warnings log."""
    findings = check_pipeline(plan.config, capture.tables, plan.dialect)
    raise_errors(findings)
    for finding in findings:
        log.warning("%s", finding)


def _run_leased(
    run: RunPlan,
    held: _Held,
    out: TextIO,
    on_batch: Callable[[int, dict[str, int]], None] | None,
    max_seconds: float | None,
) -> RunSummary:
    """The run of ``_run_once`` once it holds the checkpoint's lease and its server ids
    (both kept as it polls): the checkpoint and the sink opened, the query started, then
    watched until it ends."""
    opened = _open(run, held)
    running = _start(run, held, opened, out, on_batch)
    _watch(run, held, running, max_seconds)
    return running.summary


@dataclass
class _Opened:
    """A run's checkpoint and sink, opened: the pipeline's plan (the sink tables as the last
    run left them), the tables written so far, and the source tables to snapshot again."""

    root: Location
    new_stream: bool
    history: SchemaHistory
    plan: PipelinePlan
    schemas: tuple[TableSchema, ...]
    sink: Sink
    tables: list[SinkTable]  # the sink tables this run opens (not those dropped)
    written: WrittenTables
    resnapshots: Resnapshots
    restart: list[str]  # source tables whose snapshot the source takes again


def _open(run: RunPlan, held: _Held) -> _Opened:
    """Opens the checkpoint (claiming its state for this run) and the sink, and plans the
    pipeline over the schemas the stream last saw (a restart) or the captured ones."""
    config, spark, where = run.config, held.spark, held.where
    root = where.checkpoint
    if not str(spark.sparkContext.master).startswith("local"):
        _check_shared(spark, where.state, where.state_hadoop)
    identity = open_checkpoint(root, where.state)
    claim_state(where.state, root, identity, where.hadoop)
    history = SchemaHistory(root)
    saved = history.latest()
    schemas = held.capture.tables
    if saved is not None:  # a restart: the schemas as the stream last saw them
        schemas = tuple(saved.schema(s.qualified_name) or s for s in schemas)
    plan = plan_pipeline(config, schemas, spark)
    context = SinkContext(config.pipeline.name, config.checkpoint, identity.run_id)
    sink: Sink = run.sink_class(config.sink, spark, context)
    if saved is None:
        history.save(-1, initial_state(plan))
    else:
        plan = replace(
            plan,
            sink_tables=tuple(
                saved.sinks[t.name].table if t.name in saved.sinks else t for t in plan.sink_tables
            ),
        )
    tables = [t for t in plan.sink_tables if not (saved and _dropped(saved, t.name))]
    written = WrittenTables(root)
    resnapshots = Resnapshots(root)
    restart: list[str] = []
    if not identity.new_stream:
        requested = set(resnapshots.pending())
        _refuse_lost_tables(
            sink, [t for t in tables if t.name not in requested], written, config, root
        )
        logged = last_logged(root)[1].get("snapshot") or {}
        restart = resnapshots.sources(
            plan.sink_tables, lambda s: s not in logged or table_snapshot_done(logged[s])
        )
    return _Opened(
        root,
        identity.new_stream,
        history,
        plan,
        schemas,
        sink,
        tables,
        written,
        resnapshots,
        restart,
    )


@dataclass
class _Running:
    """A started run: its query, and what watching it and ending it use."""

    opened: _Opened
    query: Any  # pyspark's StreamingQuery (its stubs type awaitTermination's timeout int)
    writer: BatchWriter
    summary: RunSummary
    progress: Progress
    hold: BatchHold
    target: Any | None  # the source position where an available-now run is caught up


def _start(
    run: RunPlan,
    held: _Held,
    opened: _Opened,
    out: TextIO,
    on_batch: Callable[[int, dict[str, int]], None] | None,
) -> _Running:
    """Starts the streaming query into the sink (its tables created meanwhile); a failure
    on the way lets no creation outlive the run."""
    from sparkcdc.spark.batch_records import BatchHold, SnapshotBatchRecord

    config, spark, where, root = run.config, held.spark, held.where, opened.root
    plan, sink, written = opened.plan, opened.sink, opened.written
    sink_of = {source: t.name for t in plan.sink_tables for source in t.sources}
    sink.begin_open(opened.tables)  # absent tables may be created while the first batch reads
    try:
        if opened.new_stream:
            _meet_existing_rows(sink, opened.tables, config)
        summary = RunSummary(sink_tables=tuple(t.name for t in plan.sink_tables))
        committed = committed_offset(root)
        if committed is not None:  # a restart: where the last run got to
            summary.last_offset = committed[1]
        _announce(plan, config, out)
        progress = Progress(
            out,
            chunk_estimates=_chunk_estimates(run, opened.schemas, committed),
            stream=StreamOffsets.of(run.dialect),
        )

        def listener(batch_id: int, rows: dict[str, int]) -> None:
            summary.batches += 1
            for table, count in rows.items():
                summary.rows[table] = summary.rows.get(table, 0) + count
            progress.count(sum(rows.values()))
            written.add(sink_of[t] for t, count in rows.items() if count and t in sink_of)
            if on_batch is not None:
                on_batch(batch_id, rows)

        planned = SnapshotBatchRecord(config.state_location, where.state_hadoop)

        def snapshot_batch(batch_id: int) -> str | None:
            record = planned.read()
            if record is None or record[0] != logged_end(root, batch_id):
                return None
            return record[1]

        writer = BatchWriter(
            plan, sink, _write_rules(run, sink), listener, opened.history, snapshot_batch
        )
        target = run.dialect.position_now() if run.available_now else None

        hold = BatchHold(config.state_location, where.state_hadoop)
        hold.clear()  # one an earlier run left (stopped hard after setting it)
        held.sources_ready()
        reader = spark.readStream.format(run.dialect.type_name)
        for key, value in {**state_options(where.state_hadoop), **run.source_options}.items():
            reader = reader.option(key, value)
        if opened.restart:
            reader = reader.option("scan.resnapshot.tables", ",".join(opened.restart))
        batches = opened.resnapshots.wrap(writer, sink, plan.sink_tables)
        query = (
            reader.load()
            .writeStream.queryName(_query_name(config.pipeline.name))
            .foreachBatch(progress.timed(batches))
            .option("checkpointLocation", where.spark_checkpoint)
            .trigger(**_trigger(config, run.available_now))
            .start()
        )
    except BaseException:  # the creations it began must not outlive this run
        with contextlib.suppress(SparkCdcError):
            sink.ready()
        raise
    return _Running(opened, query, writer, summary, progress, hold, target)


def _watch(run: RunPlan, held: _Held, running: _Running, max_seconds: float | None) -> None:
    """Polls the query until it ends, is caught up (available-now), runs out of time or is
    asked to stop, keeping the lease, the server ids, the progress and the status current;
    then ends the run: the batch in flight settled, the query stopped, the sink closed."""
    from pyspark.errors import StreamingQueryException

    query, summary = running.query, running.summary
    plan, sink, writer, progress = (
        running.opened.plan,
        running.opened.sink,
        running.writer,
        running.progress,
    )
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    status = StatusWriter(running.opened.root)
    last_server_check = 0.0
    server_pos: Any | None = None
    stop = StopRequests()
    at_once = False
    try:
        while query.isActive:
            if stop.requested:
                summary.stopped_by = stop.requested
                log.info(
                    "stopping on request (%s) after the batch in flight (again: at once); the "
                    "next run goes on from the last committed batch",
                    stop.requested,
                )
                break
            try:
                query.awaitTermination(POLL_S)
            except StreamingQueryException:
                break  # reported below, as our own error
            held.lease.renew()
            if held.ids is not None and time.monotonic() - last_server_check > 5:
                held.ids.check()  # before last_server_check moves on below
            latest = query.lastProgress
            if latest and latest.get("sources"):
                end = latest["sources"][0].get("endOffset")
                log.debug("progress endOffset: %r", end)
                summary.last_offset = _offset_dict(end)
            if time.monotonic() - last_server_check > 5:
                last_server_check = time.monotonic()
                try:
                    server_pos = run.dialect.position_now()
                except SparkCdcError:
                    server_pos = None
            batch = int(latest["batchId"]) if latest else -1
            summary.event_lag_s = writer.event_lag_s
            progress.update(summary.last_offset, batch, server_pos, writer.event_lag_s)
            status.write(_status(run, plan, summary, batch, server_pos, running=True))
            # only an offset this run's query reached: it was checked against the server
            # that answers now, which a committed one never was (its binlog may have been
            # reset, or another server may answer, and end before the offset)
            target = running.target
            if (
                target is not None
                and latest
                and offset_caught_up(summary.last_offset, target, progress.stream)
            ):
                break
            if deadline is not None and time.monotonic() > deadline:
                break
        failure = query.exception()
        if failure is not None and stopped_mid_batch(failure):
            # stopped (Ctrl-C, another thread, the session ending) while a batch ran: that
            # batch was not committed, and the next run replays it
            log.info("the query was stopped during a batch; the next run replays that batch")
        elif failure is not None:
            raise query_error(failure)
        sink.ready()  # the sink tables exist even when no batch wrote
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once
        at_once = True
        summary.stopped_by = "SIGINT"
        log.info("stopping at once; the next run goes on from the last committed batch")
    finally:
        try:
            if query.isActive and not at_once:
                _settle(query, running.hold)
        except KeyboardInterrupt:
            summary.stopped_by = "SIGINT"
        if query.isActive:
            query.stop()
        writer.close()
        stop.close()
        running.hold.clear()
        progress.finish()
        with contextlib.suppress(SparkCdcError):  # raised by the batch, or reported above
            sink.ready()
        sink.close()
        status.write(_status(run, plan, summary, summary.batches - 1, server_pos, running=False))


def _chunk_estimates(
    run: RunPlan,
    schemas: Sequence[TableSchema],
    committed: tuple[int, dict[str, Any]] | None,
) -> dict[str, int]:
    """Per table still to snapshot, its chunk count as its row estimate over the chunk size
    gives it: the progress line's total while the chunk plan grows (DESIGN.md §2). Empty
    where the committed offset has every snapshot done, or the estimates cannot be read."""
    options = run.options
    if options.scan_startup_mode not in SNAPSHOT_MODES or (
        committed is not None and snapshot_done(committed[1])
    ):
        return {}
    size = options.chunk_size
    dialect = run.dialect

    def estimates(conn: Any) -> dict[str, int]:
        return {
            f"{s.database}.{s.table}": max(
                1, -(-dialect.estimated_rows(conn, s.database, s.table) // size)
            )
            for s in schemas
        }

    session = dialect.session()
    try:
        return session.run(estimates)
    except SparkCdcError:
        return {}
    finally:
        session.close()


def _write_rules(run: RunPlan, sink: Sink) -> WriteRules:
    """How the run's batches are written, as its file says and its sink allows."""
    config = run.config
    return WriteRules(
        config.pipeline.schema_change_behavior,
        run.dialect,
        lambda s: (
            config.route_for(s.database, s.table),
            config.transform_for(s.database, s.table),
        ),
        append_snapshot=config.pipeline.existing_sink_rows != "keep",
        table_writes=config.pipeline.table_writes_parallelism if sink.concurrent_writes else 1,
    )


def _trigger(config: PipelineConfig, available_now: bool) -> dict[str, Any]:
    """The query's trigger: ``Trigger.AvailableNow`` for an available-now run where the
    source has it (PySpark 4.2), so that Spark runs its batches back to back and ends the
    query after the last, as the run loop would only notice on its next poll and after one
    more trigger; else one batch per ``pipeline.trigger-interval``."""
    from sparkcdc.spark.compat import ADMISSION_CONTROL

    if available_now and ADMISSION_CONTROL:
        return {"availableNow": True}
    return {"processingTime": f"{config.pipeline.trigger_interval_s} seconds"}


def _check_shared(spark: Any, state: Location, settings: Mapping[str, str]) -> None:
    """On a cluster, executors stage the snapshot's chunks under the state location and the
    driver reads them: each must see what the other writes, at the same location."""
    blind = blind_executors(spark, state, settings)
    if blind:
        raise ConfigError(
            f"state.location must be shared by the driver and every executor: executors on "
            f"{', '.join(blind)} do not see a file the driver wrote under {state}. Give "
            "state.location (default <checkpoint>/source-state) on an object store "
            "(s3a://...) or on a filesystem every host mounts at the same path"
        )


def _meet_existing_rows(sink: Sink, tables: Sequence[SinkTable], config: PipelineConfig) -> None:
    """A new stream's first run: sink tables that hold rows already are refused, emptied or
    kept, as ``pipeline.existing-sink-rows`` says (a new snapshot upserts by key, so rows
    deleted at the source meanwhile would stay behind unnoticed)."""
    policy = config.pipeline.existing_sink_rows
    if policy == "keep":
        return
    holding = [t for t in tables if t.name not in sink.created and sink.has_rows(t)]
    if not holding:
        return
    names = ", ".join(t.name for t in holding)
    if policy == "fail":
        raise SinkError(
            f"the {config.sink.type} sink table(s) {names} hold rows already, but the "
            f"checkpoint {redacted_uri(config.checkpoint)} starts a new stream (a first run, "
            "or a checkpoint that was deleted): its snapshot would write over them by key and "
            "leave behind rows deleted at the source since. Set "
            "pipeline.existing-sink-rows: truncate to empty them and copy again, or keep to "
            "write over them (then `sparkcdc verify` lists what differs), or drop the sink "
            "tables; to go on with the old stream, restore its checkpoint"
        )
    for table in holding:
        log.info("emptying sink table %s before the new stream's snapshot", table.name)
        sink.truncate_table(table)


def _refuse_lost_tables(
    sink: Sink,
    tables: Sequence[SinkTable],
    written: WrittenTables,
    config: PipelineConfig,
    root: Location,
) -> None:
    """A stream that goes on: a sink table it wrote rows to that is gone now (a Delta
    directory removed, an Iceberg or JDBC table dropped while the pipeline was stopped)
    stops the run, recorded where ``sparkcdc status`` shows it. Created again it would hold
    only the changes from now on, and nothing would say so."""
    divergences = Divergences(root)
    if not written.path.exists():  # a checkpoint from before the record: the tables with rows
        written.add(t.name for t in tables if sink.exists(t) and sink.has_rows(t))
        return
    recorded = written.names()
    lost = [t for t in tables if t.name in recorded and not sink.exists(t)]
    for table in tables:
        if table not in lost:
            divergences.forget(table.name, LOST_TABLE)  # put back, or copied again
    if not lost:
        return
    names = ", ".join(t.name for t in lost)
    for table in lost:
        divergences.record(
            table.name,
            LOST_TABLE,
            -1,
            f"sink table {table.name} is missing: this pipeline wrote it, and it was removed "
            "while the pipeline was stopped; runs refuse to go on until it is copied again "
            f"(sparkcdc run FILE --resnapshot {table.name}) or put back",
        )
    raise SinkError(
        f"the {config.sink.type} sink table(s) {names}, which this pipeline wrote, are gone "
        "(removed or dropped while it was stopped): created again, they would hold only the "
        "changes from now on, not the rows they held. Copy them again from their source "
        f"tables while the stream goes on: sparkcdc run FILE "
        f"{' '.join(f'--resnapshot {t.name}' for t in lost)}; or start a new stream: delete "
        f"the checkpoint {redacted_uri(config.checkpoint)} (with "
        "pipeline.existing-sink-rows: truncate for the sink tables still there); or put the "
        "tables back as they were"
    )


class StopRequests:
    """Ctrl-C (SIGINT) and SIGTERM while a pipeline runs: a request the run loop answers
    between its polls, stopping the query and closing the sink as a caught-up run does.

    Left to pyspark's own handler, a Ctrl-C raises inside a py4j call and surfaces as a
    ``Py4JError`` traceback from ``awaitTermination``. A second signal, while the stop is
    under way, raises KeyboardInterrupt at once. Only the main thread can take signals: in
    any other (a run started from a thread) nothing changes. ``close`` puts the previous
    handlers back.
    """

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def close(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def _settle(query: StreamingQuery, hold: BatchHold) -> None:
    """Let the query's trigger in flight end with no new batch after it, so that stopping
    it interrupts no batch: set the hold (triggers that start after it plan nothing), then
    wait until no trigger runs. A trigger that began before the hold finishes its batch;
    one that begins after it returns at once."""
    hold.set()
    while query.isActive and query.status.get("isTriggerActive"):
        time.sleep(0.05)


def stopped_mid_batch(failure: BaseException) -> bool:
    """Whether a query failed only because it was stopped while a batch was writing: the
    stop interrupts the batch's Spark job, and the sink reports the interruption as its
    failure (a foreachBatch error Spark does not recognise as its own stop).

    >>> stopped_mid_batch(Exception("SinkError: MERGE ... failed: java.lang.InterruptedException"))
    True
    """
    return "java.lang.InterruptedException" in str(failure)


def _dropped(state: SchemaState, name: str) -> bool:
    sink_state = state.sinks.get(name)
    return sink_state is not None and sink_state.dropped


def _offset_dict(end: Any) -> dict[str, Any] | None:
    """A source offset from query progress: a dict, its JSON text, or (Python data sources
    in Spark 4.1) its Python repr."""
    if isinstance(end, dict):
        return end
    if isinstance(end, str) and end.startswith("{"):
        try:
            parsed = json.loads(end)
        except json.JSONDecodeError:
            try:
                parsed = ast.literal_eval(end)
            except (ValueError, SyntaxError, TypeError):
                log.debug("unparsed offset in query progress: %s", end)
                return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _query_name(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def _announce(plan: PipelinePlan, config: PipelineConfig, out: TextIO) -> None:
    out.write(
        f"pipeline {config.pipeline.name!r}: {len(plan.sources)} source table(s) → "
        f"{config.sink.type} ({len(plan.sink_tables)} sink table(s)); checkpoint "
        f"{redacted_uri(config.checkpoint)}\n"
    )
    for table in plan.sink_tables:
        out.write(
            f"  {table.name} <- {', '.join(table.sources)} (key {', '.join(table.primary_key)})\n"
        )
    out.flush()


def _status(
    run: RunPlan,
    plan: PipelinePlan,
    summary: RunSummary,
    batch: int,
    server_pos: Any | None,
    *,
    running: bool,
) -> dict[str, Any]:
    config, key = run.config, run.dialect.offset_key
    offset = summary.last_offset or {}
    return {
        "pipeline": config.pipeline.name,
        "running": running,
        "pid": os.getpid(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "phase": key if snapshot_done(offset) else "snapshot",
        "tables": offset.get("snapshot") or {},
        key: offset.get(key),
        "server_position": None if server_pos is None else str(server_pos),
        # seconds from the binlog commit of the last batch's newest change to its write
        "event_lag_s": None if summary.event_lag_s is None else round(summary.event_lag_s, 3),
        "last_batch": batch,
        "rows_this_run": summary.rows,
        "sink": config.sink.type,
        "sink_tables": {t.name: list(t.sources) for t in plan.sink_tables},
    }
