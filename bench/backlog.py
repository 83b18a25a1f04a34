"""A large backlog through ``sparkcdc run --available-now`` into Kafka: how soon the first
message reaches the topic, the whole run's time, and the peak memory of its process tree.

Run by ``bench/pipeline_throughput.py --backlog ROWS`` (DESIGN.md §2.4): a table of ROWS rows
is snapshotted into a new topic, then, with every pipeline stopped, ROWS changes are written
(half updates, a quarter deletes, a quarter inserts, 1,000 rows a statement) and read by the
same pipelines' next runs. Each budget (``--backlog-budgets``: the pipeline's defaults, or
``ROWS/BYTES``: ``scan.incremental.snapshot.chunks-per-batch`` as that many rows' chunks and
``scan.binlog.max-bytes-per-batch``) has a pipeline of its own; they take turns within a
round, so the machine's noise falls on all alike. Per run:
  - ``first_commit_s``: the process's start to the first message on the topic;
  - ``total_s``: the process's start to its exit;
  - ``peak_rss_mb``: the highest sum of resident memory over the process and all its
    descendants (the driver JVM, Spark's Python workers), sampled from /proc;
  - ``batches``: the batches the run committed;
  - ``messages``: the records the run added to the topic (read back; checked against the
    rows, then against the changes).

The peer (``--backlog-peer flinkcdc``, the default) takes its turn in each round too: Flink
CDC 3.5's MySQL SQL connector into Flink's Kafka sink, ``'format' = 'debezium-json'``
(tests/harness/flink/FlinkCdcKafka.java), one new JVM per run, on the same table and chunk
size into a topic of its own: the snapshot with ``scan.startup.mode`` initial at the
pipelines' parallelism, the catch-up from the binlog position before the changes were written
(``specific-offset``; sparkcdc resumes from its checkpoint there) at parallelism 1 (Flink's
binlog reader is one). A Flink job does not end: it is timed from its JVM's launch to the
moment its topic holds the expected records (the topic's end polled), then killed, and its
topic read back as sparkcdc's. Flink's debezium-json writes an update as two records (a
``d`` of the before image, a ``c`` of the after image), sparkcdc's as one ``u``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from vs_flinkcdc import FLINK_COLUMNS, FLINK_LIBS, PEER_JVM_OPTIONS, ROOT, flink_options

from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.javaharness import compiled_classpath

CHUNK = 8096  # the pipelines' chunk size (the source's default)
PEER_HARNESS = ROOT / "tests" / "harness" / "flink" / "FlinkCdcKafka.java"
PEER_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Budget:
    """A batch budget: None fields leave the pipeline's default."""

    name: str
    snapshot_rows: int | None = None
    binlog_bytes: str | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``default`` or ``ROWS/BYTES`` (``200000/32m``)."""
        if text == "default":
            return cls(text)
        rows, _, size = text.partition("/")
        return cls(text, int(rows), size or None)

    def source_extra(self) -> str:
        lines = []
        if self.snapshot_rows is not None:
            per_batch = max(1, self.snapshot_rows // CHUNK)
            lines.append(f"  scan.incremental.snapshot.chunks-per-batch: {per_batch}")
        if self.binlog_bytes is not None:
            lines.append(f"  scan.binlog.max-bytes-per-batch: {self.binlog_bytes}")
        return "\n".join(lines)


@dataclass
class BacklogRun:
    first_commit_s: float
    total_s: float
    peak_rss_mb: float
    batches: int | None  # None: a Flink job (no batches)
    messages: int
    load_avg: float

    def fields(self) -> dict[str, Any]:
        return {
            "first_commit_s": round(self.first_commit_s, 1),
            "total_s": round(self.total_s, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
            "batches": self.batches,
            "messages": self.messages,
            "load_avg": round(self.load_avg, 1),
        }


class TreeRss:
    """The highest sum of VmRSS over process ``root`` and its descendants (/proc), sampled
    every 0.2 s from a thread until :meth:`stop`."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, tree_rss_mb(self.root))
            self._stop.wait(0.2)


def tree_rss_mb(root: int) -> float:
    """Resident MB of ``root`` and every process under it, now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[int(entry)] = int(line.split()[1])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 1024


def topic_of(pipeline: Path) -> str:
    for line in pipeline.read_text().splitlines():
        if line.strip().startswith("topic:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"{pipeline} names no topic")


def end_offset(consumer: Consumer, topic: str) -> int:
    """The topic's end (one partition; 0 while it does not exist)."""
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
    except KafkaException:  # the topic is created by the run's first batch
        return 0


