"""A column of a MariaDB plugin type (UUID, INET6) added mid-stream and dropped again: the
typed stream restarts on each schema change and ends equal to the source by the oracle; the
type never poisons the stream (issue 11)."""

from __future__ import annotations

import uuid
from typing import Any

import pymysql
import pytest
from test_stream import AvailableNowRuns, options

from sparkcdc_dev.devserver import DevServer
from sparkcdc_dev.oracle import compare, replay

pytestmark = pytest.mark.integration


def test_a_uuid_column_added_and_dropped_mid_stream(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    opts = options(
        dev_server,
        database,
        "t",
        **{"server-id": "5530-5534", "state.location": str(tmp_path / "state")},
    )
    runs = AvailableNowRuns(spark, opts, tmp_path / "checkpoint")
    runs.catch_up()  # the first offset: later writes are captured
    sql.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    sql.execute("ALTER TABLE t ADD COLUMN u UUID NULL, ADD COLUMN a INET6 NULL")
    for i in range(3, 9):
        sql.execute(
            "INSERT INTO t VALUES (%s, %s, %s, %s)",
            (i, i, str(uuid.UUID(int=i * 7919)), f"::ffff:10.0.0.{i}"),
        )
    sql.execute("UPDATE t SET u = %s, a = '2001:db8::1' WHERE id = 1", (str(uuid.uuid4()),))
    runs.catch_up()
    assert {"u", "a"} <= set(runs.columns[-1])
    log = runs.changelog()
    assert any(r.get("a") == "::ffff:10.0.0.3" for r in log)
    state = replay([{k: v for k, v in r.items() if k != "_op_ts"} for r in log], ["id"]).state
    with dev_server.connection(database) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SELECT id, v, CAST(u AS CHAR) AS u, CAST(a AS CHAR) AS a FROM t")
        source = {(r["id"],): r for r in cur.fetchall()}
    assert compare(state, source) == []

    # dropped again: the stream goes on without the columns
    sql.execute("ALTER TABLE t DROP COLUMN u, DROP COLUMN a")
    sql.execute("INSERT INTO t VALUES (20, 20)")
    sql.execute("DELETE FROM t WHERE id = 2")
    runs.catch_up()
    assert "u" not in runs.columns[-1]
    log = runs.changelog()
    rows = [{k: v for k, v in r.items() if k not in ("_op_ts", "u", "a")} for r in log]
    result = replay(rows, ["id"])
    assert result.violations == []
    with dev_server.connection(database) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SELECT * FROM t")
        source = {(r["id"],): r for r in cur.fetchall()}
    assert compare(result.state, source) == []
