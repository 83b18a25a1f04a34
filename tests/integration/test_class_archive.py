"""`sparkcdc prepare` writes a class-data archive that the next driver JVM really maps
(spark/classdata.py): real JVMs, their class-loading log read back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcdc.spark.jit import LATE_C2

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)

# a JVM started as a pipeline's is (spark_session(pipeline_driver=True)), its class loading
# logged: each line names where the class came from
_START = """
import sys
from sparkcdc.spark.session import spark_session
options = "-Xlog:class+load=info:file=" + sys.argv[1]
spark = spark_session("archive-check", "local[1]", connectors=True, pipeline_driver=True,
                      conf={"spark.driver.extraJavaOptions": options})
spark.range(10).write.format("delta").save(sys.argv[2])
runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
with open(sys.argv[1] + ".args", "w") as out:
    out.write(" ".join(str(a) for a in runtime.getInputArguments()))
spark.stop()
"""


def _loaded_from(tmp_path: Path, environ: dict[str, str], name: str) -> dict[str, str]:
    """Where each class came from in a JVM started with ``environ``: class -> source."""
    log = tmp_path / f"{name}.log"
    subprocess.run(
        [sys.executable, "-c", _START, str(log), str(tmp_path / name)],
        env=environ,
        check=True,
        capture_output=True,
    )
    sources = {}
    for line in log.read_text().splitlines():
        _, _, rest = line.partition("[class,load] ")
        cls, _, source = rest.partition(" source: ")
        if cls:
            sources[cls] = source
    return sources


def test_prepare_writes_the_archive_the_next_jvm_maps(tmp_path: Path) -> None:
    """The archive of this machine's cache (``$SPARKCDC_CACHE_DIR/jvm``), which
    scripts/setup.sh's ``sparkcdc prepare`` wrote: ``prepare`` finds it there (or writes it,
    should it be missing), and the next driver JVM maps it. (A cache of the test's own would
    write a second archive, ~70-120 s of a suite CI must run in 90 minutes.)"""
    done = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "prepare"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    archive = Path(done.stdout.split(": ", 1)[1].split(" ")[0])
    assert archive.is_file() and archive.name.startswith("classes-"), done.stdout
    assert archive.suffix == ".jsa" and not list(archive.parent.glob(f"{archive.name}.*.pending"))

    after = _loaded_from(tmp_path, dict(os.environ), "after")
    top = {c for c, s in after.items() if s == "shared objects file (top)"}
    # Spark's own classes and the Delta connector's (both on a local driver's class path) alike
    assert "org.apache.spark.SparkContext" in top
    assert "org.apache.spark.sql.delta.DeltaLog" in top
    assert len(top) > len(after) / 2, (len(top), len(after))
    # in a JVM that compiles with C2 later too (spark/jit.py), as a pipeline's driver does
    arguments = (tmp_path / "after.log.args").read_text().split()
    assert set(LATE_C2) <= set(arguments), arguments
    assert f"-XX:SharedArchiveFile={archive}" in arguments, arguments

    # (SPARKCDC_CLASS_ARCHIVE=off leaves the JVM's options alone: tests/unit/spark)
