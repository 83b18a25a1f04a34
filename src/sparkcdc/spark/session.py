"""One place that sets up a SparkSession the way sparkcdc needs it.

Spark starts Python workers with ``PYSPARK_PYTHON``; unless it names the
interpreter that has sparkcdc installed, workers fail ("Python worker failed to
connect back") or cannot import the source. On a local master (``local``,
``local[n]``, ``local-cluster[...]``) the workers run on this machine, so we point it
at this interpreter (through a launcher that drops Spark's archives) and start them
with sparkcdc's worker daemon. On any other master the executors run their own Python:
``PYSPARK_PYTHON`` if the user set it, else Spark's default, with sparkcdc installed
there or shipped with ``spark.submit.pyFiles`` (``sparkcdc package`` builds the zip).

What the user set is never overwritten: ``PYSPARK_PYTHON``, and the Spark settings that
hold lists (``spark.jars``, ``spark.jars.packages``, ``spark.submit.pyFiles``, the extra
class paths, ``spark.sql.extensions``) get sparkcdc's entries after the user's.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from sparkcdc.errors import ConfigError, SparkMasterError
from sparkcdc.files import ensure_private_dir, open_private
from sparkcdc.spark.compat import SPARK_LINE
from sparkcdc.spark.connectors import (
    EXCLUDES,
    LINES,
    class_path_jars,
    has_connector,
    jars_folder,
    missing,
    packages,
)

log = logging.getLogger(__name__)

# the master of a session when nothing chose one (no argument, none configured)
DEFAULT_MASTER = "local[2]"
# a standalone master's port when its URL names none (Spark's own default)
STANDALONE_PORT = 7077

_DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    # Arrow batches from the Python source go straight into Spark
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    # connectorx allocates from many threads: glibc's per-thread arenas grew a snapshot
    # worker to ~180 MB of freed-but-kept memory; two arenas keep it near 110 MB, as fast
    "spark.executorEnv.MALLOC_ARENA_MAX": "2",
}

_DAEMON_MODULE = "spark.python.daemon.module"
# local masters: workers without Spark's zips and jar on sys.path (70 ms a task; see
# worker_daemon). Elsewhere Spark's own daemon, named explicitly: a JVM this process
# started earlier for a local session keeps ours in its system properties
_LOCAL_DAEMON = "sparkcdc.spark.worker_daemon"
_SPARK_DAEMON = "pyspark.daemon"

# Settings that hold lists: what the user gave (already configured, e.g. by spark-submit,
# then the session's conf), then sparkcdc's entries, each once. Jars count as the same
# when their file names are (a user's copy of a connector jar is not added twice).
_LIST_SEPARATORS = {
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.jars.excludes": ",",
    "spark.submit.pyFiles": ",",
    "spark.sql.extensions": ",",
    "spark.driver.extraClassPath": os.pathsep,
    "spark.executor.extraClassPath": os.pathsep,
}


# the JVM's logging when spark_session(log_file=...): everything to that file, nothing on the
# console (the command line says what happens, in its own words)
_LOG_CONFIG = Path(__file__).with_name("log4j2-file.properties")


# how Spark resolves the connectors' coordinates, unless the user gave settings of their own
_IVY_SETTINGS = "spark.jars.ivySettings"
_IVY_SETTINGS_FILE = Path(__file__).with_name("ivysettings.xml")

# Delta and Iceberg SQL (MERGE INTO, ALTER TABLE) need their session extensions; Delta's
# catalog serves `delta.`/path/`` tables and plain tables stored as Delta.
_CONNECTOR_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # local mode: rebuild a Delta snapshot in a few tasks, not 50
    "spark.databricks.delta.snapshotPartitions": "2",
}
# added where the connector jars have Iceberg's runtime (not every Spark line: jars/pom.xml)
_ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_ICEBERG_RUNTIME = "iceberg-spark-runtime"


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


def connector_folder() -> Path | None:
    """The folder of jars that serves every connector, if there is one
    (``sparkcdc.spark.connectors.jars_folder``)."""
    return jars_folder()


def connector_jars() -> list[str]:
    """The jars of the connector folder (``SPARKCDC_JARS_DIR``, or a development checkout's
    ``jars/lib/spark-<line>``). Without one, sessions ask Spark for the pinned Maven
    coordinates instead (``spark.jars.packages``) and this raises ConfigError."""
    folder = connector_folder()
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder is not None else []
    if not jars:
        where = f"no jars in SPARKCDC_JARS_DIR ({folder})" if folder else "no folder of jars"
        raise ConfigError(
            f"connector jars for Spark {SPARK_LINE}: {where}. Point SPARKCDC_JARS_DIR at a "
            "folder that has the Delta / Iceberg / Kafka jars, or unset it: sparkcdc's "
            "sessions then have Spark fetch them from Maven Central (spark.jars.packages; "
            "`sparkcdc package` prints them for spark-submit --packages)"
        )
    return jars


def has_iceberg_runtime(jars: Sequence[str] | None = None) -> bool:
    """Whether ``jars`` (default: the connector folder's, else the pinned coordinates of
    this Spark line) hold Iceberg's Spark runtime."""
    if jars is None:
        if connector_folder() is None:
            return has_connector("iceberg")
        jars = connector_jars()
    return any(Path(j).name.startswith(_ICEBERG_RUNTIME) for j in jars)


