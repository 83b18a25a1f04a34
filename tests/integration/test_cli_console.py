"""The console of ``sparkcdc run`` (issue 16, proof 1): scheduled runs of
``sparkcdc run --available-now`` on a live table print only the documented lines (docs/cli.md,
"What a run prints"), never a Java or Python stack, and leave the Delta sink equal to the
source; Ctrl-C typed in a terminal stops a run cleanly; a failure inside the running query
is one line with what to do.

One JVM per run is the cost of each run (~30-70 s here); the table is small, and the writes
go on between and during the runs, so that runs stop while batches and writes are in flight
(the case that printed Py4J and StackOverflowError stacks in about half of all runs).
Three runs by default (a fault of half the runs slips through all three once in 8, and CI
runs them at every change): the twenty of issue 16's proof took 12 minutes of a CI run on a
slow 2-core machine, five still 208 s of a suite that CI must run in 90 minutes;
``SPARKCDC_THOROUGH=1`` runs them as issued, ``SPARKCDC_CONSOLE_RUNS`` any number.
"""

from __future__ import annotations

import contextlib
import os
import pty
import random
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pipelines import THOROUGH, Writer, fresh_database, write_pipeline

from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)

DATABASE = "twenty_db"
RUNS = int(os.environ.get("SPARKCDC_CONSOLE_RUNS", "20" if THOROUGH else "3"))
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{TWENTY_PASSWORD}}
  tables: {database}.t
  server-id: 5880-5889
sink:
  type: delta
  path: {lake}
pipeline:
  name: twenty-runs
  checkpoint: {checkpoint}
