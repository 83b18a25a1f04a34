"""The quickstart job: a private MariaDB with sample data, its changes streamed by Spark."""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from sparkcdc.errors import SparkCdcError
from sparkcdc_dev.devserver import DEV_PASSWORD, DEV_USER, DevServer

SAMPLE_DDL = """
CREATE TABLE IF NOT EXISTS orders (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  customer VARCHAR(64) NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)
)
"""
CUSTOMERS = ["Ada", "Grace", "Linus", "Ken", "Barbara", "Edsger", "Zoë", "Jürgen"]


def _write_changes(server: DevServer, stop: threading.Event, seconds: float) -> None:
    rng = random.Random(7)
    deadline = time.monotonic() + seconds
    with server.connection("app_db") as conn, conn.cursor() as cur:
        while not stop.is_set() and time.monotonic() < deadline:
            choice = rng.random()
            if choice < 0.6:
                cur.execute(
                    "INSERT INTO orders (customer, amount) VALUES (%s, %s)",
                    (rng.choice(CUSTOMERS), round(rng.uniform(1, 500), 2)),
                )
            elif choice < 0.9:
                cur.execute(
                    "UPDATE orders SET status = %s ORDER BY RAND() LIMIT 1",
                    (rng.choice(["paid", "shipped"]),),
                )
            else:
                cur.execute("DELETE FROM orders ORDER BY RAND() LIMIT 1")
            time.sleep(0.2)


DEMO_PIPELINE = """\
# The quickstart pipeline: every table of app_db on the private MariaDB -> local Delta tables.
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: {user}
  password: ${{SPARKCDC_DEMO_PASSWORD:-{password}}}  # the private dev server's password
  tables: app_db.\\.*
  server-id: 5500-5510
  scan.incremental.snapshot.chunk.size: 20
sink:
  type: delta
  path: {lake}
pipeline:
  name: demo-app-db-to-delta
  checkpoint: {checkpoint}
  trigger.interval: 1s
"""


def _seed(server: DevServer) -> None:
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS app_db")
        cur.execute("USE app_db")
        cur.execute(SAMPLE_DDL)
        cur.execute("SELECT COUNT(*) FROM orders")
        (count,) = cur.fetchone() or (0,)
        if count == 0:
            rng = random.Random(1)
            cur.executemany(
                "INSERT INTO orders (customer, amount) VALUES (%s, %s)",
                [(rng.choice(CUSTOMERS), round(rng.uniform(1, 500), 2)) for _ in range(50)],
            )


def run_demo(
    seconds: float = 20.0, workdir: str | None = None, spark_log: str | None = None
) -> None:
    """Sample data in a private MariaDB, synced into a local Delta table, checked, shown
    (``spark_log``: where Spark's own log goes; None: the console)."""
    import os

    from sparkcdc.pipeline.config import load_pipeline
    from sparkcdc.pipeline.runner import run_pipeline

    server = DevServer.from_env()
    settings = server.start()
    _seed(server)
    print(f"MariaDB with sample table app_db.orders on {settings.host}:{settings.port}")
    base = Path(workdir or os.path.join(tempfile.gettempdir(), "sparkcdc-demo"))
    shutil.rmtree(base, ignore_errors=True)  # each demo run starts a fresh pipeline
    base.mkdir(parents=True)
    lake, checkpoint = base / "lake", base / "checkpoint"
    pipeline_file = base / "pipeline.yaml"
    pipeline_file.write_text(
        DEMO_PIPELINE.format(
            host=settings.host,
            port=settings.port,
            user=DEV_USER,
            password=DEV_PASSWORD,
            lake=lake,
            checkpoint=checkpoint,
        )
    )
    config = load_pipeline(pipeline_file)
    print(f"pipeline file: {pipeline_file}")

    stop = threading.Event()
    writer = threading.Thread(target=_write_changes, args=(server, stop, seconds), daemon=True)
    writer.start()
    print(f"1) snapshot + live changes (writing inserts/updates/deletes for {seconds:.0f}s)")
    first = run_pipeline(config, available_now=True, spark_log=spark_log)
    writer.join()
    print("2) the same pipeline again, from its checkpoint: the changes written since")
    second = run_pipeline(config, available_now=True, spark_log=spark_log)
    print(
        f"   {first.total_rows + second.total_rows} change rows in "
        f"{first.batches + second.batches} batches written to Delta"
    )
    _check_and_show(server, str(lake / "app_db" / "orders"))
    print(
        "\nQuery it yourself:\n"
        "  python -c \"import deltalake; print(deltalake.QueryBuilder().register('t', "
        f"deltalake.DeltaTable('{lake}/app_db/orders')).execute('SELECT * FROM t').read_all())\"\n"
        f"  or in PySpark (sparkcdc.spark_session(connectors=True)): "
        f"spark.read.format('delta').load('{lake}/app_db/orders')\n"
        f"  sparkcdc status {pipeline_file}    # where the pipeline is\n"
        f"  sparkcdc run {pipeline_file}       # keep it in sync (Ctrl-C to stop)"
    )


def _check_and_show(server: DevServer, table_path: str) -> None:
    """Compare the Delta table (read with delta-rs, not Spark) with the source table."""
    import deltalake
    import pyarrow as pa

    # DataFusion's reader: DeltaTable.to_pandas refuses the sink's deletion vectors
    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(table_path))
    frame = pa.table(reader.execute("SELECT * FROM t").read_all()).to_pandas().sort_values("id")
    with server.connection("app_db") as conn, conn.cursor() as cur:
        cur.execute("SELECT id, customer, amount, status FROM orders ORDER BY id")
        source = [(int(i), c, str(a), s) for i, c, a, s in cur.fetchall()]
    synced = [
        (int(r.id), r.customer, str(r.amount), r.status)
        for r in frame[["id", "customer", "amount", "status"]].itertuples()
    ]
    verdict = "equals" if synced == source else "DIFFERS FROM"
    print(f"3) the Delta table ({len(synced)} rows) {verdict} app_db.orders ({len(source)} rows)")
    print(frame[["id", "customer", "amount", "status"]].tail(10).to_string(index=False))
    if synced != source:
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    """``python -m sparkcdc_dev.demo``: the quickstart (scripts/demo.sh runs it)."""
    parser = argparse.ArgumentParser(
        prog="python -m sparkcdc_dev.demo",
        description="start a private MariaDB with sample data and sync it into a local Delta table",
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to write changes")
    parser.add_argument("--workdir", default=None, help="where the Delta table and checkpoint go")
    parser.add_argument("-v", "--verbose", action="store_true", help="Spark's log on the console")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark_log = None
    if not args.verbose:
        spark_log = os.path.join(tempfile.gettempdir(), "sparkcdc-demo-spark.log")
        print(f"Spark's own log: {spark_log}")
    try:
        run_demo(seconds=args.seconds, workdir=args.workdir, spark_log=spark_log)
    except SparkCdcError as exc:
        print(f"sparkcdc demo: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
