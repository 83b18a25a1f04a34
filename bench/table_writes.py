"""A batch's Delta sink tables written at once against one after the other.

Runnable with no arguments after scripts/test.sh's set-up (it starts the private MariaDB):

    python bench/table_writes.py [--tables 4] [--seconds 60] [--rounds 2]

``--tables`` tables of 20,000 rows each, copied to Delta once; then, in turns, a pipeline in
the binlog phase (``trigger.interval: 0``: the next micro-batch as soon as one ends) follows
them with ``pipeline.table-writes.parallelism: 1`` and with ``--tables``, ``--seconds`` each,
``--rounds`` times, while a writer commits a transaction every 0.2 s that updates five rows and
inserts one in every table (so each batch touches every table). Both run in one Spark session
made as ``sparkcdc run`` makes a pipeline's. A batch's time is the time between two batches'
ends (the first batch of each run left out: start-up). ``vs_sequential`` = median batch time one
table after the other / median batch time at once. After the runs the Delta tables are
compared with the source (row count and a sum). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.run_plan import PIPELINE_DEFAULTS
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.spark.session import spark_session
from sparkcdc_dev.devserver import DEV_PASSWORD, DEV_USER, DevServer

DATABASE = "bench_table_writes"
ROWS = 20_000
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: {user}
  password: ${{BENCH_PASSWORD}}
  tables: {database}.t[0-9]+
  server-id: 5910-5919
sink:
  type: delta
  path: {work}/lake
pipeline:
  name: bench-table-writes
  checkpoint: {work}/checkpoint
  trigger.interval: 0s
  table-writes.parallelism: {parallelism}
"""


def prepare(server: DevServer, tables: int) -> None:
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"USE {DATABASE}")  # the sequence tables are the current database's
        for t in range(tables):
            cur.execute(f"CREATE TABLE t{t} (id INT PRIMARY KEY, v INT, s VARCHAR(40))")
            cur.execute(
                f"INSERT INTO t{t} SELECT seq, seq, CONCAT('row ', seq) FROM seq_1_to_{ROWS}"
            )
        conn.commit()


def write(server: DevServer, tables: int, stop: threading.Event) -> None:
    conn = server.connection(DATABASE)
    conn.autocommit(False)  # one transaction a step
    step = 0
    with conn.cursor() as cur:
        while not stop.is_set():
            low = step * 5 % (ROWS - 5) + 1
            for t in range(tables):
                cur.execute(f"UPDATE t{t} SET v = v + 1 WHERE id BETWEEN {low} AND {low + 4}")
                cur.execute(f"INSERT INTO t{t} VALUES ({ROWS + 1 + step}, 0, 'new')")
            conn.commit()
            step += 1
            stop.wait(0.2)
    conn.close()


def follow(config: Any, spark: Any, seconds: float) -> list[float]:
    """The run's batch times (between two batches' ends), its first batch left out."""
    ends: list[float] = []
    run_pipeline(
        config,
        spark=spark,
        on_batch=lambda batch, rows: ends.append(time.monotonic()),
        max_seconds=seconds,
    )
    return [b - a for a, b in itertools.pairwise(ends)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0, help="each run")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server = DevServer.from_env()
    settings = server.start()
    prepare(server, args.tables)
    work = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-"))
    spark = spark_session(
        "sparkcdc-table-writes-bench",
        "local[2]",
        connectors=True,
        defaults=PIPELINE_DEFAULTS,
        pipeline_driver=True,
    )
    spark.sparkContext.setLogLevel("ERROR")

    def config(parallelism: int) -> Any:
        text = PIPELINE.format(
            host=settings.host,
            port=settings.port,
            user=DEV_USER,
            database=DATABASE,
            work=work,
            parallelism=parallelism,
        )
        return parse_pipeline(text, env={"BENCH_PASSWORD": DEV_PASSWORD}, base_dir=work)

    run_pipeline(config(1), available_now=True, spark=spark)  # the copy, and warm-up
    stop = threading.Event()
    writer = threading.Thread(target=write, args=(server, args.tables, stop), daemon=True)
    writer.start()
    times: dict[int, list[float]] = {1: [], args.tables: []}
    try:
        for _ in range(args.rounds):
            for parallelism in times:
                batches = follow(config(parallelism), spark, args.seconds)
                times[parallelism].extend(batches)
                print(
                    f"parallelism {parallelism}: {[round(b, 1) for b in batches]}", file=sys.stderr
                )
    finally:
        stop.set()
        writer.join()
    run_pipeline(config(args.tables), available_now=True, spark=spark)  # the rest
    equal = True
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        for t in range(args.tables):
            cur.execute(f"SELECT COUNT(*), SUM(v) FROM t{t}")
            source = tuple(int(x) for x in cur.fetchone())
            sink = spark.sql(
                f"SELECT COUNT(*), SUM(v) FROM delta.`{work}/lake/{DATABASE}/t{t}`"
            ).collect()[0]
            equal = equal and source == (int(sink[0]), int(sink[1]))
    spark.stop()
    sequential = statistics.median(times[1])
    concurrent = statistics.median(times[args.tables])
    print(
        json.dumps(
            {
                "tables": args.tables,
                "sequential_batch_s": round(sequential, 2),
                "concurrent_batch_s": round(concurrent, 2),
                "vs_sequential": round(sequential / concurrent, 2),
                "batches": {str(k): len(v) for k, v in times.items()},
                "sink_equals_source": equal,
            }
        )
    )


if __name__ == "__main__":
    main()
