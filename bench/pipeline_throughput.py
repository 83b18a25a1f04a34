"""Pipeline throughput: ``sparkcdc run`` against the plain Spark ways of doing the same work.

Runnable with no arguments after ``bash scripts/setup.sh`` (it starts the private MariaDB and
the private Kafka):

    python bench/pipeline_throughput.py [--rows 1000000] [--skip-kafka] [--skip-iceberg]

Loads the table of bench/snapshot.py (``--rows`` rows, 8 mixed columns) and, in one run,
with ``local[2]`` everywhere:
  - snapshot into Delta: ``sparkcdc run --available-now`` on a generated pipeline file, run
    as a user runs it (the CLI as a subprocess; wall time, start-up included) against the
    plain copy, Spark's JDBC reader (as bench/snapshot.py's reference) writing a Delta table,
    in a fresh process too: ``vs_jdbc_copy`` = plain seconds / sparkcdc seconds, each the
    median of ``--snapshot-runs`` (3) runs, the two taking turns (one run of each moved by
    up to 20% between runs on this shared machine);
  - the same into Iceberg (a ``hadoop`` catalog under a local warehouse):
    ``iceberg_vs_jdbc_copy``;
  - catch-up: with the pipeline stopped, ``--changes`` changes (default 30% of the rows:
    half updates, a quarter deletes, a quarter inserts, 1,000 rows a statement), then
    ``sparkcdc run --available-now`` again (wall time) against one Delta MERGE of the same
    changes into a copy of the sink table taken after the snapshot, from a change frame
    read from the source and cached before the clock starts: ``vs_plain_merge`` = MERGE
    seconds / sparkcdc seconds. That MERGE runs in the bench's own session, whose JVM has
    run for minutes; ``vs_cold_merge`` puts the same MERGE where ``sparkcdc run`` is, in a
    fresh process (start-up included, its change frame read from a Parquet copy taken
    before the clock): the plain job a user would start instead;
  - Kafka: a continuous ``sparkcdc run`` into a Kafka topic (from the binlog's end) while
    updates are written at ``--kafka-rates`` changes/s for ``--kafka-step-s`` seconds each;
    the lag of the pipeline's committed source position behind the server's (binlog bytes)
    is taken right after each batch it commits: it grows when its least-squares slope over the
    commits of the step's second half (the first is the pipeline settling to the new rate) is
    above 0.05 s of writes a second, i.e. the pipeline takes in less than 95% of the writes
    (a step lasts until its second half has 4 commits, up to 3 times ``--kafka-step-s``).
    ``kafka_changes_per_s`` is the highest achieved rate whose lag did not grow (0: not even
    the first step's); the steps stop at the first that grew, or that the writer could not
    drive to 80% of its target (the source's limit). Before the steps,
    the writer runs alone for 10 s as fast as it can: ``kafka_writer_alone_changes_per_s``,
    and MariaDB's cores per 100,000 changes/s (``mariadb_cores_per_100k_changes_per_s``:
    what such a rate leaves of the machine's two cores to the pipeline and Kafka). The
    writer's changes are written while a second Kafka pipeline is stopped, which then drains
    them with ``--available-now``: ``kafka_drain_changes_per_s`` = the changes / (that run's
    wall seconds - the same run's with nothing to read), the pipeline's own rate when it has
    the machine to itself, which the steps' rate cannot show where the writer and MariaDB
    take most of the two cores;
  - the fixed cost of a run, apart from the rates above: ``sparkcdc run --available-now``
    of a new stream whose snapshot of a 50-row table is one batch, into Delta
    (``fixed_start_s``: the process's start to its first committed batch, read from the
    query's commit log; ``fixed_stop_s``: its last committed batch to the process's exit)
    and into Kafka (``kafka_fixed_start_s``, ``kafka_fixed_stop_s``), the median of
    ``--fixed-runs`` (3) runs of each, taking turns, with the 1-minute load average at their
    start (``fixed_load_avg``); ``--fixed-only`` measures that alone;
  - the peak RSS of the Spark Python workers of every process the benchmark started;
  - ``class_archive``: whether the ``sparkcdc run`` drivers mapped the class-data archive
    ``sparkcdc prepare`` writes (``scripts/setup.sh`` runs it): they start ~2.5 s sooner
    with it (~7.5 s against ~13 s to the first commit of the fixed cost, quiet machine).
    The bench runs ``sparkcdc prepare`` first when the archive is missing, as set-up does
    (``prepare_s``: its seconds, null when there was one), unless ``--no-prepare``. The drivers
    also compile with C2 later (``spark/jit.py``). The plain copies and the
    MERGE run in sessions without either, as plain Spark starts.
Row counts of the Delta tables (and of the Iceberg table after its snapshot) are checked
against the source after the snapshot and after the catch-up; ``--verify`` adds
``sparkcdc verify`` of the caught-up pipeline. The commands' output goes to a log file named
at the start. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backlog import (
    BacklogRun,
    Budget,
    FlinkCdcKafka,
    backlog_run,
    check_messages,
    progress,
    summary,
)
from snapshot import DATABASE, FILL, ROOT, RssSampler, jdbc_frame, load

from sparkcdc.model.position import BinlogPosition
from sparkcdc.pipeline.status import committed_offset
from sparkcdc.spark.connectors import has_iceberg_runtime
from sparkcdc.spark.session import spark_session
from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

TABLE = "throughput"
FIXED_TABLE = "throughput_fixed"  # the fixed cost's table: one small snapshot batch
FIXED_ROWS = 50
KEY_BLOCK = 1000  # rows per change statement
# the lag after a commit may grow by this many seconds of writes a second within a step (the
# least-squares slope): 0.05 lets the pipeline take in 95% of the writes, not less
LAG_SLOPE = 0.05
MIN_COMMITS = 4  # batches committed during a step to judge it (the first is not judged)
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: {user}
  password: ${{BENCH_PASSWORD}}
  tables: {database}.{table}
  server-id: {server_ids}
{source_extra}
sink:
{sink}
pipeline:
  name: bench-throughput-{name}
  checkpoint: {checkpoint}
  parallelism: 2
"""
ICEBERG_CATALOG = "bench_iceberg"
# the peer's snapshot: Flink CDC's default startup mode, as sparkcdc's new pipeline's
PEER_SNAPSHOT = {"scan.startup.mode": "initial", "server-id": "6370-6379"}