def require_iceberg_runtime() -> None:
    """Stop with what to do where Iceberg has no runtime for this Spark line (4.2)."""
    if not has_iceberg_runtime():
        folder = connector_folder()
        where = f"among the connector jars in {folder}" if folder else "available"
        raise ConfigError(
            f"sink.type iceberg: Iceberg's Spark runtime is not {where} for Spark "
            f"{SPARK_LINE}: Iceberg publishes no iceberg-spark-runtime-{SPARK_LINE} yet, and "
            "its 4.1 runtime does not load on Spark 4.2. Run Iceberg pipelines on PySpark "
            "4.1: `pip install 'pyspark>=4.1.4,<4.2'` (docs: Spark lines)"
        )


def is_one_jvm_master(master: str) -> bool:
    """True for masters whose executor is the driver's own JVM (``local``, ``local[n]``;
    ``local-cluster`` starts executor JVMs of its own).

    >>> is_one_jvm_master("local[*]"), is_one_jvm_master("local-cluster[2,1,1024]")
    (True, False)
    """
    return master == "local" or master.startswith("local[")


def is_local_master(master: str) -> bool:
    """True for masters whose executors run on this machine, beside the driver.

    >>> is_local_master("local[4]"), is_local_master("spark://10.0.0.5:7077")
    (True, False)
    """
    return is_one_jvm_master(master) or master.startswith("local-cluster[")


# the PYSPARK_PYTHON values this process set itself (any other value is the user's)
_OWN_PYTHON: set[str] = set()


