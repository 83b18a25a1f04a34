"""What Spark's Python processes import before their work, done once in a process that
forks them: the worker daemon (``spark/worker_daemon.py``) and the fork server
(``spark/forkserver.py``) preload it, and each worker they fork has it already.

A module of its own, apart from the daemon: Python runs the daemon as ``__main__``
(``-m sparkcdc.spark.worker_daemon``) and warns, on every worker daemon's stderr, when the
module so run was imported before, as the launcher would import it through the fork server.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence

from sparkcdc.model.source_types import dialect_modules

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
