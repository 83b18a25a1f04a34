"""A Java harness compiled once per source version against a folder of jars.

The tests' Flink consumer (tests/integration/flink_consumer.py) and the Flink CDC and Debezium
peers of ``bench/vs_flinkcdc.py`` are single Java files run on their fetched jars (Flink's,
Debezium's); each is compiled into
``$SPARKCDC_DEV_DIR/<name>/<hash of the source>``, so an edited harness is compiled again and
an unchanged one never is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sparkcdc_dev import lanes


def compiled_classpath(source: Path, libs: Sequence[Path], name: str) -> str:
    """The classpath that runs ``source`` (one ``.java`` file) on the jars of ``libs``.

    Each lib folder must hold the ``.complete`` mark its fetch script leaves; ``name`` is the
    folder under the dev directory the classes go to. Example::

        compiled_classpath(Path("tests/harness/flink/MaterializeTopic.java"),
                           [Path("jars/flink/lib")], "flink-harness")
    """
    for lib in libs:
        if not (lib / ".complete").exists():
            raise FileNotFoundError(
                f"the jars of {source.name} are not in {lib}: run the fetch script named in "
                f"{lib.parent / 'pom.xml'} (scripts/fetch_*.sh)"
            )
    dev_dir = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    classes = dev_dir / name / digest
    jars = os.pathsep.join(f"{lib}/*" for lib in libs)
    if not (classes / f"{source.stem}.class").exists():
        staging = classes.with_name(f"{digest}.tmp{os.getpid()}")
        staging.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["javac", "-d", str(staging), "-cp", jars, str(source)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"javac could not compile {source}:\n{done.stderr}")
        try:
            staging.rename(classes)
        except OSError:  # another session compiled the same source first
            shutil.rmtree(staging)
    return f"{classes}{os.pathsep}{jars}"
