"""One place that sets up a SparkSession the way sparkcdc needs it.

Spark starts Python workers with ``PYSPARK_PYTHON``; unless it names the
interpreter that has sparkcdc installed, workers fail ("Python worker failed to
connect back") or cannot import the source. We point it at ``sys.executable``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sparkcdc.errors import ConfigError
from sparkcdc.files import ensure_private_dir, open_private

_DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    # Arrow batches from the Python source go straight into Spark
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    # workers without Spark's zips and jar on sys.path (70 ms a task; see worker_daemon)
    "spark.python.daemon.module": "sparkcdc.spark.worker_daemon",
    # connectorx allocates from many threads: glibc's per-thread arenas grew a snapshot
    # worker to ~180 MB of freed-but-kept memory; two arenas keep it near 110 MB, as fast
    "spark.executorEnv.MALLOC_ARENA_MAX": "2",
}


# the JVM's logging when spark_session(log_file=...): everything to that file, nothing on the
# console (the command line says what happens, in its own words)
_LOG_CONFIG = Path(__file__).with_name("log4j2-file.properties")

# Delta and Iceberg SQL (MERGE INTO, ALTER TABLE) need their session extensions; Delta's
# catalog serves `delta.`/path/`` tables and plain tables stored as Delta.
_CONNECTOR_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension,"
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # local mode: rebuild a Delta snapshot in a few tasks, not 50
    "spark.databricks.delta.snapshotPartitions": "2",
}


def driver_memory() -> str:
    """The driver's heap: a quarter of this machine's memory, at least 2g, at most 8g.

    In local mode the driver JVM runs every task too. A batch holds its rows in the heap
    (cached, shuffled, serialized for a sink): a batch of a few rows of 20 MB values needs
    ~1.6 GB, and a task's ``OutOfMemoryError`` ends the whole JVM. Spark's own default (1g)
    is too small for that; a quarter of the machine leaves the rest to Python workers and
    the page cache. ``spark.driver.memory`` in the session's conf overrides it.
    """
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX
        return "2g"
    gib = physical // 4 >> 30
    return f"{min(8, max(2, gib))}g"


def connector_jars() -> list[str]:
    """The pinned connector jars (Delta, Iceberg, Kafka, JDBC drivers) in ``jars/lib``.

    ``SPARKCDC_JARS_DIR`` overrides the folder; by default it is the project's ``jars/lib``,
    filled by ``bash scripts/fetch_jars.sh`` (which ``scripts/setup.sh`` runs).
    """
    folder = os.environ.get("SPARKCDC_JARS_DIR") or str(
        Path(__file__).resolve().parents[3] / "jars" / "lib"
    )
    jars = sorted(str(p) for p in Path(folder).glob("*.jar"))
    if not jars:
        raise ConfigError(
            f"no connector jars in {folder}: run `bash scripts/fetch_jars.sh` (part of "
            "scripts/setup.sh) to fetch the pinned Delta / Iceberg / Kafka jars, or point "
            "SPARKCDC_JARS_DIR at a folder that has them"
        )
    return jars


def ensure_python_env(master: str = "local") -> None:
    """Make Spark's Python workers use this interpreter (set once, before the JVM starts)."""
    launcher = _local_launcher() if master.startswith("local") else None
    os.environ["PYSPARK_PYTHON"] = launcher or sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # the workers import sparkcdc from wherever this process does
    paths = [p for p in sys.path if p]
    existing = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, existing] if existing else paths)


def _local_launcher() -> str | None:
    """A script that runs this interpreter without Spark's copies of pyspark and py4j.

    Spark starts Python processes with its ``pyspark.zip``, ``py4j-*-src.zip`` and
    ``spark-core`` jar first on ``PYTHONPATH``. Modules imported from a zip are compiled
    again in every process (no bytecode cache): the Python process that serves a streaming
    source's offsets takes ~0.6 s longer to start, at every query start. A pip-installed
    pyspark has the same code, of the same version, installed beside them; this launcher
    runs the interpreter through ``sparkcdc.spark.launch``, which drops those archives
    (``spark/archives.py``, the one implementation) before anything is
    imported from them. Local masters only: the script is a file on this machine. None
    when pyspark or py4j is not installed as plain packages, or no file can be written.
    """
    import hashlib
    import importlib.util

    import pyspark

    home = Path(pyspark.__file__).parent
    lib = home / "python" / "lib"
    specs = [importlib.util.find_spec(name) for name in ("pyspark", "py4j")]
    if (
        os.name != "posix"
        or any("'" in str(part) for part in (home, sys.executable))  # not worth quoting
        or not (lib / "pyspark.zip").is_file()
        or not all(
            spec is not None and spec.origin and Path(spec.origin).is_file() for spec in specs
        )
    ):
        return None
    script = f"""#!/bin/sh
# written by sparkcdc (spark/session.py): {sys.executable} without Spark's archives
exec '{sys.executable}' -m sparkcdc.spark.launch "$@"
"""
    # the script in the name too: sparkcdc versions whose launchers differ (worktrees of
    # one user, an upgrade while a query runs) never rewrite each other's
    digest = hashlib.sha256(f"{sys.executable}\0{home}\0{script}".encode()).hexdigest()[:16]
    try:
        # a predictable name under a shared /tmp: refuse a directory another user could write
        folder = Path(launcher_dir())
        path = folder / f"python-{digest}"
        if not path.is_file() or path.read_text() != script:
            temp = path.with_suffix(f".{os.getpid()}")
            with os.fdopen(open_private(temp, exclusive=False), "w") as out:
                out.write(script)
            temp.chmod(0o700)
            temp.replace(path)
    except OSError:
        return None
    return str(path)


