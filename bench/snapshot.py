"""Snapshot throughput: sparkcdc's exact, chunked snapshot vs Spark's JDBC copy and raw reads.

Runnable with no arguments after scripts/test.sh's set-up (it starts the private MariaDB and
fetches the JDBC driver with Maven):

    python bench/snapshot.py [--rows 2000000] [--rounds 3] [--master spark://HOST:PORT|dev]

Loads a table of ``--rows`` rows (8 mixed columns) and, in one run, with ``local[2]``,
after a warm-up of both Spark paths on a quarter-size table, ``--rounds`` times in turn
(the median of each counts):
  - sparkcdc: ``scan.startup.mode=snapshot`` into Spark's no-op sink (Trigger.AvailableNow,
    every chunk in one batch), chunk size 8096;
  - (a) Spark's built-in JDBC reader (MariaDB Connector/J) partitioned on the key into the
    same number of ranges, into the same no-op sink;
  - (b) the raw read limit: connectorx reading the same ranges in parallel, outside Spark;
and once:
  - sparkcdc's snapshot over TLS (``ssl-mode=required``; connectorx cannot read over TLS, so
    its chunks are read on the TLS connection by the compiled text splitter, or by pymysql
    where it is not built): ``tls_snapshot_rows_per_s``, ``tls_vs_plain``;
  - (c) sparkcdc's snapshot again while ~1,000 changes/s are written to the table;
  - the peak RSS of Spark's Python workers at a quarter of the size and at full size, to show
    it is bounded by chunk size x parallelism, not table size.
With ``--master`` (a Spark master URL, or ``dev`` for the private standalone cluster of
testing/devspark.py: two one-core workers on loopback), after all of that, in a session on
that master (sparkcdc shipped to the executors as ``sparkcdc package``'s zip, the state on a
folder under /var/tmp, which every worker there sees): a warm-up on the small table, then
``--rounds`` snapshots of the big one (``cluster_snapshot_rows_per_s``, ``cluster_vs_local``
beside the local[2] median) and how many tasks ran on each executor host
(``cluster_tasks_per_host``). On this 2-core machine expect parity, not a speed-up.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sparkcdc.spark.connectors import connector_jars
from sparkcdc.spark.session import spark_session
from sparkcdc_dev.devserver import DevServer

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "bench_snap"
CHUNK = 8096
DDL = """
CREATE TABLE {name} (
  id BIGINT NOT NULL PRIMARY KEY,
  user_id INT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  score DOUBLE,
  name VARCHAR(64) CHARACTER SET utf8mb4,
  status ENUM('new','paid','shipped','cancelled') NOT NULL,
  created_at DATETIME(3) NOT NULL,
  note TEXT
)
"""
FILL = """
INSERT INTO {name}
SELECT seq, seq % 100000, (seq % 99999) / 100, seq / 7, CONCAT('name-', seq, '-ü'),
       ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled'),
       TIMESTAMP('2026-01-01') + INTERVAL seq SECOND, REPEAT('x', seq % 40)
