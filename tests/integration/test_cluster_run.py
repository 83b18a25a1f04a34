"""``sparkcdc run`` on a Spark standalone cluster (testing/devspark.py: a master and two
one-core workers on loopback, each in its own mount namespace with its own ``/tmp`` where
this machine allows it), as a user runs it: ``sparkcdc package`` builds the zip of sparkcdc
and spark-submit's entry; the executors' Python is the user's ``PYSPARK_PYTHON``, their
environment has no ``PYTHONPATH``: they import sparkcdc from the shipped zip.

The proof, for a Delta sink on the private MinIO and for PostgreSQL (jdbc), with the
checkpoint and the source state on MinIO, while a writer changes the table. Delta: a first
run under ``spark-submit``, one worker killed mid-snapshot (its executor with it) and then the
driver killed mid-snapshot; a second run by ``sparkcdc run`` with the master from
``pipeline.spark.master``, from another working directory. PostgreSQL: that second run, a DDL
and more changes, a third run. (Each part costs ~100 s here, in a suite CI must run in 90
minutes: each sink has one; the kills are sink-blind, the sink's part is writing what the
runs commit. PostgreSQL's runs with ``SPARKCDC_THOROUGH=1`` only: its rows are written by
the executors as Delta's are, from the same shipped zip, and a DDL into PostgreSQL is
test_schema_evolution.py's.) Then ``sparkcdc status`` from a fourth directory. The sink
table (read back without Spark: delta-rs or psycopg) equals the source, the last run had
tasks on both workers, and nothing was written to any of the working directories.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest
from pipelines import (
    RowChanges,
    Writer,
    chunks_left,
    delta_rows,
    fresh_database,
    pipeline_env,
    sink_params,
    write_pipeline,
)
from psycopg import sql

from sparkcdc.locations import Location, open_location
from sparkcdc.pipeline.status import committed_offset
from sparkcdc.spark.connectors import connector_jars
from sparkcdc_dev.devminio import DevMinio
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer
from sparkcdc_dev.devspark import DevSpark

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)

DATABASE = "cluster_run"
NAME = "cluster-run"
ROWS = 6000
COLUMNS = ("id", "v", "s", "w")
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.t
  server-id: 5960-5969
  scan.incremental.snapshot.chunk.size: 100
  scan.incremental.snapshot.chunks-per-batch: 2
sink:
{sink}
pipeline:
  name: {name}
  checkpoint: {checkpoint}
  trigger.interval: 200ms
  spark.master: {master}
  spark.conf:
    # small executors, and no job before both workers' executors have registered
    spark.executor.memory: 512m
    spark.cores.max: "2"
    spark.scheduler.minRegisteredResourcesRatio: "1.0"
    spark.scheduler.maxRegisteredResourcesWaitingTime: 120s
{conf}
"""
SINKS = {
    "delta": "  type: delta\n  path: s3a://{bucket}/lake",
    "jdbc": (
        "  type: jdbc\n  url: jdbc:postgresql://127.0.0.1:{pg_port}/sink_db\n"
        "  username: cdc\n  password: ${{SPARKCDC_TEST_PG_PASSWORD}}\n  schema: {schema}"
    ),
}


def user_env() -> dict[str, str]:
    """A user's shell: the test passwords, this interpreter as PYSPARK_PYTHON."""
    env = {**pipeline_env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    for name in ("PYSPARK_GATEWAY_PORT", "SPARK_MASTER"):
        env.pop(name, None)
    return env


def sparkcdc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        env=user_env(),
        cwd=cwd,
        timeout=900,
    )


def pipeline_file(
    tmp_path: Path, server: DevServer, master: str, checkpoint: object, sink: str, conf: str = ""
) -> Path:
    """``tmp_path/pipeline.yaml`` of PIPELINE: ``sink`` a block of SINKS (formatted),
    ``conf`` more ``pipeline.spark.conf`` lines."""
    fields = {"master": master, "checkpoint": checkpoint, "sink": sink, "conf": conf}
    return write_pipeline(PIPELINE, tmp_path, server, DATABASE, name=NAME, **fields)


def package(output: Path) -> tuple[Path, Path]:
    """``sparkcdc package --output output``: the zip and spark-submit's entry."""
    done = sparkcdc("package", "--output", str(output), cwd=output.parent)
    assert done.returncode == 0, done.stderr
    return next(output.glob("sparkcdc-*.zip")), output / "sparkcdc_submit.py"


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    """``cluster_run.t``: ROWS rows, then writes by ``Writer`` while the runs go on."""
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s)", [(i, i * 3, f"row {i}") for i in range(ROWS)]
        )
    yield conn
    conn.close()
    with server.root_connection() as root, root.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")


