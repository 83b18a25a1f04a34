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
from sparkcdc.locations import (
    Location,
    as_location,
    blind_executors,
    open_location,
    s3a_settings,
    session_hadoop_settings,
    state_options,
)
from sparkcdc.model.options import SNAPSHOT_MODES, ServerIdRange, SourceOptions
from sparkcdc.model.position import BinlogPosition, binlog_file_number
from sparkcdc.model.schema import TableSchema
from sparkcdc.model.text import redacted_uri
from sparkcdc.mysql.admin.server_ids import ServerIdClaim
from sparkcdc.pipeline.batch_writer import BatchWriter, initial_state
from sparkcdc.pipeline.checkpoint import (
    WrittenTables,
    claim_state,
    logged_end,
    open_checkpoint,
    spark_checkpoint,
)
from sparkcdc.pipeline.config import PipelineConfig
from sparkcdc.pipeline.evolution.persistence import Divergences, SchemaHistory
from sparkcdc.pipeline.evolution.state import SchemaState
from sparkcdc.pipeline.lease import CheckpointLease
from sparkcdc.pipeline.preflight import check_pipeline, probe_locations, raise_errors
from sparkcdc.pipeline.resnapshot import LOST_TABLE, Resnapshots, last_logged
from sparkcdc.pipeline.routes import PipelinePlan, plan_pipeline
from sparkcdc.sinks.base import Sink, SinkContext, SinkTable, runnable_sink_class, sink_class
from sparkcdc.spark.streams import query_error

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from sparkcdc.spark.capture import CapturePlan
    from sparkcdc.spark.source import BatchHold

log = logging.getLogger(__name__)

STATUS_FILE = "status.json"
_POLL_S = 0.5
# Each micro-batch is cached once and read back once or twice (batch_writer.BatchWriter), and a
# binlog batch is cached by one task: compressing the cache cost more than it saved. With
# it off, the lag of bench/pipeline_throughput.py's Kafka step at 100,000 changes/s levelled off
UNCOMPRESSED_CACHE = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}
# pyspark (4.x) records where each Column and DataFrame call was made, for its error messages:
# per call a py4j round trip for a setting, a walk up the Python stack, and an `import IPython`
# (tried; 0.5 s on first use where IPython is installed), then two more round trips. A pipeline
# builds its DataFrames in our code, not the user's, so the call sites would name sparkcdc's
# lines; without them a batch's frame is built in half the time (91 against 182 ms for one
# table's changes here)
NO_CALL_SITES = {"spark.python.sql.dataFrameDebugging.enabled": "false"}
# Spark's checkpoint logs and Delta's log on a local path are written through Hadoop's
# FileContext, whose default local file system keeps a checksum file beside each file and
# renames both: writing the offset and commit logs took ~110 ms of each micro-batch here,
# ~55 ms without (a batch at 1,000 changes/s into Kafka takes ~0.75 s in all). Only local
# paths, and only FileContext's: Hadoop's FileSystem API (Parquet files) keeps its checksums
RAW_LOCAL_CONTEXT = {
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs"
}
# what a pipeline's new session has unless its file or spark-submit says otherwise
PIPELINE_DEFAULTS = {**UNCOMPRESSED_CACHE, **NO_CALL_SITES, **RAW_LOCAL_CONTEXT}


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


def source_settings(config: PipelineConfig) -> tuple[SourceOptions, Any]:
    from sparkcdc.mysql.dialect import connection_settings

    options = SourceOptions.from_options(config.source_options())
    return options, connection_settings(options)


def server_position(settings: Any) -> BinlogPosition:
    from sparkcdc.mysql.admin import server
    from sparkcdc.mysql.protocol.connection import sql_connection

    with sql_connection(settings) as conn:
        return server.current_position(conn, server.server_info(conn), with_gtids=False)


def offset_caught_up(offset: dict[str, Any] | None, target: BinlogPosition) -> bool:
    """Whether a committed source offset has every chunk read and the binlog at ``target``.

    >>> offset_caught_up({"binlog": BinlogPosition("b.000002", 4).to_offset(),
    ...     "snapshot": {"a.t": {"next": 2, "prev": 2, "total": 2}}}, BinlogPosition("b.000001", 9))
    True
    """
    if not offset or "binlog" not in offset:
        return False
    return snapshot_done(offset) and BinlogPosition.from_offset(offset["binlog"]) >= target


