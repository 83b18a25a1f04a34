"""A pipeline whose sink tables, checkpoint and source state all live on an object store (the
private MinIO, reached as ``s3a://``): Delta in Spark's catalog with its warehouse on the
store (in memory, or a Hive metastore); Iceberg in a hadoop catalog, or in a jdbc catalog on
PostgreSQL. Delta by path on the store is test_cluster_run.py's, the same story on a cluster
(here it took ~160 s of a suite CI must run in 90 minutes). Run as users run it, each run
from another working directory: ``sparkcdc run`` killed (driver and JVM) mid-snapshot under
concurrent writes (one sink of each format, ``KILLED``), run again to the end while the
writes go on, then after a DDL and more writes once more, and ``sparkcdc status``. The sink
table (read by delta-rs or pyiceberg, not by Spark) equals the source, the checkpoint's
files are on the store, and nothing lands in the working directories (before the filesystem
layer, the schema history and status.json went to ``./s3a:/...``).

The Hive metastore and the Iceberg jdbc catalog run with ``SPARKCDC_THOROUGH=1`` only
(``REPEATS``): CI must run the suite in 90 minutes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipelines import (
    RowChanges,
    Writer,
    chunks_left,
    delta_rows,
    fresh_database,
    pipeline_env,
    sink_params,
)

from sparkcdc.locations import Location, open_location
from sparkcdc.pipeline.status import committed_offset
from sparkcdc_dev.devminio import DevMinio
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)

DATABASE = "objstore_db"
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.t
  server-id: 5890-5899
  scan.incremental.snapshot.chunk.size: 200
  scan.incremental.snapshot.chunks-per-batch: 2
sink:
{sink}
pipeline:
  name: object-store
  checkpoint: s3a://{bucket}/cdc/object-store
  spark.conf:
{conf}
"""


@pytest.fixture
def postgres() -> DevPostgres:
    """The private PostgreSQL (a jdbc catalog's database)."""
    pg = DevPostgres.from_env()
    pg.start()
    return pg


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s)", [(i, i * 3, f"row {i}") for i in range(1, 2001)]
        )
    yield conn
    conn.close()


def run_killed_after_a_commit(pipeline: Path, cwd: Path, checkpoint: Location) -> None:
    """``sparkcdc run`` killed (its JVM with it) once it has committed a batch."""
    command = [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline)]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=pipeline_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while committed_offset(checkpoint) is None:
            assert process.poll() is None, f"the run ended early (exit {process.returncode})"
            assert time.monotonic() < deadline, "no batch committed within 300 s"
            time.sleep(0.5)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sparkcdc.cli.main", *args]
    done = subprocess.run(
        command, cwd=cwd, env=pipeline_env(), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{args[0]} exit {done.returncode}:\n{done.stderr[-4000:]}"
    return done


# per sink: its block, and more pipeline.spark.conf lines
SINKS = {
    # catalog mode: Spark's catalog (in memory, each run) keeps the tables in its warehouse
    "delta-catalog": ("  type: delta", "    spark.sql.warehouse.dir: s3a://{bucket}/warehouse"),
    # a persistent catalog: Spark's Hive metastore (embedded Derby, kept outside the working
    # directories, its log too), the tables in its warehouse on the store
    "delta-hive": (
        "  type: delta",
        "    spark.sql.warehouse.dir: s3a://{bucket}/warehouse\n"
        "    spark.sql.catalogImplementation: hive\n"
        "    spark.hadoop.javax.jdo.option.ConnectionURL: "
        '"jdbc:derby:;databaseName={metastore}/db;create=true"\n'
        "    spark.driver.extraJavaOptions: -Dderby.system.home={metastore}",
    ),
    "iceberg": (
        "  type: iceberg\n  catalog.name: {catalog}\n"
        "  catalog.properties.warehouse: s3a://{bucket}/warehouse",
        "",
    ),
    # a jdbc catalog: the tables' metadata pointers in PostgreSQL, their files on MinIO
    "iceberg-jdbc": (
        "  type: iceberg\n  catalog.name: {catalog}\n"
        "  catalog.properties.type: jdbc\n"
        "  catalog.properties.uri: jdbc:postgresql://127.0.0.1:{pg_port}/sink_db\n"
        "  catalog.properties.jdbc.user: cdc\n"
        "  catalog.properties.jdbc.password: ${{SPARKCDC_TEST_PG_PASSWORD}}\n"
        "  catalog.properties.warehouse: s3a://{bucket}/warehouse",
        "",
    ),
}
COLUMNS = ("id", "v", "s", "w")
# killed mid-snapshot first: one sink per table format (a catalog's own part is creating,
# finding and altering the table, which the runs after it do; a kill costs ~40 s a run)
KILLED = ("delta-catalog", "iceberg")
# run with SPARKCDC_THOROUGH=1 only: a persistent catalog's own part (the Hive metastore keeps
# the table between runs) over the same store, runs and kills as delta-catalog's (~160 s
# here); a jdbc catalog's (its pointer to the table's metadata) is also
# test_iceberg_sink.py's test_jdbc_catalog_on_mariadb (~107 s here)
REPEATS = ("delta-hive", "iceberg-jdbc")


def sink_rows(sink: str, minio: DevMinio, bucket: str) -> list[tuple[Any, ...]]:
    """The sink table's rows read without Spark: delta-rs, or pyiceberg from the table's
    current metadata file (a hadoop catalog's version-hint, a jdbc catalog's row)."""
    if sink in ("delta-catalog", "delta-hive"):  # managed: <warehouse>/<db>.db/<table>
        return delta_rows(minio, f"{bucket}/warehouse/{DATABASE}.db/t", COLUMNS)
    if sink == "iceberg":
        metadata = f"{bucket}/warehouse/{DATABASE}/t/metadata"
        with minio.filesystem().open_input_stream(f"{metadata}/version-hint.text") as hint:
            version = hint.read().decode().strip()
        return iceberg_rows(minio, f"s3://{metadata}/v{version}.metadata.json")
    pg = DevPostgres.from_env()
    with pg.connection() as conn:
        found = conn.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = %s "
            "AND table_namespace = %s AND table_name = 't'",
            (catalog_name(bucket), DATABASE),
        ).fetchone()
    assert found is not None, "the jdbc catalog has no row for the table"
    return iceberg_rows(minio, "s3://" + str(found[0]).split("://", 1)[1])