@pytest.fixture
def postgres() -> Iterator[DevPostgres]:
    pg = DevPostgres.from_env()
    pg.start()
    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(DATABASE))
    with pg.connection() as conn:
        conn.execute(drop)
    yield pg
    with pg.connection() as conn:
        conn.execute(drop)


def source_rows(conn: Any, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(columns)} FROM t")
        return sorted(tuple(row) for row in cur.fetchall())


def postgres_rows(pg: DevPostgres, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT {} FROM {}.t").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(DATABASE)
    )
    with pg.connection() as conn:
        return sorted(tuple(row) for row in conn.execute(query).fetchall())


def spark_submit(entry: Path, archive: Path, master: str, pipeline: Path, cwd: Path) -> Any:
    """``spark-submit`` of a pipeline run as the README shows it, in a process group of its
    own (its JVM and the Python driver)."""
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    command = [str(submit), "--master", master, "--py-files", str(archive)]
    command += ["--jars", ",".join(connector_jars()), str(entry), "run", str(pipeline)]
    with open(cwd.parent / "submit.log", "wb") as log:  # the child has its own copy
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=user_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def await_commit(checkpoint: Location, after: int, process: Any, timeout_s: float = 300) -> int:
    """The id of the first batch committed after batch ``after``."""
    deadline = time.monotonic() + timeout_s
    while True:
        committed = committed_offset(checkpoint)
        if committed is not None and committed[0] > after:
            return committed[0]
        assert process.poll() is None, f"the run ended early (exit {process.returncode})"
        assert time.monotonic() < deadline, f"no batch after {after} within {timeout_s} s"
        time.sleep(0.3)


def kill_worker_and_driver_mid_snapshot(
    cluster: DevSpark, driver: subprocess.Popen[bytes], checkpoint: Location
) -> None:
    """Once ``driver`` (a run by spark-submit) has committed a batch, kill worker 1 (its
    executor with it); once the run has committed another on the other worker, kill the
    driver (its JVM and Python) while chunks are left; then start worker 1 again."""
    try:
        first = await_commit(checkpoint, -1, driver)
        cluster.kill_worker(1)  # a host lost mid-snapshot, its executor with it
        await_commit(checkpoint, first, driver)  # the other worker goes on
        assert chunks_left(checkpoint), "the driver was to be killed mid-snapshot"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver: JVM and Python
        driver.wait()
    cluster.restart_worker(1)


def applications(cluster: DevSpark) -> list[str]:
    """The ids of this test's applications the master knows, oldest first."""
    status = cluster.status()
    apps = [a for a in status["completedapps"] + status["activeapps"] if a["name"] == NAME]
    return [a["id"] for a in sorted(apps, key=lambda a: a["starttime"])]


@pytest.mark.parametrize("sink", sink_params(sorted(SINKS), thorough=("jdbc",)))
def test_killed_worker_and_driver_mid_snapshot_then_runs_elsewhere_equal_the_source(
    spark_cluster: DevSpark,
    source: Any,
    server: DevServer,
    minio: DevMinio,
    bucket: str,
    postgres: DevPostgres,
    tmp_path: Path,
    sink: str,
) -> None:
    archive, entry = package(tmp_path / "dist")
    checkpoint_uri = f"s3a://{bucket}/cdc/{NAME}"
    pipeline = pipeline_file(
        tmp_path,
        server,
        spark_cluster.master_url,
        checkpoint_uri,
        SINKS[sink].format(bucket=bucket, pg_port=postgres.port, schema=DATABASE),
        "\n".join(f"    {k}: {v}" for k, v in minio.spark_conf().items()),
    )
    hadoop = {k.removeprefix("spark.hadoop."): v for k, v in minio.spark_conf().items()}
    checkpoint = open_location(checkpoint_uri, hadoop)
    directories = [tmp_path / name for name in ("first", "second", "third", "fourth")]
    for directory in directories:
        directory.mkdir()
    before = set(applications(spark_cluster))

    killed = sink == "delta"  # the kills for one sink, the DDL for the other (~100 s each)
    with Writer(server, DATABASE, seed=47, workload=RowChanges, pause_s=0.01):
        if killed:
            kill_worker_and_driver_mid_snapshot(
                spark_cluster,
                spark_submit(entry, archive, spark_cluster.master_url, pipeline, directories[0]),
                checkpoint,
            )
        done = sparkcdc(
            "run", str(pipeline), "--available-now", "--py-files", str(archive), cwd=directories[1]
        )
        assert done.returncode == 0, done.stderr[-4000:]
    if not killed:
        with source.cursor() as cur:
            cur.execute("UPDATE t SET v = v + 1 WHERE id % 7 = 0")
            cur.execute("DELETE FROM t WHERE id % 11 = 0")
            cur.execute("ALTER TABLE t ADD COLUMN w INT DEFAULT 5")
            cur.execute("INSERT INTO t (id, v, s, w) VALUES (9000, 1, 'after the DDL', 9)")
            cur.execute("UPDATE t SET w = 6 WHERE id % 13 = 0")
        done = sparkcdc(
            "run", str(pipeline), "--available-now", "--py-files", str(archive), cwd=directories[2]
        )
        assert done.returncode == 0, done.stderr[-4000:]
    columns = COLUMNS[:-1] if killed else COLUMNS  # w: the column the DDL adds

    expected = source_rows(source, columns)
    if sink == "delta":
        assert delta_rows(minio, f"{bucket}/lake/{DATABASE}/t", columns) == expected
    else:
        assert postgres_rows(postgres, columns) == expected
    status = sparkcdc("status", str(pipeline), cwd=directories[3])
    assert status.returncode == 0, status.stderr[-4000:]
    assert "phase: binlog; last committed batch" in status.stdout, status.stdout
    assert "(lag 0 bytes)" in status.stdout, status.stdout
    schema = "0 changed by DDL" if killed else f"{DATABASE}.t: 2 versions"
    assert schema in status.stdout, status.stdout
    for directory in directories:
        assert os.listdir(directory) == [], f"written to the working directory {directory}"
    # two applications ran on this cluster; the second (for Delta, after worker 1 came
    # back) had tasks on both workers
    apps = [a for a in applications(spark_cluster) if a not in before]
    assert len(apps) == 2, apps
    for app in apps[1:]:
        tasks = spark_cluster.executor_tasks(app)
        assert all(count > 0 for count in tasks.values()), (app, tasks)


