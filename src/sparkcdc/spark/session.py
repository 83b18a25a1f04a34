"""One place that sets up a SparkSession the way sparkcdc needs it: the plan of its settings
(``session_plan.py``), the Python its workers run (``python_env.py``), the driver JVM
(``jvm.py``: started here, tuned as a pipeline's driver by ``classdata.py`` and ``jit.py``),
and the mysql-cdc source registered.

What the user set is never overwritten: ``PYSPARK_PYTHON``, and the Spark settings that
hold lists (``list_settings.py``) get sparkcdc's entries after the user's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from sparkcdc.spark.classdata import sharing_settings
from sparkcdc.spark.jit import compiling_settings
from sparkcdc.spark.jvm import configured_conf, jvm_loads, jvm_running, spark_home, start_jvm
from sparkcdc.spark.list_settings import list_entries, new_entries, same_entry
from sparkcdc.spark.masters import check_master, connect_refusal, connect_request
from sparkcdc.spark.python_env import ensure_forkserver, ensure_python_env
from sparkcdc.spark.session_plan import plan_session

log = logging.getLogger(__name__)


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
        same_entry("spark.jars", e)
        for e in list_entries("spark.jars", configured.get("spark.jars"))
    }
    missing = [
        e for e in list_entries("spark.jars", wanted) if same_entry("spark.jars", e) not in have
    ]
    if missing:
        log.warning(
            "the driver JVM was started (by spark-submit) without %d of sparkcdc's connector "
            "jars (%s): the Delta / Iceberg / Kafka sinks fail on the driver without them; "
            "give spark-submit --jars with them (`sparkcdc package` prints the line)",
            len(missing),
            ", ".join(same_entry("spark.jars", e) for e in missing[:3])
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
    register_sources: bool = True,
) -> SparkSession:
    """A SparkSession with the mysql-cdc source registered (unless ``register_sources`` is
    False: the caller registers them, e.g. on a thread: ``background.Background``).

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
        loadable=jvm_loads if jvm_running() else None,
    )
    connect = connect_request(plan.master, {**configured, **plan.settings}, os.environ)
    if connect is not None:
        raise connect_refusal(f"{connect} asks for a Spark Connect session")
    check_master(plan.master)
    wanted = new_entries("spark.jars.packages", plan.settings, configured)
    if connectors and (wanted or "PYSPARK_GATEWAY_PORT" in os.environ) and jvm_running():
        _warn_jars_not_on_driver(plan.settings.get("spark.jars"), configured, wanted)
    elif wanted:
        log.info(
            "Spark fetches the connectors %s from Maven Central (cached in ~/.ivy2 after the "
            "first run; SPARKCDC_JARS_DIR names a folder of jars instead)",
            ", ".join(wanted),
        )
    ensure_python_env(plan.master)
    if not jvm_running():
        ensure_forkserver(plan.master)
    start_jvm(
        _pipeline_driver_settings(plan.settings, available_now)
        if pipeline_driver
        else plan.settings
    )
    return started_session(plan.settings, register_sources=register_sources)


def _pipeline_driver_settings(
    settings: Mapping[str, str], available_now: bool = False
) -> Mapping[str, str]:
    """``settings`` for a pipeline's driver JVM this process is about to start (one that
    runs already is not started again): it maps this machine's class-data archive, if
    ``sparkcdc prepare`` wrote one (``spark/classdata.py``), and compiles with C2 later, or
    with C1 alone for a run ``available_now`` (``spark/jit.py``). It starts and runs sooner;
    nothing it computes changes."""
    if jvm_running():
        return settings
    return sharing_settings(compiling_settings(settings, available_now=available_now))


def started_session(settings: Mapping[str, str], *, register_sources: bool = True) -> SparkSession:
    """The session of ``settings`` on the JVM started already, made the JVM's active and
    default one, the mysql-cdc source registered (with ``register_sources``)."""
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
    if register_sources:
        register(spark)
    return spark


def register(spark: Any) -> None:
    """Register ``format("mysql-cdc")`` and ``format("postgres-cdc")`` on ``spark``.

    Python data sources cannot see their session, so the class registered is a subclass
    made here that carries the session's default parallelism (cloudpickle ships a class
    made in a function by value, attributes included): snapshot chunks are spread over
    that many tasks (``scan.incremental.snapshot.chunks-per-partition``).
    """
    from pyspark.errors import PySparkException

    from sparkcdc.spark.source import MySqlCdcDataSource, PostgresCdcDataSource

    parallelism: int | None
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except (AttributeError, PySparkException):  # Spark Connect: no SparkContext, CPU count
        parallelism = None

    class SessionMySqlCdcDataSource(MySqlCdcDataSource):
        default_parallelism = parallelism
        __doc__ = MySqlCdcDataSource.__doc__

    class SessionPostgresCdcDataSource(PostgresCdcDataSource):
        default_parallelism = parallelism
        __doc__ = PostgresCdcDataSource.__doc__

    spark.dataSource.register(SessionMySqlCdcDataSource)
    spark.dataSource.register(SessionPostgresCdcDataSource)
