"""Pipeline latency: commit in MariaDB → visible in the sink, for Delta and Kafka.

Runnable with no arguments after scripts/test.sh's set-up (it starts the private MariaDB and the
private Kafka):

    python bench/pipeline_latency.py [--seconds 30] [--rate 1000]

For each sink in turn, a pipeline in the binlog phase (``scan.startup.mode: latest-offset``,
``trigger.interval: 0``: the next micro-batch starts as soon as the last one is done) follows a
table while a writer inserts ``--rate`` rows/s (10 rows per transaction) for ``--seconds``.
Each row's commit time is taken right after its transaction commits. It is visible:
  - in Delta when a new commit in the table's ``_delta_log`` adds a file whose statistics
    (``maxValues.id``) cover it — ids increase, so a commit makes every id up to its max
    visible; the log is polled every 20 ms;
  - in Kafka when a consumer (polling continuously) receives its message.
Both pipelines run in one Spark session, made as ``sparkcdc run`` makes a pipeline's (its
default settings, a pipeline driver's JVM). First ``--warmup`` seconds (default 10) of the
same writes run unmeasured and are waited for: the first micro-batches compile Spark's and
the sink's code paths (a first Delta MERGE takes seconds), which is start-up cost, not the
steady-state latency measured here.
Latency = visible - committed, p50 and p99 over every measured row. "Lag growing" compares the
p50 of the last third of the rows with the first third (growing: more than 2x and 1 s more), and the
time the sink needs after the writer stops. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devserver import DEV_PASSWORD, DEV_USER, DevServer

DATABASE = "bench_latency"
ROWS_PER_TX = 10
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: {user}
  password: ${{BENCH_PASSWORD}}
  tables: {database}.events
  server-id: 5900-5909
  scan.startup.mode: latest-offset
sink:
{sink}
pipeline:
  name: latency-{name}
  checkpoint: {checkpoint}
  trigger.interval: 0s
"""


def prepare(server: DevServer) -> None:
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(
            f"CREATE TABLE {DATABASE}.events (id BIGINT NOT NULL PRIMARY KEY, "
            "payload VARCHAR(64) NOT NULL, amount DECIMAL(10,2), at DATETIME(6))"
        )


def write(server: DevServer, start_id: int, seconds: float, rate: float) -> dict[int, float]:
    """Insert ``rate`` rows/s; returns id → commit time (monotonic)."""
    committed: dict[int, float] = {}
    conn = server.connection(DATABASE)
    interval = ROWS_PER_TX / rate
    next_id = start_id
    began = time.monotonic()
    try:
        with conn.cursor() as cur:
            tick = began
            while tick - began < seconds:
                rows = [
                    (i, f"event-{i}", (i % 10000) / 100)
                    for i in range(next_id, next_id + ROWS_PER_TX)
                ]
                cur.executemany("INSERT INTO events VALUES (%s, %s, %s, NOW(6))", rows)
                conn.commit()
                now = time.monotonic()
                committed.update((i, now) for i in range(next_id, next_id + ROWS_PER_TX))
                next_id += ROWS_PER_TX
                tick += interval
                delay = tick - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing the writer, not synchronisation
    finally:
        conn.close()
    return committed


class DeltaWatcher(threading.Thread):
    """Watches a Delta table's log; records when each max id became visible."""

    def __init__(self, table: Path) -> None:
        super().__init__(daemon=True)
        self.log = table / "_delta_log"
        self.stop = threading.Event()
        self.visible: list[tuple[float, int]] = []  # (time, max id visible)
        self._seen: set[str] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            try:
                names = sorted(n for n in os.listdir(self.log) if n.endswith(".json"))
            except FileNotFoundError:
                names = []
            for name in names:
                if name in self._seen:
                    continue
                self._seen.add(name)
                top = self._max_id(self.log / name)
                if top is not None:
                    self.visible.append((now, top))
            self.stop.wait(0.02)

    @staticmethod
    def _max_id(path: Path) -> int | None:
        top = None
        for line in path.read_text().splitlines():
            action = json.loads(line)
            stats = (action.get("add") or {}).get("stats")
            if stats:
                value = json.loads(stats).get("maxValues", {}).get("id")
                if value is not None:
                    top = max(top or 0, int(value))
        return top