def python_environ(master: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    """The environment variables to set (None: to remove) so that ``master``'s Python
    workers can run sparkcdc, given the environment ``environ`` as it is.

    ``PYSPARK_DRIVER_PYTHON``, unless the user set it, is this interpreter (through the
    launcher when one can be written: the driver is this machine). Local masters:
    ``PYSPARK_PYTHON`` is this interpreter (through the launcher when one can be written)
    unless the user set it, and ``PYTHONPATH`` has this process's ``sys.path`` (the workers
    are this machine's processes). Other masters: nothing of this machine is named for
    the executors; a value this process set earlier for a local session goes.
    """
    users = environ.get("PYSPARK_PYTHON")
    if users in _OWN_PYTHON:
        users = None
    changes: dict[str, str | None] = {}
    if "PYSPARK_DRIVER_PYTHON" not in environ:
        # the JVM starts its lookup of Python data sources with it, on this machine, at
        # every session start: through the launcher, ~0.6 s sooner (no zip to compile)
        changes["PYSPARK_DRIVER_PYTHON"] = _local_launcher() or sys.executable
    if not is_local_master(master):
        if users is None and "PYSPARK_PYTHON" in environ:
            changes["PYSPARK_PYTHON"] = None
        return changes
    if users is None:
        changes["PYSPARK_PYTHON"] = _local_launcher() or sys.executable
    # the workers import sparkcdc from wherever this process does
    paths = [p for p in sys.path if p]
    existing = environ.get("PYTHONPATH", "")
    changes["PYTHONPATH"] = os.pathsep.join([*paths, existing] if existing else paths)
    return changes


def ensure_python_env(master: str = "local") -> None:
    """Make ``master``'s Python workers able to run sparkcdc (before the JVM starts)."""
    for name, value in python_environ(master, os.environ).items():
        if value is None:
            os.environ.pop(name, None)
            continue
        os.environ[name] = value
        if name == "PYSPARK_PYTHON":
            _OWN_PYTHON.add(value)


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


@dataclass(frozen=True)
class SessionPlan:
    """The settings a new session is built with, worked out before anything starts."""

    master: str
    settings: dict[str, str]  # every Spark setting given to the builder (and a new JVM)


def list_entries(key: str, value: str | None) -> list[str]:
    """The entries of a list setting ``key`` (one of ``_LIST_SEPARATORS``), as written.

    >>> list_entries("spark.jars", " /a.jar, file:/b.jar,")
    ['/a.jar', 'file:/b.jar']
    """
    if not value:
        return []
    return [e.strip() for e in value.split(_LIST_SEPARATORS[key]) if e.strip()]


def _same_entry(key: str, entry: str) -> str:
    """What makes two entries of ``key`` the same: a jar's file name, else the text."""
    if key == "spark.jars":
        return entry.rstrip("/").rsplit("/", 1)[-1]
    return entry


def merge_list_setting(key: str, *values: str | None) -> str | None:
    """The entries of ``values`` (the user's first), each once, as one ``key`` value.

    >>> merge_list_setting("spark.jars", "/opt/s3/hadoop-aws.jar", "/lib/delta.jar")
    '/opt/s3/hadoop-aws.jar,/lib/delta.jar'
    >>> merge_list_setting("spark.jars", "file:/u/delta.jar", "/lib/delta.jar,/lib/k.jar")
    'file:/u/delta.jar,/lib/k.jar'
    """
    seen: set[str] = set()
    merged: list[str] = []
    for value in values:
        for entry in list_entries(key, value):
            if _same_entry(key, entry) not in seen:
                seen.add(_same_entry(key, entry))
                merged.append(entry)
    return _LIST_SEPARATORS[key].join(merged) if merged else None


def _connector_names(connectors: bool | Collection[str]) -> tuple[str, ...]:
    if connectors is True:  # every connector this Spark line has
        return tuple(dict.fromkeys(name for line in LINES.values() for name in line))
    if connectors is False:
        return ()
    return tuple(connectors)


def plan_session(
    app_name: str,
    master: str | None,
    *,
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    connectors: bool | Collection[str] = False,
    log_file: str | None = None,
    configured: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
    starts_jvm: bool = True,
    spark_home: Path | None = None,
    loadable: Callable[[str], bool] | None = None,
) -> SessionPlan:
    """The master and settings of a session (pure: nothing starts, nothing is written).

    ``master``: None takes ``conf``'s ``spark.master``, else the one ``configured`` has
    (the settings of a JVM this process runs under, as spark-submit starts it), else the
    ``SPARK_MASTER`` variable of ``environ``, else ``DEFAULT_MASTER``. ``configured``
    settings are the user's: sparkcdc's defaults (``defaults``, the caller's, among them)
    never replace them; ``conf`` does.

    ``connectors``: the connectors named (``sparkcdc.spark.connectors``: "delta", "kafka",
    ...; True: every one pinned for this Spark line) and the Delta / Iceberg SQL extensions
    of those named. From a folder of jars if there is one (``connector_folder``), else those
    not on the class path already (``spark_home``'s jars, ``spark.jars``, the extra class
    path; in a JVM that runs already, ``loadable`` classes) by their Maven coordinates
    (``spark.jars.packages``, resolved by Spark when the JVM starts). A folder's jars go in
    ``spark.jars``, which ships them to the executors; but where this process is yet to
    start the JVM (``starts_jvm``, and no spark-submit started one) on a master whose
    executor is that JVM (``local``, ``local[n]``), they go on its class path
    (``spark.driver.extraClassPath``) instead: a local executor fetches every jar of
    ``spark.jars`` when it starts, a copy and a ``chmod`` process each (Hadoop's, without
    its native library), ~1 s of every run's start here for the 52 jars; on the class path
    the JVM reads them where they are, and the class-data archive holds their classes.

    >>> plan = plan_session("a", "spark://h:7077", configured={}, environ={})
    >>> plan.master, plan.settings["spark.python.daemon.module"]
    ('spark://h:7077', 'pyspark.daemon')
    """
    conf = dict(conf or {})
    configured = configured or {}
    environ = os.environ if environ is None else environ
    chosen = (
        master
        or conf.get("spark.master")
        or configured.get("spark.master")
        or environ.get("SPARK_MASTER")
        or DEFAULT_MASTER
    )
    base = {
        **_DEFAULT_CONF,
        **(defaults or {}),
        "spark.driver.memory": driver_memory(),
        _DAEMON_MODULE: _LOCAL_DAEMON if is_local_master(chosen) else _SPARK_DAEMON,
    }
    needs = _connector_names(connectors)
    if "delta" in needs:
        base.update(_CONNECTOR_CONF)
    settings = {k: v for k, v in base.items() if k not in configured}
    settings.update(conf)
    # lists: the user's entries (configured, then conf), then sparkcdc's
    folder = connector_folder() if needs else None
    pinned = connector_jars() if folder is not None else []
    fetched: list[str] = []
    if needs and folder is None:
        present = class_path_jars(spark_home, {**configured, **conf}, _LIST_SEPARATORS)
        fetched = packages(missing(needs, present, loadable=loadable))
    extensions = [_CONNECTOR_CONF["spark.sql.extensions"]] if "delta" in needs else []
    if "iceberg" in needs and (has_iceberg_runtime(pinned) if folder else has_connector("iceberg")):
        extensions.append(_ICEBERG_EXTENSIONS)
    on_class_path = (
        starts_jvm and is_one_jvm_master(chosen) and "PYSPARK_GATEWAY_PORT" not in environ
    )
    ours = {
        "spark.jars": ",".join([*([] if on_class_path else pinned), *jars]),
        "spark.driver.extraClassPath": os.pathsep.join(pinned) if on_class_path else None,
        "spark.sql.extensions": ",".join(extensions),
        "spark.jars.packages": ",".join(fetched),
        "spark.jars.excludes": ",".join(EXCLUDES) if fetched else None,
    }
    if fetched and not (conf.get(_IVY_SETTINGS) or configured.get(_IVY_SETTINGS)):
        settings[_IVY_SETTINGS] = str(_IVY_SETTINGS_FILE)
    for key in _LIST_SEPARATORS:
        merged = merge_list_setting(key, configured.get(key), conf.get(key), ours.get(key))
        if merged is not None:
            settings[key] = merged
    if log_file is not None:
        key = "spark.driver.extraJavaOptions"
        settings[key] = " ".join(
            o
            for o in (
                settings.get(key) or configured.get(key),
                f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}",
                f"-Dsparkcdc.log.file={Path(log_file).absolute()}",
            )
            if o
        )
    settings["spark.master"] = chosen
    settings["spark.app.name"] = app_name
    return SessionPlan(chosen, settings)


