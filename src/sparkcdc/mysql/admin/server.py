"""SQL-side helpers about the source server: flavor and version, binlog positions, files.

All functions take an open pymysql connection (see ``connection.sql_connection``) except
``position_for_timestamp``, which also reads the binlog through the replication client.

    >>> conn = sql_connection(settings)                        # doctest: +SKIP
    >>> info = server_info(conn)                               # doctest: +SKIP
    >>> info.flavor, info.version                              # doctest: +SKIP
    ('mariadb', (10, 11, 6))
    >>> str(current_position(conn, info))                      # doctest: +SKIP
    'mysql-bin.000001:1800@0-1-8'
"""

from __future__ import annotations

import logging
import random
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from sparkcdc.errors import SourceError
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.position import (
    BinlogPosition,
    GtidSet,
    MariaDbGtidSet,
    MySqlGtidSet,
    binlog_file_number,
    binlog_file_tag,
)
from sparkcdc.mysql.binlog.decoded_events import GtidEvent, MariaGtidEvent
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc.mysql.protocol.constants import (
    EVENT_HEADER,
    EVENT_HEADER_SIZE,
    FIRST_EVENT_POS,
    EventType,
)
from sparkcdc.mysql.protocol.wire import decode_sid_set

log = logging.getLogger(__name__)

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
# MariaDB 10.x announces itself as "5.5.5-10.11.6-MariaDB..." to old clients
_MARIADB_COMPAT_PREFIX = "5.5.5-"
# MySQL 8.2 added SHOW BINARY LOG STATUS; 8.4 removed SHOW MASTER STATUS.
_MYSQL_BINARY_LOG_STATUS = (8, 2, 0)

# position_for_timestamp's short binlog reads use a random server id from this range, far
# from job ranges, so that concurrent look-ups do not kick each other off.
TIMESTAMP_PROBE_SERVER_IDS = range(4_200_000_000, 4_294_967_295)


@dataclass(frozen=True)
class ServerInfo:
    """Flavor, version and replication identity of the source server."""

    flavor: Literal["mariadb", "mysql"]
    version: tuple[int, int, int]
    version_text: str
    server_id: int
    gtid_mode: bool

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == "mariadb"


def parse_version(text: str) -> tuple[Literal["mariadb", "mysql"], tuple[int, int, int]]:
    """Flavor and version from ``SELECT VERSION()``.

    >>> parse_version("10.11.6-MariaDB-0+deb12u1-log")
    ('mariadb', (10, 11, 6))
    >>> parse_version("8.4.3")
    ('mysql', (8, 4, 3))
    """
    flavor: Literal["mariadb", "mysql"] = "mariadb" if "mariadb" in text.lower() else "mysql"
    body = text.removeprefix(_MARIADB_COMPAT_PREFIX) if flavor == "mariadb" else text
    match = _VERSION_RE.search(body)
    if not match:
        raise SourceError(f"cannot parse the server version {text!r} (expected 'X.Y.Z...')")
    major, minor, patch = (int(g) for g in match.groups())
    return flavor, (major, minor, patch)


def _rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def variables(conn: Any, *names: str) -> dict[str, str]:
    """Global server variables by lower-case name; names the server lacks are absent.

    >>> variables(conn, "log_bin", "binlog_format")          # doctest: +SKIP
    {'binlog_format': 'ROW', 'log_bin': 'ON'}
    """
    if not names:
        return {}
    wanted = tuple(n.lower() for n in names)
    placeholders = ", ".join(["%s"] * len(wanted))
    rows = _rows(
        conn, f"SHOW GLOBAL VARIABLES WHERE LOWER(Variable_name) IN ({placeholders})", wanted
    )
    return {_text(name).lower(): _text(value) for name, value in rows}


