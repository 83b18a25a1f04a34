"""SQL-side helpers about the source server: flavor and version, binlog positions, files.

All functions take an open pymysql connection (see ``connection.sql_connection``); what is
found by reading the binlog itself (a file's tag, the position for a timestamp, a batch's
cut) is ``mysql/stream/positions.py``'s.

    >>> conn = sql_connection(settings)                        # doctest: +SKIP
    >>> info = server_info(conn)                               # doctest: +SKIP
    >>> info.flavor, info.version                              # doctest: +SKIP
    ('mariadb', (10, 11, 6))
    >>> str(current_position(conn, info))                      # doctest: +SKIP
    'mysql-bin.000001:1800@0-1-8'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
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
)
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.constants import FIRST_EVENT_POS

log = logging.getLogger(__name__)

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
# MariaDB 10.x announces itself as "5.5.5-10.11.6-MariaDB..." to old clients
_MARIADB_COMPAT_PREFIX = "5.5.5-"
# MySQL 8.2 added SHOW BINARY LOG STATUS; 8.4 removed SHOW MASTER STATUS.
_MYSQL_BINARY_LOG_STATUS = (8, 2, 0)


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


def files_on_server(settings: ConnectionSettings) -> list[tuple[str, int]]:
    """``binlog_files`` over a connection of its own (for a replication client's messages)."""
    with sql_connection(settings) as conn:
        return binlog_files(conn)


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