def configured_conf() -> dict[str, str]:
    """The settings of the Spark driver JVM this process runs under: the one spark-submit
    (or the pyspark shell) started and names in ``PYSPARK_GATEWAY_PORT``, or a running
    session's. Empty when there is none (or only a JVM this process started itself,
    whose settings were sparkcdc's)."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return dict(active.getConf().getAll())
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def configured_master() -> str | None:
    """The master already chosen outside sparkcdc: spark-submit's (``--master``, or
    ``spark.master`` in its conf or ``spark-defaults.conf``), else ``SPARK_MASTER``."""
    return configured_conf().get("spark.master") or os.environ.get("SPARK_MASTER") or None


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs a master URL names where a TCP connection tells whether it
    is up: standalone masters (``spark://h1:p1,h2:p2``) and Kubernetes API servers
    (``k8s://https://h:p``). Empty for local masters, ``yarn`` and anything else.

    >>> master_endpoints("spark://a:7077,b")
    [('a', 7077), ('b', 7077)]
    >>> master_endpoints("k8s://https://api.example:6443")
    [('api.example', 6443)]
    """
    if master.startswith("spark://"):
        found = []
        for part in master[len("spark://") :].split(","):
            url = urlsplit(f"//{part.strip()}")
            if url.hostname:
                found.append((url.hostname, url.port or STANDALONE_PORT))
        return found
    if master.startswith("k8s://"):
        inner = master[len("k8s://") :]
        url = urlsplit(inner if "://" in inner else f"https://{inner}")
        if url.hostname:
            return [(url.hostname, url.port or (80 if url.scheme == "http" else 443))]
    return []


