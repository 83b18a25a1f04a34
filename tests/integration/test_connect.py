"""The source through a Spark Connect client (docs/connect.md): a private Connect server
(``sparkcdc_dev.devconnect``) whose Python workers import the sparkcdc installed in their
interpreter, a client session that registers the source and runs the interleaved snapshot
under concurrent writes, judged by the consistency oracle of DESIGN.md §8; and ``sparkcdc
run``, which needs a classic session, refusing a Connect one with what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipelines import fresh_database, write_pipeline
from test_snapshot_stream import check_against_source, ordered, prepare, snapshot_options
from test_stream import options, wait_for
from workload import ITEMS_DDL, MultiWorkload, Workload, background_writes, source_state

from sparkcdc_dev.devconnect import DEFAULT_DIR, DevConnect
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer
from sparkcdc_dev.oracle import compare, replay

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)


@pytest.fixture(autouse=True)
def classic_after() -> Iterator[None]:
    """A remote session marks the whole process as Spark Connect's (pyspark sets
    SPARK_CONNECT_MODE_ENABLED, and every later pyspark call goes to Connect); the mark
    goes after each test here, so the classic tests after this module run classic."""
    marked = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    yield
    if not marked:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture(scope="module")
def connect_server() -> Iterator[DevConnect]:
    """The private Spark Connect server, stopped after this module's tests."""
    server = DevConnect.from_env()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def connect_spark(connect_server: DevConnect) -> Iterator[Any]:
    """A Spark Connect client's session on the private server, the source registered."""
    from pyspark.sql import SparkSession

    import sparkcdc

    spark = SparkSession.builder.remote(connect_server.url).create()
    sparkcdc.register(spark)
    yield spark
    spark.stop()


