"""``sparkcdc run`` on a Spark standalone cluster (testing/devspark.py: a master and two
one-core workers on loopback), as a user runs it: ``sparkcdc package`` builds the zip of
sparkcdc, ``sparkcdc run --available-now --master spark://... --py-files <zip>`` copies a
MariaDB table, written to before the run, into PostgreSQL through the jdbc sink. The
target must equal the source (read back with psycopg, not through the sink), and the
run's tasks must have run on both workers (their executors' logs, in each worker's own
work directory). The workers' Python is the user's ``PYSPARK_PYTHON``; their environment
has no ``PYTHONPATH``: they import sparkcdc from the shipped zip.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pipelines import write_pipeline
from psycopg import sql

from sparkcdc.testing.devpostgres import DEV_PASSWORD as PG_PASSWORD
from sparkcdc.testing.devpostgres import DevPostgres
from sparkcdc.testing.devserver import DEV_PASSWORD, DevServer
from sparkcdc.testing.devspark import DevSpark

pytestmark = pytest.mark.integration

DATABASE = "cluster_run"
SCHEMA = "cluster_run"
NAME = "cluster-run"
ROWS = 3000
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.t
  server-id: 5960-5969
  scan.incremental.snapshot.chunk.size: 200
  scan.incremental.snapshot.chunks-per-batch: 4
sink:
  type: jdbc
  url: jdbc:postgresql://127.0.0.1:{pg_port}/sink_db
  username: cdc
  password: ${{SPARKCDC_TEST_PG_PASSWORD}}
  schema: {schema}
pipeline:
  name: {name}
  checkpoint: {checkpoint}
  trigger.interval: 200ms
  spark.conf:
    # small executors, and no job before both workers' executors have registered
    spark.executor.memory: 512m
    spark.cores.max: "2"
    spark.scheduler.minRegisteredResourcesRatio: "1.0"
    spark.scheduler.maxRegisteredResourcesWaitingTime: 120s
"""


def sparkcdc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, with a user's PYSPARK_PYTHON (this interpreter)."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD,
        "SPARKCDC_TEST_PG_PASSWORD": PG_PASSWORD,
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


@pytest.fixture
def source(dev_server: DevServer) -> Any:
    """``cluster_run.t``: ROWS rows, then updates, deletes and inserts (all before the run)."""
    rng = random.Random(18)
    with dev_server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(
            f"CREATE TABLE {DATABASE}.t (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, "
            "qty INT, note TEXT)"
        )
        rows = [(i, f"name-{i}", rng.randint(0, 1000), f"note {i}" * (i % 4)) for i in range(ROWS)]
        cur.executemany(f"INSERT INTO {DATABASE}.t VALUES (%s, %s, %s, %s)", rows)
        ids = rng.sample(range(ROWS), 400)
        cur.executemany(
            f"UPDATE {DATABASE}.t SET qty = qty + 1, note = NULL WHERE id = %s",
            [(i,) for i in ids[:250]],
        )
        cur.executemany(f"DELETE FROM {DATABASE}.t WHERE id = %s", [(i,) for i in ids[250:]])
        cur.executemany(
            f"INSERT INTO {DATABASE}.t VALUES (%s, %s, %s, NULL)",
            [(ROWS + i, f"late-{i}", i) for i in range(100)],
        )
        conn.commit()
    yield dev_server
    with dev_server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")


@pytest.fixture
def target() -> Any:
    pg = DevPostgres.from_env()
    pg.start()
    drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA))
    with pg.connection() as conn:
        conn.execute(drop)
    yield pg
    with pg.connection() as conn:
        conn.execute(drop)


def pipeline_file(tmp_path: Path, server: DevServer, pg: DevPostgres) -> Path:
    return write_pipeline(
        PIPELINE, tmp_path, server, DATABASE, pg_port=pg.port, schema=SCHEMA, name=NAME
    )


def source_rows(server: DevServer) -> list[tuple[Any, ...]]:
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, name, qty, note FROM t")
        return sorted(cur.fetchall())


def target_rows(pg: DevPostgres) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT id, name, qty, note FROM {}.t").format(sql.Identifier(SCHEMA))
    with pg.connection() as conn:
        return sorted(tuple(row) for row in conn.execute(query).fetchall())


def test_run_on_a_standalone_cluster_equals_the_source_with_tasks_on_both_workers(
    spark_cluster: DevSpark, source: DevServer, target: DevPostgres, tmp_path: Path
) -> None:
    packaged = sparkcdc("package", "--output", str(tmp_path / "dist"), cwd=tmp_path)
    assert packaged.returncode == 0, packaged.stderr
    archive = next((tmp_path / "dist").glob("sparkcdc-*.zip"))
    pipeline = pipeline_file(tmp_path, source, target)

    done = sparkcdc(
        "run",
        str(pipeline),
        "--available-now",
        "--master",
        spark_cluster.master_url,
        "--py-files",
        str(archive),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    expected = source_rows(source)
    assert len(expected) == ROWS - 150 + 100
    assert target_rows(target) == expected

    # the application ran on this cluster (the master's REST answer), its tasks on both
    # workers: each worker's executor logged tasks in that worker's own work directory
    apps = [
        app
        for app in spark_cluster.status()["completedapps"] + spark_cluster.status()["activeapps"]
        if app["name"] == NAME
    ]
    assert len(apps) == 1, apps
    tasks = spark_cluster.executor_tasks(apps[0]["id"])
    assert sorted(tasks) == ["worker-1", "worker-2"]
    assert all(count > 0 for count in tasks.values()), tasks


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
    assert sparkcdc("package", "--output", str(tmp_path), cwd=tmp_path).returncode == 0
    archive = next(tmp_path.glob("sparkcdc-*.zip"))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, spark_cluster.master_url, str(archive)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    daemon, *rows = done.stdout.splitlines()
    assert daemon == "pyspark.daemon"  # not sparkcdc's worker daemon, not the launcher
    assert rows == [f"./{archive.name}/sparkcdc/__init__.py|{sys.executable}"], rows


def test_an_unreachable_master_stops_the_run_with_what_to_do(
    source: DevServer, target: DevPostgres, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pipeline = pipeline_file(tmp_path, source, target)
    done = sparkcdc("run", str(pipeline), "--master", f"spark://127.0.0.1:{port}", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the Spark master spark://127.0.0.1:{port} cannot be reached" in done.stderr
    assert "Traceback" not in done.stderr