def _shown(master: str) -> str:
    """``master`` without user:password (a Kubernetes URL may carry them)."""
    scheme, sep, rest = master.partition("://")
    if not sep:
        return master
    inner = rest.partition("://")
    if inner[1]:  # k8s://https://user:pw@host
        return f"{scheme}://{inner[0]}://{_shown_host(inner[2])}"
    return f"{scheme}://{','.join(_shown_host(p) for p in rest.split(','))}"


def _shown_host(part: str) -> str:
    return part.rpartition("@")[2]


def connect_request(
    master: str, settings: Mapping[str, str], environ: Mapping[str, str]
) -> str | None:
    """What asks for a Spark Connect session instead of a classic one, shown without
    credentials (an ``sc://`` URL's parameters may hold a token), or None: a master
    ``sc://...``, ``spark.remote``, ``spark.api.mode=connect`` (Spark 4: a local Connect
    server) or the ``SPARK_REMOTE`` variable.

    >>> connect_request("local[2]", {}, {"SPARK_REMOTE": "sc://h:15002/;token=x"})
    'SPARK_REMOTE=sc://h:15002'
    >>> connect_request("local[2]", {"spark.api.mode": "classic"}, {}) is None
    True
    """
    if master.startswith("sc://"):
        return f"the master {_shown_remote(master)}"
    if settings.get("spark.remote"):
        return f"spark.remote={_shown_remote(settings['spark.remote'])}"
    if settings.get("spark.api.mode", "classic").strip().lower() == "connect":
        return "spark.api.mode=connect"
    if environ.get("SPARK_REMOTE"):
        return f"SPARK_REMOTE={_shown_remote(environ['SPARK_REMOTE'])}"
    return None


def _shown_remote(url: str) -> str:
    """A Spark Connect URL as ``sc://host:port`` (its ``/;key=value`` parameters, which
    may hold a token, and any user part left out)."""
    if "://" not in url:
        return url  # "local[2]": Spark starts a Connect server of its own
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}" if parts.scheme and host else "a Spark Connect URL"


def connect_refusal(received: str) -> ConfigError:
    """The error of a Spark Connect session where sparkcdc needs a classic one
    (``received`` says what asked for it); DESIGN.md "Spark Connect" says why."""
    return ConfigError(
        f"{received}, but sparkcdc needs a classic one: a pipeline drives its sinks, its "
        "checkpoint lease and its location checks through the Spark driver's JVM, which a "
        "Connect client cannot reach. Unset it and run sparkcdc where a Spark driver may "
        "run, with --master (or pipeline.spark.master) naming the cluster; a Connect session "
        'reads the source itself: sparkcdc.register(spark), then spark.readStream.format("'
        'mysql-cdc") (docs/connect.md)'
    )