def server_info(conn: Any) -> ServerInfo:
    """Flavor, version, server_id and whether GTIDs are usable.

    MariaDB always has GTIDs (10.0+); MySQL has them when ``gtid_mode=ON``.
    """
    rows = _rows(conn, "SELECT VERSION(), @@global.server_id")
    version_text, server_id = _text(rows[0][0]), int(rows[0][1])
    flavor, version = parse_version(version_text)
    if flavor == "mariadb":
        gtid_mode = True
    else:
        mode = variables(conn, "gtid_mode").get("gtid_mode", "OFF")
        gtid_mode = mode.upper() == "ON"
    return ServerInfo(flavor, version, version_text, server_id, gtid_mode)


def server_identity(conn: Any, info: ServerInfo) -> ServerIdentity:
    """MySQL ``@@server_uuid``; MariaDB ``@@server_id`` with ``@@gtid_domain_id``."""
    if info.is_mariadb:
        domain = int(_rows(conn, "SELECT @@global.gtid_domain_id")[0][0])
        return ServerIdentity("mariadb", info.server_id, domain_id=domain)
    uuid = _text(_rows(conn, "SELECT @@global.server_uuid")[0][0]).lower()
    return ServerIdentity("mysql", info.server_id, uuid=uuid)


def gtid_state(conn: Any, info: ServerInfo) -> str:
    """Every GTID the server's binlog has: MariaDB ``@@gtid_binlog_state`` (the last
    sequence per domain *and* server), MySQL ``@@gtid_executed``; '' without GTIDs."""
    if info.is_mariadb:
        return _text(_rows(conn, "SELECT @@global.gtid_binlog_state")[0][0])
    if info.gtid_mode:
        return _text(_rows(conn, "SELECT @@global.gtid_executed")[0][0])
    return ""


def gtid_state_contains(state: str, gtids: GtidSet) -> bool:
    """Whether a server whose GTID state is ``state`` (see ``gtid_state``) has logged every
    transaction up to ``gtids``.

    MariaDB: each ``domain-server-seq`` of ``gtids`` needs a state entry of that domain
    and server with a sequence at least as high. MySQL: set containment.

    >>> gtid_state_contains("0-1-80,0-2-3", MariaDbGtidSet.parse("0-1-57"))
    True
    >>> gtid_state_contains("0-2-90", MariaDbGtidSet.parse("0-1-57"))
    False
    """
    if isinstance(gtids, MariaDbGtidSet):
        have: dict[tuple[int, int], int] = {}
        for part in state.replace(" ", "").split(","):
            if part:
                domain, server, seq = (int(x) for x in part.split("-"))
                have[(domain, server)] = max(seq, have.get((domain, server), 0))
        return all(have.get((d, s), -1) >= q for d, s, q in gtids.gtids)
    if isinstance(gtids, MySqlGtidSet):
        return MySqlGtidSet.parse(state).contains(gtids)
    return False


def _status_sql(info: ServerInfo) -> str:
    if info.flavor == "mysql" and info.version >= _MYSQL_BINARY_LOG_STATUS:
        return "SHOW BINARY LOG STATUS"
    return "SHOW MASTER STATUS"


