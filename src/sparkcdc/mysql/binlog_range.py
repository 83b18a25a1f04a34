"""Read the changes of a binlog range ``[start, end)``: the unit of one Spark partition.

The range is read over one replication connection with a non-blocking dump, so
the read ends by itself; ``end`` is a transaction boundary taken from
``SHOW MASTER STATUS`` at planning, so a transaction is never split, and reading
the same range again yields the same changes (Spark's replay).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sparkcdc.errors import BinlogResetError, ProtocolError
from sparkcdc.model.position import BinlogPosition, binlog_file_tag
from sparkcdc.mysql.connection import ConnectionSettings
from sparkcdc.mysql.decoder import BinlogDecoder
from sparkcdc.mysql.events import (
    MISSING,
    EventHeader,
    FormatDescriptionEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    RowsKind,
    TableMapEvent,
)
from sparkcdc.mysql.replication import BinlogClient

__all__ = ["MISSING", "RowChanges", "SchemaChange", "read_range"]

TableFilter = Callable[[str, str], bool]

# DDL statements that change a table's shape (the first table name they name).
_DDL_RE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(ALTER|CREATE|DROP|RENAME|TRUNCATE)\s+"
    r"(?:ONLINE\s+|IGNORE\s+|TEMPORARY\s+|OR\s+REPLACE\s+)*(?:TABLE\s+)?"
    r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(`[^`]+`|\w+)(?:\s*\.\s*(`[^`]+`|\w+))?",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(slots=True)
class RowChanges:
    """The rows of one rows event of a captured table."""

    database: str
    table: str
    kind: RowsKind
    rows: list[tuple[tuple[object, ...] | None, tuple[object, ...] | None]]
    timestamp: int  # event time, seconds since the epoch
    position: BinlogPosition  # where the event starts
    table_map: TableMapEvent


@dataclass(slots=True)
class SchemaChange:
    """A DDL statement on a captured table."""

    database: str
    table: str
    ddl: str
    timestamp: int
    position: BinlogPosition


def ddl_target(default_database: str, query: str) -> tuple[str, str] | None:
    """(database, table) a DDL statement acts on, or None if it is not table DDL.

    >>> ddl_target("app", "ALTER TABLE `orders` ADD COLUMN x INT")
    ('app', 'orders')
    """
    match = _DDL_RE.match(query)
    if not match:
        return None
    first, second = match.group(2).strip("`"), match.group(3)
    if second is not None:
        return first, second.strip("`")
    return default_database, first


def read_range(
    settings: ConnectionSettings,
    server_id: int,
    start: BinlogPosition,
    end: BinlogPosition,
    table_filter: TableFilter,
) -> Iterator[RowChanges | SchemaChange]:
    """Yield the changes of captured tables in ``[start, end)``, in binlog order.

    Raises ProtocolError if the binlog ends before ``end`` (it was truncated or
    the offsets do not belong to this server), and ``BinlogResetError`` before the first
    row if the FORMAT_DESCRIPTION the server sends for ``start``'s (or ``end``'s) file is
    not the one of the file the position was taken in (``file_tag``): the binlog was
    reset or restored, or another server answers, since the batch was planned. Row
    positions take ``start``'s ``seq_file_base``.
    """
    if not start < end:
        return
    decoder = BinlogDecoder(table_filter=table_filter)
    current_file = start.file
    reached = start
    tags = {p.file: p.file_tag for p in (end, start) if p.file_tag is not None}
    base = start.seq_file_base
    with BinlogClient(settings, server_id) as client:
        for raw in client.events(start, blocking=False):
            event = decoder.decode(raw)
            header = event.header
            if isinstance(event, RotateEvent):
                current_file = event.next_file
                reached = BinlogPosition(current_file, event.next_pos)
                continue
            if isinstance(event, FormatDescriptionEvent):
                _check_file_tag(settings, current_file, tags.get(current_file), header, start)
                continue
            if header.log_pos == 0:
                continue  # artificial events the server sends at dump start
            here = BinlogPosition(
                current_file, header.log_pos - header.event_size, seq_file_base=base
            )
            if here >= end:
                return
            reached = BinlogPosition(current_file, header.log_pos)
            if isinstance(event, RowsEvent):
                if event.rows is not None and event.table is not None:
                    yield RowChanges(
                        event.table.database,
                        event.table.table,
                        event.kind,
                        event.rows,
                        header.timestamp,
                        here,
                        event.table,
                    )
            elif isinstance(event, QueryEvent):
                target = ddl_target(event.database, event.query)
                if target is not None and table_filter(*target):
                    yield SchemaChange(target[0], target[1], event.query, header.timestamp, here)
    if reached < end:
        raise ProtocolError(
            f"the binlog ended at {reached} before the batch end {end}; the server's binlog "
            "was reset or these offsets belong to another server. Restart the query from a "
            "new checkpoint (scan.startup.mode=latest-offset or a snapshot)."
        )


def _check_file_tag(
    settings: ConnectionSettings,
    file: str,
    expected: str | None,
    header: EventHeader,
    start: BinlogPosition,
) -> None:
    found = binlog_file_tag(header.timestamp, header.server_id)
    if expected is not None and found != expected:
        raise BinlogResetError(
            f"{file} on {settings.endpoint} is not the binlog file the batch was planned in: "
            f"its FORMAT_DESCRIPTION says created:server_id {found}, the offset says "
            f"{expected} (reading from {start}). The binlog was reset or restored, or another "
            "server answers at this address, since the batch was planned; nothing of it was "
            "read. Restart the query: it checks the server again and follows a failover by "
            "GTID, or says what to do"
        )