@dataclass
class Changes:
    """The catch-up's change statements, by key block: which blocks are updated or deleted
    (disjoint) and which new ids are inserted."""

    updated: list[int]
    deleted: list[int]
    inserted: tuple[int, int]  # first and last new id

    @classmethod
    def plan(cls, rows: int, changes: int, seed: int = 12) -> Changes:
        statements = max(4, changes // KEY_BLOCK)
        updates, deletes = statements // 2, statements // 4
        blocks = rows // KEY_BLOCK
        if updates + deletes > blocks:
            raise SystemExit(
                f"--changes {changes} needs {updates + deletes} blocks of {KEY_BLOCK} rows to "
                f"update or delete, the table has {blocks}: lower --changes or raise --rows"
            )
        picked = random.Random(seed).sample(range(blocks), updates + deletes)
        inserts = statements - updates - deletes
        return cls(picked[:updates], picked[updates:], (rows + 1, rows + inserts * KEY_BLOCK))

    @property
    def count(self) -> int:
        first, last = self.inserted
        return (len(self.updated) + len(self.deleted)) * KEY_BLOCK + last - first + 1

    def statements(self) -> list[str]:
        """One statement per block, interleaved as an application's would be."""
        out = [update_statement(b) for b in self.updated]
        out += [f"DELETE FROM {TABLE} WHERE {_block(b)}" for b in self.deleted]
        first, last = self.inserted
        out += [
            FILL.format(name=TABLE, first=lo, last=min(lo + KEY_BLOCK - 1, last))
            for lo in range(first, last + 1, KEY_BLOCK)
        ]
        random.Random(13).shuffle(out)
        return out

    def upserted_condition(self) -> str:
        """SQL condition on ``id`` selecting every updated or inserted row."""
        first, last = self.inserted
        return " OR ".join([*(_block(b) for b in self.updated), f"id BETWEEN {first} AND {last}"])

    def deleted_ids(self) -> list[int]:
        return [i for b in self.deleted for i in range(b * KEY_BLOCK + 1, (b + 1) * KEY_BLOCK + 1)]


def update_statement(block: int) -> str:
    return (
        f"UPDATE {TABLE} SET amount = amount + 1, score = score * 2, status = 'paid', "
        f"note = CONCAT(note, 'u') WHERE {_block(block)}"
    )


def _block(block: int) -> str:
    return f"id BETWEEN {block * KEY_BLOCK + 1} AND {(block + 1) * KEY_BLOCK}"


def execute(server: DevServer, statements: list[str]) -> float:
    """Seconds to run ``statements``, each its own transaction."""
    began = time.perf_counter()
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
            conn.commit()
    return time.perf_counter() - began


def source_count(server: DevServer) -> int:
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {TABLE}")
        return int(cur.fetchone()[0])


# -- the commands, as a user runs them -------------------------------------------------------


def write_pipeline(
    server: DevServer,
    work: Path,
    name: str,
    sink: str,
    server_ids: str,
    source_extra: str = "",
    table: str = TABLE,
) -> Path:
    s = server.settings
    path = work / f"{name}.yaml"
    path.write_text(
        PIPELINE.format(
            host=s.host,
            port=s.port,
            user=s.user,
            database=DATABASE,
            table=table,
            server_ids=server_ids,
            source_extra=source_extra,
            sink=sink,
            name=name,
            checkpoint=work / f"checkpoint-{name}",
        )
    )
    return path


def command_env() -> dict[str, str]:
    """The commands' environment: the password by ``${BENCH_PASSWORD}``, not in the file."""
    return {**os.environ, "BENCH_PASSWORD": DEV_PASSWORD}


def sparkcdc(args: list[str], log: Path, python: str = sys.executable) -> float:
    """Wall seconds of ``sparkcdc <args>`` run to its end."""
    return command([python, "-m", "sparkcdc.cli.main", *args], log)


def jdbc_copy(target: str, into: str, rows: int, log: Path, python: str = sys.executable) -> float:
    """Wall seconds of the plain copy in a fresh process: this file with ``--jdbc-copy-into``."""
    argv = ["--jdbc-copy-into", into, "--target", target, "--rows", str(rows)]
    return command([python, __file__, *argv], log)


def iceberg_python() -> str:
    """An interpreter whose Spark line has Iceberg's runtime: this one, or PySpark 4.1's
    environment (scripts/setup_spark41.sh) where this line has none (docs/install.md,
    "Spark lines")."""
    if has_iceberg_runtime():
        return sys.executable
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup_spark41.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip().splitlines()[-1]


def iceberg_count(warehouse: Path) -> int:
    """Rows of the bench's table in a hadoop-catalog warehouse, counted by pyiceberg (this
    process's Spark line may have no Iceberg runtime)."""
    from pyiceberg.table import StaticTable

    folder = warehouse / DATABASE / TABLE / "metadata"
    version = (folder / "version-hint.text").read_text().strip()
    return StaticTable.from_metadata(str(folder / f"v{version}.metadata.json")).scan().count()


def command(argv: list[str], log: Path) -> float:
    """Wall seconds of ``argv`` run to its end, its output appended to ``log``; a failure
    stops the benchmark with the output's tail."""
    began = time.perf_counter()
    with log.open("ab") as out:
        done = subprocess.run(
            argv, env=command_env(), stdout=out, stderr=subprocess.STDOUT, check=False
        )
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}:\n{tail}")
    return elapsed


