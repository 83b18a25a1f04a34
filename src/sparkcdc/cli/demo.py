"""The quickstart job: a private MariaDB with sample data, its changes streamed by Spark."""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from typing import Any

from sparkcdc.devserver import DEV_PASSWORD, DEV_USER, DevServer

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


def run_demo(seconds: float = 20.0) -> None:
    from sparkcdc.spark.session import spark_session

    server = DevServer.from_env()
    settings = server.start()
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
    print(f"MariaDB with sample table app_db.orders on {settings.host}:{settings.port}")
    state = tempfile.mkdtemp(prefix="sparkcdc-demo-state-")

    spark = spark_session("sparkcdc-demo")
    spark.sparkContext.setLogLevel("WARN")
    changes = (
        spark.readStream.format("mysql-cdc")
        .option("hostname", settings.host)
        .option("port", str(settings.port))
        .option("username", DEV_USER)
        .option("password", DEV_PASSWORD)
        .option("database-name", "app_db")
        .option("table-name", "orders")
        .option("scan.startup.mode", "initial")  # snapshot the table, then follow the binlog
        .option("state.location", state)
        .option("scan.incremental.snapshot.chunk.size", "20")
        .load()
    )

    def show(batch: Any, batch_id: int) -> None:
        rows = batch.count()
        if rows:
            print(f"--- batch {batch_id}: {rows} change rows")
            batch.select("_op", "_seq", "id", "customer", "amount", "status").show(
                20, truncate=False
            )

    query = changes.writeStream.foreachBatch(show).trigger(processingTime="2 seconds").start()
    stop = threading.Event()
    writer = threading.Thread(target=_write_changes, args=(server, stop, seconds), daemon=True)
    writer.start()
    try:
        writer.join()
        query.processAllAvailable()
    finally:
        stop.set()
        query.stop()
        spark.stop()
        shutil.rmtree(state, ignore_errors=True)
    print(
        "demo done: the +I rows of the first batches are the snapshot (read in chunks without "
        "locks); every change after them came from the MariaDB binlog"
    )
