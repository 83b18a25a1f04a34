"""One place that sets up a SparkSession the way sparkcdc needs it.

Spark starts Python workers with ``PYSPARK_PYTHON``; unless it names the
interpreter that has sparkcdc installed, workers fail ("Python worker failed to
connect back") or cannot import the source. We point it at ``sys.executable``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

_DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "2g",
    # Arrow batches from the Python source go straight into Spark
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
}


def ensure_python_env() -> None:
    """Make Spark's Python workers use this interpreter (set once, before the JVM starts)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # the workers import sparkcdc from wherever this process does
    paths = [p for p in sys.path if p]
    existing = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, existing] if existing else paths)


def spark_session(
    app_name: str = "sparkcdc",
    master: str = "local[2]",
    *,
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with the mysql-cdc source registered.

    >>> spark = spark_session("demo", conf={"spark.sql.shuffle.partitions": "2"})  # doctest: +SKIP
    """
    ensure_python_env()
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**_DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
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


def register(spark: Any) -> None:
    """Register ``format("mysql-cdc")`` on ``spark``."""
    from sparkcdc.spark.source import MySqlCdcDataSource

    spark.dataSource.register(MySqlCdcDataSource)
