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

The daemon also imports what every worker it forks imports first (``PRELOADED``): Spark's
worker and sparkcdc's source with pyarrow, ~1 s of a fresh process here, and what a first
read imports more (``first_use``: pandas, through pyarrow). Forked, a worker
has them already; without this each of a session's workers imported them in its first
task (a snapshot read's two tasks here each spent 0.7-1 s of their ~9 s on it).
"""

from __future__ import annotations

import contextlib
import importlib
import runpy
from collections.abc import Sequence

from sparkcdc.model.source_types import dialect_modules
from sparkcdc.spark.archives import strip_spark_archives

# the modules a worker imports before its first row: Spark's worker (the daemon imports it
# in each fork) and, unpickling the mysql-cdc reader, sparkcdc's source, and the dialects
# its reads import on first use
PRELOADED = ("pyspark.worker", "sparkcdc.spark.source", *dialect_modules())


def first_use() -> None:
    """Do once what a worker's first read imports more: pyarrow imports pandas (and its
    shim for it) when it first builds an array or scalar from Python values, as a snapshot
    chunk's metadata columns are built (~0.3-0.45 s of a first task here), and a connection
    to a host named as text imports the idna codec."""
    import pyarrow as pa

    pa.array([0], pa.int64())
    "localhost".encode("idna")


def preload(modules: Sequence[str] | None = None) -> None:
    """Import ``modules`` (``PRELOADED`` by default; the fork server passes its own list)
    here, and ``first_use``'s imports, for every fork to inherit. One that does not import is
    left to the process that needs it, which reports its error with its work's."""
    for name in PRELOADED if modules is None else modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):
        first_use()


if __name__ == "__main__":
    strip_spark_archives()
    preload()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
