"""The replication client against the private MariaDB: dumps, GTIDs, and every failure mode."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

import pymysql
import pytest

from sparkcdc.errors import (
    BinlogResetError,
    PositionError,
    SourceConnectionError,
    SourceError,
)
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.position import BinlogPosition, MariaDbGtidSet
from sparkcdc.mysql.admin import server
from sparkcdc.mysql.protocol.connection import (
    ConnectionSettings,
    KeptConnection,
    connection_lost,
    sql_connection,
)
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EventType
from sparkcdc.mysql.protocol.replication import (
    LOG_EVENT_ARTIFICIAL_F,
    BinlogClient,
    parse_rotate,
    resumed_events,
)
from sparkcdc.mysql.stream import positions
from sparkcdc.mysql.stream.binlog_range import changes_of_events, format_check, read_range
from sparkcdc_dev.devserver import DevServer, DevSettings

pytestmark = pytest.mark.integration

# distinct per test process and per client, far from the ids other suites use
_ids = itertools.count(3_000_000 + (os.getpid() % 50_000) * 20)


def _server_id() -> int:
    return next(_ids)


@pytest.fixture
def settings(dev_settings: DevSettings) -> ConnectionSettings:
    return ConnectionSettings(
        dev_settings.host,
        dev_settings.port,
        dev_settings.user,
        dev_settings.password,
        connect_timeout_s=5,
        read_timeout_s=20,
    )


@pytest.fixture
def admin(dev_server: DevServer) -> Iterator[pymysql.cursors.Cursor]:
    conn = dev_server.connection()
    with conn.cursor() as cur:
        yield cur
    conn.close()


def _position(settings: ConnectionSettings) -> BinlogPosition:
    """The current position, without GTIDs (so it compares by file and offset only)."""
    with sql_connection(settings) as conn:
        return server.current_position(conn, server.server_info(conn)).with_gtids(None)


def _bare(position: BinlogPosition) -> BinlogPosition:
    return position.with_gtids(None)


def _write_transactions(sql: pymysql.cursors.Cursor) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    sql.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    sql.execute("UPDATE t SET v = 'c' WHERE id = 1")
    sql.execute("DELETE FROM t WHERE id = 2")


def _header(event: bytes) -> tuple[int, int, int, int, int, int]:
    timestamp, type_code, server_id, size, log_pos, flags = EVENT_HEADER.unpack_from(event)
    return timestamp, type_code, server_id, size, log_pos, flags


def _real_events(
    events: list[bytes], first_file: str
) -> list[tuple[BinlogPosition, BinlogPosition, bytes]]:
    """(start, end, event) of the events that are in the binlog files (not made up)."""
    out = []
    file = first_file
    for event in events:
        _, type_code, _, size, log_pos, _ = _header(event)
        if type_code == EventType.ROTATE:
            file = parse_rotate(event).file
            if log_pos == 0:
                continue
        if log_pos == 0 or type_code == EventType.HEARTBEAT:
            continue
        out.append((BinlogPosition(file, log_pos - size), BinlogPosition(file, log_pos), event))
    return out


def _table_maps_of(events: list[bytes], database: str) -> list[bytes]:
    return [e for e in events if e[4] == EventType.TABLE_MAP and database.encode() + b"\x00" in e]


def _wait_until(condition: object, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _assert_chain(
    events: list[bytes], start: BinlogPosition, *, gaps_before_table_maps: bool
) -> None:
    """Each event starts where the previous one ended (rotations start a new chain)."""
    real = [r for r in _real_events(events, start.file) if r[2][4] != EventType.FORMAT_DESCRIPTION]
    assert real[0][0] == start
    for (_, prev_end, _), (next_start, _, event) in itertools.pairwise(real):
        if next_start.file != prev_end.file:
            continue  # a new file begins with its FORMAT_DESCRIPTION at 4
        if gaps_before_table_maps and event[4] == EventType.TABLE_MAP:
            assert next_start >= prev_end
        else:
            assert next_start == prev_end, EventType(event[4]).name


# --------------------------------------------------------------------------- dumps


def test_non_blocking_dump_from_current_position(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    start = _position(settings)
    _write_transactions(sql)
    end = _position(settings)

    with BinlogClient(settings, _server_id()) as client:
        events = list(client.events(start))  # ends by itself: EOF at the end of the binlog
        assert client.position is not None and client.position >= end

    # the server first sends a fake ROTATE to the start file, then that file's FDE
    _, t0, _, _, log_pos0, flags0 = _header(events[0])
    assert t0 == EventType.ROTATE and log_pos0 == 0 and flags0 & LOG_EVENT_ARTIFICIAL_F
    rotate = parse_rotate(events[0])
    assert (rotate.file, rotate.pos) == (start.file, start.pos)
    assert events[1][4] == EventType.FORMAT_DESCRIPTION

    # checksums were verified and stripped: each event is 4 bytes shorter than event_size
    for event in events:
        assert len(event) == _header(event)[3] - 4

    # the log_pos chain: MariaDB skips ANNOTATE_ROWS events unless asked, and only those
    _assert_chain(events, start, gaps_before_table_maps=True)
    with BinlogClient(settings, _server_id()) as client:
        annotated = list(client.events(start, annotate_rows=True))
    _assert_chain(annotated, start, gaps_before_table_maps=False)
    assert any(e[4] == EventType.MARIA_ANNOTATE_ROWS for e in annotated)

    # our four transactions are there: CREATE, then insert/update/delete row events
    ours = _table_maps_of(events, database)
    assert len(ours) == 3
    kinds = [
        e[4]
        for e in events
        if e[4]
        in (
            EventType.WRITE_ROWS_V1,
            EventType.UPDATE_ROWS_V1,
            EventType.DELETE_ROWS_V1,
            EventType.WRITE_ROWS_V2,
            EventType.UPDATE_ROWS_V2,
            EventType.DELETE_ROWS_V2,
        )
    ]
    assert len(kinds) >= 3
    assert any(e[4] == EventType.QUERY and b"CREATE TABLE t" in e for e in events), (
        "the CREATE TABLE query event is missing"
    )


def test_reading_stops_where_the_caller_stops(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, admin: pymysql.cursors.Cursor
) -> None:
    start = _position(settings)
    _write_transactions(sql)
    client = BinlogClient(settings, _server_id())
    stream = client.events(start, blocking=True)
    taken = list(itertools.islice(stream, 5))
    assert len(taken) == 5
    connection_id = client.connection_id
    # the fifth event's end is where we stand
    assert client.position == _real_events(taken, start.file)[-1][1]
    stream.close()  # generator closed early: the client closes the connection
    assert client._sock is None

    def gone() -> bool:
        admin.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (connection_id,)
        )
        row = admin.fetchone()
        return row is not None and row[0] == 0

    _wait_until(gone, "the server to drop the dump thread")
    client.close()  # safe twice


def test_blocking_dump_waits_for_new_events_and_sends_heartbeats(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    start = _position(settings)
    with BinlogClient(settings, _server_id(), heartbeat_period_s=0.3) as client:
        stream = client.events(start, blocking=True)
        inserted = False
        seen_heartbeat = False
        deadline = time.monotonic() + 30
        for event in stream:
            assert time.monotonic() < deadline, "no heartbeat / new event in time"
            if event[4] == EventType.HEARTBEAT:
                seen_heartbeat = True
                if not inserted:  # caught up with the binlog: now write
                    sql.execute("INSERT INTO t VALUES (1)")
                    inserted = True
            elif event[4] == EventType.TABLE_MAP and database.encode() in event:
                break
        assert seen_heartbeat and inserted


def test_gtid_dump_yields_the_same_transactions_as_file_position(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, admin: pymysql.cursors.Cursor
) -> None:
    admin.execute("SELECT @@global.gtid_binlog_pos")
    row = admin.fetchone()
    assert row is not None
    start_gtid = MariaDbGtidSet.parse(row[0])
    start = _position(settings)
    _write_transactions(sql)
    end = _position(settings)

    with BinlogClient(settings, _server_id()) as client:
        by_file = list(client.events(start))
    with BinlogClient(settings, _server_id()) as client:
        by_gtid = list(client.events(start.with_gtids(start_gtid), use_gtid=True))

    def window(events: list[bytes]) -> list[tuple[BinlogPosition, bytes]]:
        first_rotate = parse_rotate(events[0])
        return [
            (s, e)
            for s, _, e in _real_events(events, first_rotate.file)
            if start <= s < end and e[4] != EventType.FORMAT_DESCRIPTION
        ]

    from_file, from_gtid = window(by_file), window(by_gtid)
    assert len(from_file) >= 10  # 4 transactions: GTID, QUERY/TABLE_MAP, rows, XID ...
    # the GTID dump may have started a little before start (it resumes after a GTID that
    # can be earlier when concurrent tests wrote between the two reads): compare from start
    assert from_gtid == from_file
    assert from_gtid[0][0] == start


# ----------------------------------------------------------------------- failures


def test_wrong_password(settings: ConnectionSettings) -> None:
    bad = ConnectionSettings(settings.host, settings.port, settings.user, "not-the-password-42")
    with pytest.raises(SourceError, match=r"access denied for user cdc@127.0.0.1") as raised:
        BinlogClient(bad, _server_id()).events(BinlogPosition("mysql-bin.000001", 4))
    assert "check username/password" in str(raised.value)
    assert "not-the-password-42" not in str(raised.value)
    with pytest.raises(SourceError, match="check username/password") as raised_sql:
        sql_connection(bad)
    assert "not-the-password-42" not in str(raised_sql.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_closed_port_is_refused_quickly() -> None:
    settings = ConnectionSettings("127.0.0.1", _closed_port(), "cdc", "pw", connect_timeout_s=5)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"127\.0\.0\.1:\d+: connection refused"):
        BinlogClient(settings, _server_id()).events(BinlogPosition("mysql-bin.000001", 4))
    with pytest.raises(SourceError, match="connection refused"):
        sql_connection(settings)
    assert time.monotonic() - started < 5


def test_silent_listener_times_out_instead_of_hanging() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel completes the TCP handshake; nobody ever answers
        port = listener.getsockname()[1]
        settings = ConnectionSettings("127.0.0.1", port, "cdc", "pw", connect_timeout_s=1)
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"127\.0\.0\.1:\d+.*connect timeout 1s"):
            BinlogClient(settings, _server_id()).events(BinlogPosition("mysql-bin.000001", 4))
        assert time.monotonic() - started < 4
        started = time.monotonic()
        with pytest.raises(SourceError, match=rf"127\.0\.0\.1:{port}"):
            sql_connection(settings)
        assert time.monotonic() - started < 4


def test_nonexistent_file_lists_what_exists(settings: ConnectionSettings) -> None:
    with sql_connection(settings) as conn:
        files = server.binlog_files(conn)
    requested = BinlogPosition("mysql-bin.999999", 4)
    with (
        pytest.raises(PositionError) as raised,
        BinlogClient(settings, _server_id(), list_files=server.files_on_server) as client,
    ):
        list(client.events(requested))
    message = str(raised.value)
    assert "mysql-bin.999999:4" in message
    assert files[0][0] in message
    assert "scan.startup.mode=earliest-offset" in message


@pytest.mark.parametrize("where", ["beyond the end", "inside an event"])
def test_invalid_offsets_in_an_existing_file(settings: ConnectionSettings, where: str) -> None:
    with sql_connection(settings) as conn:
        first_file, size = server.binlog_files(conn)[0]
    pos = size + 1000 if where == "beyond the end" else 5
    with (
        pytest.raises(PositionError, match=rf"{first_file}:{pos} is not a valid start"),
        BinlogClient(settings, _server_id()) as client,
    ):
        list(client.events(BinlogPosition(first_file, pos)))


def test_same_server_id_collision_names_the_server_id(settings: ConnectionSettings) -> None:
    server_id = _server_id()
    start = _position(settings)
    older = BinlogClient(settings, server_id, heartbeat_period_s=1)
    newer = BinlogClient(settings, server_id, heartbeat_period_s=1)
    try:
        old_stream = older.events(start, blocking=True)
        assert next(old_stream)[4] == EventType.ROTATE
        assert next(old_stream)[4] == EventType.FORMAT_DESCRIPTION  # streaming now
        new_stream = newer.events(start, blocking=True)
        assert next(new_stream)[4] == EventType.ROTATE
        with pytest.raises(SourceError) as raised:
            for _ in old_stream:
                pass
        message = str(raised.value)
        assert f"server-id {server_id} collides with another replica connection" in message
        assert "distinct 'server-id' range" in message
        assert next(new_stream)[4] == EventType.FORMAT_DESCRIPTION  # the newer one goes on
    finally:
        older.close()
        newer.close()


def test_connection_killed_mid_stream(
    settings: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    start = _position(settings)
    with BinlogClient(settings, _server_id(), heartbeat_period_s=1) as client:
        stream = client.events(start, blocking=True)
        assert next(stream)[4] == EventType.ROTATE
        assert next(stream)[4] == EventType.FORMAT_DESCRIPTION
        admin.execute("SHOW PROCESSLIST")
        dump_ids = [row[0] for row in admin.fetchall() if row[0] == client.connection_id]
        assert dump_ids and "Binlog Dump" in _command_of(admin, dump_ids[0])
        admin.execute(f"KILL {dump_ids[0]}")
        with pytest.raises(SourceError, match=r"connection to 127\.0\.0\.1:\d+ lost at mysql-bin"):
            for _ in stream:
                pass


def _binlog_dumps(admin: pymysql.cursors.Cursor) -> list[int]:
    """Ids of the server's Binlog Dump threads (this test's reader's alone while it runs)."""
    admin.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
    return [int(row[0]) for row in admin.fetchall()]


