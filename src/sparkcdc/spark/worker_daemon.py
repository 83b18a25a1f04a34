"""Spark's Python worker daemon, started without Spark's archives on ``sys.path``.

Spark puts ``pyspark.zip``, ``py4j-*-src.zip`` and its ``spark-core`` jar first on the
workers' ``PYTHONPATH``. Before every task a worker calls ``importlib.invalidate_caches()``,
and on Python 3.11 that makes every zip importer read its archive's directory again: the
jar's 5,000 entries twice (the jar and its ``org/`` folder) and ``pyspark.zip`` once per
imported subpackage, about 70 ms a task here. A 16-chunk snapshot task reads its rows in
~200 ms, so a third as much again went into that.

Where the interpreter has ``pyspark`` and ``py4j`` installed (a pip-installed Spark, as the
README's set-up makes), this daemon drops those archives and runs ``pyspark.daemon`` with
the installed packages. Otherwise (workers that only have Spark's archives) it keeps
``sys.path`` as it is. ``spark_session`` sets ``spark.python.daemon.module`` to this module.

``strip_spark_archives`` is the one implementation of the stripping: the launcher
``spark/session.py`` writes for local masters runs every Python process Spark starts
through ``sparkcdc.spark.launch``, which calls it too.
"""

from __future__ import annotations

import importlib.machinery
import os
import runpy
import sys


def _spark_archive(path: str) -> bool:
    name = os.path.basename(path)
    return (
        name.endswith(".jar")
        or name == "pyspark.zip"
        or (name.startswith("py4j-") and name.endswith(".zip"))
    )


def without_spark_archives(path: list[str]) -> list[str]:
    """``path`` without Spark's archives if what they hold is installed elsewhere on it.

    >>> without_spark_archives(["/spark/python/lib/pyspark.zip", "/nowhere"])
    ['/spark/python/lib/pyspark.zip', '/nowhere']
    """
    kept = [p for p in path if not _spark_archive(p)]
    if len(kept) == len(path):
        return path
    finder = importlib.machinery.PathFinder
    if all(finder.find_spec(name, kept) is not None for name in ("pyspark", "py4j")):
        return kept
    return path


def strip_spark_archives() -> None:
    """Drop Spark's archives from ``sys.path`` where the installed pyspark and py4j stand in
    for them, and from ``PYTHONPATH``, which the processes this one starts inherit."""
    kept = without_spark_archives(sys.path)
    if kept is sys.path:
        return
    for dropped in set(sys.path) - set(kept):
        sys.path_importer_cache.pop(dropped, None)  # or invalidate_caches still reads them
    sys.path[:] = kept
    inherited = os.environ.get("PYTHONPATH")
    if inherited is not None:
        parts = inherited.split(os.pathsep)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in parts if not _spark_archive(p))


if __name__ == "__main__":
    strip_spark_archives()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
