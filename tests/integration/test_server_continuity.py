"""Offsets know their server: a reset, a rewind, another server or a failover is noticed
before any row is read; a failover by GTID is followed exactly; a position whose GTID set
MariaDB cannot compute never blocks a query."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from test_stream import changelog, options, start_collecting
from workload import ITEMS_DDL, Workload, random_row, source_state

from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin import server
from sparkcdc_dev.devserver import DevServer
from sparkcdc_dev.lanes import setting
from sparkcdc_dev.oracle import compare, replay

pytestmark = pytest.mark.integration

BIG = 20 << 20  # a 20 MB LONGTEXT value


def big_connection(dev: DevServer, database: str) -> pymysql.connections.Connection:
    s = dev.settings
    return pymysql.connect(
        host=s.host,
        port=s.port,
        user=s.user,
        password=s.password,
        database=database,
        autocommit=True,
        max_allowed_packet=128 << 20,
    )


def test_a_20mb_change_where_binlog_gtid_pos_fails_does_not_block_a_new_query(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v LONGTEXT)")
    sql.execute("SHOW MASTER STATUS")
    file, pos = sql.fetchone()[:2]
    conn = big_connection(dev_server, database)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1, %s)", ("a" * BIG,))
        cur.execute("UPDATE t SET v = %s WHERE id = 1", ("b" * BIG,))  # a ~40 MB event
        cur.execute("SHOW MASTER STATUS")
        end_file, end_pos = cur.fetchone()[:2]
        # the premise: MariaDB cannot give the GTID position after that event
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (end_file, end_pos))
        assert cur.fetchone()[0] is None
        assert server.mariadb_gtid_at(conn, end_file, end_pos) is None
        found = server.current_position(conn, server.server_info(conn))
        # at or past that point (other sessions may write meanwhile), with its GTID set
        assert (found.file, found.pos) >= (end_file, end_pos) and found.gtids is not None
    # a new query starts there and captures what follows, with GTIDs in its offsets
    query, batches = start_collecting(spark, options(dev_server, database, "t"))
    try:
        sql.execute("INSERT INTO t VALUES (2, 'after')")
        query.processAllAvailable()
        last = query.lastProgress["sources"][0]["endOffset"]
    finally:
        query.stop()
    assert [(r["_op"], r["id"], r["v"]) for r in changelog(batches)] == [("+I", 2, "after")]
    assert "'gtids'" in str(last) or '"gtids"' in str(last), last
    # and a query reading across the 20 MB changes delivers them whole
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
    got = [(r["_op"], r["id"], len(r["v"]), r["v"][:1]) for r in changelog(batches)]
    assert got == [
        ("+I", 1, BIG, "a"),
        ("-U", 1, BIG, "a"),
        ("+U", 1, BIG, "b"),
        ("+I", 2, 5, "a"),
    ]


# ------------------------------------------------------------------------ helpers


class Forwarder:
    """A TCP forwarder whose backend can be switched, like a virtual IP: the stream keeps
    its hostname/port (and so its state.location) while another server answers."""

    def __init__(self, backend: int) -> None:
        self.backend = backend
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def switch(self, backend: int) -> None:
        """Send new connections to ``backend`` and cut the open ones (as a VIP move does)."""
        with self._lock:
            self.backend = backend
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.switch(self.backend)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.backend), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def run_query(
    spark: Any,
    opts: dict[str, str],
    checkpoint: Path,
    batches: dict[int, list[dict[str, Any]]],
    every: str = "200 milliseconds",
) -> Any:
    """Start (or restart from ``checkpoint``) a query collecting into ``batches``."""
    reader = spark.readStream.format("mysql-cdc")
    for key, value in opts.items():
        reader = reader.option(key, value)

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]

    return (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=every)
        .start()
    )


def failure(spark: Any, opts: dict[str, str], checkpoint: Path) -> str:
    """The error a query restarted from ``checkpoint`` stops with."""
    query = run_query(spark, opts, checkpoint, {})
    try:
        with pytest.raises(Exception) as info:
            query.processAllAvailable()
    finally:
        query.stop()
    return str(info.value)


def offsets(checkpoint: Path) -> list[dict[str, Any]]:
    files = sorted(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    return [json.loads(p.read_text().splitlines()[-1]) for p in files]


def root(dev: DevServer, sql: str) -> None:
    with dev.root_connection() as conn, conn.cursor() as cur:
        cur.execute(sql)


def streamed_some(spark: Any, opts: dict[str, str], checkpoint: Path, dev: DevServer) -> None:
    """A query on ``items`` that has captured a few changes, stopped with its checkpoint."""
    batches: dict[int, list[dict[str, Any]]] = {}
    query = run_query(spark, opts, checkpoint, batches)
    try:
        query.processAllAvailable()
        with dev.connection(opts["database-name"]) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO items (id, name) VALUES (1, 'a'), (2, 'b')")
        query.processAllAvailable()
    finally:
        query.stop()
    assert [(r["_op"], r["id"]) for r in changelog(batches)] == [("+I", 1), ("+I", 2)]


# The servers these tests start mid-suite listen below Linux's ephemeral range (32768-60999):
# in it, a client socket of the suite (a Kafka producer retrying a stopped broker opens one a
# second) may hold the port when the server binds it ("Address already in use").
# Engineers sharing a machine give each their own (SPARKCDC_DEV_OTHER_PORT / _DIR, and
# SPARKCDC_DEV_REPLICA_PORT / _DIR), as SPARKCDC_DEV_PORT / _DIR for the private one.
OTHER_PORT = int(setting("SPARKCDC_DEV_OTHER_PORT"))
REPLICA_PORT = int(setting("SPARKCDC_DEV_REPLICA_PORT"))
OTHER_DIR = Path(setting("SPARKCDC_DEV_OTHER_DIR"))
REPLICA_DIR = Path(setting("SPARKCDC_DEV_REPLICA_DIR"))


@pytest.fixture(scope="module")
def other_server() -> Iterator[DevServer]:
    """A second, independent MariaDB (not a replica of the private one)."""
    dev = DevServer(OTHER_DIR, OTHER_PORT, server_id=2)
    dev.start()
    yield dev
    dev.stop()


def make_items(dev: DevServer, database: str) -> None:
    with dev.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cur.execute(f"USE `{database}`")
        cur.execute(ITEMS_DDL)


# -------------------------------------------------------------------------- tests


def test_reset_master_is_detected_before_anything_is_read(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    sql.execute(ITEMS_DDL)
    opts = options(dev_server, database, "items")
    streamed_some(spark, opts, tmp_path / "cp", dev_server)
    root(dev_server, "RESET MASTER")
    sql.execute("INSERT INTO items (id, name) VALUES (3, 'c')")
    message = failure(spark, opts, tmp_path / "cp")
    assert "BinlogResetError" in message or "was reset or restored" in message, message[:3000]
    assert "was reset or restored" in message and "mysql-bin.000001" in message
    assert "new checkpoint" in message


def test_a_different_server_behind_the_same_address_is_detected(
    spark: Any, dev_server: DevServer, other_server: DevServer, database: str, tmp_path: Path
) -> None:
    make_items(dev_server, database)
    make_items(other_server, database)
    vip = Forwarder(dev_server.port)
    try:
        opts = {**options(dev_server, database, "items"), "port": str(vip.port)}
        streamed_some(spark, opts, tmp_path / "cp", dev_server)
        vip.switch(other_server.port)
        message = failure(spark, opts, tmp_path / "cp")
    finally:
        vip.close()
        with other_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{database}`")
    assert "another server" in message, message[:3000]
    assert "server_id 1" in message and "server_id 2" in message
    assert "does not hold the offset's GTID set" in message


def test_a_restored_backup_is_detected(spark: Any, other_server: DevServer, tmp_path: Path) -> None:
    database = f"restore_{os.getpid()}"
    make_items(other_server, database)
    backup = tmp_path / "backup"
    other_server.stop()
    shutil.copytree(other_server.datadir, backup, symlinks=True)
    other_server.start()
    opts = options(other_server, database, "items")
    streamed_some(spark, opts, tmp_path / "cp", other_server)
    other_server.stop()  # restore the backup taken before those changes
    shutil.rmtree(other_server.datadir)
    shutil.copytree(backup, other_server.datadir, symlinks=True)
    other_server.start()
    try:
        message = failure(spark, opts, tmp_path / "cp")
    finally:
        with other_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{database}`")
    # the restored server opened a new file of the same name as the offset's
    assert "was reset or restored" in message and "now holds another file" in message, message[
        :3000
    ]


def test_a_binlog_that_went_back_is_detected(
    spark: Any, other_server: DevServer, tmp_path: Path
) -> None:
    database = f"back_{os.getpid()}"
    make_items(other_server, database)
    opts = options(other_server, database, "items")
    checkpoint = tmp_path / "cp"
    streamed_some(spark, opts, checkpoint, other_server)
    first, last = offsets(checkpoint)[0]["binlog"], offsets(checkpoint)[-1]["binlog"]
    assert first["file"] == last["file"] and first["pos"] < last["pos"]
    other_server.stop()  # the file loses its tail (as a crash with sync_binlog=0 can do)
    os.truncate(other_server.datadir / last["file"], first["pos"])
    other_server.start()
    try:
        message = failure(spark, opts, checkpoint)
    finally:
        with other_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{database}`")
    assert "went back" in message and f"before the offset {last['file']}:{last['pos']}" in (
        message
    ), message[:3000]


def fresh_replica() -> DevServer:
    """The replica server, started empty: one kept from an earlier run holds GTIDs that the
    primary, after a RESET MASTER (another test), hands out again for other transactions."""
    replica = DevServer(REPLICA_DIR, REPLICA_PORT, server_id=3)
    replica.stop()
    shutil.rmtree(replica.base_dir, ignore_errors=True)
    replica.start()
    return replica


def test_failover_to_a_replica_is_followed_by_gtid_exactly(
    spark: Any, dev_server: DevServer, tmp_path: Path
) -> None:
    replica = fresh_replica()
    database = f"failover_{os.getpid()}"
    vip = Forwarder(dev_server.port)
    try:
        replica.replicate(dev_server)
        make_items(dev_server, database)
        replica.wait_replicated(dev_server)
        opts = {**options(dev_server, database, "items"), "port": str(vip.port)}
        batches: dict[int, list[dict[str, Any]]] = {}
        checkpoint = tmp_path / "cp"
        query = run_query(spark, opts, checkpoint, batches)
        query.processAllAvailable()  # the first offset is taken
        workload = Workload(dev_server.connection(database), seed=7)
        for _ in range(150):
            workload.step()
        query.processAllAvailable()
        for _ in range(100):  # written on the primary, maybe not streamed before it stops
            workload.step()
        replica.wait_replicated(dev_server)
        dev_server.stop()  # the primary goes away mid-stream ...
        vip.switch(replica.port)  # ... and its replica takes over the address
        root(replica, "STOP SLAVE")
        workload = Workload(replica.connection(database), seed=8)
        for _ in range(150):
            workload.step()
        for _ in range(3):  # the query may have died while no server answered: restart it
            try:
                query.processAllAvailable()
                break
            except Exception:
                query.stop()
                query = run_query(spark, opts, checkpoint, batches)
        query.processAllAvailable()
        query.stop()
        result = replay(changelog(batches), ["id"])
        assert result.violations == []
        expected = source_state(replica.connection(database), "items")
        assert compare(result.state, expected) == []
        assert len(expected) > 20
        logged = offsets(checkpoint)
        servers = [o["server"]["server_id"] for o in logged]
        assert servers[0] == 1 and servers[-1] == 3, servers
        crossed = [o for o in logged if "failover" in o]
        assert crossed and crossed[0]["failover"]["from"]["server_id"] == 1
    finally:
        vip.close()
        dev_server.start()
        with dev_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        root(replica, "STOP SLAVE")
        replica.stop()


# --------------------------------------- a failover right after the batch that read the snapshot

ROWS = 1500
ROTATIONS = 3  # more binlog files than a fresh replica has: seq must still grow


def snapshot_under_a_lock(
    spark: Any,
    primary: DevServer,
    replica: DevServer,
    database: str,
    opts: dict[str, str],
    checkpoint: Path,
    batches: dict[int, list[dict[str, Any]]],
    replicate_all: bool,
) -> None:
    """Batch 0 of a query that reads the whole snapshot of ``items`` (chunks-per-batch 0),
    its chunks read after changes to ``items`` and ``ROTATIONS`` binlog rotations that
    follow the batch's binlog end: a session holds ``LOCK TABLES items WRITE`` until the
    driver, planning the batch (its end taken), waits for the table; that session writes,
    then lets go. The chunks' HWs are then past those changes, files after the batch's
    end. Then the query stops (its next trigger is an hour away) with batch 0 committed.
    The replica has applied everything, or (``replicate_all`` False) stops replicating
    right before those changes: it holds the batch's end but not the chunks' HWs."""
    rows = [random_row(random.Random(key), key) for key in range(1, ROWS + 1)]
    with primary.connection(database) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", rows)
    replica.wait_replicated(primary)
    with primary.root_connection() as lock, lock.cursor() as held:
        held.execute(f"USE `{database}`")
        held.execute("LOCK TABLES items WRITE")
        query = run_query(spark, opts, checkpoint, batches, every="1 hour")
        try:
            deadline = time.monotonic() + 120
            while not waiting_for_items(primary, database):
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, processlist(primary)
                time.sleep(0.1)
            replica.wait_replicated(primary)
            if not replicate_all:
                root(replica, "STOP SLAVE")
            # autocommit statements: a transaction would end the lock; key-changing too
            for statement in (
                "UPDATE items SET qty = qty + 1 WHERE id % 7 = 0",
                "FLUSH BINARY LOGS",
                "DELETE FROM items WHERE id % 11 = 0",
                "UPDATE items SET id = id + 5000 WHERE id % 13 = 0",
                "FLUSH BINARY LOGS",
                "INSERT INTO items (id, name) VALUES (9001, 'new'), (9002, 'newer')",
                "FLUSH BINARY LOGS",
                "UPDATE items SET name = 'late' WHERE id % 5 = 0",
            ):
                held.execute(statement)
            held.execute("UNLOCK TABLES")
            while not query.recentProgress:  # batch 0 committed
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, "the first batch did not commit"
                time.sleep(0.2)
        finally:
            query.stop()
    assert query.exception() is None
    # the set-up is what it says: batch 0 read every chunk, HWs files after its end
    first = offsets(checkpoint)[0]
    progress = first["snapshot"][f"{database}.items"]
    assert progress["next"] == progress["total"] > 1 and progress["prev"] == 0, progress
    highs = [
        BinlogPosition.from_offset(json.loads(p.read_text())["high"])
        for p in Path(opts["state.location"]).rglob("*.meta.json")
    ]
    end = BinlogPosition.from_offset(first["binlog"])
    assert highs and all(h.file_number == end.file_number + ROTATIONS for h in highs), (
        end,
        highs,
    )


def processlist(dev: DevServer) -> list[Any]:
    with dev.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SELECT USER, DB, COMMAND, STATE, INFO FROM information_schema.PROCESSLIST")
        return list(cur.fetchall())


def waiting_for_items(dev: DevServer, database: str) -> bool:
    with dev.root_connection() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "
            "STATE LIKE 'Waiting for table metadata lock%%' AND INFO LIKE %s",
            (f"%{database}%items%",),
        )
        (count,) = cur.fetchone()
    return bool(count)


def snapshot_options(dev: DevServer, database: str, port: int, tmp_path: Path) -> dict[str, str]:
    return {
        **options(dev, database, "items"),
        "port": str(port),
        "scan.startup.mode": "initial",
        "scan.incremental.snapshot.chunk.size": "200",
        "scan.incremental.snapshot.chunks-per-batch": "0",
        "state.location": str(tmp_path / "state"),
    }


def test_a_failover_right_after_the_batch_that_completed_the_snapshot_is_followed(
    spark: Any, dev_server: DevServer, tmp_path: Path
) -> None:
    replica = fresh_replica()
    database = f"snapfail_{os.getpid()}"
    vip = Forwarder(dev_server.port)
    try:
        replica.replicate(dev_server)
        make_items(dev_server, database)
        opts = snapshot_options(dev_server, database, vip.port, tmp_path)
        batches: dict[int, list[dict[str, Any]]] = {}
        checkpoint = tmp_path / "cp"
        snapshot_under_a_lock(
            spark, dev_server, replica, database, opts, checkpoint, batches, replicate_all=True
        )
        replica.wait_replicated(dev_server)
        dev_server.stop()  # the primary goes away right after the snapshot's batch ...
        vip.switch(replica.port)  # ... and its replica takes over the address
        root(replica, "STOP SLAVE")
        workload = Workload(replica.connection(database), seed=9, key_space=ROWS)
        for _ in range(150):
            workload.step()
        query = run_query(spark, opts, checkpoint, batches)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        result = replay(changelog(batches), ["id"])
        assert result.violations == []
        expected = source_state(replica.connection(database), "items")
        assert compare(result.state, expected) == []
        logged = offsets(checkpoint)
        assert [o["server"]["server_id"] for o in logged][:2] == [1, 3], logged
        assert logged[1]["failover"]["from"]["server_id"] == 1
    finally:
        vip.close()
        dev_server.start()
        with dev_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        root(replica, "STOP SLAVE")
        replica.stop()


def test_a_failover_to_a_server_without_the_chunks_transactions_is_refused(
    spark: Any, dev_server: DevServer, tmp_path: Path
) -> None:
    replica = fresh_replica()
    database = f"snaplost_{os.getpid()}"
    vip = Forwarder(dev_server.port)
    try:
        replica.replicate(dev_server)
        make_items(dev_server, database)
        opts = snapshot_options(dev_server, database, vip.port, tmp_path)
        checkpoint = tmp_path / "cp"
        snapshot_under_a_lock(
            spark, dev_server, replica, database, opts, checkpoint, {}, replicate_all=False
        )
        dev_server.stop()
        vip.switch(replica.port)
        message = failure(spark, opts, checkpoint)
    finally:
        vip.close()
        dev_server.start()
        with dev_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        root(replica, "STOP SLAVE")
        replica.stop()
    assert "DifferentServerError" in message, message[:3000]
    assert "right after the batch that read the snapshot's last chunks" in message
    assert "were lost in the failover" in message and "new checkpoint" in message
    assert len(offsets(checkpoint)) == 1  # nothing planned on the replica


# ------------------------------------------- an AvailableNow run: checked whatever the position

PIPELINE = """
source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.items
  server-id: 5880-5884
