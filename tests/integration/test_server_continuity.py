"""Offsets know their server: a reset, a rewind, another server or a failover is noticed
before any row is read; a failover by GTID is followed exactly; a position whose GTID set
MariaDB cannot compute never blocks a query."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
from test_stream import changelog, options, start_collecting

from sparkcdc.devserver import DevServer
from sparkcdc.mysql import server

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
        assert (found.file, found.pos) == (end_file, end_pos) and found.gtids is not None
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