"""
# every line a run may print (docs/cli.md, "What a run prints"); anything else is noise
STDOUT = [
    r"pipeline 'twenty-runs': 1 source table\(s\) → delta \(1 sink table\(s\)\); checkpoint \S+",
    rf"  {DATABASE}\.t <- {DATABASE}\.t \(key id\)",
    rf"sparkcdc: \d+ batch\(es\), \d+ change row\(s\) written to delta \({DATABASE}\.t\)",
]
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO "
STDERR = [
    rf"{STAMP}sparkcdc: Spark's own log: \S+/logs/spark\.log",
    rf"{STAMP}sparkcdc\.pipeline\.runner: (batch \d+|first batch running) \| [\d,]+ rows.*",
]


class TableChanges:
    """Random inserts, updates, key changes and deletes on ``t``, one a ``step``: a workload
    for ``pipelines.Writer``."""

    def __init__(self, conn: Any, seed: int) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.operations = 0

    @classmethod
    def connect(cls, seed: int) -> TableChanges:
        """The workload on an autocommit connection of its own."""
        conn = DevServer.from_env().connection(DATABASE)
        conn.autocommit(True)
        return cls(conn, seed)

    def step(self) -> None:
        rng = self.rng
        key = rng.randint(1, 120)
        with self.conn.cursor() as cur:
            choice = rng.random()
            if choice < 0.4:
                cur.execute(
                    "INSERT INTO t VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                    (key, rng.randint(0, 999), rng.choice(["a", "b", None])),
                )
            elif choice < 0.7:
                cur.execute("UPDATE t SET v = v * 2 + 1, s = %s WHERE id = %s", ("u", key))
            elif choice < 0.8:
                cur.execute("UPDATE IGNORE t SET id = %s WHERE id = %s", (rng.randint(1, 120), key))
            else:
                cur.execute("DELETE FROM t WHERE id = %s", (key,))
        self.operations += 1


def writer(seed: int) -> Writer:
    """``TableChanges`` in a thread for the span of a ``with`` block."""
    return Writer(DevServer.from_env(), DATABASE, seed, workload=TableChanges)


def noise(text: str, allowed: list[str]) -> list[str]:
    return [line for line in text.splitlines() if not any(re.fullmatch(p, line) for p in allowed)]


def sink_rows(lake: Path) -> dict[int, tuple[Any, ...]]:
    import deltalake
    import pyarrow as pa

    table = deltalake.DeltaTable(str(lake / DATABASE / "t"))
    reader = deltalake.QueryBuilder().register("t", table)  # reads deletion vectors
    rows = pa.table(reader.execute("SELECT id, v, s FROM t").read_all()).to_pylist()
    return {r["id"]: (r["v"], r["s"]) for r in rows}


def source_rows() -> dict[int, tuple[Any, ...]]:
    with DevServer.from_env().connection(DATABASE) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, v, s FROM t")
        return {row[0]: (row[1], row[2]) for row in cur.fetchall()}


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    """``t`` with 60 rows, and a pipeline file that copies it into Delta under tmp_path."""
    server = DevServer.from_env()
    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(5))")
        cur.executemany("INSERT INTO t VALUES (%s, %s, 'x')", [(i, i) for i in range(1, 61)])
    return write_pipeline(PIPELINE, tmp_path, server, DATABASE)


ENV = {**os.environ, "TWENTY_PASSWORD": DEV_PASSWORD}


@pytest.mark.timeout(2700)  # a JVM start each: ~35-70 s a run on a shared 2-core machine
def test_available_now_runs_print_only_the_documented_lines(pipeline: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    command = [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline), "--available-now"]
    between = TableChanges.connect(seed=1)
    for run in range(RUNS):
        last = run == RUNS - 1
        for _ in range(20):  # writes between runs
            between.step()
        # and while it runs, except the last
        with contextlib.nullcontext() if last else writer(seed=100 + run):
            done = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=600)
        where = f"run {run + 1}/{RUNS}, exit {done.returncode}:\n{done.stderr[-4000:]}"
        assert done.returncode == 0, where
        assert "Traceback" not in done.stderr and "\tat " not in done.stderr, where
        assert "Exception" not in done.stderr + done.stdout, where
        assert noise(done.stdout, STDOUT) == [], where
        assert noise(done.stderr, STDERR) == [], where
        assert done.stdout.splitlines()[-1].startswith("sparkcdc: "), where
    # the last run started after the last write: it ends at the source's state
    assert sink_rows(lake) == source_rows()


def read_until(fd: int, pattern: str, seen: bytearray, deadline: float) -> bool:
    """Read the terminal's output into ``seen`` until ``pattern`` is in it (True), the child
    closes the terminal or the deadline passes (False)."""
    while time.monotonic() < deadline:
        if re.search(pattern.encode(), seen):
            return True
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child is gone
            return False
        if not chunk:
            return False
        seen.extend(chunk)
    return False


def test_ctrl_c_in_a_terminal_stops_cleanly(pipeline: Path, tmp_path: Path) -> None:
    """Ctrl-C typed into the terminal ``sparkcdc run`` runs in: the terminal's line
    discipline sends SIGINT to the whole foreground process group (the JVM included), not
    only to one pid. The run lets its batch finish, exits 130 without a stack, and the
    checkpoint and the Delta table go on exactly in the next run."""
    command = [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline)]
    seen = bytearray()
    with writer(seed=7):
        pid, fd = pty.fork()
        if pid == 0:  # the child: the run, on the terminal
            try:
                os.execve(sys.executable, command, ENV)
            finally:
                os._exit(127)
        try:
            deadline = time.monotonic() + 300
            # the progress line of a committed batch, then one more, written while it runs
            assert read_until(fd, r"batch 1 \|", seen, deadline), seen.decode(errors="replace")
            os.write(fd, b"\x03")  # Ctrl-C, as typed
            read_until(fd, r"(?!)", seen, time.monotonic() + 180)  # to the end
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
    text = seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, text[-4000:]
    assert "stopping on request (SIGINT)" in text, text[-4000:]
    assert "Traceback" not in text and "\tat " not in text, text[-4000:]
    assert "Exception" not in text and "Py4J" not in text, text[-4000:]
    # the writes have stopped: a scheduled run from the checkpoint brings the sink to the
    # source exactly (nothing the stopped run committed is lost or doubled)
    done = subprocess.run(
        [*command, "--available-now"], capture_output=True, text=True, env=ENV, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert sink_rows(tmp_path / "lake") == source_rows()


def run_once(pipeline: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sparkcdc.cli.main", *flags, "run", str(pipeline)]
    return subprocess.run(
        [*command, "--available-now"], capture_output=True, text=True, env=ENV, timeout=600
    )


def purge_binlogs() -> None:
    """A new binlog file, and every older one purged (the checkpoint's position with them).
    MariaDB keeps a file a replication connection still reads (the last run's may linger
    for a moment): purge until the older files are gone."""
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        current = cur.fetchone()[0]
        deadline = time.monotonic() + 120
        while True:
            cur.execute(f"PURGE BINARY LOGS TO '{current}'")
            cur.execute("SHOW BINARY LOGS")
            if [row[0] for row in cur.fetchall()] == [current]:
                return
            assert time.monotonic() < deadline, "the older binlog files stay"
            time.sleep(0.5)


def delta_log_broken(lake: Path) -> None:
    """The sink table's transaction log replaced by a file: every later write fails."""
    log = lake / DATABASE / "t" / "_delta_log"
    shutil.rmtree(log)
    log.write_text("not a directory")


# a failure inside the running query, the line `run` prints for it, and its exit code
FAILURES = {
    "purged binlog": (
        purge_binlogs,
        r"sparkcdc: source error: the offset's binlog file mysql-bin\.\d+ \(position .*\) was "
        r"purged from .*; binlog files there now: .* Keep binlogs longer .* and restart with "
        r"scan\.startup\.mode=initial or earliest-offset and a new checkpoint",
        3,
    ),
    "sink write fails": (
        lambda: None,
        r"sparkcdc: sink error: delta sink: .*",
        4,
    ),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failure_inside_the_query_is_one_line_with_what_to_do(
    pipeline: Path, tmp_path: Path, failure: str
) -> None:
    cause, line, code = FAILURES[failure]
    assert run_once(pipeline).returncode == 0
    TableChanges.connect(seed=3).step()
    with DevServer.from_env().connection(DATABASE) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (500, 1, 'n')")  # a row to write in the next run
        conn.commit()
    cause()
    if failure == "sink write fails":
        delta_log_broken(tmp_path / "lake")
    done = run_once(pipeline)
    assert done.returncode == code, done.stderr[-4000:]
    errors = [x for x in done.stderr.splitlines() if not any(re.fullmatch(p, x) for p in STDERR)]
    assert len(errors) == 1 and re.fullmatch(line, errors[0]), done.stderr[-4000:]
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr, done.stderr[-4000:]
    # the stacks are in the log file whose path the run printed
    (log_line,) = [x for x in done.stderr.splitlines() if "Spark's own log: " in x]
    log_file = Path(log_line.split("Spark's own log: ", 1)[1])
    assert "\tat " in log_file.read_text(errors="replace")
    # with -v, the stacks are on the console too
    verbose = run_once(pipeline, "-v")
    assert verbose.returncode == code
    assert "\tat " in verbose.stderr or "Traceback" in verbose.stderr, verbose.stderr[-3000:]


def test_a_multi_batch_snapshot_shows_totals_a_rate_and_an_eta_in_a_terminal(
    server: DevServer, tmp_path: Path
) -> None:
    """Issue 58's proof of the progress line: a snapshot of 3,000 rows in chunks of 100,
    three chunks a batch (ten batches), run in a terminal: while it runs, the rewritten line
    shows rows with separators and a rate, tables and chunks done of their totals, and an
    ETA; after it, the binlog position."""
    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(5))")
        cur.executemany("INSERT INTO t VALUES (%s, %s, 'x')", [(i, i) for i in range(1, 3001)])
    template = PIPELINE.replace(
        "  server-id: 5880-5889\n",
        "  server-id: 5880-5889\n"
        "  scan.incremental.snapshot.chunk.size: 100\n"
        "  scan.incremental.snapshot.chunks-per-batch: 3\n",
    )
    assert template != PIPELINE
    pipeline = write_pipeline(template, tmp_path, server, DATABASE)
    command = [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline), "--available-now"]
    seen = bytearray()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the run, on the terminal
        try:
            os.execve(sys.executable, command, ENV)
        finally:
            os._exit(127)
    try:
        read_until(fd, r"(?!)", seen, time.monotonic() + 600)  # to the end
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-4000:]
    # each rewrite of the line begins with "\r\033[K"
    lines = [part.strip() for part in re.split(r"\r\x1b\[K|\r?\n", text) if part.strip()]
    during = [
        line
        for line in lines
        if re.fullmatch(
            r"batch \d+ \| [\d,]+ rows, [\d,]+ rows/s \| snapshot: 0/1 tables, "
            r"chunks \d+/~?\d+, ETA ~?(\d+s|\d+m\d\ds)( \| binlog \S+:\d+, lag [\d,]+ bytes)?",
            line,
        )
    ]
    assert during, text[-4000:]
    chunks = [re.search(r"chunks (\d+)/~?(\d+)", line) for line in during]
    assert all(m is not None and 0 < int(m[1]) < int(m[2]) for m in chunks), during
    assert any(
        re.fullmatch(
            r"batch \d+ \| 3,000 rows \| snapshot: 1/1 tables, chunks 30/30 \| binlog .*", x
        )
        for x in lines
    ), text[-4000:]
