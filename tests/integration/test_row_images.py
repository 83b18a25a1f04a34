"""Incomplete row images against the real MariaDB: a session that sets binlog_row_image to
MINIMAL or NOBLOB logs partial images, and every decoded RowsEvent must name exactly the
columns its images lack (RowsEvent.absent_before / absent_after), holding MISSING there and
the server's values everywhere else. The binlog is read over the replication protocol."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pymysql
import pytest

from sparkcdc.model.events import RowsKind
from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin import server
from sparkcdc.mysql.binlog.decoded_events import MISSING, RotateEvent, RowsEvent
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.replication import BinlogClient
from sparkcdc_dev.devserver import DevSettings

pytestmark = pytest.mark.integration

# distinct per test process, far from the ids other suites use
_ids = itertools.count(3_500_000 + (os.getpid() % 50_000) * 20)

# id INT PK (0), a INT (1), b VARCHAR (2), c INT (3), doc BLOB (4)
_DDL = "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20), c INT, doc BLOB)"
_ALL = (0, 1, 2, 3, 4)


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


def _position(settings: ConnectionSettings) -> BinlogPosition:
    with sql_connection(settings) as conn:
        return server.current_position(conn, server.server_info(conn)).with_gtids(None)


def _rows_events(
    settings: ConnectionSettings, start: BinlogPosition, end: BinlogPosition, database: str
) -> list[RowsEvent]:
    """The ROWS events of ``database`` in ``[start, end)``, read with a non-blocking dump."""
    decoder = BinlogDecoder(table_filter=lambda db, _table: db == database)
    out: list[RowsEvent] = []
    file = start.file
    with BinlogClient(settings, next(_ids)) as client:
        for raw in client.events(start):
            event = decoder.decode(raw)
            if isinstance(event, RotateEvent):
                file = event.next_file
                continue
            header = event.header
            if header.log_pos == 0:
                continue
            if BinlogPosition(file, header.log_pos - header.event_size) >= end:
                break
            if isinstance(event, RowsEvent) and event.rows is not None:
                out.append(event)
    return out


def _row(sql: pymysql.cursors.Cursor, key: int) -> tuple[Any, ...]:
    sql.execute("SELECT id, a, b, c, doc FROM t WHERE id = %s", (key,))
    row = sql.fetchone()
    assert row is not None
    return tuple(row)


def _check_image(
    image: tuple[Any, ...] | None, absent: tuple[int, ...], server_row: tuple[Any, ...]
) -> None:
    """MISSING exactly at ``absent``, the server's value (BLOB as bytes) everywhere else."""
    assert image is not None
    for i in _ALL:
        if i in absent:
            assert image[i] is MISSING, f"column {i}"
        else:
            assert image[i] == server_row[i], f"column {i}"


def _capture(
    settings: ConnectionSettings,
    sql: pymysql.cursors.Cursor,
    database: str,
    row_image: str,
) -> tuple[list[RowsEvent], dict[str, tuple[Any, ...]]]:
    """Insert under FULL, then UPDATE a / UPDATE doc / DELETE under ``row_image``.

    Returns the UPDATE, UPDATE, DELETE events and the row as SELECT saw it at each step.
    """
    sql.execute(_DDL)
    sql.execute("INSERT INTO t VALUES (1, 10, 'x', 30, 'blob-1'), (2, 20, 'y', 40, 'blob-2')")
    seen = {"inserted": _row(sql, 1)}
    sql.execute("SET SESSION binlog_row_image = %s", (row_image,))
    start = _position(settings)
    sql.execute("UPDATE t SET a = 11 WHERE id = 1")
    seen["a_updated"] = _row(sql, 1)
    sql.execute("UPDATE t SET doc = 'blob-new' WHERE id = 1")
    seen["doc_updated"] = _row(sql, 1)
    sql.execute("DELETE FROM t WHERE id = 1")
    end = _position(settings)
    sql.execute("SET SESSION binlog_row_image = 'FULL'")
    events = _rows_events(settings, start, end, database)
    assert [e.kind for e in events] == [RowsKind.UPDATE, RowsKind.UPDATE, RowsKind.DELETE]
    assert all(e.rows is not None and len(e.rows) == 1 for e in events)
    return events, seen


def test_minimal_row_image(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    (set_a, set_doc, delete), seen = _capture(settings, sql, database, "MINIMAL")
    # MINIMAL: the before image is the primary key, the after image the changed columns
    assert (set_a.absent_before, set_a.absent_after) == ((1, 2, 3, 4), (0, 2, 3, 4))
    assert (set_doc.absent_before, set_doc.absent_after) == ((1, 2, 3, 4), (0, 1, 2, 3))
    assert (delete.absent_before, delete.absent_after) == ((1, 2, 3, 4), ())
    assert set_a.rows is not None and set_doc.rows is not None and delete.rows is not None
    _check_image(set_a.rows[0][0], set_a.absent_before, seen["inserted"])
    _check_image(set_a.rows[0][1], set_a.absent_after, seen["a_updated"])
    _check_image(set_doc.rows[0][0], set_doc.absent_before, seen["a_updated"])
    _check_image(set_doc.rows[0][1], set_doc.absent_after, seen["doc_updated"])
    _check_image(delete.rows[0][0], delete.absent_before, seen["doc_updated"])
    assert delete.rows[0][1] is None


def test_noblob_row_image(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    (set_a, set_doc, delete), seen = _capture(settings, sql, database, "NOBLOB")
    # NOBLOB: every column but the BLOB, which the after image has only when it changed
    assert (set_a.absent_before, set_a.absent_after) == ((4,), (4,))
    assert (set_doc.absent_before, set_doc.absent_after) == ((4,), ())
    assert (delete.absent_before, delete.absent_after) == ((4,), ())
    assert set_a.rows is not None and set_doc.rows is not None and delete.rows is not None
    _check_image(set_a.rows[0][0], set_a.absent_before, seen["inserted"])
    _check_image(set_a.rows[0][1], set_a.absent_after, seen["a_updated"])
    _check_image(set_doc.rows[0][0], set_doc.absent_before, seen["a_updated"])
    _check_image(set_doc.rows[0][1], set_doc.absent_after, seen["doc_updated"])
    _check_image(delete.rows[0][0], delete.absent_before, seen["doc_updated"])


def test_full_row_image_has_nothing_absent(
    settings: ConnectionSettings, sql: pymysql.cursors.Cursor, database: str
) -> None:
    events, seen = _capture(settings, sql, database, "FULL")
    assert [(e.absent_before, e.absent_after) for e in events] == [((), ())] * 3
    set_a = events[0]
    assert set_a.rows is not None
    _check_image(set_a.rows[0][1], (), seen["a_updated"])
