"""The MySQL side of a chunk read (DESIGN.md §2): its watermarks on one SQL connection, the
SELECT between them (``select``) and the binlog backfill after them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from sparkcdc.model.dialect import ChunkSelect
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import TableSchema
from sparkcdc.mysql.admin.server import (
    committed_position,
    current_position,
    prepared_xa,
    server_info,
)
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.chunks.select import select_chunk
from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc.mysql.stream.binlog_range import read_range


class MySqlChunkReader:
    """Chunk reads on one SQL connection: set to UTC and asked who the server is once."""

    def __init__(self, conn: Any, settings: ConnectionSettings) -> None:
        self._conn, self._settings = conn, settings
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        self._info = server_info(conn)

    def low(self) -> BinlogPosition:
        # not SHOW MASTER STATUS: a transaction is in the binlog before InnoDB commits it
        return committed_position(self._conn, self._info)

    def high(self) -> BinlogPosition:
        # with its GTID set: a failover right after the batch that read this chunk places
        # the HW on the new server by it (DESIGN.md §2.7)
        return current_position(self._conn, self._info)

    def unsettled(self) -> list[str]:
        # MariaDB >= 10.5 binlogs an XA PREPARE with its rows; they take effect at XA COMMIT
        return (prepared_xa(self._conn) or []) if self._info.is_mariadb else []

    def select(self, spec: ChunkSelect) -> tuple[pa.Table, str]:
        return select_chunk(self._conn, self._settings, spec)


def read_backfill(
    settings: ConnectionSettings,
    schema: TableSchema,
    start: BinlogPosition,
    end: BinlogPosition,
    server_id: int,
    settled: list[BinlogPosition],
) -> Iterator[RowChanges | SchemaChange]:
    """The table's changes in ``[start, end)``, its rows decoded with ``schema``; the
    positions of XA COMMIT / XA ROLLBACK in the range are appended to ``settled``."""

    def on_xa(kind: str, position: BinlogPosition) -> None:
        if kind == "complete":
            settled.append(position)

    db, name = schema.database, schema.table
    return read_range(
        settings,
        server_id,
        start,
        end,
        lambda d, t: d == db and t == name,
        TableVersions.of([schema]),
        on_xa=on_xa,
    )
