"""The Python that Spark's workers run.

Spark starts Python workers with ``PYSPARK_PYTHON``; unless it names the
interpreter that has sparkcdc installed, workers fail ("Python worker failed to
connect back") or cannot import the source. On a local master (``local``,
``local[n]``, ``local-cluster[...]``) the workers run on this machine, so we point it
at this interpreter (through a launcher that drops Spark's archives) and start them
with sparkcdc's worker daemon. On any other master the executors run their own Python:
``PYSPARK_PYTHON`` if the user set it, else Spark's default, with sparkcdc installed
there or shipped with ``spark.submit.pyFiles`` (``sparkcdc package`` builds the zip).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from sparkcdc.files import ensure_private_dir, open_private
from sparkcdc.spark import forkserver
from sparkcdc.spark.masters import is_local_master

DAEMON_MODULE = "spark.python.daemon.module"


# local masters: workers without Spark's zips and jar on sys.path (70 ms a task; see
# worker_daemon). Elsewhere Spark's own daemon, named explicitly: a JVM this process
# started earlier for a local session keeps ours in its system properties
LOCAL_DAEMON = "sparkcdc.spark.worker_daemon"

SPARK_DAEMON = "pyspark.daemon"


# the PYSPARK_PYTHON values this process set itself (any other value is the user's)
_OWN_PYTHON: set[str] = set()

# the warm Python this process started for its local Python processes (one a process)
_FORKSERVER: list[subprocess.Popen[bytes]] = []


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


def ensure_forkserver(master: str) -> None:
    """On a local master whose Python processes run through sparkcdc's launcher, start the
    warm Python they are forked from (``spark/forkserver.py``), once a process, before the
    JVM starts (which passes ``SPARKCDC_FORKSERVER`` on to them). ``SPARKCDC_FORKSERVER=off``
    turns it off."""
    if os.environ.get(forkserver.SOCKET_ENV) == "off" or not is_local_master(master):
        return
    python = os.environ.get("PYSPARK_PYTHON")
    if python not in _OWN_PYTHON or python == sys.executable:
        return  # the user's Python, or no launcher: nothing would ask the server
    if _FORKSERVER and _FORKSERVER[0].poll() is None:
        return
    try:
        path = forkserver.socket_path(launcher_dir())
        _FORKSERVER[:] = [forkserver.start(path)]
    except OSError:
        return  # the processes start as they would without it
    os.environ[forkserver.SOCKET_ENV] = path


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
# written by sparkcdc (spark/python_env.py): {sys.executable} without Spark's archives
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
