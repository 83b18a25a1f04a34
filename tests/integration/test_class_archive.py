"""`sparkcdc prepare` writes a class-data archive that the next driver JVM really maps
(spark/classdata.py): real JVMs, their class-loading log read back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcdc.spark.jit import LATE_C2

pytestmark = pytest.mark.integration

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
    environ = {**os.environ, "SPARKCDC_CACHE_DIR": str(tmp_path / "cache")}
    before = _loaded_from(tmp_path, environ, "before")
    assert not any("shared objects file (top)" in s for s in before.values())

    done = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "prepare"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    archives = list((tmp_path / "cache" / "jvm").glob("classes-*.jsa"))
    assert len(archives) == 1 and str(archives[0]) in done.stdout
    assert not list((tmp_path / "cache" / "jvm").glob("*.pending"))

    after = _loaded_from(tmp_path, environ, "after")
    top = {c for c, s in after.items() if s == "shared objects file (top)"}
    # Spark's own classes (the class path) and the Delta connector's (spark.jars) alike
    assert "org.apache.spark.SparkContext" in top
    assert "org.apache.spark.sql.delta.DeltaLog" in top
    assert len(top) > len(after) / 2, (len(top), len(after))
    # in a JVM that compiles with C2 later too (spark/jit.py), as a pipeline's driver does
    arguments = (tmp_path / "after.log.args").read_text().split()
    assert set(LATE_C2) <= set(arguments), arguments

    # (SPARKCDC_CLASS_ARCHIVE=off leaves the JVM's options alone: tests/unit/spark)
