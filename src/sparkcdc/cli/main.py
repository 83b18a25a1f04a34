"""The ``sparkcdc`` command line.

    sparkcdc run FILE [--available-now] [--master URL] [--py-files ZIP]
                                          run a pipeline (until Ctrl-C, or until caught up)
    sparkcdc validate FILE                check the file and the source server
    sparkcdc status FILE                  phase, tables, chunks, positions, lag, last batch
    sparkcdc verify FILE [--json]         compare every sink table with its source tables
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
import tempfile
from collections.abc import Sequence

from sparkcdc.errors import ConfigError, SinkError, SourceError, SparkCdcError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_SOURCE = 3
EXIT_SINK = 4


def _run(args: argparse.Namespace) -> int:
    from sparkcdc.pipeline.config import load_pipeline
    from sparkcdc.pipeline.runner import run_pipeline

    config = load_pipeline(args.file)
    spark_log = None if args.verbose else _spark_log(config.checkpoint)
    if spark_log is not None:
        logging.getLogger("sparkcdc").info("Spark's own log: %s", spark_log)
        _log_py4j_to(spark_log)
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


def _spark_log(checkpoint: str) -> str:
    """Where a run's JVM logs go: beside its checkpoint when that is a local directory."""
    from pathlib import Path

    if "://" in checkpoint:
        name = "".join(c if c.isalnum() else "_" for c in checkpoint.rstrip("/"))[-80:]
        return str(Path(tempfile.gettempdir()) / f"sparkcdc-{name}.log")
    folder = Path(checkpoint) / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / "spark.log")


def _prepare(args: argparse.Namespace) -> int:
    from sparkcdc.spark.prepare import write_class_archive

    conf = None
    if args.file:
        from sparkcdc.pipeline.config import load_pipeline
        from sparkcdc.pipeline.runner import pipeline_conf

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
    from sparkcdc.spark.connectors import line_connectors, packages
    from sparkcdc.spark.session import connector_folder, connector_jars

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

    return validate(args.file)


def _status(args: argparse.Namespace) -> int:
    from sparkcdc.cli.inspect import status

    return status(args.file, as_json=args.json)


def _verify(args: argparse.Namespace) -> int:
    import json

    from sparkcdc.pipeline.config import load_pipeline
    from sparkcdc.pipeline.verify import verify_pipeline

    report = verify_pipeline(load_pipeline(args.file), timeout_s=args.timeout)
    if args.json:
        print(json.dumps(report.to_json(args.max_keys), default=str))
    else:
        print(report.text(args.max_keys))
    return EXIT_OK if report.equal else EXIT_FAILURE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkcdc", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline YAML file")
    run.add_argument("file", help="pipeline YAML (Flink CDC 3.x shape)")
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
        "spark.submit.pyFiles (`sparkcdc package` builds sparkcdc's)",
    )
    run.set_defaults(func=_run)
    prepare = sub.add_parser(
        "prepare",
        help="write this machine's class-data archive: the Spark driver of `sparkcdc run` "
        "starts seconds sooner",
    )
    prepare.add_argument(
        "file",
        nargs="?",
        default=None,
        help="a pipeline YAML whose spark.conf (its jars) the archive is for (default: "
        "sparkcdc's connector jars alone)",
    )
    prepare.add_argument(
        "--force", action="store_true", help="write the archive even if it is there already"
    )
    prepare.set_defaults(func=_prepare)
    package = sub.add_parser(
        "package",
        help="write sparkcdc as a zip for a Spark cluster's executors, and the script "
        "spark-submit runs",
    )
    package.add_argument("--output", default="dist", help="the folder to write to (dist)")
    package.set_defaults(func=_package)
    validate = sub.add_parser("validate", help="check a pipeline file and its source server")
    validate.add_argument("file")
    validate.set_defaults(func=_validate)
    status = sub.add_parser("status", help="show where a pipeline is (from its checkpoint)")
    status.add_argument("file")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=_status)
    verify = sub.add_parser(
        "verify", help="compare every sink table with its source tables (exit 1 if they differ)"
    )
    verify.add_argument("file")
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
    if not args.verbose:
        # pyspark logs each failed SQL statement with its whole Java stack (hundreds of
        # lines); the command reports the failure itself, in one line that says what to do
        # (made as pyspark makes them: it logs to them with keywords a plain Logger lacks)
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
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


if __name__ == "__main__":
    sys.exit(main())