LOG_EVERY_S = 10.0


class Progress:
    """Progress of a running pipeline: one rewritten line on a terminal, log lines otherwise.

    The terminal's line is rewritten at most every ``_POLL_S``; a log (not a terminal: a
    file, a service's journal) gets a line at most every ``log_every_s`` seconds, and at once
    when the phase changes (the snapshot done) and at the end (``finish``), so that a run of
    days does not flood it. During a snapshot the line has the rows per second since the
    first batch began (the JVM's start and the planning before it are not the pipeline's
    speed), tables and chunks done of their totals, and an ETA: a table whose chunk
    plan is still growing (DESIGN.md §2) counts the chunks its row estimate over the chunk
    size gives (``chunk_estimates``), marked ``~``. Then the binlog position, its lag
    behind the server in bytes, and the last batch's event lag in seconds.

    >>> import io
    >>> progress = Progress(io.StringIO(), interactive=False, chunk_estimates={"db.t": 62})
    >>> progress.line(None, -1, None)
    'first batch running | 0 rows | snapshot: 0/1 tables, chunks 0/~62'
    """

    def __init__(
        self,
        out: TextIO,
        interactive: bool | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        log_every_s: float = LOG_EVERY_S,
        chunk_estimates: Mapping[str, int] | None = None,
    ) -> None:
        self.out = out
        self.interactive = out.isatty() if interactive is None else interactive
        self.every_s = _POLL_S if self.interactive else log_every_s
        self._clock = clock
        self.started = clock()
        self.rows = 0
        self.first_began: float | None = None  # when the first batch began writing
        self.chunk_estimates = dict(chunk_estimates or {})
        self._last_text = ""  # the last text shown
        self._pending = ""  # a newer text, held back by the interval
        self._shown_at: float | None = None
        self._phase: str | None = None

    def count(self, rows: int) -> None:
        """Rows the sink took for the batch being written (the batch writer's listener)."""
        self.rows += rows

    def timed(self, write: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """``write`` (a foreachBatch function), noting when the first batch began: the
        rate counts from then."""

        def run(frame: Any, batch_id: int) -> None:
            if self.first_began is None:
                self.first_began = self._clock()
            write(frame, batch_id)

        return run

    def line(
        self,
        offset: dict[str, Any] | None,
        batch: int,
        server_pos: BinlogPosition | None,
        event_lag_s: float | None = None,
    ) -> str:
        now = self._clock()
        writing = None if self.first_began is None else max(now - self.first_began, 1e-6)
        rows = f"{self.rows:,} rows"
        tables = (offset or {}).get("snapshot")
        if tables is None and not offset:  # before the first batch: the tables to snapshot
            tables = {name: {"next": 0, "total": None} for name in self.chunk_estimates}
        snapshot = bool(tables) and not snapshot_done({"snapshot": tables})
        if snapshot and writing is not None and self.rows and batch >= 0:
            # batches run back to back while a snapshot lasts; after it, a rate would sink
            # in every idle gap between batches: the lag says how the binlog keeps up
            rows += f", {self.rows / writing:,.0f} rows/s"
        # batch: the last committed one (-1 before the first commits)
        parts = [f"batch {batch}" if batch >= 0 else "first batch running", rows]
        if tables:
            parts.append(self._snapshot_text(tables, writing))
        if offset and "binlog" in offset:
            position = BinlogPosition.from_offset(offset["binlog"])
            binlog = f"binlog {position.file}:{position.pos}"
            if server_pos is not None:
                binlog += f", lag {lag_text(position, server_pos)}"
            if event_lag_s is not None:
                binlog += f", {event_lag_s:,.1f}s behind"
            parts.append(binlog)
        return " | ".join(parts)

    def _snapshot_text(self, tables: Mapping[str, Any], writing: float | None) -> str:
        """Tables and chunks done of their totals (``~``: a total from an estimate), and
        the time left at the rate the chunks were read so far."""
        done = sum(1 for p in tables.values() if table_snapshot_done(p))
        chunks_done = sum(int(p["next"]) for p in tables.values())
        total = 0
        estimated = False
        for name, p in tables.items():
            if p.get("total") is not None:
                total += int(p["total"])
            else:  # the plan still grows: at least one chunk more than read
                estimated = True
                total += max(int(p["next"]) + 1, self.chunk_estimates.get(name, 0))
        text = (
            f"snapshot: {done}/{len(tables)} tables, chunks {chunks_done:,}/"
            f"{'~' if estimated else ''}{total:,}"
        )
        if writing is not None and chunks_done and total > chunks_done:
            eta = writing * (total - chunks_done) / chunks_done
            text += f", ETA {'~' if estimated else ''}{_duration(eta)}"
        return text

    def update(
        self,
        offset: dict[str, Any] | None,
        batch: int,
        server_pos: BinlogPosition | None,
        event_lag_s: float | None = None,
    ) -> None:
        """Show the current line, unless one was shown less than the interval ago in the
        same phase (then it is held back: a later update or ``finish`` shows it)."""
        phase = "binlog" if snapshot_done(offset) else "snapshot"
        text = self.line(offset, batch, server_pos, event_lag_s)
        now = self._clock()
        due = self._shown_at is None or now - self._shown_at >= self.every_s
        if due or phase != self._phase:
            self._phase = phase
            self._show(text, now)
        else:
            self._pending = text

    def _show(self, text: str, now: float) -> None:
        self._pending = ""
        if text == self._last_text:
            return
        self._last_text, self._shown_at = text, now
        if self.interactive:
            self.out.write("\r\033[K" + text)
            self.out.flush()
        else:
            log.info("%s", text)

    def finish(self) -> None:
        """The end of the run: the last line held back is shown."""
        if self._pending:
            self._show(self._pending, self._clock())
        if self.interactive and self._last_text:
            self.out.write("\n")
            self.out.flush()


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads it.

    >>> _duration(42.4), _duration(754), _duration(7384)
    ('42s', '12m34s', '2h03m')
    """
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def table_snapshot_done(progress: dict[str, Any]) -> bool:
    """Whether a table's snapshot progress (in a source offset) has every chunk read.

    >>> table_snapshot_done({"next": "3", "prev": 2, "total": 3})
    True
    """
    total = progress.get("total")
    return total is not None and int(progress["next"]) >= int(total)


def snapshot_done(offset: dict[str, Any] | None) -> bool:
    """Whether a source offset has every table's snapshot done (True for no snapshot)."""
    tables = (offset or {}).get("snapshot") or {}
    return all(table_snapshot_done(p) for p in tables.values())


def lag_text(position: BinlogPosition, server_pos: BinlogPosition) -> str:
    """How far ``position`` is behind the server, in bytes of the same file or in files."""
    if position.file == server_pos.file:
        return f"{max(0, server_pos.pos - position.pos):,} bytes"
    files = binlog_file_number(server_pos.file) - binlog_file_number(position.file)
    return f"{max(files, 0)} binlog file(s)"


def write_status(checkpoint: str | Location, status: dict[str, Any]) -> None:
    (as_location(checkpoint) / STATUS_FILE).write(json.dumps(status, indent=1, default=str))


STATUS_MIN_INTERVAL_S = 5.0  # a run's status.json changes at most this often ...
STATUS_HEARTBEAT_S = 60.0  # ... and is written at least this often ("updated")


class StatusWriter:
    """A running pipeline's ``status.json``: written at once when it starts or stops
    running, when what it says changes (at most every ``STATUS_MIN_INTERVAL_S``), and every
    ``STATUS_HEARTBEAT_S`` (its ``updated`` tells a live run from a dead one). The run polls
    its query twice a second; writing on every poll made ~170,000 PUTs a day on an object
    store, each billed."""

    def __init__(self, checkpoint: str | Location) -> None:
        self.checkpoint = checkpoint
        self._said: dict[str, Any] | None = None  # the last written status, but "updated"
        self._at = 0.0

    def write(self, status: dict[str, Any]) -> bool:
        """Write ``status`` if it is due; whether it was."""
        said = {k: v for k, v in status.items() if k != "updated"}
        since = time.monotonic() - self._at
        due = (
            self._said is None
            or said.get("running") != self._said.get("running")
            or (said != self._said and since >= STATUS_MIN_INTERVAL_S)
            or since >= STATUS_HEARTBEAT_S
        )
        if due:
            write_status(self.checkpoint, status)
            self._said, self._at = said, time.monotonic()
        return due


def committed_offset(checkpoint: str | Location) -> tuple[int, dict[str, Any]] | None:
    """The newest batch Spark committed in ``<checkpoint>/spark`` and its source end offset."""
    root = spark_checkpoint(checkpoint)
    commits = sorted(
        (int(name) for name in (root / "commits").children() if name.isdigit()), reverse=True
    )
    for batch in commits:
        end = logged_end(checkpoint, batch)
        if end is not None:
            return batch, end
    return None


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
    started = time.monotonic()
    restarts = 0
    while True:
        spent = time.monotonic() - started
        left = None if max_seconds is None else max(0.0, max_seconds - spent)
        try:
            return _run_once(
                config,
                available_now,
                out,
                spark,
                on_batch,
                left,
                spark_log,
                master=master,
                py_files=py_files,
            )
        except SchemaChangedError as exc:
            if restarts >= MAX_SCHEMA_RESTARTS:
                raise
            restarts += 1
            log.info("%s; restarting the pipeline to read the new schema", exc)


def session_master(config: PipelineConfig, flag: str | None, configured: str | None) -> str:
    """The master of a pipeline's new session: ``flag`` (``sparkcdc run --master``), else
    the file's ``pipeline.spark.master``, else ``configured`` (spark-submit's master, or
    ``SPARK_MASTER``), else ``local[pipeline.parallelism]``. A file and a spark-submit that
    name different masters are a ConfigError: which one was meant is not ours to guess.

    >>> session_master(config, "spark://10.0.0.5:7077", "yarn")  # doctest: +SKIP
    'spark://10.0.0.5:7077'
    """
    chosen = config.pipeline.master
    if flag:
        return flag
    if chosen and configured and chosen != configured:
        raise ConfigError(
            f"pipeline.spark.master is {chosen!r} but this process runs under the master "
            f"{configured!r} (spark-submit's --master, spark.master or SPARK_MASTER): remove "
            "one of them, or give `sparkcdc run --master` to choose"
        )
    return chosen or configured or f"local[{config.pipeline.parallelism}]"


def pipeline_conf(config: PipelineConfig) -> dict[str, str]:
    """The Spark settings a pipeline's session gets: its sink's, then the file's
    ``spark.conf`` (the master aside: ``session_master`` chooses it)."""
    sink_conf = sink_class(config.sink.type).spark_conf(config.sink)
    conf = {**sink_conf, **config.pipeline.session_conf()}
    conf.pop("spark.master", None)
    return conf


def session_connectors(config: PipelineConfig) -> tuple[str, ...]:
    """The connectors a pipeline's session needs: its sink's, and S3A where a location of
    the file (checkpoint, state, sink tables, warehouse) is an ``s3a://`` path."""
    from sparkcdc.spark.connectors import pipeline_connectors

    return pipeline_connectors(
        config.sink.type,
        [config.checkpoint, config.state_location, *_strings(config.sink.model_dump())],
    )


def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (nested dicts, lists and tuples)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def pipeline_session(
    config: PipelineConfig,
    spark: Any = None,
    log_file: str | None = None,
    *,
    master: str | None = None,
    py_files: Sequence[str] = (),
    available_now: bool = False,
) -> Any:
    """``spark`` (or a new session on ``session_master``'s choice) set up for the pipeline:
    the mysql-cdc source registered, the sink's and the file's Spark settings applied,
    ``py_files`` added to ``spark.submit.pyFiles``.

    A new session's console progress bars are off when stderr is not a terminal: they
    rewrite their line several times a second, a flood in a log (the pipeline's own progress
    says where it is); the file's ``spark.conf`` may turn them on again. A new session
    caches the micro-batches uncompressed, does not record the Python call site of each
    DataFrame call and writes local checkpoint and Delta log files without Hadoop's checksum
    files (``PIPELINE_DEFAULTS``) unless the file's ``spark.conf`` or spark-submit says
    otherwise, and its JVM is tuned as a pipeline's driver:
    it maps the class-data archive ``sparkcdc prepare`` wrote, if there is one
    (``spark/classdata.py``), and compiles with C2 later, or with C1 alone for a run
    ``available_now`` (``spark/jit.py``)."""
    from sparkcdc.spark.jvm import configured_master
    from sparkcdc.spark.masters import connect_refusal, is_connect_session
    from sparkcdc.spark.session import register, spark_session

    sink_conf = sink_class(config.sink.type).spark_conf(config.sink)
    user_conf = config.pipeline.session_conf()
    conf = pipeline_conf(config)
    if py_files:
        listed = [conf.get("spark.submit.pyFiles", ""), *py_files]
        conf["spark.submit.pyFiles"] = ",".join(p for p in listed if p)
    if spark is None:
        bars = "true" if sys.stderr.isatty() else "false"
        spark = spark_session(
            config.pipeline.name,
            session_master(config, master, None if master else configured_master()),
            connectors=session_connectors(config),
            conf={"spark.ui.showConsoleProgress": bars, **conf},
            log_file=log_file,
            defaults=PIPELINE_DEFAULTS,
            pipeline_driver=True,
            available_now=available_now,
        )
        spark.sparkContext.setLogLevel("WARN")
    elif is_connect_session(spark):
        raise connect_refusal("the session given is a Spark Connect client's")
    else:
        register(spark)
        for key, value in conf.items():
            # a sink's default of a setting fixed when a session starts is for new sessions
            if key in sink_conf and key not in user_conf and not spark.conf.isModifiable(key):
                continue
            spark.conf.set(key, value)
    return spark


def _run_once(
    config: PipelineConfig,
    available_now: bool,
    out: TextIO | None,
    spark: Any,
    on_batch: Callable[[int, dict[str, int]], None] | None,
    max_seconds: float | None,
    spark_log: str | None = None,
    *,
    master: str | None = None,
    py_files: Sequence[str] = (),
) -> RunSummary:
    from sparkcdc.mysql.admin.validator import check_source
    from sparkcdc.spark.capture import plan_capture

    out = out or sys.stdout
    runnable_sink_class(config.sink.type)  # a sink that cannot run stops before any work
    options, settings = source_settings(config)
    check_source(settings)
    capture = plan_capture(options)
    findings = check_pipeline(config, capture.tables, settings)
    raise_errors(findings)
    for finding in findings:
        log.warning("%s", finding)
    spark = pipeline_session(
        config, spark, spark_log, master=master, py_files=py_files, available_now=available_now
    )
    # sparkcdc's own files reach the checkpoint and the state as Spark's Hadoop does
    hadoop = session_hadoop_settings(spark)
    probe_locations(config, hadoop)  # as validate does: exit 2, not an OSError mid-run
    root = config.checkpoint_location(hadoop)
    lease = CheckpointLease.take(root)  # before anything under the checkpoint is touched
    ids: ServerIdClaim | None = None
    try:
        if options.server_id:  # a random default range is the source's, unknown here
            ids = ServerIdClaim.take(settings, ServerIdRange.parse(options.server_id))
        return _run_leased(
            config,
            available_now,
            out,
            spark,
            on_batch,
            max_seconds,
            settings,
            capture,
            root,
            lease,
            ids,
        )
    finally:
        if ids is not None:
            ids.close()
        lease.release()


def _run_leased(
    config: PipelineConfig,
    available_now: bool,
    out: TextIO,
    spark: Any,
    on_batch: Callable[[int, dict[str, int]], None] | None,
    max_seconds: float | None,
    settings: Any,
    capture: CapturePlan,
    root: Location,
    lease: CheckpointLease,
    ids: ServerIdClaim | None,
) -> RunSummary:
    """The run of ``_run_once`` once it holds the checkpoint's lease and its server ids
    (both kept as it polls)."""
    from pyspark.errors import StreamingQueryException

    cls = runnable_sink_class(config.sink.type)
    hadoop = session_hadoop_settings(spark)
    state_hadoop = s3a_settings(config.state_location, hadoop)
    state = open_location(config.state_location, hadoop)
    if not str(spark.sparkContext.master).startswith("local"):
        _check_shared(spark, state, state_hadoop)
    identity = open_checkpoint(root, state)
    claim_state(state, root, identity, hadoop)
    history = SchemaHistory(root)
    saved = history.latest()
    schemas = capture.tables
    if saved is not None:  # a restart: the schemas as the stream last saw them
        schemas = tuple(saved.schema(s.qualified_name) or s for s in schemas)
    plan = plan_pipeline(config, schemas, spark)
    context = SinkContext(config.pipeline.name, config.checkpoint, identity.run_id)
    sink: Sink = cls(config.sink, spark, context)
    if saved is None:
        history.save(-1, initial_state(plan))
    else:
        plan = replace(
            plan,
            sink_tables=tuple(
                saved.sinks[t.name].table if t.name in saved.sinks else t for t in plan.sink_tables
            ),
        )
    opened = [t for t in plan.sink_tables if not (saved and _dropped(saved, t.name))]
    written = WrittenTables(root)
    resnapshots = Resnapshots(root)
    restart: list[str] = []  # source tables whose snapshot the source takes again
    if not identity.new_stream:
        requested = set(resnapshots.pending())
        _refuse_lost_tables(
            sink, [t for t in opened if t.name not in requested], written, config, root
        )
        logged = last_logged(root)[1].get("snapshot") or {}
        restart = resnapshots.sources(
            plan.sink_tables, lambda s: s not in logged or table_snapshot_done(logged[s])
        )
    sink_of = {source: t.name for t in plan.sink_tables for source in t.sources}
    sink.begin_open(opened)  # absent tables may be created while the first batch reads
    try:
        if identity.new_stream:
            _meet_existing_rows(sink, opened, config)
        summary = RunSummary(sink_tables=tuple(t.name for t in plan.sink_tables))
        committed = committed_offset(root)
        if committed is not None:  # a restart: where the last run got to
            summary.last_offset = committed[1]
        _announce(plan, config, out)

        def listener(batch_id: int, rows: dict[str, int]) -> None:
            summary.batches += 1
            for table, count in rows.items():
                summary.rows[table] = summary.rows.get(table, 0) + count
            progress.count(sum(rows.values()))
            written.add(sink_of[t] for t, count in rows.items() if count and t in sink_of)
            if on_batch is not None:
                on_batch(batch_id, rows)

        estimates = _chunk_estimates(settings, config, schemas, committed)
        progress = Progress(out, chunk_estimates=estimates)
        from sparkcdc.spark.source import BatchHold, SnapshotBatchRecord

        planned = SnapshotBatchRecord(config.state_location, state_hadoop)

        def snapshot_batch(batch_id: int) -> str | None:
            record = planned.read()
            if record is None or record[0] != logged_end(root, batch_id):
                return None
            return record[1]

        writer = BatchWriter(
            plan,
            sink,
            config.pipeline.schema_change_behavior,
            listener,
            history,
            lambda s: (
                config.route_for(s.database, s.table),
                config.transform_for(s.database, s.table),
            ),
            source=settings,
            append_snapshot=config.pipeline.existing_sink_rows != "keep",
            snapshot_batch=snapshot_batch,
            table_writes=config.pipeline.table_writes_parallelism if sink.concurrent_writes else 1,
        )
        target = server_position(settings) if available_now else None

        hold = BatchHold(config.state_location, state_hadoop)
        hold.clear()  # one an earlier run left (stopped hard after setting it)
        reader = spark.readStream.format("mysql-cdc")
        for key, value in {**state_options(state_hadoop), **config.source_options()}.items():
            reader = reader.option(key, value)
        if restart:
            reader = reader.option("scan.resnapshot.tables", ",".join(restart))
        query = (
            reader.load()
            .writeStream.queryName(_query_name(config.pipeline.name))
            .foreachBatch(progress.timed(resnapshots.wrap(writer, sink, plan.sink_tables)))
            .option("checkpointLocation", f"{config.checkpoint.rstrip('/')}/spark")
            .trigger(**_trigger(config, available_now))
            .start()
        )
    except BaseException:  # the creations it began must not outlive this run
        with contextlib.suppress(SparkCdcError):
            sink.ready()
        raise
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    status = StatusWriter(root)
    last_server_check = 0.0
    server_pos: BinlogPosition | None = None
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
                query.awaitTermination(_POLL_S)
            except StreamingQueryException:
                break  # reported below, as our own error
            lease.renew()
            if ids is not None and time.monotonic() - last_server_check > 5:
                ids.check()  # before last_server_check moves on below
            latest = query.lastProgress
            if latest and latest.get("sources"):
                log.debug("progress endOffset: %r", latest["sources"][0].get("endOffset"))
            if latest and latest.get("sources"):
                end = latest["sources"][0].get("endOffset")
                summary.last_offset = _offset_dict(end)
            if time.monotonic() - last_server_check > 5:
                last_server_check = time.monotonic()
                try:
                    server_pos = server_position(settings)
                except SparkCdcError:
                    server_pos = None
            batch = int(latest["batchId"]) if latest else -1
            summary.event_lag_s = writer.event_lag_s
            progress.update(summary.last_offset, batch, server_pos, writer.event_lag_s)
            status.write(_status(config, plan, summary, batch, server_pos, running=True))
            # only an offset this run's query reached: it was checked against the server
            # that answers now, which a committed one never was (its binlog may have been
            # reset, or another server may answer, and end before the offset)
            if target is not None and latest and offset_caught_up(summary.last_offset, target):
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
                _settle(query, hold)
        except KeyboardInterrupt:
            summary.stopped_by = "SIGINT"
        if query.isActive:
            query.stop()
        writer.close()
        stop.close()
        hold.clear()
        progress.finish()
        with contextlib.suppress(SparkCdcError):  # raised by the batch, or reported above
            sink.ready()
        sink.close()
        status.write(_status(config, plan, summary, summary.batches - 1, server_pos, running=False))
    return summary


def _chunk_estimates(
    settings: Any,
    config: PipelineConfig,
    schemas: Sequence[TableSchema],
    committed: tuple[int, dict[str, Any]] | None,
) -> dict[str, int]:
    """Per table still to snapshot, its chunk count as its row estimate over the chunk size
    gives it: the progress line's total while the chunk plan grows (DESIGN.md §2). Empty
    where the committed offset has every snapshot done, or the estimates cannot be read."""
    from sparkcdc.mysql.admin.catalog import estimated_rows
    from sparkcdc.mysql.protocol.connection import sql_connection

    options = SourceOptions.from_options(config.source_options())
    if options.scan_startup_mode not in SNAPSHOT_MODES or (
        committed is not None and snapshot_done(committed[1])
    ):
        return {}
    size = options.chunk_size
    try:
        with sql_connection(settings) as conn:
            return {
                f"{s.database}.{s.table}": max(
                    1, -(-estimated_rows(conn, s.database, s.table) // size)
                )
                for s in schemas
            }
    except SparkCdcError:
        return {}


def _trigger(config: PipelineConfig, available_now: bool) -> dict[str, Any]:
    """The query's trigger: ``Trigger.AvailableNow`` for an available-now run where the
    source has it (PySpark 4.2), so that Spark runs its batches back to back and ends the
    query after the last, as the run loop would only notice on its next poll and after one
    more trigger; else one batch per ``pipeline.trigger-interval``."""
    from sparkcdc.spark.compat import ADMISSION_CONTROL

    if available_now and ADMISSION_CONTROL:
        return {"availableNow": True}
    return {"processingTime": f"{config.pipeline.trigger_interval_s} seconds"}


def _check_shared(spark: Any, state: Location, settings: dict[str, str]) -> None:
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
    config: PipelineConfig,
    plan: PipelinePlan,
    summary: RunSummary,
    batch: int,
    server_pos: BinlogPosition | None,
    *,
    running: bool,
) -> dict[str, Any]:
    offset = summary.last_offset or {}
    return {
        "pipeline": config.pipeline.name,
        "running": running,
        "pid": os.getpid(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "phase": "binlog" if snapshot_done(offset) else "snapshot",
        "tables": offset.get("snapshot") or {},
        "binlog": offset.get("binlog"),
        "server_position": None if server_pos is None else str(server_pos),
        # seconds from the binlog commit of the last batch's newest change to its write
        "event_lag_s": None if summary.event_lag_s is None else round(summary.event_lag_s, 3),
        "last_batch": batch,
        "rows_this_run": summary.rows,
        "sink": config.sink.type,
        "sink_tables": {t.name: list(t.sources) for t in plan.sink_tables},
    }