def run_jdbc_copy(into: str, target: str, rows: int) -> None:
    """The plain copy (in the child process): Spark's JDBC reader → a new Delta or Iceberg
    table at ``target`` (a path; for Iceberg, a hadoop catalog's warehouse)."""
    conf = {"spark.ui.showConsoleProgress": "false"}
    if into == "iceberg":
        conf |= iceberg_catalog_conf(Path(target))
    spark = spark_session("bench-jdbc-copy", "local[2]", connectors=True, conf=conf)
    frame = jdbc_frame(spark, DevServer.from_env(), TABLE, rows)
    if into == "delta":
        frame.write.format("delta").save(target)
    else:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.{DATABASE}")
        frame.writeTo(f"{ICEBERG_CATALOG}.{DATABASE}.{TABLE}").tableProperty(
            "format-version", "2"
        ).create()
    spark.stop()


def iceberg_catalog_conf(warehouse: Path) -> dict[str, str]:
    prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": str(warehouse),
    }


# -- the catch-up's reference: one MERGE of a prepared change frame ---------------------------


def plain_merge(
    spark: Any, server: DevServer, changes: Changes, table: str, keep: Path | None = None
) -> float:
    """Seconds of one Delta MERGE of ``changes`` (final states read from the source, cached
    and counted before the clock starts) into the Delta table at ``table``. With ``keep``,
    the change frame is also written there as Parquet (before the clock), for
    :func:`cold_merge`."""
    from pyspark.sql import functions as F

    target = spark.read.format("delta").load(table).schema
    upserts = (
        jdbc_frame(spark, server, TABLE, changes.inserted[1])
        .where(changes.upserted_condition())
        .withColumn("_deleted", F.lit(False))
    )
    deletes = spark.createDataFrame([(i,) for i in changes.deleted_ids()], "id long").withColumn(
        "_deleted", F.lit(True)
    )
    frame = upserts.unionByName(deletes, allowMissingColumns=True).select(
        *(F.col(f.name).cast(f.dataType).alias(f.name) for f in target.fields), "_deleted"
    )
    frame.cache().count()
    if keep is not None:
        frame.write.parquet(str(keep))
    frame.createOrReplaceTempView("bench_changes")
    began = time.perf_counter()
    spark.sql(merge_statement(table, "bench_changes", [f.name for f in target.fields]))
    elapsed = time.perf_counter() - began
    frame.unpersist()
    return elapsed


def merge_statement(table: str, view: str, columns: list[str]) -> str:
    """The reference's MERGE of a change frame (``_deleted`` marks deletes) into ``table``."""
    names = [f"`{c}`" for c in columns]
    return (
        f"MERGE INTO delta.`{table}` t USING {view} s ON t.id = s.id "
        "WHEN MATCHED AND s._deleted THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{n} = s.{n}' for n in names)} "
        f"WHEN NOT MATCHED AND NOT s._deleted THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(f's.{n}' for n in names)})"
    )


def cold_merge(changes: Path, table: str, log: Path) -> float:
    """Wall seconds of the same MERGE as a user's job runs it: a fresh process (this file
    with ``--merge-from``) that starts Spark, reads the change frame :func:`plain_merge`
    kept as Parquet, and merges it into ``table``. What ``sparkcdc run`` does on top of that
    is read the changes from the binlog instead of a file, exactly."""
    return command([sys.executable, __file__, "--merge-from", str(changes), "--target", table], log)


def run_cold_merge(changes: str, table: str) -> None:
    """:func:`cold_merge`'s child process."""
    spark = spark_session(
        "bench-merge", "local[2]", connectors=True, conf={"spark.ui.showConsoleProgress": "false"}
    )
    frame = spark.read.parquet(changes)
    frame.createOrReplaceTempView("bench_changes")
    columns = [c for c in frame.columns if c != "_deleted"]
    spark.sql(merge_statement(table, "bench_changes", columns))
    spark.stop()


def check_count(what: str, counted: int, expected: int) -> None:
    if counted != expected:
        raise SystemExit(f"{what} has {counted} rows, the source {expected}: the copy is wrong")


# -- Kafka: the highest sustained rate --------------------------------------------------------