sink:
  type: console
pipeline:
  name: continuity
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""


def binlog_end(dev: DevServer) -> BinlogPosition:
    """Where the last binlog file of ``dev`` ends."""
    with dev.connection() as conn:
        return BinlogPosition(*server.binlog_files(conn)[-1])


def pipeline(port: int, database: str, tmp_path: Path) -> Any:
    from pipelines import pipeline_env

    from sparkcdc.pipeline.config import parse_pipeline

    text = PIPELINE.format(port=port, database=database, checkpoint=tmp_path / "cp")
    return parse_pipeline(text, base_dir=tmp_path, env=pipeline_env())


def caught_up_far(spark: Any, config: Any, dev: DevServer, database: str) -> BinlogPosition:
    """Runs ``config`` to the end of a binlog grown well past a few small changes (a
    40 KB row of an uncaptured table); the position its offset reached."""
    from sparkcdc.pipeline.runner import run_pipeline

    with dev.connection(database) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO items (id, name) VALUES (1, 'a')")
        cur.execute("CREATE TABLE pad (v LONGTEXT)")
        cur.execute("INSERT INTO pad VALUES (%s)", ("x" * 40_000,))
    summary = run_pipeline(config, available_now=True, spark=spark)
    assert summary.last_offset is not None
    return BinlogPosition.from_offset(summary.last_offset["binlog"])