def iceberg_rows(minio: DevMinio, metadata: str) -> list[tuple[Any, ...]]:
    from pyiceberg.table import StaticTable

    conf = minio.spark_conf()
    properties = {
        "s3.endpoint": conf["spark.hadoop.fs.s3a.endpoint"],
        "s3.access-key-id": conf["spark.hadoop.fs.s3a.access.key"],
        "s3.secret-access-key": conf["spark.hadoop.fs.s3a.secret.key"],
        "s3.region": "us-east-1",
    }
    frame = StaticTable.from_metadata(metadata, properties).scan(selected_fields=COLUMNS)
    return sorted(tuple(row[c] for c in COLUMNS) for row in frame.to_arrow().to_pylist())


def catalog_name(bucket: str) -> str:
    """The Iceberg catalog's name: the bucket's (a jdbc catalog's rows outlive the test)."""
    return bucket.replace("-", "_")


def source_rows(conn: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute("SELECT id, v, s, w FROM t")
        return sorted(tuple(row) for row in cur.fetchall())


@pytest.mark.parametrize("sink", sink_params(sorted(SINKS), REPEATS))
def test_sink_checkpoint_and_state_on_an_object_store(
    server: DevServer,
    source: Any,
    minio: DevMinio,
    bucket: str,
    postgres: DevPostgres,
    tmp_path: Path,
    sink: str,
) -> None:
    settings = server.start()
    block, more_conf = SINKS[sink]
    fields = {"bucket": bucket, "catalog": catalog_name(bucket), "pg_port": postgres.port}
    fields["metastore"] = str(tmp_path / "metastore")
    conf = [f"    {k}: {v}" for k, v in minio.spark_conf().items()]
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        PIPELINE.format(
            host=settings.host,
            port=settings.port,
            database=DATABASE,
            bucket=bucket,
            conf="\n".join([*conf, more_conf.format(**fields)]),
            sink=block.format(**fields),
        )
    )
    hadoop = {k.removeprefix("spark.hadoop."): v for k, v in minio.spark_conf().items()}
    checkpoint = open_location(f"s3a://{bucket}/cdc/object-store", hadoop)
    directories = [tmp_path / name for name in ("first", "second", "third", "fourth")]
    for directory in directories:
        directory.mkdir()

    with Writer(server, DATABASE, seed=31, workload=RowChanges, pause_s=0.01):
        if sink in KILLED:
            run_killed_after_a_commit(pipeline, directories[0], checkpoint)
            assert chunks_left(checkpoint), (
                f"the run was to be killed mid-snapshot, its last commit is "
                f"{committed_offset(checkpoint)}"
            )
        second = cli(["run", str(pipeline), "--available-now"], directories[1])
    with source.cursor() as cur:
        cur.execute("UPDATE t SET v = v + 1 WHERE id % 7 = 0")
        cur.execute("DELETE FROM t WHERE id % 11 = 0")
        cur.execute("ALTER TABLE t ADD COLUMN w INT DEFAULT 5")
        cur.execute("INSERT INTO t (id, v, s, w) VALUES (5000, 1, 'after the DDL', 9)")
        cur.execute("UPDATE t SET w = 6 WHERE id % 13 = 0")
    cli(["run", str(pipeline), "--available-now"], directories[2])
    if sink.startswith("delta"):
        # an in-memory catalog forgets the table when a run ends (the next registers it
        # again); the Hive metastore keeps it
        adopted = "registered the Delta table" in second.stderr
        assert adopted == (sink == "delta-catalog"), second.stderr[-3000:]

    assert sink_rows(sink, minio, bucket) == source_rows(source)
    status = cli(["status", str(pipeline)], directories[3]).stdout
    assert "phase: binlog; last committed batch" in status and "(lag 0 bytes)" in status, status
    assert "objstore_db.t: 2 versions" in status, status  # the schema history, from the store
    # the checkpoint's own files are on the store, next to Spark's
    assert {"spark", "schema", "source-state", "status.json"} <= set(checkpoint.children())
    for directory in directories:
        assert os.listdir(directory) == [], f"written to the working directory {directory}"