@dataclass
class Step:
    """One rate step: the writer's target and achievement, and the lag (binlog bytes) right
    after each batch the pipeline committed during the step.

    Right after a commit the lag is what was written while that batch ran (its end was
    planned when it started): it stays level while the pipeline keeps up and grows with the
    batches when it falls behind. Only the commits of the step's second half are judged:
    in the first the pipeline settles to the new rate (its batches grow to it, and a
    continuous run's JVM compiles code for their sizes), and a lag that rises and then falls
    back is not one that grows. Measured here at 50,000 and 60,000 changes/s for 60 s each:
    the lag rose to ~5 s within the first 15 s, then fell to ~2-4 s and stayed.
    """

    target: float
    began: float = 0.0  # time.monotonic() when the step's writes began
    achieved: float = 0.0
    bytes_per_s: float = 0.0
    commit_lags: list[int] = field(default_factory=list)
    commit_times: list[float] = field(default_factory=list)  # time.monotonic() of each
    drain_s: float | None = None

    @property
    def settled(self) -> list[tuple[float, int]]:
        """(time, lag) of the commits in the second half of the step so far."""
        if not self.commit_times:
            return []
        half = self.began + (self.commit_times[-1] - self.began) / 2
        return [
            (t, lag)
            for t, lag in zip(self.commit_times, self.commit_lags, strict=True)
            if t >= half
        ]

    @property
    def judged(self) -> bool:
        return len(self.settled) >= MIN_COMMITS

    @property
    def lag_slope(self) -> float:
        """Seconds of writes the lag after a commit grew by a second of the step: the
        least-squares slope over the judged commits."""
        points = [(t, lag / max(self.bytes_per_s, 1)) for t, lag in self.settled]
        if len(points) < 2:
            return 0.0
        times, lags = zip(*points, strict=True)
        return statistics.linear_regression(times, lags).slope

    @property
    def lag_growing(self) -> bool:
        """Whether the lag after a commit grew by more than LAG_SLOPE seconds of writes a
        second (or the pipeline did not catch up after the step)."""
        if self.drain_s is None or not self.judged:
            return True
        return self.lag_slope > LAG_SLOPE

    def text(self) -> str:
        drain = "not within the time limit" if self.drain_s is None else f"{self.drain_s:.1f}s"
        lags = ", ".join(f"{b / max(self.bytes_per_s, 1):.1f}s" for b in self.commit_lags)
        return (
            f"target {self.target:,.0f}/s achieved {self.achieved:,.0f}/s, lag after each "
            f"commit (in seconds of writes) [{lags}] ({self.lag_slope:+.3f} s/s), drain {drain}, "
            f"lag growing: {self.lag_growing}"
        )


def absolute_position(cur: Any, position: BinlogPosition | None = None) -> int:
    """Bytes from the start of the oldest binlog file to ``position`` (default: the end)."""
    cur.execute("SHOW BINARY LOGS")
    total = 0
    for name, size, *_ in cur.fetchall():
        if position is not None and name == position.file:
            return total + position.pos
        total += int(size)
    return total


def pipeline_position(checkpoint: Path) -> BinlogPosition | None:
    committed = committed_offset(str(checkpoint))
    if committed is None or "binlog" not in committed[1]:
        return None
    return BinlogPosition.from_offset(committed[1]["binlog"])


def wait_caught_up(cur: Any, checkpoint: Path, timeout_s: float) -> float | None:
    """Seconds until the pipeline committed everything the server has now; None: not in
    ``timeout_s``."""
    began = time.monotonic()
    end = absolute_position(cur)
    while time.monotonic() - began < timeout_s:
        position = pipeline_position(checkpoint)
        if position is not None and absolute_position(cur, position) >= end:
            return time.monotonic() - began
        time.sleep(0.2)
    return None


def drive(server: DevServer, step: Step, seconds: float, rows: int, checkpoint: Path) -> None:
    """Write updates at ``step.target`` changes/s for ``seconds`` (longer, up to three
    times, until the pipeline committed MIN_COMMITS batches), noting the lag at commits."""
    blocks = rows // KEY_BLOCK
    with (
        server.connection(DATABASE) as conn,
        conn.cursor() as cur,
        server.connection(DATABASE) as watch,
        watch.cursor() as wcur,
    ):
        start_bytes = absolute_position(wcur)
        began = step.began = time.monotonic()
        committed = pipeline_position(checkpoint)
        written, next_look, block = 0, began, random.Random(7).randrange(blocks)
        while (now := time.monotonic()) - began < seconds or (
            not step.judged and now - began < 3 * seconds
        ):
            if now >= next_look:
                position = pipeline_position(checkpoint)
                if position is not None and position != committed:
                    committed = position
                    lag = absolute_position(wcur) - absolute_position(wcur, position)
                    step.commit_lags.append(max(0, lag))
                    step.commit_times.append(now)
                next_look = now + 0.2
            ahead = written / step.target - (now - began)
            if ahead > 0:
                time.sleep(min(ahead, 0.05))  # pacing the writer, not synchronisation
                continue
            cur.execute(update_statement(block))
            conn.commit()
            written += KEY_BLOCK
            block = (block + 1) % blocks
        elapsed = time.monotonic() - began
        step.achieved = written / elapsed
        step.bytes_per_s = (absolute_position(wcur) - start_bytes) / elapsed
        step.drain_s = wait_caught_up(wcur, checkpoint, timeout_s=max(30.0, seconds * 2))


class WriterAlone(NamedTuple):
    """What the Kafka steps' writer does with the machine to itself."""

    changes_per_s: float
    mariadb_cores: float  # MariaDB's CPU meanwhile
    written: int  # changes


