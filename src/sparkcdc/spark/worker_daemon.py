"""Spark's Python worker daemon, started without Spark's archives on ``sys.path``.

Spark puts ``pyspark.zip``, ``py4j-*-src.zip`` and its ``spark-core`` jar first on the
workers' ``PYTHONPATH``. Before every task a worker calls ``importlib.invalidate_caches()``,
and on Python 3.11 that makes every zip importer read its archive's directory again: the
jar's 5,000 entries twice (the jar and its ``org/`` folder) and ``pyspark.zip`` once per
imported subpackage, about 70 ms a task here. A 16-chunk snapshot task reads its rows in
~200 ms, so a third as much again went into that.

Where the interpreter has ``pyspark`` and ``py4j`` installed (a pip-installed Spark, as the
scripts/setup.sh makes), this daemon drops those archives and runs ``pyspark.daemon`` with
the installed packages. Otherwise (workers that only have Spark's archives) it keeps
``sys.path`` as it is. ``spark_session`` sets ``spark.python.daemon.module`` to this module.

The stripping is ``spark/archives.py``'s, shared with the launcher ``spark/session.py``
writes for local masters (every Python process Spark starts runs through
``sparkcdc.spark.launch``).

The daemon also imports what every worker it forks imports first (``spark/preloads.py``:
Spark's worker and sparkcdc's source with pyarrow, ~1 s of a fresh process here, and what a
first read imports more). Forked, a worker has them already; without this each of a
session's workers imported them in its first task (a snapshot read's two tasks here each
spent 0.7-1 s of their ~9 s on it). Nothing imports this module: Python runs it as
``__main__`` (``-m``), and warns when a module so run was imported before (the fork server
shares the preloading through ``spark/preloads.py``).
"""

from __future__ import annotations

import runpy

from sparkcdc.spark.archives import strip_spark_archives
from sparkcdc.spark.preloads import preload

if __name__ == "__main__":
    strip_spark_archives()
    preload()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