def mariadb_gtid_at(conn: Any, file: str, pos: int) -> MariaDbGtidSet | None:
    """The MariaDB GTID position at a transaction boundary (``BINLOG_GTID_POS``), or None.

    MariaDB answers NULL when it cannot read the file up to ``pos`` (seen after an event
    larger than its internal read limit, e.g. a 20 MB LONGTEXT value), when the file is
    gone or when ``pos`` is not a boundary. A missing GTID set never blocks a query: the
    position is still exact by file/position, it only cannot be followed to another
    server by GTID; a warning says so.
    """
    rows = _rows(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    value = rows[0][0] if rows else None
    if value is None:
        log.warning(
            "MariaDB cannot tell the GTID position at %s:%s (BINLOG_GTID_POS returned NULL: "
            "an event before it is too large for the server to scan, the file is gone, or the "
            "position is not a transaction boundary); going on by file/position without a "
            "GTID set there, so this offset cannot be followed to another server by GTID",
            file,
            pos,
        )
        return None
    return MariaDbGtidSet.parse(_text(value))


# SHOW MASTER STATUS and @@gtid_binlog_pos are read apart; tries to find the pair stable
_GTID_PAIR_TRIES = 20


def _mariadb_position_with_gtids(conn: Any, info: ServerInfo) -> BinlogPosition:
    """``SHOW MASTER STATUS`` with the GTID position exactly at it, without scanning files.

    Reads ``@@global.gtid_binlog_pos``, the status, and ``@@global.gtid_binlog_pos`` again,
    until the two GTID reads agree. Why the pair is then exact: MariaDB adds a GTID to the
    binlog state while it writes that transaction's GTID event, under the binlog lock
    (LOCK_log) that SHOW MASTER STATUS also takes; so the status never shows a place inside
    a transaction, and it shows the end of every transaction whose GTID the first read saw
    (it waits for the writer holding the lock). Had any transaction been written after the
    first read and before the status, its GTID would be in the second read (every event
    group in MariaDB has a GTID, and it changes the last GTID of its domain). Equal reads
    therefore bracket a status with exactly those transactions behind it.
    """
    for _ in range(_GTID_PAIR_TRIES):
        before = _text(_rows(conn, "SELECT @@global.gtid_binlog_pos")[0][0])
        file, pos, _ = _master_status(conn, info)
        after = _text(_rows(conn, "SELECT @@global.gtid_binlog_pos")[0][0])
        if before == after:
            return BinlogPosition(file, pos, MariaDbGtidSet.parse(after))
    log.warning(
        "the binlog of %s kept moving while its GTID position was read (%d tries); this "
        "position (an offset or a chunk's high watermark) goes on by file/position without "
        "a GTID set, and a failover cannot be followed from it",
        info.version_text,
        _GTID_PAIR_TRIES,
    )
    return BinlogPosition(file, pos)


def _master_status(conn: Any, info: ServerInfo) -> tuple[str, int, dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute(_status_sql(info))
        row = cur.fetchone()
        names = [d[0].lower() for d in cur.description or ()]
    if not row:
        raise SourceError(
            "the binary log is not enabled on the source (SHOW MASTER STATUS is empty): start "
            "the server with log-bin=mysql-bin, binlog_format=ROW, binlog_row_image=FULL"
        )
    record = dict(zip(names, row, strict=False))
    return _text(record["file"]), int(record["position"]), record


def binlog_filters(conn: Any, info: ServerInfo) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The server's ``binlog-do-db`` and ``binlog-ignore-db`` lists, from its binlog status."""
    _, _, record = _master_status(conn, info)

    def names(key: str) -> tuple[str, ...]:
        return tuple(n.strip() for n in _text(record.get(key)).split(",") if n.strip())

    return names("binlog_do_db"), names("binlog_ignore_db")


def current_position(conn: Any, info: ServerInfo, *, with_gtids: bool = True) -> BinlogPosition:
    """The end of the binlog now, a transaction boundary, with its GTID set.

    MySQL: ``Executed_Gtid_Set`` when ``gtid_mode=ON``; MariaDB: ``@@gtid_binlog_pos`` read
    consistently with the status (``_mariadb_position_with_gtids``). Positions that need
    only the place pass ``with_gtids=False`` (one statement instead of three).
    """
    if with_gtids and info.flavor == "mariadb":
        return _mariadb_position_with_gtids(conn, info)
    file, pos, record = _master_status(conn, info)
    gtids: GtidSet | None = None
    if with_gtids and info.gtid_mode:
        gtids = MySqlGtidSet.parse(_text(record.get("executed_gtid_set")))
    return BinlogPosition(file, pos, gtids)


def committed_position(conn: Any, info: ServerInfo) -> BinlogPosition:
    """A binlog position before which every transaction is committed (visible to any read
    view opened after this call): the safe low watermark of a chunk read.

    ``SHOW MASTER STATUS`` is not one: the server writes a transaction to the binlog
    before the storage engine commits it, so a transaction just below that position may
    not be visible yet. MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` takes its
    snapshot together with ``binlog_snapshot_file`` / ``binlog_snapshot_position`` (under
    the lock that orders commits), so every transaction before that position is committed.
    MySQL has no such pair: its current position is used, which leaves that gap open
    (docs/snapshot.md, "Snapshot exactness").
    """
    if not info.is_mariadb:
        return current_position(conn, info, with_gtids=False)
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {_text(k).lower(): _text(v) for k, v in cur.fetchall()}
        finally:
            cur.execute("COMMIT")
    file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    if not file or not pos:
        raise SourceError(
            f"MariaDB {info.version_text} reported no binlog_snapshot_file/position after "
            "START TRANSACTION WITH CONSISTENT SNAPSHOT; the snapshot needs log-bin and InnoDB"
        )
    return BinlogPosition(file, int(pos))


def prepared_xa(conn: Any) -> list[str] | None:
    """The XIDs of XA transactions prepared and not yet committed or rolled back
    (``XA RECOVER``), or None when the user may not list them."""
    try:
        rows = _rows(conn, "XA RECOVER")
    except Exception as exc:  # pymysql raises per error code; access denied is the one here
        if "denied" in str(exc).lower():
            return None
        raise
    return [_text(row[-1]) for row in rows]


def binlog_files(conn: Any) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS`` as (name, size) in order.

    >>> binlog_files(conn)                                  # doctest: +SKIP
    [('mysql-bin.000001', 1800)]
    """
    try:
        rows = _rows(conn, "SHOW BINARY LOGS")
    except Exception as exc:  # pymysql raises OperationalError 1381 when log_bin is off
        if "not using binary logging" in str(exc).lower() or "1381" in str(exc):
            raise SourceError(
                "the binary log is not enabled on the source: start the server with "
                "log-bin=mysql-bin, binlog_format=ROW, binlog_row_image=FULL"
            ) from None
        raise
    return [(_text(row[0]), int(row[1])) for row in rows]


def earliest_position(conn: Any, info: ServerInfo) -> BinlogPosition:
    """The first event of the oldest binlog file still on the server (pos 4).

    GTIDs: MariaDB ``BINLOG_GTID_POS(first, 4)``; MySQL ``@@global.gtid_purged`` (what is
    not in any binlog file any more) when ``gtid_mode=ON``.
    """
    files = binlog_files(conn)
    if not files:
        raise SourceError("the source has no binlog files (SHOW BINARY LOGS is empty)")
    first = files[0][0]
    gtids: GtidSet | None = None
    if info.flavor == "mariadb":
        gtids = mariadb_gtid_at(conn, first, FIRST_EVENT_POS)
    elif info.gtid_mode:
        gtids = MySqlGtidSet.parse(_text(_rows(conn, "SELECT @@global.gtid_purged")[0][0]))
    return BinlogPosition(first, FIRST_EVENT_POS, gtids)


# ------------------------------------------------------------------ position by timestamp

# Events that open a transaction: the transaction boundary is the start of this event.
_TRANSACTION_START = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.MARIA_GTID})
# QUERY event post-header: thread_id u32, exec_time u32, db_len u8, error_code u16,
# status_vars_len u16; then status vars, db name + NUL, the statement.
_QUERY_POST_HEADER = struct.Struct("<IIBHH")


def _query_text(event: bytes) -> bytes:
    _, _, db_len, _, status_len = _QUERY_POST_HEADER.unpack_from(event, EVENT_HEADER_SIZE)
    start = EVENT_HEADER_SIZE + _QUERY_POST_HEADER.size + status_len + db_len + 1
    return event[start:]


def _events_from(
    settings: ConnectionSettings, start: BinlogPosition, server_id: int
) -> Iterator[tuple[BinlogPosition, int, int, bytes]]:
    """(start position, type, timestamp, event) of the real events from ``start`` on: those
    in the files, a file's closing ROTATE included. A lost connection reads on from where
    it was cut (``resumed_events``, up to ``connect.max-retries`` attempts)."""
    from sparkcdc.mysql.protocol.replication import BinlogClient, parse_rotate, resumed_events

    file = start.file
    with BinlogClient(settings, server_id) as client:
        for event in resumed_events(client, start, settings.connect_max_retries):
            timestamp, type_code, _, size, log_pos, _ = EVENT_HEADER.unpack_from(event)
            real = log_pos != 0 and type_code not in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2)
            if real:
                yield BinlogPosition(file, log_pos - size), type_code, timestamp, event
            if type_code == EventType.ROTATE:
                file = parse_rotate(event).file


def file_tag(settings: ConnectionSettings, file: str, server_id: int | None = None) -> str | None:
    """The ``binlog_file_tag`` of ``file`` on the server now (one short binlog read), or
    None if the server sends no FORMAT_DESCRIPTION for it."""
    from sparkcdc.mysql.protocol.replication import BinlogClient

    if server_id is None:
        server_id = random.choice(TIMESTAMP_PROBE_SERVER_IDS)
    with BinlogClient(settings, server_id) as client:
        for event in client.events(BinlogPosition(file, FIRST_EVENT_POS)):
            timestamp, type_code, event_server_id, *_ = EVENT_HEADER.unpack_from(event)
            if type_code == EventType.FORMAT_DESCRIPTION:
                return binlog_file_tag(timestamp, event_server_id)
            if type_code != EventType.ROTATE:
                break
    return None


def first_transaction_start(events: Iterable[bytes], file: str) -> BinlogPosition | None:
    """Where the first transaction among raw ``events`` (checksums stripped) starts.

    ``events`` is what a dump by GTID sends: a ROTATE to the file it starts in, that
    file's FORMAT_DESCRIPTION, file headers (GTID lists, checkpoints) and then only the
    transactions not in the requested set. The first real GTID / ANONYMOUS_GTID /
    MariaDB GTID event opens the first transaction we lack; its start (``log_pos`` minus
    its size) is where reading by file/position resumes. None: the dump ended first.

    >>> first_transaction_start([], "mysql-bin.000001") is None
    True
    """
    from sparkcdc.mysql.protocol.replication import parse_rotate

    for event in events:
        _, type_code, _, size, log_pos, _ = EVENT_HEADER.unpack_from(event)
        if type_code == EventType.ROTATE:
            file = parse_rotate(event).file
        elif type_code in _TRANSACTION_START and log_pos:
            return BinlogPosition(file, log_pos - size)
    return None


def position_after_gtids(
    settings: ConnectionSettings,
    gtids: GtidSet,
    end: BinlogPosition,
    server_id: int | None = None,
) -> BinlogPosition:
    """The file/position on this server right after the transactions of ``gtids``.

    One non-blocking dump by GTID (MariaDB ``@slave_connect_state``, MySQL
    COM_BINLOG_DUMP_GTID): the server skips what ``gtids`` holds and sends the rest; the
    first transaction it sends starts where we resume. When it sends none, nothing
    follows ``gtids`` on the server and ``end`` (its binlog end, read before the dump) is
    the place. A GTID the server no longer has raises ``PositionError`` (purged).
    """
    from sparkcdc.mysql.protocol.replication import BinlogClient

    if server_id is None:
        server_id = random.choice(TIMESTAMP_PROBE_SERVER_IDS)
    start = BinlogPosition(end.file, FIRST_EVENT_POS, gtids)
    with BinlogClient(settings, server_id) as client:
        found = first_transaction_start(client.events(start, use_gtid=True), end.file)
    return (end if found is None else found).with_gtids(gtids)


def _first_event_timestamp(settings: ConnectionSettings, file: str, server_id: int) -> int | None:
    start = BinlogPosition(file, FIRST_EVENT_POS)
    for _, _, timestamp, _ in _events_from(settings, start, server_id):
        return timestamp  # the file's FORMAT_DESCRIPTION: when the file was started
    return None


def position_for_timestamp(
    conn: Any,
    settings: ConnectionSettings,
    info: ServerInfo,
    ts_millis: int,
    *,
    server_id: int | None = None,
) -> BinlogPosition:
    """The first transaction boundary whose transaction has timestamp >= ``ts_millis``.

    For ``scan.startup.mode=timestamp``. Approach: each binlog file starts with a
    FORMAT_DESCRIPTION event stamped when the file was opened, so the events of file k
    all come at or after that stamp. A binary search over the files (one short
    replication read of the first event per probe) finds the last file opened at or
    before ``ts``; then one non-blocking read scans from that file's start (crossing
    into later files if needed) for the first transaction-opening event (GTID /
    ANONYMOUS_GTID / MariaDB GTID, or a ``BEGIN`` / DDL QUERY without one) whose
    timestamp (seconds) is >= ``ts``. Its start is the answer. If no transaction is
    that recent, the answer is the current end of the binlog. Event timestamps are
    statement start times in whole seconds: an event counts when ``timestamp * 1000 >=
    ts_millis`` (as Flink CDC compares), so the cut is exact to the second. The reads use
    ``server_id``, by default a random one from ``TIMESTAMP_PROBE_SERVER_IDS``.

    >>> position_for_timestamp(conn, settings, info, 1767225600000)   # doctest: +SKIP
    BinlogPosition(file='mysql-bin.000003', pos=1234, ...)
    """
    ts_s = (ts_millis + 999) // 1000  # event timestamps are whole seconds: ceil
    if server_id is None:
        server_id = random.choice(TIMESTAMP_PROBE_SERVER_IDS)
    files = [name for name, _ in binlog_files(conn)]
    if not files:
        raise SourceError("the source has no binlog files (SHOW BINARY LOGS is empty)")
    lo, hi = 0, len(files) - 1  # answer: last file whose first timestamp <= ts (or 0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        first_ts = _first_event_timestamp(settings, files[mid], server_id)
        if first_ts is not None and first_ts <= ts_s:
            lo = mid
        else:
            hi = mid - 1
    found = _scan_for_timestamp(settings, info, files[lo], ts_s, server_id)
    if found is None:
        return current_position(conn, info)
    if info.flavor == "mariadb":
        return found.with_gtids(mariadb_gtid_at(conn, found.file, found.pos))
    return found


def _events_with_gtids(
    settings: ConnectionSettings,
    start: BinlogPosition,
    server_id: int,
    *,
    previous_gtids: bool = False,
) -> Iterator[tuple[BinlogPosition, int, int, bytes, int]]:
    """The real events from ``start`` on, as ``_events_from``: (start position, type,
    timestamp, event, bytes of binlog from ``start`` to it), the position carrying
    the GTID set of everything before the event where it is known.

    That set starts as ``start.gtids`` and grows by each GTID event read (a MySQL GTID to a
    MySQL set, a MariaDB GTID to a MariaDB position); with ``previous_gtids`` (MySQL with
    gtid_mode=ON, a read from a file's start) a file's PREVIOUS_GTIDS sets it.
    """
    gtids = start.gtids
    # bytes by place, not by the events' sizes: a dump leaves out what the client did not
    # ask for (MariaDB's ANNOTATE_ROWS); the files read whole before this one, and where
    # reading began in this one
    done, base = 0, start.pos
    decoder = BinlogDecoder()  # GTID events are read by the decoder's one reader of them
    for position, type_code, timestamp, event in _events_from(settings, start, server_id):
        yield position.with_gtids(gtids), type_code, timestamp, event, done + position.pos - base
        if type_code == EventType.ROTATE:  # the file's last event: on from the next one's
            done += position.pos + EVENT_HEADER.unpack_from(event)[3] - base
            base = FIRST_EVENT_POS
        elif type_code == EventType.PREVIOUS_GTIDS and previous_gtids:
            gtids = MySqlGtidSet(decode_sid_set(event, EVENT_HEADER_SIZE))
        elif type_code == EventType.GTID and isinstance(gtids, MySqlGtidSet):
            gtid = decoder.decode(event)
            assert isinstance(gtid, GtidEvent)
            gtids = gtids.add(gtid.uuid, gtid.gno)
        elif type_code == EventType.MARIA_GTID and isinstance(gtids, MariaDbGtidSet):
            group = decoder.decode(event)
            assert isinstance(group, MariaGtidEvent)
            gtids = gtids.add(group.domain_id, group.header.server_id, group.sequence)


def _scan_for_timestamp(
    settings: ConnectionSettings, info: ServerInfo, file: str, ts_s: int, server_id: int
) -> BinlogPosition | None:
    """Scan from ``file``'s start; MySQL GTID sets are rebuilt from PREVIOUS_GTIDS + GTIDs."""
    in_gtid_transaction = False
    for position, type_code, timestamp, event, _ in _events_with_gtids(
        settings,
        BinlogPosition(file, FIRST_EVENT_POS),
        server_id,
        previous_gtids=info.flavor == "mysql" and info.gtid_mode,
    ):
        starts = False
        if type_code in _TRANSACTION_START:
            starts = True
        elif type_code == EventType.QUERY and not in_gtid_transaction:
            starts = True  # BEGIN, or a DDL statement, without a GTID event before it
        if starts and timestamp >= ts_s:
            return position
        if type_code in _TRANSACTION_START:
            in_gtid_transaction = True
        elif type_code in (EventType.XID, EventType.QUERY) and in_gtid_transaction:
            if type_code == EventType.XID or _query_text(event).strip().upper() in (
                b"COMMIT",
                b"ROLLBACK",
            ):
                in_gtid_transaction = False
            elif not _query_text(event).strip().upper().startswith(b"BEGIN"):
                in_gtid_transaction = False  # a DDL: its own transaction
    return None


def transaction_cut(
    settings: ConnectionSettings,
    start: BinlogPosition,
    end: BinlogPosition,
    budget: int,
    server_id: int | None = None,
) -> BinlogPosition | None:
    """The first transaction boundary at least ``budget`` bytes of binlog past ``start``
    and before ``end``, with the GTID set before it where ``start`` has one; None when
    there is none (the range holds less, or its last transaction runs to ``end``).

    One non-blocking read from ``start`` that walks event headers and decodes only GTID
    events. A boundary is the start of a GTID event (MySQL's GTID or ANONYMOUS_GTID,
    MariaDB's GTID), which opens every transaction on MariaDB and on MySQL 5.7 and later,
    the place where a server's own binlog position stands between transactions; a
    binlog without them (MySQL 5.6 with gtid_mode=OFF) is never cut.
    """
    if server_id is None:
        server_id = random.choice(TIMESTAMP_PROBE_SERVER_IDS)
    for position, type_code, _, _, read in _events_with_gtids(settings, start, server_id):
        if position >= end:
            return None
        if read >= budget and type_code in _TRANSACTION_START:
            return position
    return None


def binlog_bytes(
    start: BinlogPosition, end: BinlogPosition, files: Iterable[tuple[str, int]]
) -> int:
    """The bytes of binlog from ``start`` to ``end``, by the sizes of the files between
    them (``SHOW BINARY LOGS``); a file the list lacks counts as up to ``end``.

    >>> a, b = BinlogPosition("b.000001", 400), BinlogPosition("b.000002", 300)
    >>> binlog_bytes(a, b, [("b.000001", 1000), ("b.000002", 300)])
    896
    """
    if end <= start:
        return 0
    if start.file == end.file:
        return end.pos - start.pos
    total = end.pos - FIRST_EVENT_POS
    for name, size in files:
        number = binlog_file_number(name)
        if number == start.file_number:
            total += max(size - start.pos, 0)
        elif start.file_number < number < end.file_number:
            total += max(size - FIRST_EVENT_POS, 0)
    return total