class KafkaWatcher(threading.Thread):
    """Consumes a topic; records when each id arrived."""

    def __init__(self, servers: str, topic: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": f"latency-{time.time_ns()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        self.consumer.subscribe([topic])
        self.stop = threading.Event()
        self.arrived: dict[int, float] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.05)
            if message is None or message.error():
                continue
            now = time.monotonic()
            key = json.loads(message.key())
            self.arrived.setdefault(int(key["id"]), now)
        self.consumer.close()


def latencies_delta(
    committed: dict[int, float], visible: list[tuple[float, int]]
) -> list[tuple[int, float]]:
    """(id, ms) for each committed id: the first log commit whose max id covers it."""
    out = []
    points = sorted(visible)
    for row_id, at in committed.items():
        seen = next((t for t, top in points if top >= row_id), None)
        if seen is not None:
            out.append((row_id, max(0.0, seen - at) * 1000))
    return out


def summarise(latencies_by_id: list[tuple[int, float]], total: int) -> dict[str, Any]:
    ordered = [ms for _, ms in sorted(latencies_by_id)]
    if not ordered:
        return {"p50_ms": None, "p99_ms": None, "seen": 0, "of": total, "lag_growing": None}
    third = max(1, len(ordered) // 3)
    first, last = statistics.median(ordered[:third]), statistics.median(ordered[-third:])
    return {
        "p50_ms": round(statistics.median(ordered)),
        "p99_ms": round(sorted(ordered)[min(len(ordered) - 1, int(len(ordered) * 0.99))]),
        "first_third_p50_ms": round(first),
        "last_third_p50_ms": round(last),
        "lag_growing": last > 2 * first and last - first > 1000,
        "seen": len(ordered),
        "of": total,
    }


def run_one(
    name: str, sink_block: str, server: DevServer, spark: Any, args: Any, start_id: int, watch: Any
) -> tuple[dict[str, Any], float]:
    settings = server.start()
    work = Path(tempfile.mkdtemp(prefix=f"sparkcdc-latency-{name}-"))
    text = PIPELINE.format(
        host=settings.host,
        port=settings.port,
        user=DEV_USER,
        database=DATABASE,
        sink=sink_block.format(work=work),
        name=name,
        checkpoint=work / "checkpoint",
    )
    config = parse_pipeline(text, env={"BENCH_PASSWORD": DEV_PASSWORD}, base_dir=work)
    watcher = watch(work)
    watcher.start()
    failure: list[BaseException] = []
    runner = threading.Thread(
        target=lambda: _run(config, spark, args.warmup + args.seconds + 120, failure), daemon=True
    )
    runner.start()
    _wait_until_streaming(spark, failure)
    if args.warmup > 0:  # the first batches compile Spark's and the sink's code paths
        warm = write(server, start_id, args.warmup, args.rate)
        _wait_seen(watcher, warm, failure)
        start_id = max(warm) + 1
    committed = write(server, start_id, args.seconds, args.rate)
    written_for = args.seconds
    _wait_seen(watcher, committed, failure)
    drain_s = time.monotonic() - max(committed.values())
    watcher.stop.set()
    for query in spark.streams.active:
        query.stop()
    runner.join(timeout=60)
    if failure:
        raise failure[0]
    if isinstance(watcher, DeltaWatcher):
        pairs = latencies_delta(committed, watcher.visible)
    else:
        pairs = [
            (i, max(0.0, watcher.arrived[i] - at) * 1000)
            for i, at in committed.items()
            if i in watcher.arrived
        ]
    result = summarise(pairs, len(committed))
    result["drain_after_writes_ms"] = round(drain_s * 1000)
    result["achieved_changes_per_s"] = round(len(committed) / written_for)
    shutil.rmtree(work, ignore_errors=True)
    return result, len(committed) / written_for


def _run(config: Any, spark: Any, seconds: float, failure: list[BaseException]) -> None:
    try:
        run_pipeline(config, spark=spark, max_seconds=seconds)
    except BaseException as exc:  # reported by the main thread
        failure.append(exc)


def _wait_until_streaming(spark: Any, failure: list[BaseException]) -> None:
    """Until the query is up and waiting for data (its first, empty, trigger is done)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not failure:
        for query in spark.streams.active:
            if "Waiting for" in str(query.status.get("message", "")):
                return
        time.sleep(0.1)
    if failure:
        raise failure[0]
    raise RuntimeError("the pipeline's query did not start within 120 s")


def _wait_seen(watcher: Any, committed: dict[int, float], failure: list[BaseException]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not failure:
        if _all_seen(watcher, committed):
            return
        time.sleep(0.1)


def _all_seen(watcher: Any, committed: dict[int, float]) -> bool:
    top = max(committed)
    if isinstance(watcher, DeltaWatcher):
        return any(v >= top for _, v in watcher.visible)
    return top in watcher.arrived


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to write")
    parser.add_argument("--rate", type=float, default=1000.0, help="rows per second")
    parser.add_argument(
        "--warmup",
        type=float,
        default=10.0,
        help="seconds of writes before measuring, not measured (0: measure from the start)",
    )
    args = parser.parse_args()
    server = DevServer.from_env()
    server.start()
    prepare(server)
    servers = DevKafka.from_env().start()
    # made as `sparkcdc run` makes a pipeline's session (pipeline_session): its defaults
    # and a pipeline driver's JVM; one session for both sinks, each run sets its sink's conf
    spark = spark_session(
        "sparkcdc-latency-bench",
        "local[2]",
        connectors=True,
        defaults=PIPELINE_DEFAULTS,
        pipeline_driver=True,
    )
    spark.sparkContext.setLogLevel("ERROR")
    topic = f"latency-{time.time_ns()}"

    delta, delta_rate = run_one(
        "delta",
        "  type: delta\n  path: {work}/lake",
        server,
        spark,
        args,
        1,
        lambda work: DeltaWatcher(work / "lake" / DATABASE / "events"),
    )
    print(f"delta: {delta}", file=sys.stderr)
    kafka, kafka_rate = run_one(
        "kafka",
        f"  type: kafka\n  properties.bootstrap.servers: {servers}\n  topic: {topic}\n"
        "  value.format: debezium-json",
        server,
        spark,
        args,
        10_000_000,
        lambda work: KafkaWatcher(servers, topic),
    )
    print(f"kafka: {kafka}", file=sys.stderr)
    spark.stop()
    print(
        json.dumps(
            {
                "delta_p50_ms": delta["p50_ms"],
                "delta_p99_ms": delta["p99_ms"],
                "kafka_p50_ms": kafka["p50_ms"],
                "kafka_p99_ms": kafka["p99_ms"],
                "sustained_changes_per_s": round(min(delta_rate, kafka_rate)),
                "delta_lag_growing": delta["lag_growing"],
                "kafka_lag_growing": kafka["lag_growing"],
                "delta_drain_after_writes_ms": delta["drain_after_writes_ms"],
                "kafka_drain_after_writes_ms": kafka["drain_after_writes_ms"],
                "changes_per_sink": delta["of"],
                "warmup_s": args.warmup,
            }
        )
    )


if __name__ == "__main__":
    main()
