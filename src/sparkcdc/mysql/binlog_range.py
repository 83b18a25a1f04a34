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

from sparkcdc.errors import ProtocolError
from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.connection import ConnectionSettings
from sparkcdc.mysql.decoder import BinlogDecoder
from sparkcdc.mysql.events import (
    MISSING,
    MariaGtidEvent,
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
    on_xa: Callable[[str, BinlogPosition], None] | None = None,
) -> Iterator[RowChanges | SchemaChange]:
    """Yield the changes of captured tables in ``[start, end)``, in binlog order.

    ``on_xa(kind, position)`` is told of each MariaDB XA event group in the range:
    ``"prepare"`` (an XA PREPARE: its rows, yielded like any, take effect at a later XA
    COMMIT) or ``"complete"`` (the XA COMMIT / XA ROLLBACK of an earlier prepare).

    Raises ProtocolError if the binlog ends before ``end`` (it was truncated or
    the offsets do not belong to this server).
    """
    if not start < end:
        return
    decoder = BinlogDecoder(table_filter=table_filter)
    current_file = start.file
    reached = start
    with BinlogClient(settings, server_id) as client:
        for raw in client.events(start, blocking=False):
            event = decoder.decode(raw)
            header = event.header
            if isinstance(event, RotateEvent):
                current_file = event.next_file
                reached = BinlogPosition(current_file, event.next_pos)
                continue
            if header.log_pos == 0:
                continue  # artificial events the server sends at dump start
            here = BinlogPosition(current_file, header.log_pos - header.event_size)
            if here >= end:
                return
            reached = BinlogPosition(current_file, header.log_pos)
            if isinstance(event, MariaGtidEvent):
                if on_xa is not None and (event.xa_prepare or event.xa_complete):
                    on_xa("prepare" if event.xa_prepare else "complete", here)
            elif isinstance(event, RowsEvent):
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
