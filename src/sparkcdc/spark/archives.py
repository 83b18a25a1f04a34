"""Spark's archives off ``sys.path`` where the installed pyspark and py4j stand in for them.

Spark puts ``pyspark.zip``, ``py4j-*-src.zip`` and its ``spark-core`` jar first on the
workers' ``PYTHONPATH``; why that costs ~70 ms a task is in ``spark/worker_daemon.py``. The
one implementation of the stripping, used by the worker daemon and by the local launcher
(``spark/launch.py``). Its own module, so that the launcher can strip before it runs
``-m sparkcdc.spark.worker_daemon`` without having imported that module already.
"""

from __future__ import annotations

import importlib.machinery
import os
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