def count_records(servers: str, topic: str, start: int) -> int:
    """Committed records with a value (no tombstones) from offset ``start`` to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"bench-backlog-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, start or OFFSET_BEGINNING)])
        counted, deadline = 0, time.monotonic() + 600
        while time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return counted
                if error is not None:
                    raise SystemExit(f"{topic}: {error}")
                counted += msg.value() is not None
        raise SystemExit(f"{topic}: not read to its end in 600 s")
    finally:
        consumer.close()


def backlog_run(argv: list[str], env: dict[str, str], pipeline: Path, log: Path) -> BacklogRun:
    """One ``sparkcdc run --available-now`` of ``pipeline``, timed from its process's start."""
    topic = topic_of(pipeline)
    checkpoint = Path(pipeline.read_text().split("checkpoint:", 1)[1].split()[0])
    commits = checkpoint / "spark" / "commits"
    before = len(list(commits.glob("[0-9]*"))) if commits.exists() else 0
    run = watched(argv, env, topic, log, expected=None)
    run.batches = len(list(commits.glob("[0-9]*"))) - before
    return run


def watched(
    argv: list[str], env: Mapping[str, str], topic: str, log: Path, expected: int | None
) -> BacklogRun:
    """Process ``argv`` timed from its start: to its exit (``expected`` None, exit 0 required),
    or until ``topic`` holds ``expected`` records more than at its start, then killed (a job
    that never ends; an exit before that fails the bench). Its records read back."""
    servers = DevKafka.from_env().start()
    watcher = Consumer({"bootstrap.servers": servers, "group.id": uuid.uuid4().hex})
    start_offset = end_offset(watcher, topic)
    load_avg = os.getloadavg()[0]
    began = time.monotonic()
    deadline = began + PEER_TIMEOUT_S
    with log.open("ab") as out:
        process = subprocess.Popen(argv, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    rss = TreeRss(process.pid)
    first = None
    try:
        while process.poll() is None:
            written = end_offset(watcher, topic) - start_offset
            if first is None and written > 0:
                first = time.monotonic() - began
            if expected is not None and (written >= expected or time.monotonic() > deadline):
                break
            time.sleep(0.1)  # polling the topic's end, not synchronisation
        total = time.monotonic() - began
    finally:
        peak = rss.stop()
        watcher.close()
        stopped = process.poll() is None
        if stopped:
            process.kill()
            process.wait()
    if process.returncode != 0 and not stopped:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(argv[:3])} exited with {process.returncode}:\n{tail}")
    if expected is not None and not stopped:
        raise SystemExit(f"{' '.join(argv[:3])} ended before {topic} held {expected} records")
    messages = count_records(servers, topic, start_offset)
    first_s = first if first is not None else total
    return BacklogRun(first_s, total, peak, None, messages, load_avg)


@dataclass(frozen=True)
class FlinkCdcKafka:
    """The peer: Flink CDC's SQL connector into Flink's Kafka sink, a new JVM per run."""

    name: str
    poll_ms: int
    classpath: str

    @classmethod
    def prepare(cls, poll_ms: int) -> FlinkCdcKafka:
        """Fetches the jars (scripts/fetch_flinkcdc.sh) and compiles the harness, once."""
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "fetch_flinkcdc.sh")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        classpath = compiled_classpath(PEER_HARNESS, FLINK_LIBS, "flinkcdc-kafka-harness")
        return cls(f"flinkcdc-poll{poll_ms}", poll_ms, classpath)

    def run(
        self,
        server: Any,
        database: str,
        table: str,
        phase: Mapping[str, str],
        parallelism: int,
        expected: int,
        log: Path,
    ) -> BacklogRun:
        """One job reading ``table`` from ``phase``'s options into a new topic, until the topic
        holds ``expected`` records."""
        servers = DevKafka.from_env().start()
        topic = f"bench-flinkcdc-{self.poll_ms}-{time.time_ns()}"
        request = {
            "columns": FLINK_COLUMNS.format(text="note"),
            "parallelism": parallelism,
            "source": {**flink_options(server, database, table, self.poll_ms), **phase},
            "sink": {
                "topic": topic,
                "properties.bootstrap.servers": servers,
                "format": "debezium-json",
            },
        }
        argv = ["java", *PEER_JVM_OPTIONS, "-cp", self.classpath, "FlinkCdcKafka"]
        return watched([*argv, json.dumps(request)], os.environ, topic, log, expected)


def summary(runs: dict[str, list[BacklogRun]]) -> dict[str, Any]:
    """Per budget: each field's median over the rounds, and the rounds' first_commit_s."""
    out: dict[str, Any] = {}
    for name, done in runs.items():
        out[name] = {
            "first_commit_s": round(statistics.median(r.first_commit_s for r in done), 1),
            "total_s": round(statistics.median(r.total_s for r in done), 1),
            "peak_rss_mb": round(statistics.median(r.peak_rss_mb for r in done)),
            "batches": [r.batches for r in done],
            "runs_first_commit_s": [round(r.first_commit_s, 1) for r in done],
            "runs_total_s": [round(r.total_s, 1) for r in done],
            "load_avg": [round(r.load_avg, 1) for r in done],
        }
    return out


def check_messages(what: str, run: BacklogRun, expected: int) -> None:
    if run.messages != expected:
        raise SystemExit(f"{what} wrote {run.messages} messages, expected {expected}")


def progress(text: str) -> None:
    print(f"backlog: {text}", file=sys.stderr)
