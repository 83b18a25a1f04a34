"""The mysql-cdc streaming source against the private MariaDB and local Spark."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workload import ITEMS_DDL, Workload, source_state

from sparkcdc.model.dialect import dialect_class
from sparkcdc.model.position import BinlogPosition
from sparkcdc_dev.devserver import DevServer
from sparkcdc_dev.oracle import compare, replay

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent


def options(server: DevServer, database: str, table: str, **extra: str) -> dict[str, str]:
    s = server.settings
    return {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": database,
        "table-name": table,
        "server-id": "5500-5504",
        "scan.startup.mode": "latest-offset",
        **extra,
    }


def start_collecting(
    spark: Any,
    opts: dict[str, str],
    wait: bool = True,
    then: Callable[[int], None] | None = None,
) -> tuple[Any, dict[int, list[dict[str, Any]]]]:
    """The query's batches collected as they come; ``then(batch_id)`` runs after each is
    collected, before the next is planned."""
    reader = spark.readStream.format("mysql-cdc")
    for key, value in opts.items():
        reader = reader.option(key, value)
    batches: dict[int, list[dict[str, Any]]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]
        if then is not None:
            then(batch_id)

    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    if wait:
        query.processAllAvailable()  # the first offset is taken: later writes are captured
    return query, batches


class AvailableNowRuns:
    """A query run again and again with Trigger.AvailableNow from one checkpoint, each run
    restarted on a schema change (``sparkcdc.await_restarting``): every batch is collected,
    and the columns of each run's frame."""

    def __init__(self, spark: Any, opts: dict[str, str], checkpoint: Path) -> None:
        self.spark, self.opts, self.checkpoint = spark, opts, checkpoint
        self.batches: dict[int, list[dict[str, Any]]] = {}
        self.columns: list[list[str]] = []

    def _collect(self, batch: Any, batch_id: int) -> None:
        self.batches[batch_id] = [r.asDict() for r in batch.collect()]

    def _start(self, **trigger: Any) -> Any:
        reader = self.spark.readStream.format("mysql-cdc")
        for key, value in self.opts.items():
            reader = reader.option(key, value)
        frame = reader.load()
        self.columns.append(frame.columns)
        return (
            frame.writeStream.foreachBatch(self._collect)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**(trigger or {"availableNow": True}))
            .start()
        )

    def one_batch(self, timeout_s: float = 300) -> None:
        """One batch (a snapshot's first ``chunks-per-batch`` chunks) on either Spark line,
        then a stop with no batch in flight: a processing-time query whose next trigger is an
        hour away, stopped once its first batch is committed (its progress is posted then).
        An AvailableNow run reads the whole snapshot on PySpark 4.2."""
        query = self._start(processingTime="1 hour")
        try:
            deadline = time.monotonic() + timeout_s
            while not query.recentProgress:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, "the first batch did not commit"
                time.sleep(0.2)
        finally:
            query.stop()
        assert query.exception() is None

    def catch_up(self) -> None:
        import sparkcdc

        query = sparkcdc.await_restarting(self._start)
        assert query.exception() is None

    def failure(self) -> str:
        """The message of the SourceError the next run stops with (it must stop)."""
        import sparkcdc
        from sparkcdc.errors import SourceError

        with pytest.raises(SourceError) as caught:
            sparkcdc.await_restarting(self._start)
        return str(caught.value)

    def changelog(self) -> list[dict[str, Any]]:
        return changelog(self.batches)


