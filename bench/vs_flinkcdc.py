"""sparkcdc against Flink CDC, side by side: one server, one table, one workload, one run.

Runnable after scripts/test.sh's set-up (it starts the private MariaDB; the peer's jars are
fetched on first use by scripts/fetch_flinkcdc.sh):

    python bench/vs_flinkcdc.py [--quick] [--rows 2000000] [--changes 1000000] [--rounds 2]

The peer is Flink CDC 3.5's MySQL SQL connector (jars/flinkcdc/pom.xml) on Flink 1.20's table
runtime (jars/flink/pom.xml), in a local MiniCluster of one JVM that serves every run
(tests/harness/flink/FlinkCdcPeer.java), its changelog as full rows into a sink that counts
RowKinds. sparkcdc is ``spark.readStream.format("mysql-cdc")`` in one ``local[2]`` session,
Trigger.AvailableNow, into a ``foreachBatch`` that writes the batch to Spark's no-op sink (every
column of every row made into Spark rows) while an observation counts its rows by ``_op``.
Both sides read in clear (no TLS). Phases, the two sides alternating ``--rounds`` times
(the order flipped each round), the median of each counts:
  - snapshot of ``--rows`` rows (8 mixed columns, bench/snapshot.py's table), parallelism 2
    both (``scan.startup.mode=snapshot``, chunks of 8096 rows);
  - binlog catch-up of ``--changes`` changes from a specific offset (bench/binlog_decode.py's
    workload: half inserts in 1,000-row statements, 30% updates, 20% deletes), parallelism 1
    for Flink (its binlog reader is one), ``scan.binlog.partitions`` (default ``auto``) on
    ``local[2]`` for sparkcdc;
  - once per side, the snapshot again while ~``--writes-per-s`` updates a second are written
    to the table (0 skips it).
Rates exclude start-up, which is reported apart: the Spark session's and the Flink JVM's
start, and each run's own (sparkcdc: the query's start to its first batch's call, its planning
and the source's offsets; Flink: a MiniCluster started and the job submitted). Flink's steady
time runs from the submission's end to its last row, sparkcdc's from the first batch's call to
the last batch's end; ``*_with_start_vs_flinkcdc`` count each run's start-up too. Both sides
must count exactly the workload, by kind (an update is a -U and a +U), or the bench stops.
Peak resident memory of sparkcdc's JVM, of its Python processes (this one and Spark's
workers) and of Flink's JVM, and the load average, go in the result. The last line printed is
one JSON object; ``*_vs_flinkcdc`` are sparkcdc's rate over Flink CDC's.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "harness" / "flink" / "FlinkCdcPeer.java"
FLINK_LIBS = (ROOT / "jars" / "flink" / "lib", ROOT / "jars" / "flinkcdc" / "lib")
FLINK_JVM_OPTIONS = ("-Xmx2g",)
KINDS = ("+I", "-U", "+U", "-D")
CHUNK = 8096
# Flink DDL of the two tables (bench/snapshot.py's and bench/binlog_decode.py's), MySQL types
# as Flink CDC maps them
FLINK_COLUMNS = (
    "id BIGINT, user_id BIGINT, amount DECIMAL(12, 2), score DOUBLE, name STRING, "
    "status STRING, created_at TIMESTAMP(3), {text} STRING, PRIMARY KEY (id) NOT ENFORCED"
)
PHASE_TIMEOUT_S = 1800


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What one run measures (parsed from the command line)."""

    rows: int
    changes: int
    rounds: int
    writes_per_s: float
    binlog_partitions: str
    flink_poll_ms: int


def parse_args(argv: Sequence[str] | None = None) -> Sizes:
    """The run's sizes; ``--quick`` is ten times fewer rows and changes than asked.

    >>> parse_args(["--quick"]).rows
    200000
    """
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the snapshot")
    parser.add_argument(
        "--changes", type=int, default=1_000_000, help="changes of the binlog catch-up"
    )
    parser.add_argument("--quick", action="store_true", help="ten times fewer rows and changes")
    parser.add_argument(
        "--rounds", type=int, default=2, help="alternated runs of each side (the median counts)"
    )
    parser.add_argument(
        "--writes-per-s", type=float, default=1000.0, help="writes during the third phase (0: none)"
    )
    parser.add_argument("--binlog-partitions", default="auto", help="sparkcdc's, for the catch-up")
    parser.add_argument(
        "--flink-poll-ms",
        type=int,
        default=20,
        help="Flink CDC's debezium.poll.interval.ms (its default, 500, waits at each chunk's end)",
    )
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    if args.rows < 10 * scale or args.changes < 10 * scale or args.rounds < 1:
        parser.error("--rows and --changes need at least 10 (100 with --quick), --rounds 1")
    return Sizes(
        rows=args.rows // scale,
        changes=args.changes // scale,
        rounds=args.rounds,
        writes_per_s=args.writes_per_s,
        binlog_partitions=args.binlog_partitions,
        flink_poll_ms=args.flink_poll_ms,
    )