def writer_alone(server: DevServer, rows: int, seconds: float) -> WriterAlone:
    """Changes/s the Kafka steps' writer reaches with no pipeline running, as fast as it
    can (its one connection, its UPDATE statements), and the cores MariaDB used meanwhile.
    The steps share this machine's two cores with that writer and its server: a rate the
    writer cannot reach alone is none a pipeline could be shown to keep up with here, and
    MariaDB's cores per change say what a rate leaves the pipeline. Also the changes written."""
    blocks = rows // KEY_BLOCK
    mariadb = int(server.pid_file.read_text().strip())
    cpu_before = cpu_seconds(mariadb)
    with server.connection(DATABASE) as conn, conn.cursor() as cur:
        written, began, block = 0, time.monotonic(), random.Random(5).randrange(blocks)
        while time.monotonic() - began < seconds:
            cur.execute(update_statement(block))
            conn.commit()
            written += KEY_BLOCK
            block = (block + 1) % blocks
        elapsed = time.monotonic() - began
    return WriterAlone(written / elapsed, (cpu_seconds(mariadb) - cpu_before) / elapsed, written)


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has used (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kafka_sink(name: str) -> str:
    """The sink block of a pipeline into a new Kafka topic (debezium-json)."""
    servers = DevKafka.from_env().start()
    return (
        f"  type: kafka\n  properties.bootstrap.servers: {servers}\n"
        f"  topic: bench-throughput-{name}-{time.time_ns()}\n  value.format: debezium-json"
    )


def kafka_pipeline(server: DevServer, work: Path, name: str, server_ids: str) -> Path:
    """A pipeline file into a new Kafka topic (debezium-json) from the binlog's end."""
    return write_pipeline(
        server, work, name, kafka_sink(name), server_ids, "  scan.startup.mode: latest-offset"
    )


def kafka_drain(server: DevServer, work: Path, rows: int, log: Path) -> tuple[float, WriterAlone]:
    """Changes/s of a Kafka pipeline draining what the writer wrote alone while it was
    stopped (its run's start and end taken out: the same run with nothing to read), and
    :func:`writer_alone`'s figures."""
    pipeline = kafka_pipeline(server, work, "kafka-drain", "6340-6349")
    empty_s = sparkcdc(["run", str(pipeline), "--available-now"], log)  # commits the position
    alone = writer_alone(server, rows, 10.0)
    drain_s = sparkcdc(["run", str(pipeline), "--available-now"], log)
    return alone.written / max(drain_s - empty_s, 0.1), alone


def kafka_sustained(server: DevServer, work: Path, args: argparse.Namespace, log: Path) -> float:
    """The highest achieved rate of a step whose lag did not grow (0: none)."""
    pipeline = kafka_pipeline(server, work, "kafka", "6330-6339")
    checkpoint = work / "checkpoint-kafka"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline)],
            env=command_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    best = 0.0
    try:
        _wait_started(process, checkpoint, log)
        warm = Step(5000.0)  # the first batches compile Spark's and the sink's code paths
        drive(server, warm, 3.0, args.rows, checkpoint)
        for rate in args.kafka_rates:
            step = Step(rate)
            drive(server, step, args.kafka_step_s, args.rows, checkpoint)
            print(f"kafka: {step.text()}", file=sys.stderr)
            if step.lag_growing:
                break
            best = max(best, step.achieved)
            if step.achieved < 0.8 * rate:  # the source cannot be driven faster
                break
    finally:
        process.send_signal(signal.SIGINT)  # as Ctrl-C: the run stops after its batch
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return best


def _wait_started(process: subprocess.Popen[bytes], checkpoint: Path, log: Path) -> None:
    """Until the continuous run committed its first batch (it has a source position)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"the Kafka pipeline exited with {process.returncode}:\n{tail}")
        if pipeline_position(checkpoint) is not None:
            return
        time.sleep(0.2)
    raise SystemExit(f"the Kafka pipeline committed no batch within 300 s; see {log}")


# -- the fixed cost of a run ------------------------------------------------------------------


class FixedCost(NamedTuple):
    """Seconds of one ``sparkcdc run --available-now`` that do not depend on the rows: from
    the process's start to its first committed batch, and from its last to its exit."""

    start_s: float
    stop_s: float


def fixed_cost_run(pipeline: Path, checkpoint: Path, log: Path) -> FixedCost:
    """One run of ``pipeline`` (a new stream whose snapshot of FIXED_ROWS rows is one batch),
    its batches' commit times read from the streaming query's commit log."""
    began = time.time()
    ended = began + sparkcdc(["run", str(pipeline), "--available-now"], log)
    commits = [p for p in (checkpoint / "spark" / "commits").iterdir() if p.name.isdigit()]
    if not commits:
        raise SystemExit(f"{pipeline} committed no batch; see {log}")
    times = sorted(p.stat().st_mtime for p in commits)
    return FixedCost(times[0] - began, ended - times[-1])


def fixed_costs(
    server: DevServer, work: Path, args: argparse.Namespace, log: Path
) -> dict[str, FixedCost]:
    """The fixed cost of a run into Delta (and Kafka unless skipped): the median of
    ``--fixed-runs`` runs of each, taking turns, each a new stream of FIXED_ROWS rows."""
    load(server, FIXED_TABLE, FIXED_ROWS)
    sinks: dict[str, Callable[[str], str]] = {
        "delta": lambda name: f"  type: delta\n  path: {work / name}"
    }
    if not args.skip_kafka:
        sinks["kafka"] = kafka_sink
    runs: dict[str, list[FixedCost]] = {name: [] for name in sinks}
    for run in range(args.fixed_runs):
        for kind, sink_of in sinks.items():
            name = f"fixed-{kind}-{run}"
            pipeline = write_pipeline(
                server, work, name, sink_of(name), "6350-6359", table=FIXED_TABLE
            )
            runs[kind].append(fixed_cost_run(pipeline, work / f"checkpoint-{name}", log))
    print(
        "fixed cost (start, stop): "
        + "; ".join(
            f"{kind} {[(round(c.start_s, 1), round(c.stop_s, 1)) for c in costs]}"
            for kind, costs in runs.items()
        ),
        file=sys.stderr,
    )
    return {
        kind: FixedCost(
            statistics.median(c.start_s for c in costs), statistics.median(c.stop_s for c in costs)
        )
        for kind, costs in runs.items()
    }