def is_connect_session(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Raise SparkMasterError when no endpoint of ``master`` accepts a TCP connection.

    A standalone client that cannot register keeps trying for a minute and then leaves
    the session without executors; this says at once what is wrong and what to do."""
    endpoints = master_endpoints(master)
    failures = []
    for host, port in endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc.strerror or exc}")
    if endpoints:
        raise SparkMasterError(
            f"the Spark master {_shown(master)} cannot be reached ({'; '.join(failures)}); "
            "start it (a standalone master: $SPARK_HOME/sbin/start-master.sh, port 7077 by "
            "default), or correct `sparkcdc run --master` / pipeline.spark.master (or "
            "spark-submit's --master); `--master local[2]` runs on this machine"
        )


def spark_home() -> Path | None:
    """The Spark a JVM started from here runs: ``SPARK_HOME``, else pyspark's own."""
    from pyspark.find_spark_home import _find_spark_home

    try:
        return Path(_find_spark_home())
    except (Exception, SystemExit):  # pyspark exits when it finds none: no jars known there
        return None


def _jvm_loads(name: str) -> bool:
    """Whether the running JVM (spark-submit's, a platform's, this process's) loads class
    ``name``: a connector its platform ships under a jar name of its own counts as there."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    jvm = SparkContext._jvm
    assert jvm is not None
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
    except Py4JError:
        return False
    return True


def _new_entries(key: str, settings: Mapping[str, str], configured: Mapping[str, str]) -> list[str]:
    """The entries of list setting ``key`` in ``settings`` that ``configured`` lacks."""
    have = set(list_entries(key, configured.get(key)))
    return [e for e in list_entries(key, settings.get(key)) if e not in have]


def _warn_jars_not_on_driver(
    wanted: str | None, configured: Mapping[str, str], packages: Sequence[str] = ()
) -> None:
    """The driver JVM runs already (spark-submit's, or a session's of this process): jars
    it was not started with reach the executors (``spark.jars``) but not the driver's class
    path, and Maven coordinates are not resolved at all. Say which and how."""
    if packages:
        log.warning(
            "the Spark driver JVM runs already without sparkcdc's connectors %s: the sinks "
            "that need them fail; start it with them: spark-submit --packages %s "
            "(`sparkcdc package` prints the whole line)",
            ", ".join(packages),
            ",".join(packages),
        )
        return
    have = {
        _same_entry("spark.jars", e)
        for e in list_entries("spark.jars", configured.get("spark.jars"))
    }
    missing = [
        e for e in list_entries("spark.jars", wanted) if _same_entry("spark.jars", e) not in have
    ]
    if missing:
        log.warning(
            "the driver JVM was started (by spark-submit) without %d of sparkcdc's connector "
            "jars (%s): the Delta / Iceberg / Kafka sinks fail on the driver without them; "
            "give spark-submit --jars with them (`sparkcdc package` prints the line)",
            len(missing),
            ", ".join(_same_entry("spark.jars", e) for e in missing[:3])
            + (", ..." if len(missing) > 3 else ""),
        )


def spark_session(
    app_name: str = "sparkcdc",
    master: str | None = None,
    *,
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    connectors: bool | Collection[str] = False,
    log_file: str | None = None,
    defaults: Mapping[str, str] | None = None,
    pipeline_driver: bool = False,
    available_now: bool = False,
) -> SparkSession:
    """A SparkSession with the mysql-cdc source registered.

    ``master``: any Spark master URL; None takes the one already configured (spark-submit's,
    ``SPARK_MASTER``), else ``local[2]``. See ``plan_session`` for what else is set, and the
    module's docstring for Python workers on local and other masters. A master that cannot
    be reached raises SparkMasterError. With ``connectors=True`` the pinned connector jars
    are added (``spark.jars``, or the class path of a local JVM this call starts: see
    ``plan_session``) and the Delta and Iceberg SQL extensions are on (what the pipeline
    sinks need). With ``log_file``, a JVM this call starts logs (warnings and
    errors, stacks included) to that file and nothing to the console
    (``log4j2-file.properties`` beside this module). ``defaults``: settings of the caller's
    that a setting the user made (spark-submit's, ``conf``) replaces. ``pipeline_driver``:
    a JVM this call starts is tuned as a pipeline's driver (``_pipeline_driver_settings``),
    as one that runs ``--available-now`` with ``available_now``.

    >>> spark = spark_session("demo", conf={"spark.sql.shuffle.partitions": "2"})  # doctest: +SKIP
    """
    configured = configured_conf()
    plan = plan_session(
        app_name,
        master,
        jars=jars,
        conf=conf,
        connectors=connectors,
        log_file=log_file,
        configured=configured,
        defaults=defaults,
        starts_jvm=not jvm_running(),
        spark_home=spark_home(),
        loadable=_jvm_loads if jvm_running() else None,
    )
    connect = connect_request(plan.master, {**configured, **plan.settings}, os.environ)
    if connect is not None:
        raise connect_refusal(f"{connect} asks for a Spark Connect session")
    check_master(plan.master)
    wanted = _new_entries("spark.jars.packages", plan.settings, configured)
    if connectors and (wanted or "PYSPARK_GATEWAY_PORT" in os.environ) and jvm_running():
        _warn_jars_not_on_driver(plan.settings.get("spark.jars"), configured, wanted)
    elif wanted:
        log.info(
            "Spark fetches the connectors %s from Maven Central (cached in ~/.ivy2 after the "
            "first run; SPARKCDC_JARS_DIR names a folder of jars instead)",
            ", ".join(wanted),
        )
    ensure_python_env(plan.master)
    start_jvm(
        _pipeline_driver_settings(plan.settings, available_now)
        if pipeline_driver
        else plan.settings
    )
    return started_session(plan.settings)


def _pipeline_driver_settings(
    settings: Mapping[str, str], available_now: bool = False
) -> Mapping[str, str]:
    """``settings`` for a pipeline's driver JVM this process is about to start (one that
    runs already is not started again): it maps this machine's class-data archive, if
    ``sparkcdc prepare`` wrote one (``spark/classdata.py``), and compiles with C2 later, or
    with C1 alone for a run ``available_now`` (``spark/jit.py``). It starts and runs sooner;
    nothing it computes changes."""
    from sparkcdc.spark.classdata import sharing_settings
    from sparkcdc.spark.jit import compiling_settings

    if jvm_running():
        return settings
    return sharing_settings(compiling_settings(settings, available_now=available_now))


def started_session(settings: Mapping[str, str]) -> SparkSession:
    """The session of ``settings`` on the JVM started already, made the JVM's active and
    default one, the mysql-cdc source registered."""
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
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


def jvm_running() -> bool:
    """Whether this process has Spark's JVM already, or is told to attach to one
    (``PYSPARK_GATEWAY_PORT``: spark-submit or the pyspark shell started it)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def start_jvm(settings: Mapping[str, str]) -> None:
    """Start Spark's JVM (as pyspark would) with its stderr read by a thread that passes
    every line on to ours except ``_JVM_NOISE``; nothing when a JVM runs already or
    pyspark is told to attach to one (``PYSPARK_GATEWAY_PORT``)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if jvm_running():
        return
    # pyspark's first call into the JVM imports pyspark.testing.utils (its numpy converter
    # asks it whether numpy is there), which imports pandas: 0.3-0.5 s, done meanwhile here.
    # Joined before this thread imports anything more, so no two imports wait on each other
    importing = threading.Thread(target=_import_quietly, args=("pyspark.testing.utils",))
    importing.start()
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(settings.items()))
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    finally:
        importing.join()
    stream = gateway.proc.stderr

    def forward() -> None:
        for line in iter(stream.readline, b""):
            if not line.startswith(_JVM_NOISE):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()

    threading.Thread(target=forward, name="sparkcdc-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def _import_quietly(module: str) -> None:
    """Import ``module`` if it can be: whoever needs it next meets its error."""
    with contextlib.suppress(Exception):
        importlib.import_module(module)


def stop_jvm(timeout_s: float = 300.0) -> int:
    """End the JVM ``start_jvm`` started (its session stopped first) and wait for it to
    exit: the exit code. The JVM ends when its stdin closes (pyspark's gateway server reads
    it for that), and runs its exit work (a class-data archive written) before it does."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or getattr(gateway, "proc", None) is None:
        raise RuntimeError("no JVM started by this process to stop")
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    proc = gateway.proc
    gateway.shutdown()
    proc.stdin.close()
    code: int = proc.wait(timeout=timeout_s)
    SparkContext._gateway = None
    SparkContext._jvm = None
    return code


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