def test_an_available_now_run_after_reset_master_stops_whatever_the_position(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """RESET MASTER, then fewer bytes of changes than the offset's position: the run used to
    find itself "caught up" (0 batches, exit 0) and never deliver them."""
    from sparkcdc.pipeline.runner import run_pipeline

    sql.execute(ITEMS_DDL)
    root(dev_server, "RESET MASTER")  # the offset lands in mysql-bin.000001 ...
    config = pipeline(dev_server.port, database, tmp_path)
    reached = caught_up_far(spark, config, dev_server, database)
    root(dev_server, "RESET MASTER")  # ... and so does the new binlog, shorter
    sql.execute("INSERT INTO items (id, name) VALUES (2, 'b')")
    end = binlog_end(dev_server)
    assert end < reached and end.file == reached.file  # the premise: a shorter file of its name
    with pytest.raises(Exception) as info:
        run_pipeline(config, available_now=True, spark=spark)
    message = str(info.value)
    assert "was reset or restored" in message and "mysql-bin.000001" in message, message[:3000]
    assert "new checkpoint" in message


def test_an_available_now_run_on_another_server_with_a_shorter_binlog_stops(
    spark: Any, dev_server: DevServer, other_server: DevServer, database: str, tmp_path: Path
) -> None:
    """Another server (a split brain, a restored backup elsewhere) whose GTID state does
    not hold the offset and whose binlog ends before it: refused, not "caught up"."""
    from sparkcdc.pipeline.runner import run_pipeline

    make_items(dev_server, database)
    make_items(other_server, database)
    other_end = binlog_end(other_server)
    while binlog_end(dev_server) < other_end:
        root(dev_server, "FLUSH BINARY LOGS")  # the offset's file numbers past the other's
    vip = Forwarder(dev_server.port)
    try:
        config = pipeline(vip.port, database, tmp_path)
        reached = caught_up_far(spark, config, dev_server, database)
        vip.switch(other_server.port)
        assert other_end < reached  # the premise: the other server's binlog ends before
        with pytest.raises(Exception) as info:
            run_pipeline(config, available_now=True, spark=spark)
    finally:
        vip.close()
        with other_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{database}`")
    message = str(info.value)
    assert "another server" in message, message[:3000]
    assert "does not hold the offset's GTID set" in message