def fixed_fields(costs: dict[str, FixedCost], load_avg: float) -> dict[str, Any]:
    """The JSON line's fixed-cost fields: Delta's unprefixed, Kafka's with ``kafka_``."""
    fields: dict[str, Any] = {}
    for kind, cost in costs.items():
        prefix = "" if kind == "delta" else f"{kind}_"
        fields[f"{prefix}fixed_start_s"] = round(cost.start_s, 1)
        fields[f"{prefix}fixed_stop_s"] = round(cost.stop_s, 1)
    fields["fixed_load_avg"] = round(load_avg, 1)
    return fields


# -- a large backlog into Kafka: the first message, the whole run, memory ----------------------


def backlogs(server: DevServer, work: Path, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    """``--backlog-runs`` rounds of bench/backlog.py's measurement: per round the table is
    loaded afresh (``--backlog`` rows), each budget's new pipeline and each peer (Flink CDC at
    each of ``--flinkcdc-poll-ms``) snapshots it into its own topic, ``--backlog`` changes are
    written while all are stopped, and each catches up; the order of the sides is flipped
    each round."""
    budgets = [Budget.parse(b) for b in args.backlog_budgets.split(",")]
    peers = (
        [FlinkCdcKafka.prepare(int(ms)) for ms in args.flinkcdc_poll_ms.split(",")]
        if args.backlog_peer == "flinkcdc"
        else []
    )
    changes = Changes.plan(args.backlog, args.backlog)
    # Flink's debezium-json writes an update as two records (backlog.py)
    peer_changes = changes.count + len(changes.updated) * KEY_BLOCK
    sides = [b.name for b in budgets] + [p.name for p in peers]
    snap: dict[str, list[BacklogRun]] = {name: [] for name in sides}
    catchup: dict[str, list[BacklogRun]] = {name: [] for name in sides}
    for round_ in range(args.backlog_runs):
        with server.connection(DATABASE) as conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        load(server, TABLE, args.backlog)
        pipelines = {}
        order = sides if round_ % 2 == 0 else sides[::-1]

        for name in order:
            peer = next((p for p in peers if p.name == name), None)
            if peer is not None:
                run = peer.run(server, DATABASE, TABLE, PEER_SNAPSHOT, 2, args.backlog, log)
            else:
                budget = next(b for b in budgets if b.name == name)
                pipeline_name = f"backlog-{round_}-{budgets.index(budget)}"
                pipelines[name] = pipeline = write_pipeline(
                    server,
                    work,
                    pipeline_name,
                    kafka_sink(pipeline_name),
                    "6360-6369",
                    budget.source_extra(),
                )
                run = backlog_run(_run_argv(pipeline), command_env(), pipeline, log)
            check_messages(f"the snapshot of {name}", run, args.backlog)
            snap[name].append(run)
            progress(f"snapshot {name}: {run.fields()}")
        with server.connection(DATABASE) as conn, conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            binlog_file, binlog_pos = cur.fetchone()[:2]
        write_s = execute(server, changes.statements())
        progress(f"{changes.count} changes written in {write_s:.1f}s")
        from_offset = {
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": str(binlog_file),
            "scan.startup.specific-offset.pos": str(binlog_pos),
            "server-id": "6380",
        }
        for name in order:
            peer = next((p for p in peers if p.name == name), None)
            if peer is not None:
                run = peer.run(server, DATABASE, TABLE, from_offset, 1, peer_changes, log)
                check_messages(f"the catch-up of {name}", run, peer_changes)
            else:
                pipeline = pipelines[name]
                run = backlog_run(_run_argv(pipeline), command_env(), pipeline, log)
                check_messages(f"the catch-up of {name}", run, changes.count)
            catchup[name].append(run)
            progress(f"catch-up {name}: {run.fields()}")
    result: dict[str, Any] = {
        "backlog_rows": args.backlog,
        "backlog_changes": changes.count,
        "backlog_peer_changes": peer_changes if peers else None,
        "backlog_snapshot": summary(snap),
        "backlog_catchup": summary(catchup),
    }
    # Flink's seconds over sparkcdc's (> 1: sparkcdc is faster), the first budget's, medians
    for peer in peers:
        suffix = "" if peer is peers[0] else f"_poll{peer.poll_ms}"
        for phase, runs in (("snapshot", snap), ("catchup", catchup)):
            ours = statistics.median(r.total_s for r in runs[budgets[0].name])
            theirs = statistics.median(r.total_s for r in runs[peer.name])
            result[f"{phase}_total_vs_flinkcdc{suffix}"] = round(theirs / ours, 2)
    result["flinkcdc_poll_interval_ms"] = [p.poll_ms for p in peers]
    result["load_avg_end"] = round(os.getloadavg()[0], 1)
    return result


def _run_argv(pipeline: Path) -> list[str]:
    return [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline), "--available-now"]


# -- the run ----------------------------------------------------------------------------------