def binlog_kinds(changes: int) -> dict[str, int]:
    """The rows of bench/binlog_decode.py's workload of ``changes`` changes, by RowKind.

    >>> binlog_kinds(1000)
    {'+I': 500, '-U': 300, '+U': 300, '-D': 200}
    """
    inserts, updates = changes // 2, changes * 3 // 10
    return {"+I": inserts, "-U": updates, "+U": updates, "-D": changes - inserts - updates}


def snapshot_kinds(rows: int) -> dict[str, int]:
    return {"+I": rows, "-U": 0, "+U": 0, "-D": 0}


class CountMismatchError(SystemExit):
    """A side did not read exactly the workload: no ratio of its rate means anything."""


def check_counts(
    side: str, phase: str, counted: Mapping[str, int], expected: Mapping[str, int]
) -> None:
    """Stops the bench unless ``counted`` is ``expected``, kind by kind.

    >>> check_counts("flinkcdc", "snapshot", {"+I": 5}, {"+I": 5, "-D": 0})
    """
    wrong = {
        kind: (counted.get(kind, 0), want)
        for kind in sorted(set(counted) | set(expected))
        if counted.get(kind, 0) != expected.get(kind, 0)
        for want in [expected.get(kind, 0)]
    }
    if wrong:
        detail = ", ".join(
            f"{kind}: {got} counted, {want} expected" for kind, (got, want) in wrong.items()
        )
        raise CountMismatchError(
            f"{side} read the wrong rows in the {phase} phase ({detail}): the workload is not "
            "what both sides read, so no ratio is reported; check the server's binlog and the table"
        )


# ------------------------------------------------------------------------------- memory


class PeakMemory:
    """Peak resident memory (MB) of sparkcdc's JVM, its Python processes and Flink's JVM.

    Sampled from /proc every 0.2 s over this process's descendants: the Flink peer's JVM by
    its pid, every other ``java`` (Spark's driver) as sparkcdc's JVM, every Python process
    (this one, Spark's workers) as sparkcdc's Python; each peak is of the sum of its group.
    """

    def __init__(self) -> None:
        self.flink_pid = 0
        self.peak_mb = {"sparkcdc_jvm": 0.0, "sparkcdc_python": 0.0, "flinkcdc_jvm": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.2):
            groups: dict[str, float] = collections.defaultdict(float)
            for pid, parent, command, rss_mb in _processes():
                if not _descends(pid, parent, me):
                    continue
                if pid == self.flink_pid:
                    groups["flinkcdc_jvm"] += rss_mb
                elif command.endswith("java"):
                    groups["sparkcdc_jvm"] += rss_mb
                elif "python" in command:
                    groups["sparkcdc_python"] += rss_mb
            for group, mb in groups.items():
                self.peak_mb[group] = max(self.peak_mb[group], mb)


_PARENTS: dict[int, int] = {}


def _processes() -> list[tuple[int, int, str, float]]:
    """(pid, parent pid, executable's name, resident MB) of every process on the machine."""
    found = []
    _PARENTS.clear()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            # fields after the parenthesised name: state, ppid, ..., rss (pages) is the 24th
            fields = stat[stat.rindex(")") + 2 :].split()
            command = os.path.basename(Path(f"/proc/{entry}/exe").resolve().name)
        except OSError:
            continue
        pid, parent = int(entry), int(fields[1])
        _PARENTS[pid] = parent
        found.append((pid, parent, command, int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20))
    return found


