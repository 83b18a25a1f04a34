"""``python -m sparkcdc.spark.launch ARGS``: the interpreter run as ``python ARGS``, without
Spark's archives (``spark/archives.py``).

The launcher ``spark/session.py`` writes for local masters is ``PYSPARK_PYTHON``: Spark runs
each Python process as ``launcher -m <module>``, and the launcher runs this module with
those arguments. ``-m <module> ...`` runs the module in a child of the driver's warm
Python (``spark/forkserver.py``) where one serves this process, else here, after the
stripping, so it imports the installed pyspark (byte-compiled once) rather than Spark's zips
(compiled again in every process). Any other arguments run the interpreter itself, on a
``PYTHONPATH`` without the archives.
"""

from __future__ import annotations

import os
import runpy
import sys

from sparkcdc.spark.archives import strip_spark_archives
from sparkcdc.spark.forkserver import run_forked

if __name__ == "__main__":
    strip_spark_archives()
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "-m":
        code = run_forked(args[1], args[2:])
        if code is not None:
            sys.exit(code)
        sys.argv[:] = [sys.argv[0], *args[2:]]  # run_module puts the module's file first
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        os.execv(sys.executable, [sys.executable, *args])