def launcher_dir() -> str:
    """``<tmp>/sparkcdc-<uid>``: made 0700, or checked to be this user's alone.

    Raises PrivateDirectoryError when it exists and is not (owned by another user, writable
    by group or others, a symbolic link).
    """
    import tempfile

    folder = Path(tempfile.gettempdir()) / f"sparkcdc-{os.getuid()}"
    return ensure_private_dir(folder, "the Python launcher Spark runs")


def spark_session(
    app_name: str = "sparkcdc",
    master: str = "local[2]",
    *,
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    connectors: bool = False,
    log_file: str | None = None,
) -> SparkSession:
    """A SparkSession with the mysql-cdc source registered.

    With ``connectors=True`` the pinned connector jars are on its classpath and the Delta
    and Iceberg SQL extensions are on (what the pipeline sinks need). With ``log_file``,
    a JVM this call starts logs (warnings and errors, stacks included) to that file and
    nothing to the console (``log4j2-file.properties`` beside this module).

    >>> spark = spark_session("demo", conf={"spark.sql.shuffle.partitions": "2"})  # doctest: +SKIP
    """
    ensure_python_env(master)
    builder = SparkSession.builder.appName(app_name).master(master)
    if connectors:
        jars = [*connector_jars(), *jars]
        conf = {**_CONNECTOR_CONF, **(conf or {})}
    defaults = {**_DEFAULT_CONF, "spark.driver.memory": driver_memory()}
    settings = {**defaults, **(conf or {})}
    if log_file is not None:
        settings["spark.driver.extraJavaOptions"] = " ".join(
            o
            for o in (
                settings.get("spark.driver.extraJavaOptions"),
                f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}",
                f"-Dsparkcdc.log.file={Path(log_file).absolute()}",
            )
            if o
        )
    for key, value in settings.items():
        builder = builder.config(key, value)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
        settings["spark.jars"] = ",".join(jars)
    _start_jvm({**settings, "spark.master": master, "spark.app.name": app_name})
    spark = builder.getOrCreate()
    # Streaming threads inherit the JVM's thread-local active session from the thread
    # that starts the query; make sure it is set there (py4j threads may lack it).
    jvm = spark._jvm
    assert jvm is not None  # a classic (non-Connect) session has a JVM
    jvm_session = jvm.org.apache.spark.sql.SparkSession
    jvm_session.setActiveSession(spark._jsparkSession)
    jvm_session.setDefaultSession(spark._jsparkSession)
    register(spark)
    return spark


# What the JVM prints to stderr that no setting turns off: Spark's launcher always adds
# `--add-modules=jdk.incubator.vector` (JavaModuleOptions), and Java then warns on every start
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


def _start_jvm(settings: Mapping[str, str]) -> None:
    """Start Spark's JVM (as pyspark would) with its stderr read by a thread that passes
    every line on to ours except ``_JVM_NOISE``; nothing when a JVM runs already or
    pyspark is told to attach to one (``PYSPARK_GATEWAY_PORT``)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    stream = gateway.proc.stderr

    def forward() -> None:
        for line in iter(stream.readline, b""):
            if not line.startswith(_JVM_NOISE):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()

    threading.Thread(target=forward, name="sparkcdc-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def register(spark: Any) -> None:
    """Register ``format("mysql-cdc")`` on ``spark``.

    Python data sources cannot see their session, so the class registered is a subclass
    made here that carries the session's default parallelism (cloudpickle ships a class
    made in a function by value, attributes included): snapshot chunks are spread over
    that many tasks (``scan.incremental.snapshot.chunks-per-partition``).
    """
    from pyspark.errors import PySparkException

    from sparkcdc.spark.source import MySqlCdcDataSource

    parallelism: int | None
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except (AttributeError, PySparkException):  # Spark Connect: no SparkContext, CPU count
        parallelism = None

    class SessionMySqlCdcDataSource(MySqlCdcDataSource):
        default_parallelism = parallelism
        __doc__ = MySqlCdcDataSource.__doc__

    spark.dataSource.register(SessionMySqlCdcDataSource)
