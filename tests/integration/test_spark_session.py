"""The Python workers spark_session starts: the project's interpreter, without Spark's archives."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)


def test_workers_import_installed_pyspark_without_zip_importers_forked_with_sparkcdc_loaded(
    spark: Any,
) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Probe(DataSourceReader):
        def read(self, partition: Any) -> Any:
            import os
            import sys
            import zipimport

            import pyspark

            zips = [
                k
                for k, v in sys.path_importer_cache.items()
                if isinstance(v, zipimport.zipimporter)
            ]
            arenas = os.environ.get("MALLOC_ARENA_MAX", "")
            # the daemon that forked this worker: what it imported before, every fork has
            with open(f"/proc/{os.getppid()}/maps") as maps:
                preloaded = "pyarrow" in maps.read()
            yield (
                sys.executable,
                pyspark.__file__,
                len(zips),
                ";".join(sys.path),
                arenas,
                preloaded,
            )

    class ProbeSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "sparkcdc_worker_probe"

        def schema(self) -> str:
            return (
                "executable STRING, pyspark STRING, zip_importers INT, path STRING, "
                "arenas STRING, daemon_preloaded BOOLEAN"
            )

        def reader(self, schema: Any) -> Probe:
            return Probe()

    spark.dataSource.register(ProbeSource)
    row = spark.read.format("sparkcdc_worker_probe").load().collect()[0]
    assert row.executable == sys.executable
    assert ".zip" not in row.pyspark, row.pyspark
    assert row.zip_importers == 0
    assert row.arenas == "2"  # glibc arenas bounded (snapshot worker memory)
    assert row.daemon_preloaded  # sparkcdc's source and pyarrow, imported once per daemon
    assert not any(p.endswith((".zip", ".jar")) and "pyspark" in p for p in row.path.split(";"))


SUBMITTED = """
from sparkcdc.spark.session import spark_session

spark = spark_session("submitted", connectors=True)
conf = spark.sparkContext.getConf()
print("master=" + spark.sparkContext.master)
for key in ("spark.jars", "spark.sql.shuffle.partitions", "spark.python.daemon.module"):
    print(key + "=" + (conf.get(key) or ""))
spark.stop()
"""


def test_under_spark_submit_its_master_and_settings_are_kept(tmp_path: Any) -> None:
    """spark-submit starts the JVM with the user's master, conf and jars; the session
    sparkcdc makes in it keeps them and adds its connector jars after the user's."""
    import os
    import subprocess
    import zipfile

    import pyspark

    from sparkcdc.spark.connectors import connector_jars

    user_jar = tmp_path / "user-extra.jar"
    with zipfile.ZipFile(user_jar, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    script = tmp_path / "submitted.py"
    script.write_text(SUBMITTED)
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    unset = ("PYSPARK_GATEWAY_PORT", "SPARK_MASTER")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    done = subprocess.run(
        [
            *(spark_submit, "--master", "local[1]"),
            *("--conf", "spark.sql.shuffle.partitions=7", "--jars", str(user_jar), str(script)),
        ],
        capture_output=True,
        text=True,
        env={**env, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert lines["master"] == "local[1]"  # not sparkcdc's default local[2]
    assert lines["spark.sql.shuffle.partitions"] == "7"  # not sparkcdc's default 4
    assert lines["spark.python.daemon.module"] == "sparkcdc.spark.worker_daemon"  # local
    jars = lines["spark.jars"].split(",")
    assert jars[0].endswith("/user-extra.jar"), jars
    names = [j.rsplit("/", 1)[-1] for j in jars[1:]]
    assert names == [p.rsplit("/", 1)[-1] for p in connector_jars()]
    # the connector jars reach the executors, not the driver's class path: said, with the
    # fix (spark-submit passes the Python driver's stderr on in its stdout)
    said = done.stdout + done.stderr
    assert f"started (by spark-submit) without {len(connector_jars())} of sparkcdc's" in said
    assert "give spark-submit --jars" in said


# classes of the connector jars that Spark's own jars hold too, with other bytes, and why
# that is harmless: a local driver has the connector jars first on its class path
# (plan_session), so their copy is the one Spark loads
SHADOWING_CHECKED = {
    # shims-0.9.25 (a Delta dependency) against RoaringBitmap's own: the same two static
    # methods, each java.util.Arrays' equals / mismatch over ranges (javap of both)
    "org/roaringbitmap/ArraysShim.class",
}


def test_no_connector_jar_replaces_a_class_of_sparks_own_unnoticed() -> None:
    """The connector jars go before Spark's on a local driver's class path: a class both
    hold is loaded from the connector's jar. Any such class must be byte-identical or
    checked (``SHADOWING_CHECKED``); a new pin that brings another fails here, not as a
    silently different Spark."""
    import zipfile
    from pathlib import Path

    import pyspark

    from sparkcdc.spark.connectors import connector_jars

    def classes(jar: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(jar) as z:
            return {
                n: z.read(n)
                for n in z.namelist()
                if n.endswith(".class")
                and not n.endswith("module-info.class")
                and not n.startswith("META-INF/")
            }

    sparks: dict[str, bytes] = {}
    for jar in sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar")):
        sparks.update(classes(jar))
    shadowing = {
        name
        for jar in map(Path, connector_jars())
        for name, code in classes(jar).items()
        if name in sparks and sparks[name] != code
    }
    assert shadowing <= SHADOWING_CHECKED, sorted(shadowing - SHADOWING_CHECKED)[:20]


def test_a_running_jvm_is_asked_whether_it_loads_a_connectors_class(spark: Any) -> None:
    """How a session on a JVM that runs already (spark-submit's, a platform's) finds the
    connectors it has, whatever their jars are called."""
    from sparkcdc.spark.connectors import LINES, SPARK_LINE
    from sparkcdc.spark.jvm import jvm_loads

    assert jvm_loads(LINES[SPARK_LINE]["delta"].probe_class)
    assert not jvm_loads("io.example.NoSuchConnector")
