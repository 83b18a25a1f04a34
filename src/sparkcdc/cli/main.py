"""The sparkcdc command line (``sparkcdc --help``).

    sparkcdc run FILE [--available-now] [--master URL] [--py-files ZIP]
                                          run a pipeline (until Ctrl-C, or until caught up)
    sparkcdc validate FILE                check the file and the source server
    sparkcdc status FILE                  phase, tables, chunks, positions, lag, last batch
    sparkcdc verify FILE [--json]         compare every sink table with its source tables
    sparkcdc cleanup FILE                 drop the source's slot of a pipeline given up
    sparkcdc package [--output DIR]       sparkcdc as a zip for a Spark cluster's executors

Exit codes: 0 success (verify: the tables are equal); 1 verify found differences, or
anything else; 2 bad configuration or usage; 3 source problem (unreachable, misconfigured,
purged position); 4 sink problem (unreachable, refused a write).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import ConfigError, SinkError, SourceError, SparkCdcError

if TYPE_CHECKING:
    from sparkcdc.pipeline.config import PipelineConfig

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_SOURCE = 3
EXIT_SINK = 4


def _run(args: argparse.Namespace) -> int:
    from sparkcdc.pipeline.config import load_pipeline
    from sparkcdc.pipeline.runner import run_pipeline

    config = load_pipeline(args.file)
    if args.resnapshot:
        from sparkcdc.pipeline.resnapshot import request_resnapshot

        request_resnapshot(config, args.resnapshot)
    spark_log = _spark_log(config, verbose=args.verbose)
    py_files = [p for p in (args.py_files or "").split(",") if p]
    summary = run_pipeline(
        config,
        available_now=args.available_now,
        spark_log=spark_log,
        master=args.master,
        py_files=py_files,
    )
    print(
        f"sparkcdc: {summary.batches} batch(es), {summary.total_rows} change row(s) written "
        f"to {config.sink.type} ({', '.join(summary.sink_tables)})"
    )
    if summary.stopped_by is not None:  # as a shell reports a signal: 128 + its number
        return 128 + signal.Signals[summary.stopped_by].value
    return EXIT_OK


def _spark_log(
    config: PipelineConfig, *, verbose: bool, beside_checkpoint: bool = True
) -> str | None:
    """Send Spark's own lines to a file, before this command starts Spark: the JVM's (its
    start-up lines, warnings, stacks; ``log4j2-file.properties``), py4j's, and pyspark's
    logs of failed statements. Every command that starts Spark calls it first; the console
    keeps sparkcdc's lines, and a failure is reported in one line that says what to do.

    The file is ``<checkpoint>/logs/spark.log`` for a local checkpoint
    (``beside_checkpoint``: a run's, a verify's), else one in this user's private temp
    folder; its path is logged. ``verbose``: Spark logs to the console as its defaults say
    (None)."""
    if verbose:
        return None
    path = _spark_log_path(config.checkpoint if beside_checkpoint else None, config)
    logging.getLogger("sparkcdc").info("Spark's own log: %s", path)
    _log_py4j_to(path)
    _quiet_pyspark()
    return path


def _quiet_pyspark() -> None:
    """pyspark logs each failed SQL statement with its whole Java stack (hundreds of
    lines); the command reports the failure itself, in one line that says what to do."""
    from pyspark.logger import PySparkLogger

    # made as pyspark makes them: it logs to them with keywords a plain Logger lacks
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _spark_log_path(checkpoint: str | None, config: PipelineConfig) -> str:
    """``<checkpoint>/logs/spark.log`` for a local ``checkpoint`` (probed first, as a run
    writes there: a ConfigError, not an OSError, where it cannot be made), else a file
    named after the pipeline's checkpoint in this user's private temp folder."""
    from pathlib import Path

    from sparkcdc.locations import open_location
    from sparkcdc.spark.python_env import launcher_dir

    if checkpoint is not None and "://" not in checkpoint:
        open_location(checkpoint).probe()
        folder = Path(checkpoint) / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / "spark.log")
    name = "".join(c if c.isalnum() else "_" for c in config.checkpoint.rstrip("/"))[-80:]
    return str(Path(launcher_dir()) / f"spark-{name}.log")


def _log_py4j_to(path: str) -> None:
    """py4j's own log into the JVM's log file, not the console: it logs an exception a
    foreachBatch function raised (a sink's write) with its Python traceback, before the
    query fails with it, and the command reports that failure in one line."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # private, as state
    handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    py4j = logging.getLogger("py4j")
    py4j.addHandler(handler)
    py4j.propagate = False


def _prepare(args: argparse.Namespace) -> int:
    from sparkcdc.spark.prepare import write_class_archive

    conf = None
    if args.file:
        from sparkcdc.pipeline.config import load_pipeline
        from sparkcdc.pipeline.run_plan import pipeline_conf

        conf = pipeline_conf(load_pipeline(args.file))
    path, seconds = write_class_archive(conf, force=args.force)
    if seconds is None:
        print(
            f"the Spark driver's class-data archive is there already: {path} (--force "
            "writes it again)"
        )
    else:
        print(f"the Spark driver's class-data archive: {path} (written in {seconds:.0f} s)")
    return EXIT_OK


def _package(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sparkcdc.cli.package import package_sparkcdc, submit_line
    from sparkcdc.spark.connectors import (
        connector_folder,
        connector_jars,
        line_connectors,
        packages,
    )

    built = package_sparkcdc(Path(args.output))
    print(f"sparkcdc for the executors (spark.submit.pyFiles / --py-files): {built.archive}")
    print(f"spark-submit's primary resource: {built.entry}")
    # a folder of jars if there is one; else the pinned Maven coordinates (--packages)
    jars = connector_jars() if connector_folder() is not None else []
    coordinates = [] if jars else packages(line_connectors())
    print("run a pipeline on a cluster with (the executors' Python needs sparkcdc's")
    print("dependencies installed: pip install the requirements of pyproject.toml):")
    print(f"  sparkcdc run pipeline.yaml --master spark://HOST:7077 --py-files {built.archive}")
    print("or")
    print(f"  {submit_line(built, jars, coordinates)}")
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from sparkcdc.cli.inspect import validate

    return validate(
        args.file, lambda config: _spark_log(config, verbose=args.verbose, beside_checkpoint=False)
    )


def _status(args: argparse.Namespace) -> int:
    from sparkcdc.cli.inspect import status

    return status(args.file, as_json=args.json)


def _cleanup(args: argparse.Namespace) -> int:
    from sparkcdc.cli.inspect import cleanup

    return cleanup(args.file)


def _verify(args: argparse.Namespace) -> int:
    import json

    from sparkcdc.pipeline.config import load_pipeline
    from sparkcdc.pipeline.verify.run import verify_pipeline

    config = load_pipeline(args.file)
    spark_log = None
    if not args.verbose:  # Spark's lines, if verify starts it, to a file of verify's own
        spark_log = _spark_log_path(None, config).removesuffix(".log") + "-verify.log"
        _log_py4j_to(spark_log)
        _quiet_pyspark()
    report = verify_pipeline(
        config, timeout_s=args.timeout, master=args.master, spark_log=spark_log
    )
    if args.json:
        print(json.dumps(report.to_json(args.max_keys), default=str))
    else:
        print(report.text(args.max_keys))
    return EXIT_OK if report.equal else EXIT_FAILURE


EXIT_CODES = """exit codes:
  0  success (verify: every sink table equals its source tables)
  1  verify found differences; or any other failure
  2  bad configuration or usage (the file, a location a run cannot write to)
  3  source problem (unreachable, misconfigured, a purged position)
  4  sink problem (unreachable, refused a write)
  128+N  run stopped by signal N (130: Ctrl-C)"""


def _command(
    sub: Any, name: str, summary: str, examples: Sequence[str], details: str = ""
) -> argparse.ArgumentParser:
    """A subcommand whose --help shows ``summary``, ``details``, its ``examples`` and the
    exit codes."""
    lines = "\n".join(f"  {e}" for e in examples)
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=f"{summary}\n\n{textwrap.fill(details, 78)}" if details else summary,
        epilog=f"example{'s' if len(examples) > 1 else ''}:\n{lines}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


PIPELINE_FILE = (
    "the pipeline YAML file (Flink CDC 3.x shape: source, sink, route, transform, pipeline)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparkcdc",
        description="sparkcdc: change data capture from MySQL / MariaDB into Spark.",
        epilog="examples:\n  sparkcdc validate pipeline.yaml\n  sparkcdc run pipeline.yaml\n"
        f"  sparkcdc status pipeline.yaml\n\n{EXIT_CODES}\n\n"
        "sparkcdc COMMAND --help says more about each command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = _command(
        sub,
        "run",
        "run a pipeline: snapshot, then the binlog (until Ctrl-C, or until caught up)",
        [
            "sparkcdc run pipeline.yaml",
            "sparkcdc run pipeline.yaml --available-now",
            "sparkcdc run pipeline.yaml --master spark://host:7077 --py-files dist/sparkcdc.zip",
        ],
        "Progress goes to the console; Spark's own log to <checkpoint>/logs/spark.log.",
    )
    run.add_argument("file", help=PIPELINE_FILE)
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process everything the source has now (snapshot included), then exit 0",
    )
    run.add_argument(
        "--master",
        default=None,
        help="the Spark master URL (spark://host:7077, yarn, k8s://..., local[n]); default: "
        "pipeline.spark.master, else the one spark-submit configured, else "
        "local[pipeline.parallelism]",
    )
    run.add_argument(
        "--py-files",
        default=None,
        help="comma-separated .zip/.egg/.py files for the executors, added to "
        "spark.submit.pyFiles (sparkcdc package builds sparkcdc's)",
    )
    run.add_argument(
        "--resnapshot",
        action="append",
        metavar="SINK_TABLE",
        help="copy this sink table again from its source tables (a snapshot of them taken "
        "again while the stream goes on), e.g. after it was removed; may be repeated",
    )
    run.set_defaults(func=_run)
    prepare = _command(
        sub,
        "prepare",
        "write this machine's class-data archive: the Spark driver of sparkcdc run starts "
        "seconds sooner",
        ["sparkcdc prepare", "sparkcdc prepare pipeline.yaml --force"],
    )
    prepare.add_argument(
        "file",
        nargs="?",
        default=None,
        help="a pipeline YAML file whose spark.conf (its jars) the archive is for (default: "
        "sparkcdc's connector jars alone)",
    )
    prepare.add_argument(
        "--force", action="store_true", help="write the archive even if it is there already"
    )
    prepare.set_defaults(func=_prepare)
    package = _command(
        sub,
        "package",
        "write sparkcdc as a zip for a Spark cluster's executors, and the script spark-submit runs",
        ["sparkcdc package --output dist"],
    )
    package.add_argument("--output", default="dist", help="the folder to write to (dist)")
    package.set_defaults(func=_package)
    validate = _command(
        sub,
        "validate",
        "check a pipeline file, its source server and the locations it writes to",
        ["sparkcdc validate pipeline.yaml"],
        "Checks the file, the source's connections, grants and binlog settings, the captured "
        "tables, and writes, reads back and deletes a file in each location a run writes to. "
        "Spark starts only to type a transform's projection or filter.",
    )
    validate.add_argument("file", help=PIPELINE_FILE)
    validate.set_defaults(func=_validate)
    status = _command(
        sub,
        "status",
        "show where a pipeline is: phase, chunks, binlog position, lag (from its checkpoint)",
        ["sparkcdc status pipeline.yaml", "sparkcdc status pipeline.yaml --json"],
    )
    status.add_argument("file", help=f"{PIPELINE_FILE}; its checkpoint is read, nothing is written")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=_status)
    cleanup = _command(
        sub,
        "cleanup",
        "drop what the source's server keeps for a pipeline given up (PostgreSQL: its "
        "replication slot and publication)",
        ["sparkcdc cleanup pipeline.yaml"],
        "A PostgreSQL replication slot keeps the WAL its reader has not confirmed for as long "
        "as it exists: a pipeline deleted with its checkpoint leaves it behind. This drops the "
        "slot (refused while a reader streams it) and the publication if sparkcdc created it "
        "and no other slot may read through it. Refused while the pipeline's checkpoint holds "
        "committed batches: the stream could not go on without its slot.",
    )
    cleanup.add_argument("file", help=f"{PIPELINE_FILE}; the one its pipeline ran with")
    cleanup.set_defaults(func=_cleanup)
    verify = _command(
        sub,
        "verify",
        "compare every sink table with its source tables (exit 1 if they differ)",
        ["sparkcdc verify pipeline.yaml", "sparkcdc verify pipeline.yaml --json --timeout 600"],
    )
    verify.add_argument("file", help=f"{PIPELINE_FILE}; the one its pipeline runs with")
    verify.add_argument("--json", action="store_true", help="print one JSON document")
    verify.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the pipeline to pass the source position (default 300)",
    )
    verify.add_argument(
        "--max-keys", type=int, default=20, help="keys shown per kind of difference"
    )
    verify.add_argument(
        "--master",
        default=None,
        help="the Spark master verify uses where it needs Spark (a transform in Spark SQL, "
        "a sink it cannot read without it); default local[n], never the pipeline's: a "
        "running pipeline holds its cluster's cores",
    )
    verify.set_defaults(func=_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        code: int = args.func(args)
        return code
    except ConfigError as exc:
        print(f"sparkcdc: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SourceError as exc:
        print(f"sparkcdc: source error: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except SinkError as exc:
        print(f"sparkcdc: sink error: {exc}", file=sys.stderr)
        return EXIT_SINK
    except SparkCdcError as exc:
        print(f"sparkcdc: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:  # a file or a connection sparkcdc's own checks did not foresee
        print(f"sparkcdc: {exc} (-v logs the details)", file=sys.stderr)
        if args.verbose:
            logging.getLogger("sparkcdc").debug("the failure", exc_info=True)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
