"""Binlog positions found by short reads of the binlog through the replication client: a
file's tag, where the transactions after a GTID set start, the first transaction at a
timestamp, a batch's cut by bytes.

The SQL side (SHOW BINARY LOGS, GTID state, the current end) is ``mysql/admin/server.py``'s.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable, Iterator
from typing import Any

from sparkcdc.errors import SourceError
from sparkcdc.model.position import (
    BinlogPosition,
    GtidSet,
    MariaDbGtidSet,
    MySqlGtidSet,
    binlog_file_tag,
)
from sparkcdc.mysql.admin.server import (
    ServerInfo,
    binlog_files,
    current_position,
    files_on_server,
    mariadb_gtid_at,
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
from sparkcdc.mysql.protocol.replication import BinlogClient, parse_rotate, resumed_events
from sparkcdc.mysql.protocol.wire import decode_sid_set

# position_for_timestamp's short binlog reads use a random server id from this range, far
# from job ranges, so that concurrent look-ups do not kick each other off.
TIMESTAMP_PROBE_SERVER_IDS = range(4_200_000_000, 4_294_967_295)

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
    file = start.file
    with BinlogClient(settings, server_id, list_files=files_on_server) as client:
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
    if server_id is None:
        server_id = random.choice(TIMESTAMP_PROBE_SERVER_IDS)
    with BinlogClient(settings, server_id, list_files=files_on_server) as client:
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
    if server_id is None:
        server_id = random.choice(TIMESTAMP_PROBE_SERVER_IDS)
    start = BinlogPosition(end.file, FIRST_EVENT_POS, gtids)
    with BinlogClient(settings, server_id, list_files=files_on_server) as client:
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