def test_a_state_location_on_one_hosts_disk_stops_the_run_at_start(
    spark_cluster: DevSpark, server: DevServer, source: Any, postgres: DevPostgres, tmp_path: Path
) -> None:
    if not spark_cluster.private_tmp:
        pytest.skip("the workers share this machine's /tmp (no mount namespaces here)")
    archive, _ = package(tmp_path / "dist")
    jdbc = SINKS["jdbc"].format(pg_port=postgres.port, schema=DATABASE)
    # under /tmp: the driver's own disk, which the workers do not see
    pipeline = pipeline_file(tmp_path, server, spark_cluster.master_url, tmp_path / "cp", jdbc)
    done = sparkcdc("run", str(pipeline), "--py-files", str(archive), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr  # a configuration error
    said = " ".join(done.stderr.split())
    assert "state.location must be shared by the driver and every executor" in said, said
    assert f"under {tmp_path / 'cp' / 'source-state'}" in said, said
    assert "Traceback" not in done.stderr
    with postgres.connection() as conn:  # it stopped before the sink was touched
        found = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
            (DATABASE,),
        ).fetchone()
    assert found == (0,)


PROBE = """
import sys
from sparkcdc.spark.session import spark_session

spark = spark_session("cluster-probe", sys.argv[1], conf={
    "spark.submit.pyFiles": sys.argv[2], "spark.executor.memory": "512m",
    "spark.cores.max": "2", "spark.scheduler.minRegisteredResourcesRatio": "1.0"})
conf = spark.sparkContext.getConf()

def where(_):
    import sparkcdc
    yield sparkcdc.__file__, sys.executable

print(conf.get("spark.python.daemon.module"))
for row in sorted(set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect())):
    print(*row, sep="|")
spark.stop()
"""


def test_executors_import_sparkcdc_from_the_shipped_zip_with_the_users_python(
    spark_cluster: DevSpark, tmp_path: Path
) -> None:
    archive, _ = package(tmp_path / "dist")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, spark_cluster.master_url, str(archive)],
        capture_output=True,
        text=True,
        env=user_env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    daemon, *rows = done.stdout.splitlines()
    assert daemon == "pyspark.daemon"  # not sparkcdc's worker daemon, not the launcher
    assert rows == [f"./{archive.name}/sparkcdc/__init__.py|{sys.executable}"], rows


def test_an_unreachable_master_stops_the_run_with_what_to_do(
    server: DevServer, source: Any, postgres: DevPostgres, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    jdbc = SINKS["jdbc"].format(pg_port=postgres.port, schema=DATABASE)
    pipeline = pipeline_file(tmp_path, server, master, tmp_path / "cp", jdbc)
    done = sparkcdc("run", str(pipeline), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the Spark master spark://127.0.0.1:{port} cannot be reached" in done.stderr
    assert "Traceback" not in done.stderr
