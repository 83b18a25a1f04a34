"""``sparkcdc verify`` throughput against the snapshot that copied the table.

Runnable with no arguments after scripts/test.sh's set-up (it starts the private MariaDB):

    python bench/verify.py [--rows 2000000]

Loads the table of bench/snapshot.py (``--rows`` rows, 8 mixed columns), copies it to Delta
with a pipeline (``--available-now``: the snapshot, then the binlog), then, in the same run
with ``local[2]``: sparkcdc's snapshot of the same table into Spark's no-op sink (the
reference: reading the source, nothing written), and ``verify`` of the pipeline (the source
aggregated in the database, the Delta table read by delta-rs and hashed in Python: no
Spark). The last line printed is one JSON object; the target is ``verify_vs_snapshot`` >= 1
(verify no slower than the snapshot).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from snapshot import DATABASE, load, sparkcdc_snapshot

from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.verify.run import verify_pipeline
from sparkcdc.spark.session import spark_session
from sparkcdc_dev.devserver import DevServer

PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: {user}
  password: {password}
  tables: {database}.big
  server-id: 6200-6209
sink:
  type: delta
  path: {lake}
pipeline:
  name: bench-verify
  checkpoint: {checkpoint}
  parallelism: 2
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    server = DevServer.from_env()
    settings = server.start()
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    load(server, "big", args.rows)
    print(f"table loaded: big {args.rows} rows", file=sys.stderr)

    spark = spark_session(
        "bench-verify", "local[2]", connectors=True, conf={"spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-verify-"))
    try:
        config = parse_pipeline(
            PIPELINE.format(
                host=settings.host,
                port=settings.port,
                user=settings.user,
                password=settings.password,
                database=DATABASE,
                lake=workdir / "lake",
                checkpoint=workdir / "checkpoint",
            ),
            base_dir=workdir,
        )
        began = time.perf_counter()
        run_pipeline(config, available_now=True, spark=spark)
        copy_s = time.perf_counter() - began
        snapshot_s = sparkcdc_snapshot(spark, server, "big", workdir)
        began = time.perf_counter()
        report = verify_pipeline(config, spark=spark, timeout_s=60)
        verify_s = time.perf_counter() - began
        print(report.text(), file=sys.stderr)
        assert report.equal, "the copy differs from its source"
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    rows = args.rows
    print(
        json.dumps(
            {
                "rows": rows,
                "verify_rows_per_s": round(rows / verify_s),
                "snapshot_rows_per_s": round(rows / snapshot_s),
                "verify_vs_snapshot": round(snapshot_s / verify_s, 2),
                "pipeline_copy_to_delta_rows_per_s": round(rows / copy_s),
                "verify_vs_pipeline_copy": round(copy_s / verify_s, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