def _descends(pid: int, parent: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        pid, parent = parent, _PARENTS.get(parent, 0)
    return False


# ------------------------------------------------------------------------------- Flink CDC


class FlinkCdcPeer:
    """The Flink CDC side: one JVM running FlinkCdcPeer.java, one job per :meth:`run`."""

    def __init__(self, memory: PeakMemory) -> None:
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "fetch_flinkcdc.sh")],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        from sparkcdc_dev.javaharness import compiled_classpath

        classpath = compiled_classpath(HARNESS, FLINK_LIBS, "flinkcdc-harness")
        began = time.perf_counter()
        self._process = subprocess.Popen(
            ["java", *FLINK_JVM_OPTIONS, "-cp", classpath, "FlinkCdcPeer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        memory.flink_pid = self._process.pid
        ready = self._read()
        self.jvm_start_s = time.perf_counter() - began
        self.jvm_uptime_at_ready_s = ready["ready_ms"] / 1000

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise SystemExit(f"the Flink CDC peer exited ({self._process.wait()}): see its stderr")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(
        self,
        name: str,
        text_column: str,
        options: Mapping[str, str],
        parallelism: int,
        expected: int,
    ) -> dict[str, Any]:
        assert self._process.stdin is not None
        request = {
            "name": name,
            "columns": FLINK_COLUMNS.format(text=text_column),
            "options": dict(options),
            "parallelism": parallelism,
            "expected": expected,
            "timeout_s": PHASE_TIMEOUT_S,
        }
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def flink_options(server: Any, database: str, table: str, flink_poll_ms: int) -> dict[str, str]:
    return {
        **connection_options(server, database, table),
        "server-time-zone": "UTC",
        "scan.incremental.snapshot.chunk.size": str(CHUNK),
        # in clear, as sparkcdc reads here: the JDBC connections and the binlog client
        "jdbc.properties.sslMode": "DISABLED",
        "debezium.database.ssl.mode": "disabled",
        "debezium.poll.interval.ms": str(flink_poll_ms),
    }


def flink_phase(
    peer: FlinkCdcPeer,
    phase: str,
    text_column: str,
    options: Mapping[str, str],
    parallelism: int,
    expected: Mapping[str, int],
) -> dict[str, Any]:
    """One Flink CDC job; its counts checked; its seconds from submission to the last row."""
    result = peer.run(
        f"flinkcdc-{phase}", text_column, options, parallelism, sum(expected.values())
    )
    if "error" in result:
        raise SystemExit(
            f"Flink CDC's {phase} failed: {result['error']} (counted {result.get('counts')})"
        )
    check_counts("flinkcdc", phase, result["counts"], expected)
    return result


# ------------------------------------------------------------------------------- sparkcdc


class SparkcdcSide:
    """The sparkcdc side: one ``local[2]`` session, a query per :meth:`run`."""

    def __init__(self) -> None:
        from sparkcdc.spark.session import spark_session

        began = time.perf_counter()
        self.spark = spark_session(
            "bench-vs-flinkcdc", "local[2]", conf={"spark.ui.showConsoleProgress": "false"}
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.session_start_s = time.perf_counter() - began
        self.workdir = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-vs-"))

    def run(self, options: Mapping[str, str]) -> tuple[float, float, dict[str, int]]:
        """One AvailableNow query of the source: the seconds from its start to its first batch's
        call (planning, the source's offsets: its start-up), from there to its last batch's end,
        and its rows by ``_op``."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        counted: dict[str, int] = collections.Counter()
        calls: list[float] = []

        def consume(batch: Any, batch_id: int) -> None:
            calls.append(time.perf_counter())
            # one pass: the no-op sink makes Spark rows of every column; the observation
            # counts them by kind as they pass
            observation = Observation(f"kinds-{batch_id}")
            kinds = [
                F.sum(F.when(F.col("_op") == kind, 1).otherwise(0)).alias(kind) for kind in KINDS
            ]
            batch.observe(observation, *kinds).write.format("noop").mode("overwrite").save()
            for kind, rows in observation.get.items():
                counted[kind] += rows or 0
            calls.append(time.perf_counter())

        shutil.rmtree(self.workdir, ignore_errors=True)
        reader = self.spark.readStream.format("mysql-cdc")
        for key, value in {**options, "state.location": str(self.workdir / "state")}.items():
            reader = reader.option(key, value)
        began = time.perf_counter()
        query = (
            reader.load()
            .writeStream.foreachBatch(consume)
            .option("checkpointLocation", str(self.workdir / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if not calls:
            raise SystemExit(f"sparkcdc's query of {options['table-name']} ran no batch")
        return calls[0] - began, calls[-1] - calls[0], dict(counted)

    def close(self) -> None:
        self.spark.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def connection_options(server: Any, database: str, table: str) -> dict[str, str]:
    """The options both sources name alike (sparkcdc takes Flink CDC's names)."""
    s = server.settings
    return {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": database,
        "table-name": table,
    }


def sparkcdc_options(server: Any, database: str, table: str) -> dict[str, str]:
    return {
        **connection_options(server, database, table),
        "server-id": "6700-6710",
        "ssl-mode": "disabled",
    }


def sparkcdc_phase(
    side: SparkcdcSide, phase: str, options: Mapping[str, str], expected: Mapping[str, int]
) -> float:
    start_s, steady_s, counted = side.run(options)
    check_counts("sparkcdc", phase, counted, expected)
    STARTS["sparkcdc"].append(start_s)
    return steady_s


# ------------------------------------------------------------------------------- the run


# each side's start-up seconds of every timed run: sparkcdc's query to its first batch,
# Flink's MiniCluster and job submission
STARTS: dict[str, list[float]] = collections.defaultdict(list)


def alternate(rounds: int, sides: Mapping[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Each side's seconds over ``rounds`` rounds, the order of the sides flipped each round."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for round_ in range(rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            times[name].append(sides[name]())
            print(
                f"  {name}: {times[name][-1]:.2f}s (load {os.getloadavg()[0]:.1f})", file=sys.stderr
            )
    return times


def main(argv: Sequence[str] | None = None) -> None:
    sizes = parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    import binlog_decode
    import snapshot

    from sparkcdc_dev.devserver import DevServer

    load_start = os.getloadavg()
    server = DevServer.from_env()
    server.start()
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {snapshot.DATABASE}")
    table = f"vs_flinkcdc_{sizes.rows}"
    snapshot.load(server, table, sizes.rows)
    warm_table, warm_rows = f"{table}_warm_up", max(1, sizes.rows // 10)
    snapshot.load(server, warm_table, warm_rows)
    start, end, written = binlog_decode.build_binlog(server, sizes.changes)
    assert written == sizes.changes, (written, sizes.changes)
    print(
        f"table {table}: {sizes.rows} rows; binlog {start} .. {end}: {written} changes",
        file=sys.stderr,
    )

    with PeakMemory() as memory:
        peer = FlinkCdcPeer(memory)
        side = SparkcdcSide()
        try:
            snap_spark = {
                **sparkcdc_options(server, snapshot.DATABASE, table),
                "scan.startup.mode": "snapshot",
                "scan.incremental.snapshot.chunk.size": str(CHUNK),
                "scan.incremental.snapshot.chunks-per-batch": "0",
            }
            snap_flink = {
                **flink_options(server, snapshot.DATABASE, table, sizes.flink_poll_ms),
                "scan.startup.mode": "snapshot",
                "server-id": "6720-6729",
            }
            binlog_spark = {
                **sparkcdc_options(server, binlog_decode.DATABASE, "events"),
                "scan.startup.mode": "specific-offset",
                "scan.startup.specific-offset.file": start.file,
                "scan.startup.specific-offset.pos": str(start.pos),
                "scan.binlog.partitions": sizes.binlog_partitions,
            }
            binlog_flink = {
                **flink_options(server, binlog_decode.DATABASE, "events", sizes.flink_poll_ms),
                "scan.startup.mode": "specific-offset",
                "scan.startup.specific-offset.file": start.file,
                "scan.startup.specific-offset.pos": str(start.pos),
                "server-id": "6730",
            }
            snap_kinds, change_kinds = snapshot_kinds(sizes.rows), binlog_kinds(sizes.changes)
            flink_runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)

            def flink(
                phase: str,
                text: str,
                options: dict[str, str],
                parallelism: int,
                kinds: dict[str, int],
            ) -> Callable[[], float]:
                def one() -> float:
                    result = flink_phase(peer, phase, text, options, parallelism, kinds)
                    flink_runs[phase].append(result)
                    seconds: float = result["last_row_s"]
                    STARTS["flinkcdc"].append(result["submit_s"])
                    return seconds

                return one

            # warm-up of both sides on both phases (JIT, Python workers, connections), the
            # snapshot's on a tenth of the table
            print("warm-up", file=sys.stderr)
            warm_spark = {**snap_spark, "table-name": warm_table}
            warm_flink = {**snap_flink, "table-name": warm_table}
            sparkcdc_phase(side, "warm-up", warm_spark, snapshot_kinds(warm_rows))
            flink("warm-up", "note", warm_flink, 2, snapshot_kinds(warm_rows))()
            sparkcdc_phase(side, "warm-up", binlog_spark, change_kinds)
            flink("warm-up", "payload", binlog_flink, 1, change_kinds)()
            STARTS.clear()
            print("snapshot", file=sys.stderr)
            snaps = alternate(
                sizes.rounds,
                {
                    "sparkcdc": lambda: sparkcdc_phase(side, "snapshot", snap_spark, snap_kinds),
                    "flinkcdc": flink("snapshot", "note", snap_flink, 2, snap_kinds),
                },
            )
            print("binlog catch-up", file=sys.stderr)
            binlogs = alternate(
                sizes.rounds,
                {
                    "sparkcdc": lambda: sparkcdc_phase(side, "binlog", binlog_spark, change_kinds),
                    "flinkcdc": flink("binlog", "payload", binlog_flink, 1, change_kinds),
                },
            )
            writes: dict[str, list[float]] = {}
            writes_done: dict[str, float] = {}
            if sizes.writes_per_s:
                print(f"snapshot under {sizes.writes_per_s:.0f} writes/s", file=sys.stderr)

                def under_writes(name: str, run: Callable[[], float]) -> Callable[[], float]:
                    def one() -> float:
                        stop, done = threading.Event(), []
                        writer = threading.Thread(
                            target=snapshot.write_load,
                            args=(server, table, sizes.rows, stop, sizes.writes_per_s, done),
                        )
                        writer.start()
                        try:
                            return run()
                        finally:
                            stop.set()
                            writer.join()
                            writes_done[name] = (
                                done[0] / (done[1] / 1000) if done and done[1] else 0.0
                            )

                    return one

                writes = alternate(
                    1,
                    {
                        "sparkcdc": under_writes(
                            "sparkcdc",
                            lambda: sparkcdc_phase(
                                side, "snapshot-under-writes", snap_spark, snap_kinds
                            ),
                        ),
                        "flinkcdc": under_writes(
                            "flinkcdc",
                            flink("snapshot-under-writes", "note", snap_flink, 2, snap_kinds),
                        ),
                    },
                )
        finally:
            side.close()
            peer.close()
    load_end = os.getloadavg()

    def rate(work: int, seconds: list[float]) -> float:
        return work / statistics.median(seconds)

    start_s = {name: statistics.median(starts) for name, starts in STARTS.items()}

    def with_start(times: dict[str, list[float]]) -> float:
        """sparkcdc's rate over Flink CDC's with each run's start-up counted (its median)."""
        spark = statistics.median(times["sparkcdc"]) + start_s["sparkcdc"]
        return round((statistics.median(times["flinkcdc"]) + start_s["flinkcdc"]) / spark, 2)

    result: dict[str, Any] = {
        "rows": sizes.rows,
        "changes": sizes.changes,
        "rounds": sizes.rounds,
        "sparkcdc_snapshot_rows_per_s": round(rate(sizes.rows, snaps["sparkcdc"])),
        "flinkcdc_snapshot_rows_per_s": round(rate(sizes.rows, snaps["flinkcdc"])),
        "snapshot_vs_flinkcdc": round(rate(1, snaps["sparkcdc"]) / rate(1, snaps["flinkcdc"]), 2),
        "sparkcdc_binlog_changes_per_s": round(rate(sizes.changes, binlogs["sparkcdc"])),
        "flinkcdc_binlog_changes_per_s": round(rate(sizes.changes, binlogs["flinkcdc"])),
        "binlog_vs_flinkcdc": round(rate(1, binlogs["sparkcdc"]) / rate(1, binlogs["flinkcdc"]), 2),
        "snapshot_with_start_vs_flinkcdc": with_start(snaps),
        "binlog_with_start_vs_flinkcdc": with_start(binlogs),
    }
    if writes:
        result |= {
            "sparkcdc_snapshot_under_writes_rows_per_s": round(
                rate(sizes.rows, writes["sparkcdc"])
            ),
            "flinkcdc_snapshot_under_writes_rows_per_s": round(
                rate(sizes.rows, writes["flinkcdc"])
            ),
            "snapshot_under_writes_vs_flinkcdc": round(
                rate(1, writes["sparkcdc"]) / rate(1, writes["flinkcdc"]), 2
            ),
            "writes_per_s_achieved": {name: round(w) for name, w in writes_done.items()},
        }
    result |= {
        "seconds": {
            phase: {name: [round(t, 2) for t in times] for name, times in sides.items()}
            for phase, sides in (
                ("snapshot", snaps),
                ("binlog", binlogs),
                ("snapshot_under_writes", writes),
            )
            if sides
        },
        "sparkcdc_session_start_s": round(side.session_start_s, 2),
        "flinkcdc_jvm_start_s": round(peer.jvm_start_s, 2),
        "sparkcdc_query_start_s": round(start_s["sparkcdc"], 2),
        "flinkcdc_job_start_s": round(start_s["flinkcdc"], 2),
        "flinkcdc_binlog_first_row_s": round(
            statistics.median(r["first_row_s"] for r in flink_runs["binlog"]), 2
        ),
        "peak_mb": {group: round(mb) for group, mb in memory.peak_mb.items()},
        "binlog_partitions": sizes.binlog_partitions,
        "flinkcdc_poll_interval_ms": sizes.flink_poll_ms,
        "load_avg_start": round(load_start[0], 1),
        "load_avg_end": round(load_end[0], 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
