"""The private MinIO as the tests' S3: Spark reaches it through ``s3a://`` with
``DevMinio.spark_conf()`` and the S3A jars of ``jars/pom.xml``; pyarrow and delta-rs, which do
not share Spark's S3 client, read what Spark wrote.

Spark runs in a process of its own: ``spark.hadoop.*`` settings reach S3A only when they are
there as the session's JVM starts, and the tests' shared session may have started without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FileSelector

from sparkcdc_dev.devminio import DEV_ACCESS_KEY, DEV_SECRET_KEY, REGION, DevMinio

pytestmark = pytest.mark.integration

ROWS = [(1, "Ada", 12.5), (2, "Grace", None), (3, "Édouard", 7.25)]

# Writes ROWS as a Delta table, copies it with a streaming query whose checkpoint is on
# s3a:// too (Spark writes checkpoint files by rename: S3A's copy, then delete), and prints
# the table's rows read back, as JSON.
SPARK_SCRIPT = """
import json, sys
from sparkcdc.spark.session import spark_session

config = json.loads(sys.argv[1])
spark = spark_session("devminio-test", "local[2]", connectors=True, conf=config["conf"])
spark.sparkContext.setLogLevel("ERROR")
rows = [tuple(r) for r in config["rows"]]
frame = spark.createDataFrame(rows, "id INT, name STRING, amount DOUBLE")
frame.write.format("delta").mode("overwrite").save(config["table"])
copy = (
    spark.readStream.format("delta").load(config["table"])
    .writeStream.format("delta").option("checkpointLocation", config["checkpoint"])
    .trigger(availableNow=True).start(config["copy"])
)
copy.awaitTermination()
back = spark.read.format("delta").load(config["table"]).collect()
print(json.dumps(sorted(tuple(r) for r in back)))
spark.stop()
"""


@pytest.fixture(scope="module")
def minio() -> DevMinio:
    server = DevMinio.from_env()
    server.start()
    return server


def new_bucket(minio: DevMinio, prefix: str) -> str:
    """A bucket of its own for each test (so no test sees another's objects); its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    assert minio.bucket(name) == f"s3a://{name}"
    return name


def test_start_reuses_the_running_server(minio: DevMinio) -> None:
    started = time.monotonic()
    assert minio.start() == f"http://127.0.0.1:{minio.port}"
    assert time.monotonic() - started < 5  # reused, not started again
    assert minio.is_running()
    assert not DevMinio(port=minio.console_port).is_running()  # the console is no S3 API


def test_bucket_is_created_once(minio: DevMinio) -> None:
    name = new_bucket(minio, "twice")
    assert minio.bucket(name) == f"s3a://{name}"  # exists: nothing to do, no error
    assert name in {info.path for info in minio.filesystem().get_file_info(FileSelector(""))}


def test_parquet_through_pyarrow(minio: DevMinio) -> None:
    name = new_bucket(minio, "pyarrow")
    table = pa.table({"id": [1, 2, 3], "name": ["a", None, "é"]})
    pq.write_table(table, f"{name}/dir/part-0.parquet", filesystem=minio.filesystem())
    assert pq.read_table(f"{name}/dir", filesystem=minio.filesystem()).equals(table)


@pytest.mark.e2e
def test_spark_delta_table_and_checkpoint_on_s3a(minio: DevMinio) -> None:
    name = new_bucket(minio, "spark")
    config = {
        "conf": minio.spark_conf(),
        "rows": ROWS,
        "table": f"s3a://{name}/t",
        "copy": f"s3a://{name}/copy",
        "checkpoint": f"s3a://{name}/checkpoint",
    }
    done = subprocess.run(
        [sys.executable, "-c", SPARK_SCRIPT, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    expected = sorted(ROWS)
    assert [tuple(r) for r in json.loads(done.stdout.strip().splitlines()[-1])] == expected

    # delta-rs, with an S3 client of its own, reads the table and the streaming copy
    for table in ("t", "copy"):
        reader = deltalake.DeltaTable(
            f"s3://{name}/{table}", storage_options=_delta_rs_options(minio)
        )
        found = reader.to_pyarrow_table().to_pylist()
        assert sorted((r["id"], r["name"], r["amount"]) for r in found) == expected, table
    # the streaming query's progress is on the bucket: batch 0 planned and committed
    fs = minio.filesystem()
    for kept in ("offsets/0", "commits/0", "metadata"):
        assert fs.get_file_info(f"{name}/checkpoint/{kept}").is_file, kept


def _delta_rs_options(minio: DevMinio) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": minio.endpoint,
        "AWS_ACCESS_KEY_ID": DEV_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": DEV_SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