def snapshots(
    server: DevServer, work: Path, args: argparse.Namespace, log: Path
) -> tuple[Path, dict[str, float]]:
    """Both snapshots (Delta, then Iceberg unless skipped) and their plain copies, each pair
    run ``--snapshot-runs`` times alternately (median seconds of each side). The first Delta
    run's pipeline is the one returned, for the catch-up; the other runs' tables go."""
    delta = write_pipeline(
        server, work, "delta", f"  type: delta\n  path: {work / 'lake'}", "6310-6319"
    )

    def delta_run(run: int) -> float:
        if run == 0:
            return sparkcdc(["run", str(delta), "--available-now"], log)
        name = f"delta-{run}"
        again = write_pipeline(
            server, work, name, f"  type: delta\n  path: {work / name}", "6310-6319"
        )
        return sparkcdc(["run", str(again), "--available-now"], log)

    seconds = alternated(
        args.snapshot_runs,
        work,
        ("delta", delta_run),
        (
            "delta_jdbc",
            lambda run: jdbc_copy(str(work / f"jdbc-delta-{run}"), "delta", args.rows, log),
        ),
    )
    if not args.skip_iceberg:
        python = iceberg_python()

        def iceberg_run(run: int) -> float:
            iceberg = write_pipeline(
                server,
                work,
                f"iceberg-{run}",
                "  type: iceberg\n  catalog.properties.type: hadoop\n"
                f"  catalog.properties.warehouse: {work / f'warehouse-{run}'}",
                "6320-6329",
            )
            return sparkcdc(["run", str(iceberg), "--available-now"], log, python)

        seconds |= alternated(
            args.snapshot_runs,
            work,
            ("iceberg", iceberg_run),
            (
                "iceberg_jdbc",
                lambda run: jdbc_copy(
                    str(work / f"jdbc-iceberg-{run}"), "iceberg", args.rows, log, python
                ),
            ),
        )
    print("snapshot: " + ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items()), file=sys.stderr)
    return delta, seconds