def changelog(batches: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for batch_id in sorted(batches):
        rows.extend(sorted(batches[batch_id], key=lambda r: r["_seq"]))
    return rows


def kill_idle_connections(server: DevServer) -> list[int]:
    """KILL every connection of the source user that idles (the driver's kept ones between
    batches), as a server restart or a proxy's idle timeout would drop them; their ids."""
    with server.root_connection() as root, root.cursor() as cur:
        cur.execute(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s AND COMMAND = 'Sleep'",
            (server.settings.user,),
        )
        threads = [int(thread) for (thread,) in cur.fetchall()]
        for thread in threads:
            cur.execute(f"KILL CONNECTION {thread}")
    return threads


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


# one partition (the source's default) is what the tests around here run: a repeat, run
# with SPARKCDC_THOROUGH=1
@pytest.mark.parametrize("partitions", [pytest.param("1", marks=pytest.mark.thorough), "3"])
def test_changelog_replays_to_the_source(
    spark: Any, dev_server: DevServer, database: str, sql: Any, partitions: str
) -> None:
    """Also when three partitions decode each batch's binlog range between them, across
    binlog rotations inside batches."""
    sql.execute(ITEMS_DDL)
    opts = options(dev_server, database, "items", **{"scan.binlog.partitions": partitions})
    query, batches = start_collecting(spark, opts)
    try:
        workload = Workload(dev_server.connection(database), seed=1)
        with dev_server.root_connection() as root, root.cursor() as cur:
            for step in range(300):
                workload.step()
                if step % 70 == 69:
                    cur.execute("FLUSH BINARY LOGS")  # the next batch spans two files
        query.processAllAvailable()
    finally:
        query.stop()
    log = changelog(batches)
    assert {r["_op"] for r in log} == {"+I", "-U", "+U", "-D"}
    assert all(r["_database"] == database and r["_table"] == "items" for r in log)
    result = replay(log, ["id"])
    assert result.violations == []
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []


def test_update_gives_before_and_after_rows(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    query, batches = start_collecting(spark, options(dev_server, database, "t"))
    try:
        sql.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        sql.execute("UPDATE t SET v = 'c' WHERE id = 1")
        sql.execute("DELETE FROM t WHERE id = 2")
        query.processAllAvailable()
    finally:
        query.stop()
    got = [(r["_op"], r["id"], r["v"]) for r in changelog(batches)]
    assert got == [("+I", 1, "a"), ("+I", 2, "b"), ("-U", 1, "a"), ("+U", 1, "c"), ("-D", 2, "b")]


def test_several_tables_give_the_envelope(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE a1 (id INT PRIMARY KEY, price DECIMAL(6,2))")
    sql.execute("CREATE TABLE a2 (k VARCHAR(5) PRIMARY KEY, b VARBINARY(4))")
    sql.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    query, batches = start_collecting(spark, options(dev_server, database, "a[0-9]"))
    try:
        sql.execute("INSERT INTO a1 VALUES (1, 9.50)")
        sql.execute("INSERT INTO a2 VALUES ('x', x'00ff')")
        sql.execute("INSERT INTO other VALUES (1)")
        sql.execute("UPDATE a1 SET price = 10 WHERE id = 1")
        sql.execute("DELETE FROM a2")
        query.processAllAvailable()
    finally:
        query.stop()
    rows = [r for b in sorted(batches) for r in sorted(batches[b], key=lambda r: r["seq"])]
    got = [(r["table"], r["op"], r["before"], r["after"]) for r in rows]
    assert got == [
        ("a1", "c", None, '{"id":1,"price":"9.50"}'),
        ("a2", "c", None, '{"k":"x","b":"AP8="}'),
        ("a1", "u", '{"id":1,"price":"9.50"}', '{"id":1,"price":"10.00"}'),
        ("a2", "d", '{"k":"x","b":"AP8="}', None),
    ]
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)


def test_earliest_and_specific_offsets(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    # earliest-offset reads every binlog file the server has: only this test's, not what
    # earlier tests left (a statement-logged stored-function call there stops any stream)
    with dev_server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    sql.execute("SHOW MASTER STATUS")
    file, pos = sql.fetchone()[:2]
    sql.execute("INSERT INTO t VALUES (1), (2)")
    opts = options(
        dev_server,
        database,
        "t",
        **{
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": file,
            "scan.startup.specific-offset.pos": str(pos),
        },
    )
    query, batches = start_collecting(spark, opts)
    query.stop()
    assert [(r["_op"], r["id"]) for r in changelog(batches)] == [("+I", 1), ("+I", 2)]
    query, batches = start_collecting(
        spark, options(dev_server, database, "t", **{"scan.startup.mode": "earliest-offset"})
    )
    query.stop()
    assert [(r["_op"], r["id"]) for r in changelog(batches)] == [("+I", 1), ("+I", 2)]


def drain(config: dict[str, Any], env: dict[str, str], target: Any) -> None:
    """Run the query with Trigger.AvailableNow until its checkpoint has committed everything
    up to the source position ``target`` (a ``BinlogPosition``, an ``Lsn``: the config's
    ``format``) and, for a snapshot, every chunk. A restarted
    AvailableNow run on Spark 4.1 may only finish the batch the killed run left open, so
    this repeats (a bounded number of times)."""
    checkpoint = Path(config["checkpoint"])
    for _ in range(5):
        final = subprocess.run(
            [
                sys.executable,
                str(HERE / "stream_worker.py"),
                json.dumps({**config, "available_now": True}),
            ],
            env=env,
            timeout=600,
            check=False,
            capture_output=True,
        )
        assert final.returncode == 0, final.stdout[-3000:]
        if _drained(checkpoint, target, dialect_class(worker_format(config)).offset_key):
            return
    raise AssertionError(f"the query did not catch up with {target} in 5 AvailableNow runs")


def _drained(checkpoint: Path, target: Any, offset_key: str) -> bool:
    offsets = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    commits = {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    if not offsets or offsets[-1] not in commits:
        return False
    last = json.loads((checkpoint / "offsets" / str(offsets[-1])).read_text().splitlines()[-1])
    position = type(target).from_offset(last[offset_key])
    snapshot_done = all(
        t["total"] is not None and t["next"] >= t["total"]
        for t in last.get("snapshot", {}).values()
    )
    return bool(position >= target) and snapshot_done


def master_position(server: DevServer) -> BinlogPosition:
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return BinlogPosition(str(file), int(pos))


def worker_format(config: dict[str, Any]) -> str:
    """The source format a stream worker reads (stream_worker.py): ``format``, or MySQL's."""
    return str(config.get("format", "mysql-cdc"))


def start_worker(config: dict[str, Any], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start a stream worker and wait until it says it is ready (see stream_worker.py)."""
    ready = Path(config["out"]) / "ready"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "stream_worker.py"), json.dumps(config)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, 180, "the worker")
        assert proc.poll() is None, f"worker exited early:\n{worker_errors(log)}"
        ready.unlink()
    except BaseException:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        raise
    return proc


def worker_errors(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    picked = [
        line[:400] for line in lines if "ERROR" in line or "Error" in line or "Exception" in line
    ]
    return "\n".join(picked[:30] or lines[-30:])


# one partition (the default) with SPARKCDC_THOROUGH=1 only: the default's kills and restarts
# are also the pipelines' (test_pipeline_delta.py, test_snapshot_stream.py)
@pytest.mark.e2e  # Spark in the worker processes
@pytest.mark.parametrize("partitions", [pytest.param("1", marks=pytest.mark.thorough), "3"])
def test_available_now_and_kill_restart_lose_and_duplicate_nothing(
    dev_server: DevServer, database: str, sql: Any, tmp_path: Path, partitions: str
) -> None:
    """With the binlog range decoded by three partitions: a replayed batch yields the same
    rows."""
    sql.execute(ITEMS_DDL)
    config = {
        "out": str(tmp_path / "out"),
        "checkpoint": str(tmp_path / "checkpoint"),
        "options": options(dev_server, database, "items", **{"scan.binlog.partitions": partitions}),
    }
    out = Path(config["out"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    stop = threading.Event()
    workload = Workload(dev_server.connection(database), seed=42)
    writer: threading.Thread | None = None
    kills = 2  # each a worker JVM of ~30 s here; the snapshot's kill oracles kill more
    for attempt in range(kills):
        log = tmp_path / f"worker-{attempt}.log"
        proc = start_worker(config, env, log)
        try:
            if writer is None:
                writer = threading.Thread(
                    target=workload.run, args=(300, stop, 1_000_000), daemon=True
                )
                writer.start()
            seen = len(list(out.glob("batch-*.pkl")))
            wait_for(
                lambda proc=proc, want=seen + 2 + attempt: (
                    len(list(out.glob("batch-*.pkl"))) >= want or proc.poll() is not None
                ),
                120,
                "more batches",
            )
            assert proc.poll() is None, f"worker died:\n{worker_errors(log)}"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    stop.set()
    assert writer is not None
    writer.join()
    # the last runs drain everything up to now and end by themselves (Trigger.AvailableNow)
    drain(config, env, master_position(dev_server))
    assert not list(out.glob("mismatch-*")), "a replayed batch yielded different rows"
    batches = {
        int(p.stem.split("-")[1]): pickle.loads(p.read_bytes()) for p in out.glob("batch-*.pkl")
    }
    assert sorted(batches) == list(range(len(batches))), "a batch id is missing"
    result = replay(changelog(batches), ["id"])
    assert result.violations == []
    assert workload.operations > 100
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []


def load_error(spark: Any, opts: dict[str, str]) -> str:
    reader = spark.readStream.format("mysql-cdc")
    for key, value in opts.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        df = reader.load()
        query = df.writeStream.format("console").start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    return str(info.value)


def test_unknown_option_suggests_the_closest(
    spark: Any, dev_server: DevServer, database: str
) -> None:
    opts = {**options(dev_server, database, "t"), "scan.startup.mod": "latest-offset"}
    message = load_error(spark, opts)
    assert (
        "unknown option 'scan.startup.mod'" in message
        and "Did you mean 'scan.startup.mode'" in message
    )


def test_wrong_password_is_clear_and_secret(
    spark: Any, dev_server: DevServer, database: str
) -> None:
    message = load_error(
        spark, {**options(dev_server, database, "t"), "password": "not-the-password"}
    )
    assert "ccess denied" in message
    assert "not-the-password" not in message


def test_a_user_without_the_replication_grants_is_told_the_grant(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    user, password = f"g_{uuid.uuid4().hex[:10]}", "grant-test-pw-5521"
    with dev_server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY %s", (password,))
        cur.execute(f"GRANT SELECT ON *.* TO '{user}'@'127.0.0.1'")
    try:
        opts = {**options(dev_server, database, "t"), "username": user, "password": password}
        message = load_error(spark, opts)
    finally:
        with dev_server.root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
    assert "is not ready for CDC" in message, message[-3000:]
    assert f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1';" in message
    assert "OperationalError" not in message
    assert password not in message


def test_unreachable_port_times_out_clearly(
    spark: Any, dev_server: DevServer, database: str
) -> None:
    opts = {**options(dev_server, database, "t"), "port": "1", "connect.timeout": "2s"}
    message = load_error(spark, opts)
    assert "127.0.0.1:1" in message


def test_pattern_matching_nothing_lists_tables(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE present (id INT PRIMARY KEY)")
    message = load_error(spark, options(dev_server, database, "absent"))
    assert "matches no table" in message and f"{database}.present" in message


def test_purged_start_position_says_which_exist(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    sql.execute("INSERT INTO t VALUES (1)")
    opts = options(
        dev_server,
        database,
        "t",
        **{
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": "mysql-bin.000000",
            "scan.startup.specific-offset.pos": "4",
        },
    )
    sql.execute("SHOW BINARY LOGS")
    existing = [str(row[0]) for row in sql.fetchall()]
    message = load_error(spark, opts)
    assert "mysql-bin.000000" in message
    assert existing and all(name in message for name in existing), (existing, message[:2000])


def test_polls_reuse_one_connection_and_survive_its_loss(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    """latestOffset looks at the server at every trigger (here every 200 ms) on one kept
    connection, not a new login each time; when the server drops it, the next poll opens
    another and the stream goes on."""
    sql.execute(ITEMS_DDL)
    query, batches = start_collecting(spark, options(dev_server, database, "items"))

    def connections() -> int:
        with dev_server.root_connection() as root, root.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
            return int(cur.fetchone()[1])

    try:
        before = connections()
        time.sleep(6)  # ~30 triggers of an idle stream
        opened = connections() - before - 1  # less the count's own connection
        assert opened <= 3, f"{opened} logins in 6 s of polling"
        kill_idle_connections(dev_server)
        workload = Workload(dev_server.connection(database), seed=5)
        for _ in range(20):
            workload.step()
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    result = replay(changelog(batches), ["id"])
    assert result.violations == []
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []
