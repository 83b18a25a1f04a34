"""The chunk read's low watermark leaves no gap: proven with XA on the real MariaDB.

An XA PREPARE writes the transaction and its rows to the binlog (MariaDB >= 10.5) while
its changes stay invisible until XA COMMIT: exactly the "in the binlog, not committed"
window a low watermark from SHOW MASTER STATUS fell into.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from test_snapshot_reader import dialect_of, rows_of, settings_of
from test_stream import wait_for

from sparkcdc.errors import SnapshotError
from sparkcdc.mysql.admin.catalog import load_schema
from sparkcdc.mysql.admin.server import committed_position, current_position, server_info
from sparkcdc.mysql.protocol.connection import sql_connection
from sparkcdc.mysql.stream.binlog_range import read_range
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.reader import ChunkRead, ChunkResult, read_chunk
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration


def prepare_xa(dev_server: DevServer, database: str, xid: str, row: int) -> Any:
    conn = dev_server.connection(database)
    with conn.cursor() as cur:
        cur.execute(f"XA START '{xid}'")
        cur.execute("INSERT INTO t VALUES (%s, 1)", (row,))
        cur.execute(f"XA END '{xid}'")
        cur.execute(f"XA PREPARE '{xid}'")
    return conn


def test_xa_prepare_is_in_the_binlog_before_it_commits(
    dev_server: DevServer, database: str, sql: Any
) -> None:
    """The server behaviour the rule rests on (MariaDB >= 10.5)."""
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    conn = sql_connection(settings_of(dev_server), database)
    info = server_info(conn)
    before = current_position(conn, info, with_gtids=False)
    xa = prepare_xa(dev_server, database, "w1", 5)
    try:
        after = current_position(conn, info, with_gtids=False)
        kinds: list[str] = []
        rows = list(
            read_range(
                settings_of(dev_server),
                5621,
                before,
                after,
                lambda d, t: True,
                on_xa=lambda k, p: kinds.append(k),
            )
        )
        assert kinds == ["prepare"]
        assert [r.rows for r in rows] == [[(None, (5, 1))]]  # type: ignore[union-attr]
        sql.execute("SELECT COUNT(*) FROM t")
        assert sql.fetchone()[0] == 0  # in the binlog, not visible
        # SHOW MASTER STATUS and the consistent snapshot's position are both past it
        assert committed_position(conn, info) >= after
    finally:  # a prepared XA outlives its test and blocks DROP DATABASE
        with xa.cursor() as cur:
            cur.execute("XA COMMIT 'w1'")
        conn.close()


def test_a_chunk_read_during_an_unfinished_xa_stops_with_what_to_do(
    dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    xa = prepare_xa(dev_server, database, "w2", 3)
    schema = load_schema(sql.connection, database, "t")
    try:
        # before: the read returned rows 1 and 2, LW past the XA's rows, and the row of its
        # later XA COMMIT was never delivered (the filter dropped it at the prepare point)
        with pytest.raises(SnapshotError, match=r"XA .*XA RECOVER"):
            read_chunk(
                dialect_of(dev_server),
                ChunkRead(schema, key_column="id", collation=None, server_id=5622, xa_wait_s=0),
                ChunkRange(f"{database}.t", 0, None, None),
            )
    finally:
        with xa.cursor() as cur:
            cur.execute("XA ROLLBACK 'w2'")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_chunk_read_waits_for_the_xa_and_then_has_its_row(
    dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    xa = prepare_xa(dev_server, database, "w3", 3)
    schema = load_schema(sql.connection, database, "t")
    records = _Records()
    logger = logging.getLogger("sparkcdc.snapshot.reader")
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    out: list[ChunkResult | BaseException] = []

    def read() -> None:
        try:
            out.append(
                read_chunk(
                    dialect_of(dev_server),
                    ChunkRead(
                        schema, key_column="id", collation=None, server_id=5623, xa_wait_s=60
                    ),
                    ChunkRange(f"{database}.t", 0, None, None),
                )
            )
        except BaseException as exc:
            out.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_for(lambda: any("XA" in m for m in records.messages), 30, "the read to see the XA")
    finally:
        with xa.cursor() as cur:
            cur.execute("XA COMMIT 'w3'")
        reader.join(60)
        logger.removeHandler(records)
    result = out[0]
    assert isinstance(result, ChunkResult), result
    assert sorted(rows_of(result)) == [(1, 1), (2, 2), (3, 1)]
