"""sparkcdc against Flink CDC and Debezium, side by side: one server, one table, one workload.

Runnable after scripts/test.sh's set-up (it starts the private MariaDB; the peers' jars are
fetched on first use by scripts/fetch_flinkcdc.sh and scripts/fetch_debezium.sh):

    python bench/vs_flinkcdc.py [--quick] [--rows 2000000] [--changes 1000000] [--rounds 2]
                                [--peers flinkcdc,debezium]

The first peer is Flink CDC 3.5's MySQL SQL connector (jars/flinkcdc/pom.xml) on Flink 1.20's
table runtime (jars/flink/pom.xml), in a local MiniCluster of one JVM that serves every run
(tests/harness/flink/FlinkCdcPeer.java), its changelog as full rows into a sink that counts
RowKinds. The second is Debezium 3.5's embedded engine with its MariaDB connector
(jars/debezium/pom.xml; tests/harness/flink/DebeziumPeer.java, one JVM too): Kafka Connect
records whose every column a consumer reads, counted by the same kinds (an update is one
Debezium event carrying both images: it counts as a -U and a +U). ``--peers`` picks the peers
(default both). sparkcdc is ``spark.readStream.format("mysql-cdc")`` in one ``local[2]``
session, Trigger.AvailableNow, into a ``foreachBatch`` that writes the batch to Spark's no-op
sink (every column of every row made into Spark rows) while an observation counts its rows by
``_op``. All read in clear (no TLS). Phases, the sides alternating ``--rounds`` times (the
order flipped each round), the median of each counts:
  - snapshot of ``--rows`` rows (8 mixed columns, bench/snapshot.py's table), parallelism 2
    for sparkcdc and Flink (``scan.startup.mode=snapshot``, chunks of 8096 rows); Debezium's
    ``snapshot.mode=initial_only`` reads a table in one thread, without locks
    (``snapshot.locking.mode=none``);
  - binlog catch-up of ``--changes`` changes from a specific offset (bench/binlog_decode.py's
    workload: half inserts in 1,000-row statements, 30% updates, 20% deletes), parallelism 1
    for Flink (its binlog reader is one), ``scan.binlog.partitions`` (default ``auto``) on
    ``local[2]`` for sparkcdc; Debezium from the same offset (with the server's GTID position
    there) written into its offset store, ``snapshot.mode=recovery`` (the table's schema read
    from the server, no rows);
  - once per side, the snapshot again while ~``--writes-per-s`` updates a second are written
    to the table (0 skips it).
Rates exclude start-up, which is reported apart: the Spark session's and each peer's JVM's
start, and each run's own (sparkcdc: the query's start to its first batch's call, its planning
and the source's offsets; Flink: a MiniCluster started and the job submitted; Debezium: the
engine built). Flink's steady time runs from the submission's end to its last row, Debezium's
from the engine's start to its last row (its connections and schema read in it, as in a Flink
job's), sparkcdc's from the first batch's call to the last batch's end;
``*_with_start_vs_<peer>`` count each run's start-up too. Every side must count exactly the
workload, by kind, or the bench stops. Peak resident memory of sparkcdc's JVM, of its Python
processes (this one and Spark's workers) and of each peer's JVM, and the load average, go in
the result. The last line printed is one JSON object; ``*_vs_flinkcdc`` and ``*_vs_debezium``
are sparkcdc's rate over the peer's.
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
HARNESS_DIR = ROOT / "tests" / "harness" / "flink"
FLINK_LIBS = (ROOT / "jars" / "flink" / "lib", ROOT / "jars" / "flinkcdc" / "lib")
PEER_JVM_OPTIONS = ("-Xmx2g",)
KINDS = ("+I", "-U", "+U", "-D")
PEERS = ("flinkcdc", "debezium")
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
    peers: tuple[str, ...]


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
        help=(
            "Flink CDC's debezium.poll.interval.ms and Debezium's poll.interval.ms (their "
            "default, 500, waits at each chunk's end)"
        ),
    )
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"the peers beside sparkcdc, comma-separated, of {', '.join(PEERS)} (default all)",
    )
    args = parser.parse_args(argv)
    peers = tuple(peer for peer in args.peers.split(",") if peer)
    if not peers or set(peers) - set(PEERS):
        parser.error(f"--peers takes some of {', '.join(PEERS)}, not {args.peers!r}")
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
        peers=peers,
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
    """Peak resident memory (MB) of sparkcdc's JVM, its Python processes and each peer's JVM.

    Sampled from /proc every 0.2 s over this process's descendants: a peer's JVM by its pid,
    every other ``java`` (Spark's driver) as sparkcdc's JVM, every Python process (this one,
    Spark's workers) as sparkcdc's Python; each peak is of the sum of its group.
    """

    def __init__(self) -> None:
        self.peer_pids: dict[int, str] = {}
        self.peak_mb: dict[str, float] = collections.defaultdict(float)
        self.peak_mb |= {"sparkcdc_jvm": 0.0, "sparkcdc_python": 0.0}
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
                if pid in self.peer_pids:
                    groups[self.peer_pids[pid]] += rss_mb
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


class JvmPeer:
    """A peer's JVM: one Java harness (a JSON request a line on stdin, a JSON reply a line on
    stdout) serving every run of the bench, so that its JIT warms up as the Spark session does."""

    harness: Path
    libs: tuple[Path, ...]
    fetch_script: str
    memory_group: str

    def __init__(self, memory: PeakMemory) -> None:
        subprocess.run(
            ["bash", str(ROOT / "scripts" / self.fetch_script)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        from sparkcdc_dev.javaharness import compiled_classpath

        classpath = compiled_classpath(self.harness, self.libs, f"{self.harness.stem}-harness")
        began = time.perf_counter()
        self._process = subprocess.Popen(
            ["java", *PEER_JVM_OPTIONS, "-cp", classpath, self.harness.stem],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        memory.peer_pids[self._process.pid] = self.memory_group
        ready = self._read()
        self.jvm_start_s = time.perf_counter() - began
        self.jvm_uptime_at_ready_s = ready["ready_ms"] / 1000

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise SystemExit(
                f"the {self.harness.stem} peer exited ({self._process.wait()}): see its stderr"
            )
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({**request, "timeout_s": PHASE_TIMEOUT_S}) + "\n")
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


class FlinkCdcPeer(JvmPeer):
    """The Flink CDC side: FlinkCdcPeer.java, one MiniCluster job per :meth:`run`."""

    harness = HARNESS_DIR / "FlinkCdcPeer.java"
    libs = FLINK_LIBS
    fetch_script = "fetch_flinkcdc.sh"
    memory_group = "flinkcdc_jvm"

    def run(
        self,
        name: str,
        text_column: str,
        options: Mapping[str, str],
        parallelism: int,
        expected: int,
    ) -> dict[str, Any]:
        return self.request(
            {
                "name": name,
                "columns": FLINK_COLUMNS.format(text=text_column),
                "options": dict(options),
                "parallelism": parallelism,
                "expected": expected,
            }
        )


class DebeziumPeer(JvmPeer):
    """The Debezium side: DebeziumPeer.java, one embedded engine per :meth:`run`."""

    harness = HARNESS_DIR / "DebeziumPeer.java"
    libs = (ROOT / "jars" / "debezium" / "lib",)
    fetch_script = "fetch_debezium.sh"
    memory_group = "debezium_jvm"

    def run(
        self,
        properties: Mapping[str, str],
        binlog_offset: Mapping[str, Any] | None,
        expected: int,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"properties": dict(properties), "expected": expected}
        if binlog_offset is not None:
            request["binlog_offset"] = dict(binlog_offset)
        return self.request(request)


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


def debezium_properties(
    server: Any, database: str, table: str, poll_ms: int, server_id: str
) -> dict[str, str]:
    """The embedded engine's and the MariaDB connector's properties for one table, in clear.

    The snapshot takes no lock (``snapshot.locking.mode=none``: a consistent-snapshot
    transaction alone, as both other sides read); ``poll.interval.ms`` is the knob Flink CDC
    gets as ``debezium.poll.interval.ms``, set alike; the queue and batch sizes are Debezium's
    defaults, as Flink CDC runs them.
    """
    s = server.settings
    return {
        "name": f"bench-{database}-{table}",
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "topic.prefix": "bench",
        "database.hostname": s.host,
        "database.port": str(s.port),
        "database.user": s.user,
        "database.password": s.password,
        "database.server.id": server_id,
        "database.ssl.mode": "disable",
        "database.include.list": database,
        "table.include.list": f"{database}.{table}",
        "snapshot.locking.mode": "none",
        "schema.history.internal": "io.debezium.relational.history.MemorySchemaHistory",
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "include.schema.changes": "false",
        "tombstones.on.delete": "false",
        "poll.interval.ms": str(poll_ms),
        "offset.flush.interval.ms": "600000",
    }


def debezium_phase(
    peer: DebeziumPeer,
    phase: str,
    properties: Mapping[str, str],
    binlog_offset: Mapping[str, Any] | None,
    expected: Mapping[str, int],
) -> dict[str, Any]:
    """One embedded engine; its counts checked; its seconds from its start to the last row."""
    result = peer.run(properties, binlog_offset, sum(expected.values()))
    if "error" in result:
        raise SystemExit(
            f"Debezium's {phase} failed: {result['error']} (counted {result.get('counts')})"
        )
    check_counts("debezium", phase, result["counts"], expected)
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
        flinkcdc = FlinkCdcPeer(memory) if "flinkcdc" in sizes.peers else None
        debezium = DebeziumPeer(memory) if "debezium" in sizes.peers else None
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
            # Debezium: the snapshot alone (initial_only), and the catch-up from the offset the
            # harness writes into the engine's offset store (recovery: the table's schema read
            # from the server, then the binlog from that offset)
            snap_debezium = {
                **debezium_properties(
                    server, snapshot.DATABASE, table, sizes.flink_poll_ms, "6740"
                ),
                "snapshot.mode": "initial_only",
            }
            binlog_debezium = {
                **debezium_properties(
                    server, binlog_decode.DATABASE, "events", sizes.flink_poll_ms, "6741"
                ),
                "snapshot.mode": "recovery",
            }
            with server.connection() as conn, conn.cursor() as cur:
                # the GTID position at the start: the MariaDB connector streams by GTID
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (start.file, start.pos))
                (gtids,) = cur.fetchone()
            binlog_offset = {"file": start.file, "pos": start.pos, "gtids": gtids}
            snap_kinds, change_kinds = snapshot_kinds(sizes.rows), binlog_kinds(sizes.changes)
            peer_runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)

            def flink(
                phase: str,
                text: str,
                options: dict[str, str],
                parallelism: int,
                kinds: dict[str, int],
            ) -> Callable[[], float]:
                assert flinkcdc is not None

                def one() -> float:
                    result = flink_phase(flinkcdc, phase, text, options, parallelism, kinds)
                    peer_runs[f"flinkcdc-{phase}"].append(result)
                    seconds: float = result["last_row_s"]
                    STARTS["flinkcdc"].append(result["submit_s"])
                    return seconds

                return one

            def dbz(
                phase: str,
                properties: dict[str, str],
                offset: dict[str, Any] | None,
                kinds: dict[str, int],
            ) -> Callable[[], float]:
                assert debezium is not None

                def one() -> float:
                    result = debezium_phase(debezium, phase, properties, offset, kinds)
                    peer_runs[f"debezium-{phase}"].append(result)
                    seconds: float = result["last_row_s"]
                    STARTS["debezium"].append(result["submit_s"])
                    return seconds

                return one

            def sides(phase: str, workload: str) -> dict[str, Callable[[], float]]:
                """Each side's run of ``phase`` on ``workload``: ``warm-up`` (the snapshot of the
                small table), ``snapshot`` or ``binlog``."""
                if workload == "binlog":
                    spark, kinds = binlog_spark, change_kinds
                    text, flink_run, parallelism = "payload", binlog_flink, 1
                    dbz_run, offset = binlog_debezium, binlog_offset
                elif workload == "warm-up":
                    spark, kinds = (
                        {**snap_spark, "table-name": warm_table},
                        snapshot_kinds(warm_rows),
                    )
                    text, flink_run, parallelism = (
                        "note",
                        {**snap_flink, "table-name": warm_table},
                        2,
                    )
                    dbz_run = {
                        **snap_debezium,
                        "table.include.list": f"{snapshot.DATABASE}.{warm_table}",
                    }
                    offset = None
                else:
                    spark, kinds = snap_spark, snap_kinds
                    text, flink_run, parallelism = "note", snap_flink, 2
                    dbz_run, offset = snap_debezium, None
                found: dict[str, Callable[[], float]] = {
                    "sparkcdc": lambda: sparkcdc_phase(side, phase, spark, kinds)
                }
                if flinkcdc is not None:
                    found["flinkcdc"] = flink(phase, text, flink_run, parallelism, kinds)
                if debezium is not None:
                    found["debezium"] = dbz(phase, dbz_run, offset, kinds)
                return found

            # warm-up of every side on both phases (JIT, Python workers, connections), the
            # snapshot's on a tenth of the table
            print("warm-up", file=sys.stderr)
            for run in [
                *sides("warm-up", "warm-up").values(),
                *sides("warm-up", "binlog").values(),
            ]:
                run()
            STARTS.clear()
            peer_runs.clear()
            print("snapshot", file=sys.stderr)
            snaps = alternate(sizes.rounds, sides("snapshot", "snapshot"))
            print("binlog catch-up", file=sys.stderr)
            binlogs = alternate(sizes.rounds, sides("binlog", "binlog"))
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
                        name: under_writes(name, run)
                        for name, run in sides("snapshot-under-writes", "snapshot").items()
                    },
                )
        finally:
            side.close()
            for peer_jvm in (flinkcdc, debezium):
                if peer_jvm is not None:
                    peer_jvm.close()
    load_end = os.getloadavg()

    def rate(work: int, seconds: list[float]) -> float:
        return work / statistics.median(seconds)

    start_s = {name: statistics.median(starts) for name, starts in STARTS.items()}

    def with_start(times: dict[str, list[float]], peer: str) -> float:
        """sparkcdc's rate over the peer's with each run's start-up counted (its median)."""
        spark = statistics.median(times["sparkcdc"]) + start_s["sparkcdc"]
        return round((statistics.median(times[peer]) + start_s[peer]) / spark, 2)

    def vs(times: dict[str, list[float]], peer: str) -> float:
        return round(rate(1, times["sparkcdc"]) / rate(1, times[peer]), 2)

    result: dict[str, Any] = {
        "rows": sizes.rows,
        "changes": sizes.changes,
        "rounds": sizes.rounds,
        "peers": list(sizes.peers),
        "sparkcdc_snapshot_rows_per_s": round(rate(sizes.rows, snaps["sparkcdc"])),
        "sparkcdc_binlog_changes_per_s": round(rate(sizes.changes, binlogs["sparkcdc"])),
    }
    for peer in sizes.peers:
        result |= {
            f"{peer}_snapshot_rows_per_s": round(rate(sizes.rows, snaps[peer])),
            f"snapshot_vs_{peer}": vs(snaps, peer),
            f"{peer}_binlog_changes_per_s": round(rate(sizes.changes, binlogs[peer])),
            f"binlog_vs_{peer}": vs(binlogs, peer),
            f"snapshot_with_start_vs_{peer}": with_start(snaps, peer),
            f"binlog_with_start_vs_{peer}": with_start(binlogs, peer),
        }
    if writes:
        result["sparkcdc_snapshot_under_writes_rows_per_s"] = round(
            rate(sizes.rows, writes["sparkcdc"])
        )
        for peer in sizes.peers:
            result |= {
                f"{peer}_snapshot_under_writes_rows_per_s": round(rate(sizes.rows, writes[peer])),
                f"snapshot_under_writes_vs_{peer}": vs(writes, peer),
            }
        result["writes_per_s_achieved"] = {name: round(w) for name, w in writes_done.items()}
    result |= {
        "seconds": {
            phase: {name: [round(t, 2) for t in times] for name, times in sides_.items()}
            for phase, sides_ in (
                ("snapshot", snaps),
                ("binlog", binlogs),
                ("snapshot_under_writes", writes),
            )
            if sides_
        },
        "sparkcdc_session_start_s": round(side.session_start_s, 2),
        "sparkcdc_query_start_s": round(start_s["sparkcdc"], 2),
    }
    # each peer's JVM start once; each run's own start-up (Flink: a MiniCluster and the job
    # submitted; Debezium: the engine built); the first row of a catch-up from its start
    for peer, jvm, run_start in (
        ("flinkcdc", flinkcdc, "job_start_s"),
        ("debezium", debezium, "engine_start_s"),
    ):
        if jvm is not None:
            result |= {
                f"{peer}_jvm_start_s": round(jvm.jvm_start_s, 2),
                f"{peer}_{run_start}": round(start_s[peer], 2),
                f"{peer}_binlog_first_row_s": round(
                    statistics.median(r["first_row_s"] for r in peer_runs[f"{peer}-binlog"]), 2
                ),
            }
    result |= {
        "peak_mb": {group: round(mb) for group, mb in memory.peak_mb.items()},
        "binlog_partitions": sizes.binlog_partitions,
        "flinkcdc_poll_interval_ms": sizes.flink_poll_ms,
        "load_avg_start": round(load_start[0], 1),
        "load_avg_end": round(load_end[0], 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
