"""``sparkcdc validate`` and ``sparkcdc status``: look at a pipeline without running it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from sparkcdc.errors import ConfigError, SparkCdcError
from sparkcdc.locations import Location, hadoop_settings
from sparkcdc.model.dialect import SourceDialect, StreamHold
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.text import redacted_uri
from sparkcdc.pipeline.config import LenientEnv, PipelineConfig, load_pipeline
from sparkcdc.pipeline.evolution.persistence import Divergences, SchemaHistory
from sparkcdc.pipeline.evolution.state import SchemaState
from sparkcdc.pipeline.progress import StreamOffsets, lag_text
from sparkcdc.pipeline.run_plan import source_of
from sparkcdc.pipeline.status import STATUS_FILE, committed_offset


def validate(file: str, spark_log: Callable[[PipelineConfig], str | None] | None = None) -> int:
    """Check the file, the source server (settings, grants, tables), the locations a run
    writes to and the transforms.

    Returns 0 when everything is ready, 3 when the source has problems (each printed with
    the statement that fixes it). A wrong file, or a pipeline ``run`` would refuse (see
    :mod:`sparkcdc.pipeline.preflight`), raises ConfigError (exit 2), as ``run`` does.
    Spark starts only where a transform is Spark SQL (it types the transform's columns),
    its JVM logging to the file ``spark_log`` names for the pipeline.
    """
    from sparkcdc.pipeline.preflight import check_pipeline, probe_locations, raise_errors
    from sparkcdc.pipeline.routes import needs_session, plan_pipeline
    from sparkcdc.sinks.base import runnable_sink_class
    from sparkcdc.spark.capture import plan_capture

    config = load_pipeline(file)
    runnable_sink_class(config.sink.type)
    print(f"{file}: the file is valid (pipeline {config.pipeline.name!r}, sink {config.sink.type})")
    options, dialect = source_of(config)
    issues = dialect.validate()
    for connection, state in dialect.tls_report():
        print(f"  source {connection}: {state}")
    for issue in issues:
        print(f"  source {issue.severity}: {issue}")
    if any(i.severity == "error" for i in issues):
        print(f"source {dialect.server_name()}: not ready for CDC")
        return 3
    print(f"source {dialect.server_name()}: ready for CDC")
    capture = plan_capture(options, dialect)
    findings = check_pipeline(config, capture.tables, dialect)
    for finding in findings:
        print(f"  pipeline {finding.severity}: {finding}")
    raise_errors(findings)
    hadoop = hadoop_settings(config.pipeline.session_conf())
    for location in probe_locations(config, hadoop):  # ConfigError (exit 2) as run would fail
        print(f"  location {redacted_uri(location)}: written, read and deleted a file")
    spark = None
    if needs_session(config, capture.tables):
        from sparkcdc.spark.session import spark_session

        # the file's Spark settings (ANSI mode, the session time zone) type the transforms
        # as in run; its master is run's business: the plan is made here, on one local core
        conf = {k: v for k, v in config.pipeline.session_conf().items() if k != "spark.master"}
        log_file = None if spark_log is None else spark_log(config)
        spark = spark_session("sparkcdc-validate", "local[1]", conf=conf, log_file=log_file)
        spark.sparkContext.setLogLevel("ERROR")
    plan = plan_pipeline(config, capture.tables, spark)
    for table in plan.sink_tables:
        columns = ", ".join(f"{c.name} {c.spark_type}" for c in table.columns)
        print(
            f"  {table.name} <- {', '.join(table.sources)}: "
            f"key ({', '.join(table.primary_key)}); {columns}"
        )
    return 0


def status(file: str, *, as_json: bool = False) -> int:
    """Print where the pipeline is: phase, per-table chunks, position, lag, last batch.

    It reads local files: a variable the file references but this shell lacks (the source
    password) only keeps it from asking the server for its position."""
    env = LenientEnv(os.environ)
    config = load_pipeline(file, env=env)
    checkpoint = config.checkpoint_location()
    recorded, unreadable = _recorded_status(checkpoint / STATUS_FILE)
    committed = committed_offset(checkpoint)
    _, dialect = source_of(config)
    if committed is None and not recorded:
        print(f"pipeline {config.pipeline.name!r}: never run (no checkpoint at {checkpoint})")
        # a checkpoint deleted with its pipeline may leave a slot behind, keeping WAL
        _, hold, _ = _ask_source(dialect, env, position=False)
        if hold is not None and hold.retained_bytes:
            print(f"  {hold.text()}")
        return 0
    batch, offset = committed if committed else (-1, {})
    tables = offset.get("snapshot") or {}
    done = all(p.get("total") is not None and p["next"] >= p["total"] for p in tables.values())
    stream = StreamOffsets.of(dialect)
    server_pos, hold, server_error = _ask_source(dialect, env)
    position = stream.position(offset)
    # which server the committed offset is a place on (offsets of older versions: unknown)
    on_server = str(ServerIdentity.from_offset(offset["server"])) if "server" in offset else None
    chunks = {
        name: {"chunks_done": p["next"], "chunks_total": p.get("total")}
        for name, p in tables.items()
    }
    report: dict[str, Any] = {
        "pipeline": config.pipeline.name,
        "checkpoint": str(checkpoint),
        "running": bool(recorded.get("running")) and _alive(recorded.get("pid")),
        "phase": stream.key if done else "snapshot",
        "last_committed_batch": batch,
        "tables": chunks,
        f"{stream.key}_position": None if position is None else str(position),
        "server": on_server,
        "server_position": None if server_pos is None else str(server_pos),
        # what the server keeps for this pipeline's reader alone (PostgreSQL: its slot)
        "stream_hold": None if hold is None else hold.to_json(),
        "lag": lag_text(position, server_pos) if position and server_pos else None,
        "event_lag_s": recorded.get("event_lag_s"),
        "status_updated": recorded.get("updated"),
        "schema": _schema_report(SchemaHistory(checkpoint).latest()),
        # sink columns known to differ from the source (an added column not filled)
        "divergences": Divergences(checkpoint).all(),
    }
    if as_json:
        print(json.dumps(report, indent=1))
        return 0
    state = "running" if report["running"] else "not running"
    print(f"pipeline {config.pipeline.name!r} ({state}), checkpoint {checkpoint}")
    print(f"  phase: {report['phase']}; last committed batch: {batch}")
    for name, p in chunks.items():
        total = p["chunks_total"]
        print(f"  {name}: chunks {p['chunks_done']}/{'?' if total is None else total}")
    print(f"  {stream.key} position: {report[f'{stream.key}_position']}")
    for divergence in report["divergences"]:
        print(f"  DIVERGES: {divergence['message']}")
    if on_server is not None:
        print(f"  on server: {on_server}")
    if server_pos is not None:
        print(f"  server position: {server_pos} (lag {report['lag']})")
    elif server_error:
        print(f"  server position: unknown ({server_error})")
    if hold is not None:
        print(f"  {hold.text()}")
    if report["event_lag_s"] is not None:
        print(f"  event lag of the last batch: {report['event_lag_s']} s")
    if recorded.get("updated"):
        print(f"  last status update: {recorded['updated']}")
    if unreadable:
        print(f"  {STATUS_FILE}: {unreadable} (ignored; the next run writes it again)")
    _print_schema(report["schema"])
    return 0


def cleanup(file: str) -> int:
    """Drop what the source's server keeps for the pipeline's reader (its PostgreSQL slot
    and publication): for a pipeline given up. Refused while its checkpoint holds committed
    batches (that stream needs them), or while a reader streams the slot."""
    config = load_pipeline(file)
    checkpoint = config.checkpoint_location()
    committed = committed_offset(checkpoint)
    if committed is not None:
        raise ConfigError(
            f"pipeline {config.pipeline.name!r} has a checkpoint with committed batches "
            f"({checkpoint}, batch {committed[0]}): its stream goes on from its source's "
            "slot, which cleanup would drop. Delete the checkpoint first if the pipeline is "
            "given up (a new run then takes a new snapshot)"
        )
    _, dialect = source_of(config)
    for line in dialect.release_stream():
        print(line)
    return 0


def _ask_source(
    dialect: SourceDialect[Any], env: LenientEnv, *, position: bool = True
) -> tuple[Any | None, StreamHold | None, str]:
    """The source server's position now (if ``position``); what it keeps for the
    pipeline's reader alone (None: nothing, as for MySQL); and why it was not asked (the
    source's password missing in this shell, the server unreachable)."""
    if env.missing:
        names = ", ".join(sorted(env.missing))
        return None, None, f"not asked: the file references {names}, not set in this shell"
    try:
        now = dialect.position_now() if position else None
        return now, dialect.stream_hold(), ""
    except SparkCdcError as exc:
        return None, None, str(exc)


def _recorded_status(path: Location) -> tuple[dict[str, Any], str]:
    """The last run's ``status.json`` (empty when there is none), and why it could not be
    read (a run killed while writing it, a hand edit): status then reports without it."""
    try:
        text = path.read_text()
        if text is None:
            return {}, ""
        recorded = json.loads(text)
    except (OSError, ValueError) as exc:
        return {}, f"unreadable ({exc})"
    if not isinstance(recorded, dict):
        return {}, "unreadable (not a JSON object)"
    return recorded, ""


def _schema_report(state: SchemaState | None) -> dict[str, Any] | None:
    """The schema history's newest state: per source table its versions (one per DDL
    statement that changed it) and columns, per sink table its columns and marks."""
    if state is None:
        return None
    return {
        "sources": {
            name: {
                "versions": len(versions),
                "last_changed_batch": versions[-1].batch if len(versions) > 1 else None,
                "columns": None
                if versions[-1].schema is None
                else [f"{c.name} {c.column_type}" for c in versions[-1].schema.columns],
            }
            for name, versions in state.sources.items()
        },
        "sinks": {
            name: {
                "columns": [f"{c.name} {c.spark_type}" for c in sink.table.columns],
                "dropped": sink.dropped,
                "stale": sink.stale,
            }
            for name, sink in state.sinks.items()
        },
    }


def _print_schema(schema: dict[str, Any] | None) -> None:
    if schema is None:
        return
    sources = schema["sources"]
    changed = {name: s for name, s in sources.items() if s["versions"] > 1}
    print(f"  schema: {len(sources)} source table(s), {len(changed)} changed by DDL")
    for name, source in changed.items():
        columns = "dropped" if source["columns"] is None else ", ".join(source["columns"])
        print(
            f"    {name}: {source['versions']} versions, last changed in batch "
            f"{source['last_changed_batch']}; now {columns}"
        )
    for name, sink in schema["sinks"].items():
        if sink["stale"]:
            print(
                f"    sink table {name}: keeps rows a truncate, drop or rename removed at the "
                "source (not forwarded); its inserts are merged by key, not appended"
            )


def _alive(pid: Any) -> bool:
    import os

    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, OSError):
        return False
    return True