def alternated(
    runs: int, work: Path, *commands: tuple[str, Callable[[int], float]]
) -> dict[str, float]:
    """Median seconds of each named command over ``runs`` rounds, the commands taking turns
    within a round (this machine's noise then falls on all of them alike). What a round
    after the first left in ``work`` is removed (the first's Delta table is the catch-up's)."""
    times: dict[str, list[float]] = {name: [] for name, _ in commands}
    for run in range(runs):
        before = set(work.iterdir())
        for name, command_of in commands:
            times[name].append(command_of(run))
        if run:
            for left in set(work.iterdir()) - before:
                if left.is_dir():
                    shutil.rmtree(left)
                else:
                    left.unlink()
    print(
        "runs: " + ", ".join(f"{n} {[round(t, 1) for t in ts]}" for n, ts in times.items()),
        file=sys.stderr,
    )
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--changes", type=int, default=None, help="catch-up changes (default: 30%% of --rows)"
    )
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--skip-iceberg", action="store_true")
    parser.add_argument(
        "--verify", action="store_true", help="also run `sparkcdc verify` after the catch-up"
    )
    parser.add_argument(
        "--kafka-rates",
        type=lambda text: [float(r) for r in text.split(",")],
        default=[5e3, 1e4, 2e4, 3e4, 4e4, 5e4, 6e4, 7.5e4, 9e4, 1e5, 1.25e5, 1.5e5],
        help="changes/s of the Kafka steps, comma-separated, increasing",
    )
    parser.add_argument("--kafka-step-s", type=float, default=60.0)
    parser.add_argument(
        "--snapshot-runs",
        type=int,
        default=3,
        help="rounds of each snapshot and its plain copy, alternated (medians reported)",
    )
    parser.add_argument(
        "--fixed-runs",
        type=int,
        default=3,
        help="runs of each fixed-cost pipeline (Delta, Kafka), alternated (medians reported)",
    )
    parser.add_argument(
        "--fixed-only", action="store_true", help="measure the fixed cost of a run alone"
    )
    parser.add_argument(
        "--no-prepare",
        action="store_true",
        help="run without the class-data archive when there is none (no `sparkcdc prepare`)",
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="measure only a backlog of this many rows, then changes, into Kafka (backlog.py)",
    )
    parser.add_argument(
        "--backlog-budgets",
        default="default,200000/32m",
        help="comma-separated batch budgets: default, or snapshot ROWS/binlog BYTES",
    )
    parser.add_argument("--backlog-runs", type=int, default=2, help="rounds of the budgets")
    parser.add_argument(
        "--backlog-peer",
        choices=("flinkcdc", "none"),
        default="flinkcdc",
        help="the backlog's peer: Flink CDC's SQL connector into Flink's Kafka sink (backlog.py)",
    )
    parser.add_argument(
        "--flinkcdc-poll-ms",
        default="20",
        help="the peer's debezium.poll.interval.ms, comma-separated, a peer each (500: default)",
    )
    parser.add_argument("--jdbc-copy-into", choices=("delta", "iceberg"), help=argparse.SUPPRESS)
    parser.add_argument("--merge-from", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.jdbc_copy_into:  # the child process of jdbc_copy
        run_jdbc_copy(args.jdbc_copy_into, args.target, args.rows)
        return
    if args.merge_from:  # the child process of cold_merge
        run_cold_merge(args.merge_from, args.target)
        return
    changes = Changes.plan(args.rows, args.changes or args.rows * 3 // 10)
    class_archive = pipelines_map_class_archive()
    prepare_s = None
    if not class_archive and not args.no_prepare:  # as scripts/setup.sh does
        print("no class-data archive for these drivers: `sparkcdc prepare` first", file=sys.stderr)
        prepare_s = round(sparkcdc(["prepare"], Path(os.devnull)), 1)
        class_archive = pipelines_map_class_archive()
    archive = {"class_archive": class_archive, "prepare_s": prepare_s}

    server = DevServer.from_env()
    server.start()
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        cur.execute(f"DROP TABLE IF EXISTS {DATABASE}.{TABLE}")  # the catch-up changed it
    work = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-throughput-"))
    # the commands' output outlives the run's files, to be read after a surprising result
    log = Path(tempfile.mkstemp(prefix="sparkcdc-bench-throughput-", suffix=".log")[1])
    print(f"the commands' output goes to {log}", file=sys.stderr)
    if args.backlog:
        try:
            print(json.dumps({**backlogs(server, work, args, log), **archive}))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        load_avg = os.getloadavg()[0]
        fixed = fixed_fields(fixed_costs(server, work, args, log), load_avg)
    finally:
        if args.fixed_only:
            shutil.rmtree(work, ignore_errors=True)
    if args.fixed_only:
        print(json.dumps({**fixed, **archive}))
        return
    load(server, TABLE, args.rows)
    print(f"table loaded: {TABLE} {args.rows} rows", file=sys.stderr)
    lake_table = str(work / "lake" / DATABASE / TABLE)
    try:
        with RssSampler() as rss:
            delta, seconds = snapshots(server, work, args, log)
            spark = spark_session(
                "bench-throughput",
                "local[2]",
                connectors=True,
                conf={"spark.ui.showConsoleProgress": "false"},
            )
            spark.sparkContext.setLogLevel("ERROR")
            check_count("the Delta table after the snapshot", _count(spark, lake_table), args.rows)
            if not args.skip_iceberg:
                counted = iceberg_count(work / "warehouse-0")
                check_count("the Iceberg table after the snapshot", counted, args.rows)
            plain_table, cold_table = str(work / "plain-merge"), str(work / "cold-merge")
            shutil.copytree(lake_table, plain_table)
            shutil.copytree(lake_table, cold_table)

            write_s = execute(server, changes.statements())
            rows_after = source_count(server)
            print(f"catch-up: {changes.count} changes written in {write_s:.1f}s", file=sys.stderr)
            catchup_s = sparkcdc(["run", str(delta), "--available-now"], log)
            check_count("the Delta table after the catch-up", _count(spark, lake_table), rows_after)
            kept = work / "changes.parquet"
            merge_s = plain_merge(spark, server, changes, plain_table, keep=kept)
            check_count("the plain MERGE's table", _count(spark, plain_table), rows_after)
            cold_s = cold_merge(kept, cold_table, log)
            check_count("the cold MERGE's table", _count(spark, cold_table), rows_after)
            print(
                f"catch-up: sparkcdc {catchup_s:.1f}s, MERGE {merge_s:.1f}s, the same MERGE in "
                f"a new process {cold_s:.1f}s",
                file=sys.stderr,
            )
            spark.stop()
            verified = None
            if args.verify:
                verified = sparkcdc(["verify", str(delta), "--timeout", "60"], log)
            alone: WriterAlone | None = None
            kafka = drain = None
            if not args.skip_kafka:
                drain, alone = kafka_drain(server, work, args.rows, log)
                print(
                    f"kafka: the writer alone reaches {alone.changes_per_s:,.0f} changes/s, "
                    f"MariaDB using {alone.mariadb_cores:.2f} cores; a pipeline drains its "
                    f"{alone.written:,} changes at {drain:,.0f} changes/s",
                    file=sys.stderr,
                )
                kafka = kafka_sustained(server, work, args, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = args.rows
    result = {
        "rows": rows,
        "changes": changes.count,
        "delta_snapshot_rows_per_s": round(rows / seconds["delta"]),
        "jdbc_copy_rows_per_s": round(rows / seconds["delta_jdbc"]),
        "vs_jdbc_copy": round(seconds["delta_jdbc"] / seconds["delta"], 2),
        "iceberg_vs_jdbc_copy": (
            round(seconds["iceberg_jdbc"] / seconds["iceberg"], 2) if "iceberg" in seconds else None
        ),
        "catchup_s": round(catchup_s, 1),
        "plain_merge_s": round(merge_s, 1),
        "vs_plain_merge": round(merge_s / catchup_s, 2),
        "cold_merge_s": round(cold_s, 1),
        "vs_cold_merge": round(cold_s / catchup_s, 2),
        "kafka_changes_per_s": None if kafka is None else round(kafka),
        "kafka_drain_changes_per_s": None if drain is None else round(drain),
        "kafka_writer_alone_changes_per_s": (None if alone is None else round(alone.changes_per_s)),
        # MariaDB's cores per 100,000 changes/s: what that rate would leave of two cores
        "mariadb_cores_per_100k_changes_per_s": (
            None if alone is None else round(alone.mariadb_cores * 100_000 / alone.changes_per_s, 2)
        ),
        "peak_executor_rss_mb": round(rss.peak_mb),
        **archive,
        **fixed,
    }
    if verified is not None:
        result["verify_s"] = round(verified, 1)
    print(json.dumps(result))


def pipelines_map_class_archive() -> bool:
    """Whether the drivers the bench's ``sparkcdc run`` commands start map a class-data
    archive (their pipeline files add no jars: the connector jars alone name it)."""
    from sparkcdc.spark.classdata import sharing_settings
    from sparkcdc.spark.session_plan import plan_session

    plan = plan_session("bench", "local[2]", connectors=True, configured={})
    return sharing_settings(plan.settings) != plan.settings


def _count(spark: Any, path: str) -> int:
    return int(spark.read.format("delta").load(path).count())


if __name__ == "__main__":
    main()