FROM seq_{first}_to_{last}
"""


def load(server: DevServer, name: str, rows: int) -> None:
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='{DATABASE}' "
            f"AND TABLE_NAME='{name}'"
        )
        if cur.fetchone()[0]:
            cur.execute(f"SELECT COUNT(*) FROM {name}")
            if cur.fetchone()[0] == rows:
                return
            cur.execute(f"DROP TABLE {name}")
        cur.execute(DDL.format(name=name))
        cur.execute(FILL.format(name=name, first=1, last=rows))


# how Spark's Python workers show in their command line: Spark's own daemon and worker, and
# the daemon spark_session sets (spark.python.daemon.module), whose forks are the workers
WORKER_MODULES = (b"pyspark.daemon", b"pyspark.worker", b"sparkcdc.spark.worker_daemon")


class RssSampler:
    """Peak resident memory of Spark's Python worker processes (read from /proc).

    Only workers started by this process or its children count (Spark sessions of the
    benchmark and of the ``sparkcdc`` commands it runs), not those of other sessions on the
    machine.
    """

    def __init__(self) -> None:
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        root = os.getpid()
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if not any(m in cmd for m in WORKER_MODULES) or not _descends(int(pid), root):
                        continue
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            self.peak_mb = max(self.peak_mb, int(line.split()[1]) / 1024)
                except OSError:
                    continue
            time.sleep(0.1)


def _descends(pid: int, root: int) -> bool:
    """Whether process ``pid`` is ``root`` or one of its descendants."""
    while pid > 1:
        if pid == root:
            return True
        # the parent pid is the field after the parenthesised command name
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return False


def sparkcdc_snapshot(
    spark: Any, server: DevServer, table: str, workdir: Path, ssl_mode: str = "disabled"
) -> float:
    """Seconds to snapshot ``table`` into the no-op sink, on connections of ``ssl_mode``
    (``disabled``: plain TCP as the JDBC reference reads, and connectorx reads chunks)."""
    state, checkpoint = workdir / f"state-{table}", workdir / f"ckpt-{table}"
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(checkpoint, ignore_errors=True)
    s = server.settings
    reader = spark.readStream.format("mysql-cdc")
    for key, value in {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": DATABASE,
        "table-name": table,
        "scan.startup.mode": "snapshot",
        "state.location": str(state),
        "scan.incremental.snapshot.chunk.size": str(CHUNK),
        "scan.incremental.snapshot.chunks-per-batch": "0",
        "server-id": "6100-6110",
        "ssl-mode": ssl_mode,
    }.items():
        reader = reader.option(key, value)
    began = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    shutil.rmtree(state, ignore_errors=True)
    return elapsed


def spark_jdbc(spark: Any, server: DevServer, table: str, rows: int) -> float:
    began = time.perf_counter()
    jdbc_frame(spark, server, table, rows).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def jdbc_frame(spark: Any, server: DevServer, table: str, rows: int) -> Any:
    """Spark's built-in JDBC reader on ``table``, partitioned on the key into as many ranges
    as sparkcdc has chunks: the plain way to read the table into Spark."""
    s = server.settings
    return (
        spark.read.format("jdbc")
        # the mysql: scheme makes Spark use its MySQL dialect (backtick quoting)
        .option("url", f"jdbc:mysql://{s.host}:{s.port}/{DATABASE}?permitMysqlScheme")
        .option("driver", "org.mariadb.jdbc.Driver")
        .option("dbtable", table)
        .option("user", s.user)
        .option("password", s.password)
        .option("partitionColumn", "id")
        .option("lowerBound", "1")
        .option("upperBound", str(rows))
        .option("numPartitions", str(-(-rows // CHUNK)))
        .option("fetchsize", "10000")
        .load()
    )


def raw_connectorx(server: DevServer, table: str, rows: int) -> float:
    import connectorx as cx

    s = server.settings
    url = f"mysql://{s.user}:{s.password}@{s.host}:{s.port}/{DATABASE}"
    queries = [
        f"SELECT * FROM {table} WHERE id >= {lo} AND id < {lo + CHUNK}"
        for lo in range(1, rows + 1, CHUNK)
    ]
    began = time.perf_counter()
    total = 0
    for i in range(0, len(queries), 2):  # two at a time, as local[2] runs two tasks
        table_ = cx.read_sql(url, queries[i : i + 2], return_type="arrow")
        total += table_.num_rows
    elapsed = time.perf_counter() - began
    assert total == rows, (total, rows)
    return elapsed


def write_load(
    server: DevServer, table: str, rows: int, stop: threading.Event, rate: float, done: list[int]
) -> None:
    import random

    rng = random.Random(1)
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        began = time.perf_counter()
        n = 0
        while not stop.is_set():
            for _ in range(10):
                cur.execute(
                    f"UPDATE {table} SET amount = amount + 1 WHERE id = %s", (rng.randint(1, rows),)
                )
                n += 1
            ahead = n / rate - (time.perf_counter() - began)
            if ahead > 0:
                time.sleep(ahead)
        done.append(n)
        done.append(int((time.perf_counter() - began) * 1000))


def cluster_snapshots(
    master: str, server: DevServer, rounds: int
) -> tuple[list[float], dict[str, int]]:
    """Seconds of each of ``rounds`` snapshots of ``big`` on ``master`` (after one of
    ``small``), and the tasks each executor host ran."""
    from sparkcdc.cli.package import package_sparkcdc

    loopback = {}
    if master == "dev":
        from sparkcdc_dev.devspark import DevSpark

        master = DevSpark.from_env().start()
        loopback = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    # a folder every worker of the private cluster sees (each has a /tmp of its own)
    shared = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-", dir="/var/tmp"))
    built = package_sparkcdc(shared / "dist")
    spark = spark_session(
        "bench-snapshot-cluster",
        master,
        conf={
            "spark.ui.showConsoleProgress": "false",
            "spark.submit.pyFiles": str(built.archive),
            "spark.pyspark.python": sys.executable,
            "spark.executor.memory": "1g",
            # no job before every executor has registered (the tasks spread over them)
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
            **loopback,
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        sparkcdc_snapshot(spark, server, "small", shared)
        times = [sparkcdc_snapshot(spark, server, "big", shared) for _ in range(rounds)]
        tasks = tasks_per_host(spark)
    finally:
        spark.stop()
        shutil.rmtree(shared, ignore_errors=True)
    return times, tasks


def tasks_per_host(spark: Any) -> dict[str, int]:
    """Tasks run so far per executor host (the driver's status store; no UI needed)."""
    counts: dict[str, int] = {}
    executors = spark.sparkContext._jsc.sc().statusStore().executorList(False)
    for i in range(executors.size()):
        executor = executors.apply(i)
        if executor.id() == "driver":
            continue
        host = str(executor.hostPort()).rsplit(":", 1)[0]
        counts[host] = counts.get(host, 0) + int(executor.totalTasks())
    return dict(sorted(counts.items()))


def _seconds(times: list[float]) -> str:
    return " ".join(f"{t:.2f}s" for t in times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed runs of each side; the median counts"
    )
    parser.add_argument(
        "--master",
        help="also snapshot on this Spark master (dev: the private standalone cluster)",
    )
    args = parser.parse_args()
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "fetch_jars.sh")], check=True, stdout=subprocess.DEVNULL
    )
    jars = connector_jars()

    server = DevServer.from_env()
    server.start()
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    small_rows = args.rows // 4
    load(server, "big", args.rows)
    load(server, "small", small_rows)
    print(f"tables loaded: big {args.rows} rows, small {small_rows} rows", file=sys.stderr)

    spark = spark_session(
        "bench-snapshot", "local[2]", jars=jars, conf={"spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-"))
    try:
        # warm-up of both sides: JVM code paths, Python workers, the JDBC driver, caches
        sparkcdc_snapshot(spark, server, "small", workdir)
        spark_jdbc(spark, server, "small", small_rows)
        with RssSampler() as small_rss:
            sparkcdc_snapshot(spark, server, "small", workdir)
        snaps, jdbcs, raws = [], [], []
        with RssSampler() as big_rss:
            for _ in range(args.rounds):  # alternating, so both see the same machine
                snaps.append(sparkcdc_snapshot(spark, server, "big", workdir))
                jdbcs.append(spark_jdbc(spark, server, "big", args.rows))
                raws.append(raw_connectorx(server, "big", args.rows))
        # over TLS (verify-ca on the dev server's own CA): connectorx cannot read over
        # TLS, so chunks are read on the TLS connection (mysql/chunks/textrows.py)
        tls = [
            sparkcdc_snapshot(spark, server, "big", workdir, "required")
            for _ in range(max(1, args.rounds - 1))
        ]
        snap_s, jdbc_s, raw_s = (statistics.median(t) for t in (snaps, jdbcs, raws))
        tls_s = statistics.median(tls)
        print(
            f"rounds: sparkcdc {_seconds(snaps)}, spark jdbc {_seconds(jdbcs)}, "
            f"connectorx {_seconds(raws)}",
            file=sys.stderr,
        )
        stop, done = threading.Event(), []
        writer = threading.Thread(
            target=write_load, args=(server, "big", args.rows, stop, 1000.0, done)
        )
        writer.start()
        try:
            writes_s = sparkcdc_snapshot(spark, server, "big", workdir)
        finally:
            stop.set()
            writer.join()
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    cluster: dict[str, Any] = {}
    if args.master:
        times, tasks = cluster_snapshots(args.master, server, args.rounds)
        print(f"rounds on {args.master}: sparkcdc {_seconds(times)}", file=sys.stderr)
        cluster_s = statistics.median(times)
        cluster = {
            "cluster_snapshot_rows_per_s": round(args.rows / cluster_s),
            "cluster_vs_local": round(snap_s / cluster_s, 2),
            "cluster_tasks_per_host": tasks,
        }

    rows = args.rows
    result = {
        "rows": rows,
        "snapshot_rows_per_s": round(rows / snap_s),
        "spark_jdbc_rows_per_s": round(rows / jdbc_s),
        "vs_spark_jdbc": round(jdbc_s / snap_s, 2),
        "raw_read_rows_per_s": round(rows / raw_s),
        "vs_raw": round(raw_s / snap_s, 2),
        "tls_snapshot_rows_per_s": round(rows / tls_s),
        "tls_vs_plain": round(snap_s / tls_s, 2),
        "with_writes_rows_per_s": round(rows / writes_s),
        "with_writes_vs_without": round(snap_s / writes_s, 2),
        "writes_per_s_achieved": round(done[0] / (done[1] / 1000)) if done else 0,
        "peak_executor_rss_mb": round(big_rss.peak_mb),
        "peak_executor_rss_mb_quarter_size": round(small_rss.peak_mb),
        **cluster,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
