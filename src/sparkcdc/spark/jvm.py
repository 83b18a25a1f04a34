"""Spark's driver JVM in this process: the one it runs under (spark-submit's) and its settings,
or one started here, its stderr filtered, and stopped again.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path


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


def spark_home() -> Path | None:
    """The Spark a JVM started from here runs: ``SPARK_HOME``, else pyspark's own."""
    from pyspark.find_spark_home import _find_spark_home

    try:
        return Path(_find_spark_home())
    except (Exception, SystemExit):  # pyspark exits when it finds none: no jars known there
        return None


def jvm_loads(name: str) -> bool:
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
