"""The master and settings of a new session, worked out before anything starts (pure): the
defaults, the connectors' jars or Maven coordinates and SQL extensions, the user's list
settings first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sparkcdc.spark.connectors import (
    EXCLUDES,
    LINES,
    class_path_jars,
    connector_folder,
    connector_jars,
    has_connector,
    has_iceberg_runtime,
    missing,
    packages,
)
from sparkcdc.spark.list_settings import LIST_SEPARATORS, merge_list_setting
from sparkcdc.spark.masters import is_local_master, is_one_jvm_master
from sparkcdc.spark.python_env import DAEMON_MODULE, LOCAL_DAEMON, SPARK_DAEMON

# the master of a session when nothing chose one (no argument, none configured)
DEFAULT_MASTER = "local[2]"

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


@dataclass(frozen=True)
class SessionPlan:
    """The settings a new session is built with, worked out before anything starts."""

    master: str
    settings: dict[str, str]  # every Spark setting given to the builder (and a new JVM)


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
        DAEMON_MODULE: LOCAL_DAEMON if is_local_master(chosen) else SPARK_DAEMON,
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
        present = class_path_jars(spark_home, {**configured, **conf}, LIST_SEPARATORS)
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
    for key in LIST_SEPARATORS:
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