def _write_30_mb(sql: pymysql.cursors.Cursor) -> None:
    """~30 MB of binlog into a new table t: 30 statements, each one transaction of ~120
    ROWS events after its TABLE_MAP (rows of 1,000 characters)."""
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, pad VARCHAR(1000))")
    for block in range(30):
        ids = range(block * 1000, (block + 1) * 1000)
        sql.execute("INSERT INTO t VALUES " + ",".join(f"({i}, REPEAT('x', 1000))" for i in ids))


def _row_changes(changes: Iterable[RowChanges | SchemaChange]) -> Iterator[tuple[Any, ...]]:
    for change in changes:
        if isinstance(change, RowChanges):
            yield change.position, change.kind, change.rows


def test_a_binlog_read_whose_connection_is_killed_reads_on_where_it_was_cut(
    settings: ConnectionSettings,
    admin: pymysql.cursors.Cursor,
    sql: pymysql.cursors.Cursor,
    database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # more binlog than the sockets buffer, so the dump is still sending when it is killed,
    # and the cut falls inside a transaction whose later events need its TABLE_MAP
    start = _position(settings)
    _write_30_mb(sql)
    sql.execute("UPDATE t SET pad = REPEAT('y', 999) WHERE id % 7 = 0")
    end = _position(settings)
    captured = lambda d, t: d == database and t == "t"  # noqa: E731
    whole = list(_row_changes(read_range(settings, _server_id(), start, end, captured)))
    assert sum(len(rows) for *_, rows in whole) == 30_000 + 30_000 // 7 + 1

    caplog.set_level(logging.WARNING, logger="sparkcdc.mysql.protocol.replication")
    cut: list[tuple[Any, ...]] = []
    killed: list[int] = []
    for change in _row_changes(read_range(settings, _server_id(), start, end, captured)):
        cut.append(change)
        if len(cut) == 20:
            killed = _binlog_dumps(admin)
            for thread in killed:
                admin.execute(f"KILL {thread}")
    assert killed, "no Binlog Dump thread was running to kill"
    assert any("connecting again in 1s to read on from" in r.message for r in caplog.records)
    assert cut == whole  # every change once, in order


def test_a_dump_opened_again_on_another_file_of_that_name_stops_the_read(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    """A dump opened again after a lost connection begins with the file's FORMAT_DESCRIPTION:
    the same one reads on as if uncut; another (another server answering at the address, a
    restored binlog) is a BinlogResetError, even for a file the offsets do not name."""
    start = _position(settings)  # no file tag: the read learns the file's from its dump
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    for i in range(4):
        sql.execute(f"INSERT INTO t VALUES ({i}, {i})")
    end = _position(settings)
    with BinlogClient(settings, _server_id()) as client:
        raw = list(client.events(start))
    rotate, fde = raw[0], raw[1]  # what the server begins every dump with
    assert _header(rotate)[1] == EventType.ROTATE
    assert _header(fde)[1] == EventType.FORMAT_DESCRIPTION
    captured = lambda d, t: d == database and t == "t"  # noqa: E731

    def read(events: list[bytes]) -> list[tuple[Any, ...]]:
        return list(
            _row_changes(
                changes_of_events(
                    events, start, end, captured, check_format=format_check(settings, start, end)
                )
            )
        )

    whole = read(raw)
    assert len(whole) == 4
    cut = len(raw) // 2
    assert read([*raw[:cut], rotate, fde, *raw[cut:]]) == whole
    created = _header(fde)[0]
    other = (created + 1).to_bytes(4, "little") + fde[4:]  # another file of the same name
    with pytest.raises(BinlogResetError, match="this read's first look at the file"):
        read([*raw[:cut], rotate, other, *raw[cut:]])


def test_a_binlog_read_gives_up_after_connect_max_retries_attempts(
    settings: ConnectionSettings,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nowhere = dataclasses.replace(settings, port=port, connect_max_retries=2)
    pauses: list[float] = []
    start = BinlogPosition("mysql-bin.000001", 4)
    with (
        BinlogClient(nowhere, _server_id()) as client,
        pytest.raises(SourceConnectionError) as raised,
    ):
        list(resumed_events(client, start, nowhere.connect_max_retries, sleep=pauses.append))
    assert pauses == [1.0, 2.0]
    message = str(raised.value)
    assert "connection refused" in message
    assert "(2 attempt(s) to connect again failed)" in message
    assert "connect.max-retries (2)" in message


def test_a_binlog_read_with_no_retries_stops_at_the_loss(
    settings: ConnectionSettings,
    admin: pymysql.cursors.Cursor,
    sql: pymysql.cursors.Cursor,
    database: str,
) -> None:
    start = _position(settings)
    _write_30_mb(sql)
    end = _position(settings)
    once = dataclasses.replace(settings, connect_max_retries=0)
    captured = lambda d, t: d == database and t == "t"  # noqa: E731
    read = 0
    with pytest.raises(SourceConnectionError) as raised:
        for _ in read_range(once, _server_id(), start, end, captured):
            read += 1
            if read == 20:
                for thread in _binlog_dumps(admin):
                    admin.execute(f"KILL {thread}")
    assert read >= 20
    assert "connect.max-retries (0)" in str(raised.value)


def test_a_killed_or_closed_connection_is_told_from_a_failed_statement(
    settings: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    """What the driver's kept poll connection opens again on (a connection the server
    killed while it idled, one closed here) and what it does not (a statement the server
    refused on a live connection)."""
    conn = sql_connection(settings)
    with conn.cursor() as cur, pytest.raises(pymysql.MySQLError) as refused:
        cur.execute("SELECT no_such_column FROM DUAL")
    assert not connection_lost(refused.value)
    admin.execute(f"KILL CONNECTION {conn.thread_id()}")
    with conn.cursor() as cur, pytest.raises(pymysql.MySQLError) as killed:
        cur.execute("SELECT @@global.gtid_binlog_pos")
    assert connection_lost(killed.value), killed.value
    conn.close()
    with conn.cursor() as cur, pytest.raises(pymysql.MySQLError) as closed:
        cur.execute("SELECT 1")
    assert connection_lost(closed.value), closed.value


def test_a_kept_connection_the_server_dropped_is_opened_again_with_its_session(
    settings: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    """The driver's kept connection (the chunk splitter's, the trigger's look at the server):
    killed by the server between two uses, the next use runs on a new connection that has
    the session statements again; a caller's own connection (``over``) is never replaced."""
    opened: list[Any] = []

    def opener() -> Any:
        opened.append(sql_connection(settings))
        return opened[-1]

    def session_of(conn: Any) -> tuple[int, str]:
        with conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID(), @@session.time_zone")
            thread, zone = cur.fetchone()
        return int(thread), str(zone)

    kept = KeptConnection(opener)
    kept.session("SET time_zone = '+03:00'")
    first, zone = kept.run(session_of)
    assert zone == "+03:00" and len(opened) == 1
    assert kept.run(session_of) == (first, zone)  # kept, not opened again
    admin.execute(f"KILL CONNECTION {first}")
    second, zone = kept.run(session_of)
    assert second != first and zone == "+03:00" and len(opened) == 2
    with pytest.raises(pymysql.MySQLError):  # a refused statement is the caller's
        kept.run(lambda conn: conn.cursor().execute("SELECT no_such_column FROM DUAL"))
    assert len(opened) == 2
    kept.close()

    own = sql_connection(settings)
    fixed = KeptConnection.over(own)
    admin.execute(f"KILL CONNECTION {own.thread_id()}")
    with pytest.raises(pymysql.MySQLError) as lost:
        fixed.run(session_of)
    assert connection_lost(lost.value)
    own.close()


def test_work_on_a_kept_connection_killed_mid_statement_is_done_again(
    settings: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    """A KILL of the connection while its statement runs (MariaDB answers 1927, "Connection
    was killed", or the socket closes): the work is done again, whole, on a new connection
    after a pause, and its answer is the new connection's."""
    pauses: list[float] = []
    kept = KeptConnection(lambda: sql_connection(settings), sleep=pauses.append)
    runs: list[int] = []

    def slow_then_quick(conn: Any) -> int:
        with conn.cursor() as cur:
            runs.append(conn.thread_id())
            cur.execute("SELECT SLEEP(20)" if len(runs) == 1 else "SELECT 1")
            return int(cur.fetchone()[0])

    killer = threading.Thread(target=_kill_when_sleeping, args=(admin, runs), daemon=True)
    killer.start()
    started = time.monotonic()
    assert kept.run(slow_then_quick) == 1
    killer.join(5)
    assert time.monotonic() - started < 15, "the killed statement was waited out"
    assert len(runs) == 2 and runs[0] != runs[1] and pauses == [1.0]
    kept.close()


def _kill_when_sleeping(admin: pymysql.cursors.Cursor, runs: list[int]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if runs and "SLEEP" in _info_of(admin, runs[0]):
            admin.execute(f"KILL CONNECTION {runs[0]}")
            return
        time.sleep(0.01)


def _info_of(admin: pymysql.cursors.Cursor, connection_id: int) -> str:
    admin.execute("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = %s", (connection_id,))
    row = admin.fetchone()
    return str(row[0] or "") if row else ""


def test_a_kept_connection_tries_again_while_the_server_refuses_then_gives_up(
    settings: ConnectionSettings,
) -> None:
    """A server restarting refuses connections for a while: the kept connection tries again
    after 1, 2 ... s, up to connect.max-retries attempts, then stops naming the option; a
    refused login is the error at once."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nowhere = dataclasses.replace(settings, port=port, connect_max_retries=2)
    pauses: list[float] = []
    attempts: list[int] = []

    def refused_twice() -> Any:
        attempts.append(1)
        return sql_connection(nowhere if len(attempts) <= 2 else settings)

    kept = KeptConnection(refused_twice, retries=2, sleep=pauses.append)
    assert kept.run(lambda conn: conn.thread_id()) > 0
    assert len(attempts) == 3 and pauses == [1.0, 2.0]
    kept.close()

    pauses.clear()
    gone = KeptConnection.to(nowhere)
    gone._sleep = pauses.append
    with pytest.raises(SourceConnectionError) as raised:
        gone.run(lambda conn: conn.thread_id())
    assert pauses == [1.0, 2.0]
    message = str(raised.value)
    assert "connection refused" in message and f"127.0.0.1:{port}" in message
    assert "(2 attempt(s) to connect again failed)" in message
    assert "connect.max-retries (2)" in message

    wrong = dataclasses.replace(settings, password="not-the-password")
    pauses.clear()
    with pytest.raises(SourceError, match="access denied") as denied:
        KeptConnection(partial(sql_connection, wrong), sleep=pauses.append).run(lambda c: 1)
    assert not isinstance(denied.value, SourceConnectionError) and pauses == []


def _command_of(admin: pymysql.cursors.Cursor, connection_id: int) -> str:
    admin.execute(
        "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = %s", (connection_id,)
    )
    row = admin.fetchone()
    return str(row[0]) if row else ""


# ------------------------------------------------------------------ server helpers


def test_server_helpers(settings: ConnectionSettings) -> None:
    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        assert info.flavor == "mariadb" and info.version >= (10, 4, 0) and info.gtid_mode
        current = server.current_position(conn, info)
        assert isinstance(current.gtids, MariaDbGtidSet)
        files = server.binlog_files(conn)
        assert files[-1][0] == current.file
        earliest = server.earliest_position(conn, info)
        assert (earliest.file, earliest.pos) == (files[0][0], 4)
        assert server.variables(conn, "log_bin", "BINLOG_FORMAT", "no_such_variable") == {
            "log_bin": "ON",
            "binlog_format": "ROW",
        }


def test_position_for_timestamp(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    sql.execute("INSERT INTO t VALUES (1)")
    after_a = _position(settings)
    cut_s = int(time.time()) + 1
    _wait_until(lambda: time.time() >= cut_s, "the clock to pass a whole second")
    sql.execute("INSERT INTO t VALUES (2)")
    after_b = _position(settings)

    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        found = positions.position_for_timestamp(conn, settings, info, cut_s * 1000)
        assert after_a <= _bare(found) < after_b
        # a transaction boundary: MariaDB knows the GTID position there
        assert found.gtids is not None
        assert found.gtids == server.mariadb_gtid_at(conn, found.file, found.pos)
        # and the insert of 2 is the first change of our table from there on
        with BinlogClient(settings, _server_id()) as client:
            maps = _table_maps_of(list(client.events(found)), database)
        assert len(maps) == 1

        future = positions.position_for_timestamp(conn, settings, info, (cut_s + 3600) * 1000)
        assert _bare(future) >= after_b
        # the binlog's first transaction, at or before ours: not necessarily in its first
        # file (a RESET MASTER then a rotation by an earlier test leaves a file without one)
        oldest = positions.position_for_timestamp(conn, settings, info, 0)
        assert oldest.file in [name for name, _ in server.binlog_files(conn)]
        assert _bare(oldest) <= after_a


def test_a_transaction_cut_is_the_first_transaction_start_past_the_budget(
    settings: ConnectionSettings,
    sql: pymysql.cursors.Cursor,
    admin: pymysql.cursors.Cursor,
    database: str,
) -> None:
    """``transaction_cut`` (the batch bound, scan.binlog.max-bytes-per-batch): the first
    GTID event at least the budget's bytes after the start, across a rotation, with the
    GTID position MariaDB itself gives there; a transaction larger than the budget is
    never cut inside."""
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(250))")
    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        start = server.current_position(conn, info)
    for key in range(40):
        sql.execute("INSERT INTO t VALUES (%s, %s)", (key, "x" * 150))
    sql.execute("UPDATE t SET v = REPEAT('y', 250)")  # one ~20 KB transaction
    admin.execute("FLUSH BINARY LOGS")
    for key in range(40, 60):
        sql.execute("INSERT INTO t VALUES (%s, %s)", (key, "z" * 150))
    with sql_connection(settings) as conn:
        end = server.current_position(conn, info)
        files = server.binlog_files(conn)
        assert end.file != start.file
        with BinlogClient(settings, _server_id()) as client:
            real = _real_events(list(client.events(start)), start.file)
        opening = [s for s, _, e in real if e[4] == EventType.MARIA_GTID and _bare(s) < end]
        assert len(opening) >= 60
        total = server.binlog_bytes(start, end, files)
        second_last = server.binlog_bytes(start, opening[-2], files)
        for budget in (1, 500, 7_000, 12_000, 30_000, second_last - 1, second_last):
            cut = positions.transaction_cut(settings, start, end, budget)
            expected = next(
                (s for s in opening if server.binlog_bytes(start, s, files) >= budget), None
            )
            assert cut is not None and expected is not None, budget
            assert _bare(cut) == _bare(expected), budget
            assert start < cut < end
            assert cut.gtids == server.mariadb_gtid_at(conn, cut.file, cut.pos), budget
        # the big update: a budget that ends inside it cuts after it, not in it
        big = max(itertools.pairwise(opening), key=lambda p: server.binlog_bytes(*p, files))
        inside = server.binlog_bytes(start, big[0], files) + 100
        assert _bare(positions.transaction_cut(settings, start, end, inside)) == _bare(big[1])
        # the range holds less than the budget, or its last transaction runs to the end
        assert positions.transaction_cut(settings, start, end, total) is None
        last = server.binlog_bytes(start, opening[-1], files) + 1
        assert positions.transaction_cut(settings, start, end, last) is None


def test_a_transaction_cut_whose_dump_is_killed_reads_on(
    settings: ConnectionSettings,
    dev_server: DevServer,
    sql: pymysql.cursors.Cursor,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The driver's walk to a batch's end is a binlog read like any other: killed in the
    middle, it reads on from where it was cut and finds the same place."""
    start = _position(settings)
    _write_30_mb(sql)
    sql.execute("INSERT INTO t VALUES (-1, 'last')")
    end = _position(settings)
    with sql_connection(settings) as conn:
        budget = server.binlog_bytes(start, end, server.binlog_files(conn)) - 2_000
    whole = positions.transaction_cut(settings, start, end, budget)
    assert whole is not None

    killed: list[int] = []
    walking = threading.Event()

    def kill_the_walk() -> None:
        with dev_server.connection() as conn, conn.cursor() as cur:
            walking.wait(20)
            deadline = time.monotonic() + 20
            while not killed and time.monotonic() < deadline:
                for thread in _binlog_dumps(cur):
                    cur.execute(f"KILL {thread}")
                    killed.append(thread)
                time.sleep(0.01)

    caplog.set_level(logging.WARNING, logger="sparkcdc.mysql.protocol.replication")
    killer = threading.Thread(target=kill_the_walk, daemon=True)
    killer.start()
    walking.set()
    cut = positions.transaction_cut(settings, start, end, budget)
    killer.join()
    assert killed, "no Binlog Dump thread was running to kill"
    assert any("connecting again in 1s to read on from" in r.message for r in caplog.records)
    assert cut == whole and cut.gtids == whole.gtids


def test_a_kept_connection_dropped_while_idle_is_opened_again_even_without_retries(
    settings: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    """connect.max-retries=0 (fail at the first loss) still outlives an idle drop, as Flink
    CDC's and Debezium's clients reconnect a dropped connection: found dead before its next
    work, the kept connection is opened again at once, without a pause; a loss during the
    work is still the error."""
    pauses: list[float] = []
    kept = KeptConnection(lambda: sql_connection(settings), retries=0, sleep=pauses.append)

    def connection_id(conn: Any) -> int:
        with conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            return int(cur.fetchone()[0])

    first = kept.run(connection_id)
    admin.execute(f"KILL CONNECTION {first}")
    second = kept.run(connection_id)
    assert second != first and pauses == []
    runs: list[int] = []

    def slow(conn: Any) -> int:
        with conn.cursor() as cur:
            runs.append(conn.thread_id())
            cur.execute("SELECT SLEEP(20)")
            return int(cur.fetchone()[0])

    killer = threading.Thread(target=_kill_when_sleeping, args=(admin, runs), daemon=True)
    killer.start()
    with pytest.raises(SourceConnectionError, match=r"connect.max-retries \(0\)"):
        kept.run(slow)
    killer.join(5)
    assert runs == [second] and pauses == []
    kept.close()