def test_the_snapshot_under_concurrent_writes_through_a_connect_client_equals_the_source(
    connect_spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """The query's batches go to parquet from ``foreachBatch``, which runs in a Python
    process of the server's; the client reads them back and replays them in order."""
    workload = MultiWorkload(dev_server.connection(database), seed=61, key_space=300)
    prepare(sql, workload, 400)
    writer, stop = background_writes(
        dev_server.connection(database), seed=62, key_space=300, seconds=120
    )
    opts = snapshot_options(dev_server, database, tmp_path / "state", **{"server-id": "5960-5969"})
    reader = connect_spark.readStream.format("mysql-cdc")
    for key, value in opts.items():
        reader = reader.option(key, value)
    out = str(tmp_path / "batches")

    def write(batch: Any, batch_id: int) -> None:  # pickled by value, run on the server
        batch.write.mode("overwrite").parquet(f"{out}/batch={batch_id}")

    query = (
        reader.load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: (query.lastProgress or {}).get("batchId", -1) >= 5, 300, "six batches")
        stop.set()
        writer.join()
        query.processAllAvailable()
    finally:
        stop.set()
        query.stop()
    batches: dict[int, list[dict[str, Any]]] = {}
    for row in connect_spark.read.parquet(out).collect():
        record = row.asDict()
        batches.setdefault(record.pop("batch"), []).append(record)
    rows = ordered(batches)
    assert {r["op"] for r in rows} >= {"r", "c", "u", "d"}
    snapshot_batches = [b for b, rs in batches.items() if any(r["op"] == "r" for r in rs)]
    assert len(snapshot_batches) >= 2, sorted(batches)  # the snapshot took several batches
    check_against_source(rows, dev_server, database)


def python_without_sparkcdc(folder: Path) -> str:
    """A virtual environment's Python that sees this interpreter's packages (pyspark,
    pyarrow, ...) but not sparkcdc: the site-packages folders are put on its path by a
    ``.pth`` line, which does not run the ``.pth`` files inside them (among them the one
    that puts this checkout's ``src/`` on the path)."""
    import site

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    inner = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(inner, "outer.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    # a sparkcdc session made earlier in this process put this checkout on PYTHONPATH
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [str(python), "-c", "import pyspark, sparkcdc"], capture_output=True, env=environ
    )
    assert b"No module named 'sparkcdc'" in probe.stderr, probe.stderr[-2000:]
    return str(python)


def test_a_server_without_sparkcdc_installed_runs_the_zip_sparkcdc_package_writes(
    dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """The server's Python lacks sparkcdc; the zip is on the server's PYTHONPATH and given
    with --py-files, as docs/connect.md says: the typed changelog of a snapshot and the
    changes after it replays to the source."""
    from pyspark.sql import SparkSession

    import sparkcdc

    packaged = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "package", "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert packaged.returncode == 0, packaged.stderr[-2000:]
    (zip_file,) = tmp_path.glob("sparkcdc-*.zip")
    port = DevConnect.from_env().port + 1  # beside the module's server, which has sparkcdc
    python = python_without_sparkcdc(tmp_path / "venv")
    server = DevConnect(DEFAULT_DIR, port, python=python, py_files=[str(zip_file)])
    server.start()
    try:
        spark = SparkSession.builder.remote(server.url).create()
        sparkcdc.register(spark)
        sql.execute(ITEMS_DDL)
        workload = Workload(dev_server.connection(database), seed=71, key_space=100)
        for _ in range(150):
            workload.step()
        opts = options(
            dev_server,
            database,
            "items",
            **{
                "server-id": "5980-5989",
                "scan.startup.mode": "initial",
                "state.location": str(tmp_path / "state"),
            },
        )
        reader = spark.readStream.format("mysql-cdc")
        for key, value in opts.items():
            reader = reader.option(key, value)
        query = reader.load().writeStream.format("memory").queryName("items_changes").start()
        try:
            query.processAllAvailable()
            for _ in range(150):
                workload.step()
            query.processAllAvailable()
        finally:
            query.stop()
        log = [r.asDict() for r in spark.table("items_changes").collect()]
        spark.stop()
    finally:
        server.stop()
    log.sort(key=lambda r: r["_seq"])  # the snapshot's rows, then the binlog's in order
    assert {r["_op"] for r in log} == {"+I", "-U", "+U", "-D"}
    result = replay(log, ["id"])
    assert result.violations == []
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []


PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{CONNECT_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5970-5979
sink:
  type: delta
  path: {lake}
pipeline:
  name: connect-test
  checkpoint: {checkpoint}
"""


def test_sparkcdc_run_refuses_a_spark_connect_session_saying_what_works(
    connect_server: DevConnect, tmp_path: Path
) -> None:
    """SPARK_REMOTE (its token not shown), or a Connect session given to run_pipeline: a
    configuration error naming what asked for Connect and the path that works, before
    anything is written."""
    server = DevServer.from_env()
    with fresh_database(server, "connect_db") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO t VALUES (1, 'a')")
    pipeline = write_pipeline(PIPELINE, tmp_path, server, "connect_db")
    env = os.environ | {
        "CONNECT_TEST_PASSWORD": DEV_PASSWORD,
        "SPARK_REMOTE": f"{connect_server.url}/;token=not-to-be-shown",
    }
    done = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline), "--available-now"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"SPARK_REMOTE={connect_server.url} asks for a Spark Connect session" in done.stderr
    assert "sparkcdc.register(spark)" in done.stderr
    assert "not-to-be-shown" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "lake").exists()

    from pyspark.sql import SparkSession

    from sparkcdc.errors import ConfigError
    from sparkcdc.pipeline.config import load_pipeline
    from sparkcdc.pipeline.runner import run_pipeline

    spark = SparkSession.builder.remote(connect_server.url).create()
    try:
        config = load_pipeline(pipeline, {"CONNECT_TEST_PASSWORD": DEV_PASSWORD})
        with pytest.raises(ConfigError, match="the session given is a Spark Connect client's"):
            run_pipeline(config, spark=spark, available_now=True)
    finally:
        spark.stop()
    assert not (tmp_path / "lake").exists()
