"""Every change is delivered exactly, or the stream stops with a clear error (issue 11).

Against the private MariaDB: statements logged without row images, MariaDB's plugin types
(UUID, INET4, INET6) and types sparkcdc does not know.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest
from pyspark.errors import StreamingQueryException
from test_stream import AvailableNowRuns, changelog, options, start_collecting, wait_for

from sparkcdc.errors import SourceError
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin import server
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.stream.binlog_range import read_range, refuse_row_changing_ddl
from sparkcdc_dev.devserver import DevServer, DevSettings

pytestmark = pytest.mark.integration

_ids = itertools.count(3_600_000 + (os.getpid() % 50_000) * 20)


@pytest.fixture
def settings(dev_settings: DevSettings) -> ConnectionSettings:
    return ConnectionSettings(
        dev_settings.host, dev_settings.port, dev_settings.user, dev_settings.password
    )


def _position(settings: ConnectionSettings) -> BinlogPosition:
    with sql_connection(settings) as conn:
        return server.current_position(conn, server.server_info(conn), with_gtids=False)


def _changes(
    settings: ConnectionSettings, start: BinlogPosition, database: str, table: str = "t"
) -> list[RowChanges | SchemaChange]:
    end = _position(settings)
    captured = lambda d, t: d == database and t == table  # noqa: E731
    return list(read_range(settings, next(_ids), start, end, captured))


@pytest.fixture
def session(dev_server: DevServer, database: str) -> Iterator[pymysql.cursors.Cursor]:
    """A second autocommit session of the application, free to change its own settings."""
    conn = dev_server.connection(database)
    with conn.cursor() as cur:
        yield cur
    conn.close()


@pytest.mark.parametrize("fmt", ["STATEMENT", "MIXED"])
def test_a_statement_logged_dml_on_a_captured_table_stops_the_range(
    settings: ConnectionSettings, database: str, sql: Any, session: Any, fmt: str
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("CREATE TABLE other (id INT PRIMARY KEY, v INT)")
    start = _position(settings)
    session.execute(f"SET SESSION binlog_format = '{fmt}'")
    session.execute("INSERT INTO other VALUES (1, 1)")  # not captured: no reason to stop
    assert _changes(settings, start, database) == []
    session.execute("UPDATE t SET v = v + 1 WHERE id > 0")
    with pytest.raises(SourceError) as caught:
        _changes(settings, start, database)
    message = str(caught.value)
    assert f"{database}.t" in message
    assert "binlog_format=STATEMENT or MIXED" in message
    assert "SET GLOBAL binlog_format='ROW'" in message
    assert "at binlog position" in message


@pytest.fixture
def aux(dev_server: DevServer, database: str) -> Iterator[str]:
    """An uncaptured database beside the captured one."""
    name = f"{database}_aux"
    with dev_server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    yield name
    with dev_server.connection() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION foreign_key_checks = 0")  # the captured t may refer to it
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _rows_of_t(settings: ConnectionSettings, database: str) -> list[tuple[Any, ...]]:
    with sql_connection(settings) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{database}`.t ORDER BY id")
        return list(cur.fetchall())


# How a statement-logged session changes the captured table t without naming it (or naming
# it behind a modifier): (setup in the aux database, the statement, what the stop says).
# Each one's binlog holds only the statement. Issue 57, item 1.
_FUNCTION = (
    "CREATE FUNCTION {aux}.f() RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
    "BEGIN UPDATE {db}.t SET v = v + 1; RETURN 1; END"
)
_HIDDEN_CHANGES = {
    "trigger": (
        [
            "CREATE TABLE {aux}.src (id INT PRIMARY KEY)",
            "CREATE TRIGGER {aux}.src_copy AFTER INSERT ON {aux}.src FOR EACH ROW "
            "INSERT INTO {db}.t VALUES (NEW.id, 0)",
        ],
        "INSERT INTO {aux}.src VALUES (7)",
        "it has a trigger (src_copy)",
    ),
    "select-function": (
        [_FUNCTION],
        "SELECT {aux}.f()",
        "it calls {aux}.f(), a stored function",
    ),
    "do-function": ([_FUNCTION], "DO {aux}.f()", "it calls {aux}.f(), a stored function"),
    "call-procedure": (
        [_FUNCTION, "CREATE PROCEDURE {aux}.p() BEGIN SET @x = {aux}.f(); END"],
        "CALL {aux}.p()",  # logged as the SELECT f() it ran
        "it calls {aux}.f(), a stored function",
    ),
    "view": (
        ["CREATE VIEW {aux}.v AS SELECT id, v FROM {db}.t"],
        "UPDATE {aux}.v SET v = 9",
        "it is a view",
    ),
    "cascade": (
        [
            "CREATE TABLE {aux}.parent (id INT PRIMARY KEY)",
            "INSERT INTO {aux}.parent VALUES (1)",
            "ALTER TABLE {db}.t ADD FOREIGN KEY (id) REFERENCES {aux}.parent (id) "
            "ON DELETE CASCADE",
        ],
        "DELETE FROM {aux}.parent",
        "ON DELETE CASCADE",
    ),
    "update-ignore": ([], "UPDATE IGNORE t SET v = 5", "{db}.t"),
    "update-low-priority": ([], "UPDATE LOW_PRIORITY t SET v = 6", "{db}.t"),
}


@pytest.mark.parametrize("case", list(_HIDDEN_CHANGES))
def test_a_statement_logged_change_of_a_captured_table_it_does_not_name_stops_the_range(
    settings: ConnectionSettings, database: str, aux: str, sql: Any, session: Any, case: str
) -> None:
    setup, statement, why = (
        [q.format(db=database, aux=aux) for q in _HIDDEN_CHANGES[case][0]],
        *(q.format(db=database, aux=aux) for q in _HIDDEN_CHANGES[case][1:]),
    )
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1)")
    for query in setup:
        sql.execute(query)
    before = _rows_of_t(settings, database)
    start = _position(settings)
    session.execute("SET SESSION binlog_format = 'STATEMENT'")
    session.execute(statement)
    assert _rows_of_t(settings, database) != before  # the captured table changed
    with pytest.raises(SourceError) as caught:
        _changes(settings, start, database)
    message = str(caught.value)
    assert why in message
    assert "at binlog position" in message
    assert "binlog_format=STATEMENT or MIXED" in message
    assert "SET GLOBAL binlog_format='ROW'" in message


def test_a_statement_logged_change_proven_to_stay_in_uncaptured_tables_flows(
    settings: ConnectionSettings, database: str, aux: str, sql: Any, session: Any
) -> None:
    """A table without triggers, cascading foreign keys or a view's definition: its
    statement-logged changes cannot reach t, and the range reads past them; a trigger that
    writes only another uncaptured table still stops it (a trigger is never proven)."""
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute(f"CREATE TABLE `{aux}`.plain (id INT PRIMARY KEY, v INT)")
    sql.execute(
        f"CREATE TABLE `{aux}`.child (id INT PRIMARY KEY, FOREIGN KEY (id) "
        f"REFERENCES `{aux}`.plain (id))"
    )  # no cascade: a delete is refused instead
    sql.execute(f"CREATE TABLE `{aux}`.logged (id INT PRIMARY KEY)")
    start = _position(settings)
    session.execute("SET SESSION binlog_format = 'STATEMENT'")
    session.execute(f"INSERT IGNORE INTO `{aux}`.plain VALUES (1, NOW() + 0), (2, LENGTH('ab'))")
    session.execute(
        f"UPDATE `{aux}`.plain SET v = v + 1 WHERE id IN (SELECT id FROM `{aux}`.child)"
    )
    session.execute(f"DELETE FROM `{aux}`.plain WHERE id = 2")
    session.execute("SELECT COUNT(*) FROM t")  # not logged: changes nothing
    session.execute(f"CREATE TEMPORARY TABLE `{aux}`.scratch (id INT)")  # the session's own
    session.execute(f"INSERT INTO `{aux}`.scratch SELECT id FROM `{aux}`.plain")
    assert _changes(settings, start, database) == []
    sql.execute(
        f"CREATE TRIGGER `{aux}`.plain_log AFTER INSERT ON `{aux}`.plain FOR EACH ROW "
        f"INSERT INTO `{aux}`.logged VALUES (NEW.id)"
    )
    later = _position(settings)
    session.execute(f"INSERT INTO `{aux}`.plain VALUES (3, 3)")
    with pytest.raises(SourceError, match="it has a trigger \\(plain_log\\)"):
        _changes(settings, later, database)


def test_a_cdc_user_that_cannot_see_triggers_proves_nothing(
    dev_server: DevServer,
    settings: ConnectionSettings,
    database: str,
    aux: str,
    sql: Any,
    session: Any,
) -> None:
    """information_schema.TRIGGERS hides the triggers of tables the user holds no TRIGGER
    privilege on: an empty answer is no proof, and the stop says which grant makes one."""
    user = f"cdc_nt_{os.getpid()}"
    with dev_server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{user}'")
        cur.execute(f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'%'")
    try:
        sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        sql.execute(f"CREATE TABLE `{aux}`.plain (id INT PRIMARY KEY)")
        start = _position(settings)
        session.execute("SET SESSION binlog_format = 'STATEMENT'")
        session.execute(f"INSERT INTO `{aux}`.plain VALUES (1)")
        assert _changes(settings, start, database) == []  # the dev user sees all triggers
        limited = ConnectionSettings(settings.host, settings.port, user, f"pw-{user}")
        with pytest.raises(SourceError) as caught:
            _changes(limited, start, database)
        assert f"GRANT TRIGGER ON `{aux}`.*" in str(caught.value)
    finally:
        with dev_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER '{user}'@'%'")


@pytest.mark.parametrize(
    ("case", "ids"), [("trigger", "5555-5559"), ("select-function", "5560-5564")]
)
def test_a_stream_stops_at_a_statement_logged_change_it_cannot_prove_harmless(
    spark: Any,
    dev_server: DevServer,
    database: str,
    aux: str,
    sql: Any,
    session: Any,
    tmp_path: Any,
    case: str,
    ids: str,
) -> None:
    """Through the streaming source: the query stops at the statement with its reason."""
    setup, statement, why = (
        [q.format(db=database, aux=aux) for q in _HIDDEN_CHANGES[case][0]],
        *(q.format(db=database, aux=aux) for q in _HIDDEN_CHANGES[case][1:]),
    )
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1)")
    for query in setup:
        sql.execute(query)
    runs = AvailableNowRuns(
        spark, options(dev_server, database, "t", **{"server-id": ids}), tmp_path / "checkpoint"
    )
    runs.catch_up()
    session.execute("SET SESSION binlog_format = 'STATEMENT'")
    session.execute(statement)
    failure = runs.failure()
    assert why in failure and "binlog_format=STATEMENT or MIXED" in failure


def test_rows_logged_in_row_format_still_flow(
    settings: ConnectionSettings, database: str, sql: Any, session: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = _position(settings)
    session.execute("SET SESSION binlog_format = 'ROW'")
    session.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    session.execute("BEGIN")
    session.execute("UPDATE t SET v = 3 WHERE id = 1")
    session.execute("COMMIT")
    rows = [
        r for c in _changes(settings, start, database) if isinstance(c, RowChanges) for r in c.rows
    ]
    assert rows == [(None, (1, 1)), (None, (2, 2)), ((1, 1), (1, 3))]


def test_an_xa_rollback_after_prepare_stops_the_range(
    settings: ConnectionSettings, database: str, sql: Any, session: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = _position(settings)
    session.execute("XA START 'sparkcdc-test'")
    session.execute("INSERT INTO t VALUES (1, 1)")
    session.execute("XA END 'sparkcdc-test'")
    session.execute("XA PREPARE 'sparkcdc-test'")
    session.execute("XA ROLLBACK 'sparkcdc-test'")
    with pytest.raises(SourceError, match="XA transaction was rolled back"):
        _changes(settings, start, database)


def test_an_xa_rollback_of_other_tables_or_prepared_before_the_range(
    settings: ConnectionSettings, database: str, sql: Any, session: Any
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("CREATE TABLE other (id INT PRIMARY KEY, v INT)")
    start = _position(settings)
    session.execute("XA START 'x-other'")
    session.execute("INSERT INTO other VALUES (1, 1)")
    session.execute("XA END 'x-other'")
    session.execute("XA PREPARE 'x-other'")
    session.execute("XA ROLLBACK 'x-other'")
    assert _changes(settings, start, database) == []  # not a captured table: nothing to undo
    session.execute("XA START 'x-early'")
    session.execute("INSERT INTO other VALUES (2, 2)")
    session.execute("XA END 'x-early'")
    session.execute("XA PREPARE 'x-early'")
    later = _position(settings)
    session.execute("XA ROLLBACK 'x-early'")
    # prepared before the range: its rows are unknown here, so the range cannot prove it
    with pytest.raises(SourceError, match="before this read began"):
        _changes(settings, later, database)


PLUGIN_VALUES = [
    ("123e4567-e89b-12d3-a456-426655440000", "2001:db8::1", "10.0.0.1"),
    ("6ccd780c-baba-1026-9564-5b8c656024db", "::ffff:10.0.0.1", "255.255.255.255"),
    ("00000000-0000-0000-0000-000000000000", "::10.0.0.1", "0.0.0.0"),
    ("f81d4fae-7dec-41d0-a765-00a0c91e6bf6", "1:0:0:1::1", "127.0.0.1"),
    ("ffffffff-ffff-ffff-ffff-ffffffffffff", "::ffff:0.0.0.1", "1.2.3.4"),
    (None, None, None),
]


def test_uuid_and_inet_columns_decode_to_the_servers_text(
    settings: ConnectionSettings, database: str, sql: Any
) -> None:
    from sparkcdc.model.schema import value_converter
    from sparkcdc.mysql.admin.catalog import load_schema

    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4)")
    start = _position(settings)
    for i, values in enumerate(PLUGIN_VALUES):
        sql.execute("INSERT INTO t VALUES (%s, %s, %s, %s)", (i, *values))
    with sql_connection(settings, database) as conn:
        schema = load_schema(conn, database, "t")
    assert [c.spark_type for c in schema.columns] == ["INT", "STRING", "STRING", "STRING"]
    converters = [value_converter(c) for c in schema.columns]
    decoded = []
    for change in _changes(settings, start, database):
        assert isinstance(change, RowChanges)
        for _before, after in change.rows:
            assert after is not None
            decoded.append(
                tuple(
                    v if v is None or f is None else f(v)
                    for v, f in zip(after, converters, strict=True)
                )
            )
    sql.execute("SELECT id, CAST(u AS CHAR), CAST(i6 AS CHAR), CAST(i4 AS CHAR) FROM t ORDER BY id")
    assert decoded == [tuple(r) for r in sql.fetchall()]


def test_snapshot_rows_of_plugin_types_equal_binlog_rows(
    settings: ConnectionSettings, database: str, sql: Any
) -> None:
    """Chunk rows (SQL) and binlog rows share one decoder form, so backfill can mix them."""
    from sparkcdc.model.dialect import ChunkSelect
    from sparkcdc.mysql.admin.catalog import load_schema
    from sparkcdc.mysql.chunks.select import select_connectorx, select_pymysql

    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4)")
    start = _position(settings)
    for i, values in enumerate(PLUGIN_VALUES):
        sql.execute("INSERT INTO t VALUES (%s, %s, %s, %s)", (i, *values))
    binlog_rows = [
        after
        for c in _changes(settings, start, database)
        if isinstance(c, RowChanges)
        for _b, after in c.rows
    ]
    with sql_connection(settings, database) as conn:
        schema = load_schema(conn, database, "t")
        whole = ChunkSelect(schema, "id")
        for select in (select_pymysql, select_connectorx):
            args = (conn, whole) if select is select_pymysql else (conn, settings, whole)
            table = select(*args)  # type: ignore[operator]
            assert [tuple(r.values()) for r in table.to_pylist()] == binlog_rows, select.__name__


def test_a_column_of_an_unknown_type_is_no_poison_pill() -> None:
    from sparkcdc.model.schema import Column

    column = Column.from_mysql("v", "vector", "vector(3)", True, table="db.t")
    assert column.spark_type == "BINARY"


# ------------------------------------------------------ binlog without column metadata


@pytest.fixture
def row_metadata(dev_server: DevServer) -> Iterator[Callable[[str], None]]:
    """Set the server's global binlog_row_metadata; FULL again afterwards."""
    root = dev_server.root_connection()

    def set_mode(mode: str) -> None:
        with root.cursor() as cur:
            cur.execute(f"SET GLOBAL binlog_row_metadata = '{mode}'")

    yield set_mode
    set_mode("FULL")
    root.close()


METADATA_TABLE = (
    "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, big BIGINT UNSIGNED, "
    "l VARCHAR(10) CHARACTER SET latin1, e ENUM('a','b','it''s'), s SET('x','y'), "
    "j JSON, b BLOB, txt TEXT, c CHAR(3) CHARACTER SET utf8mb4, u UUID)"
)
METADATA_ROWS = [
    (3_000_000_000, 18_446_744_073_709_551_615, "café", "it's", "x,y", '{"a": 1}', b"\x00\xff",
     "ünï", "€ab", "123e4567-e89b-12d3-a456-426655440000"),
    (1, 0, None, "a", "", "[]", b"", "", "", None),
]  # fmt: skip


def _decoded_rows(
    settings: ConnectionSettings, start: BinlogPosition, database: str, versions: Any
) -> list[tuple[Any, ...]]:
    end = _position(settings)
    captured = lambda d, t: d == database and t == "t"  # noqa: E731
    out = []
    for change in read_range(settings, next(_ids), start, end, captured, versions):
        if isinstance(change, SchemaChange):
            continue
        assert list(change.columns.names)[:2] == ["id", "big"]
        out.extend(after for _before, after in change.rows if after is not None)
    return out


@pytest.mark.parametrize("mode", ["MINIMAL", "NO_LOG"])
def test_rows_without_column_metadata_decode_exactly_with_the_schema(
    settings: ConnectionSettings,
    database: str,
    sql: Any,
    row_metadata: Callable[[str], None],
    mode: str,
) -> None:
    from sparkcdc.mysql.admin.catalog import load_schema
    from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions

    sql.execute(METADATA_TABLE)
    with sql_connection(settings, database) as conn:
        versions = TableVersions.of([load_schema(conn, database, "t")])

    def write() -> BinlogPosition:
        start = _position(settings)
        sql.execute("DELETE FROM t")
        for row in METADATA_ROWS:
            sql.execute("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
        return start

    full = _decoded_rows(settings, write(), database, None)
    row_metadata(mode)
    start = write()
    assert _decoded_rows(settings, start, database, versions) == full
    assert full[0][:5] == (3_000_000_000, 18_446_744_073_709_551_615, "café", "it's", "x,y")
    with pytest.raises(SourceError, match="no column metadata"):
        _decoded_rows(settings, start, database, None)


def test_a_schema_change_the_versions_do_not_know_stops_rows_without_metadata(
    settings: ConnectionSettings, database: str, sql: Any, row_metadata: Callable[[str], None]
) -> None:
    from sparkcdc.errors import SchemaChangedError
    from sparkcdc.mysql.admin.catalog import load_schema
    from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions

    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, big INT UNSIGNED)")
    with sql_connection(settings, database) as conn:
        versions = TableVersions.of([load_schema(conn, database, "t")])
    row_metadata("MINIMAL")
    start = _position(settings)
    sql.execute("INSERT INTO t VALUES (1, 4000000000)")
    # a rename keeps the column count and types: only the versions can tell the names
    sql.execute("ALTER TABLE t CHANGE big other INT UNSIGNED")
    sql.execute("INSERT INTO t VALUES (2, 4000000001)")
    with pytest.raises(SchemaChangedError, match="changed at binlog position"):
        _decoded_rows(settings, start, database, versions)


@pytest.mark.parametrize("mode", ["MINIMAL", "NO_LOG"])
def test_a_typed_stream_without_column_metadata_follows_a_schema_change_exactly(
    mode: str,
    spark: Any,
    dev_server: DevServer,
    database: str,
    sql: Any,
    row_metadata: Callable[[str], None],
    tmp_path: Any,
) -> None:
    """Rows before the ALTER decode with the schema the first run kept under state.location,
    rows after it with the schema the restarted run reads; equal to the source by the oracle."""
    import random

    from sparkcdc_dev.oracle import compare, replay

    sql.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, n INT UNSIGNED, e ENUM('lo','hi'), "
        "l VARCHAR(8) CHARACTER SET latin1)"
    )
    row_metadata(mode)
    opts = options(
        dev_server,
        database,
        "t",
        **{"server-id": "5520-5524", "state.location": str(tmp_path / "state")},
    )
    runs = AvailableNowRuns(spark, opts, tmp_path / "checkpoint")
    runs.catch_up()  # the first offset: later writes are captured
    rng = random.Random(11)

    def writes(count: int, start_id: int) -> None:
        for i in range(start_id, start_id + count):
            big = rng.randrange(2**31, 2**32)
            sql.execute("INSERT INTO t (id, n, e, l) VALUES (%s, %s, %s, %s)", (i, big, "hi", "é"))
            if i % 3 == 0:
                sql.execute("UPDATE t SET n = n - 1, e = 'lo' WHERE id = %s", (i - 1,))
            if i % 5 == 0:
                sql.execute("DELETE FROM t WHERE id = %s", (i - 2,))

    writes(40, 0)
    sql.execute("ALTER TABLE t ADD COLUMN w INT UNSIGNED NULL AFTER n")
    sql.execute("UPDATE t SET w = 4000000000 WHERE id % 2 = 0")
    writes(40, 100)
    runs.catch_up()
    log = runs.changelog()
    assert any(r["n"] is not None and r["n"] >= 2**31 for r in log)  # unsigned, not negative
    assert {r["l"] for r in log if r["l"] is not None} == {"é"}  # latin1 text, not bytes
    assert {r["e"] for r in log if r["e"] is not None} == {"lo", "hi"}  # labels, not indexes
    assert any(r["w"] == 4_000_000_000 for r in log)
    rows = [{k: v for k, v in r.items() if k not in ("_op_ts",)} for r in log]
    result = replay(rows, ["id"])
    assert result.violations == []
    with dev_server.connection(database) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SELECT * FROM t")
        source = {(r["id"],): r for r in cur.fetchall()}
    assert compare(result.state, source) == []


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_a_session_row_image_without_all_columns_stops_the_range(
    settings: ConnectionSettings, database: str, sql: Any, session: Any, image: str
) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b BLOB)")
    sql.execute("INSERT INTO t VALUES (1, 1, 'x'), (2, 2, 'y')")
    start = _position(settings)
    session.execute(f"SET SESSION binlog_row_image = '{image}'")
    session.execute("UPDATE t SET a = 10 WHERE id = 1")
    with pytest.raises(SourceError) as caught:
        _changes(settings, start, database)
    message = str(caught.value)
    assert f"{database}.t" in message and "at binlog position" in message
    assert "binlog_row_image=MINIMAL or NOBLOB" in message
    assert "SET GLOBAL binlog_row_image='FULL'" in message


_PARTITIONED = (
    "CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
    "(PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE)"
)


@pytest.mark.parametrize(
    ("statement", "clause"),
    [
        ("ALTER TABLE t DROP PARTITION p0", "DROP PARTITION"),
        ("ALTER TABLE t TRUNCATE PARTITION p0", "TRUNCATE PARTITION"),
        ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE swap", "EXCHANGE PARTITION"),
    ],
)
def test_a_partition_ddl_that_changes_rows_without_images_stops_the_range(
    settings: ConnectionSettings, database: str, sql: Any, statement: str, clause: str
) -> None:
    """The server removes (or swaps in) the partition's rows and logs only the statement:
    the range is stopped at it, or, as ddl.row-changes=continue asks, it is delivered as a
    schema change of the table and the rows after it follow."""
    sql.execute(_PARTITIONED)
    sql.execute("CREATE TABLE swap (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1), (101, 1)")
    start = _position(settings)
    sql.execute("INSERT INTO t VALUES (2, 2)")
    sql.execute(statement)
    sql.execute("INSERT INTO t VALUES (102, 2)")
    with sql_connection(settings) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT id FROM `{database}`.t ORDER BY id")
        assert [r[0] for r in cur.fetchall()] == [101, 102]  # the rows are gone at the source
    changes = _changes(settings, start, database)
    assert [type(c).__name__ for c in changes] == ["RowChanges", "SchemaChange", "RowChanges"]
    with pytest.raises(SourceError) as caught:
        list(refuse_row_changing_ddl(changes))
    message = str(caught.value)
    assert f"{database}.t" in message
    assert clause in message
    assert str(changes[1].position) in message
    assert "ddl.row-changes=continue" in message
    assert "new snapshot" in message


def test_a_partition_ddl_that_keeps_the_rows_does_not_stop_the_range(
    settings: ConnectionSettings, database: str, sql: Any
) -> None:
    sql.execute(_PARTITIONED)
    sql.execute("INSERT INTO t VALUES (1, 1), (101, 1)")
    start = _position(settings)
    sql.execute(
        "ALTER TABLE t REORGANIZE PARTITION p1 INTO (PARTITION p1 VALUES LESS THAN (200), "
        "PARTITION p2 VALUES LESS THAN MAXVALUE)"
    )
    sql.execute("ALTER TABLE t REMOVE PARTITIONING")
    sql.execute("INSERT INTO t VALUES (201, 2)")
    changes = list(refuse_row_changing_ddl(_changes(settings, start, database)))
    assert [type(c).__name__ for c in changes] == ["SchemaChange", "SchemaChange", "RowChanges"]


@pytest.mark.parametrize("statement", ["DROP DATABASE `{db}`", "DROP SCHEMA IF EXISTS {db}"])
def test_a_dropped_database_of_captured_tables_stops_the_range(
    settings: ConnectionSettings, database: str, sql: Any, statement: str
) -> None:
    """The server drops the database's tables and logs only the statement: the sink would
    keep their rows without a word. The range stops at it, unless the database holds no
    captured table (or ddl.row-changes=continue, which passes no ``stop_database``)."""
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    start = _position(settings)
    sql.execute("INSERT INTO t VALUES (3, 3)")
    sql.execute(statement.format(db=database))
    end = _position(settings)
    captured = lambda d, t: d == database and t == "t"  # noqa: E731

    def read(databases: frozenset[str] | None) -> list[RowChanges | SchemaChange]:
        stop = None if databases is None else databases.__contains__
        return list(read_range(settings, next(_ids), start, end, captured, stop_database=stop))

    with pytest.raises(SourceError) as caught:
        read(frozenset({database}))
    message = str(caught.value)
    assert f"dropped the database {database}" in message and "at binlog position" in message
    assert "ddl.row-changes=continue" in message and "new snapshot" in message
    for databases in (frozenset({"another_db"}), None):
        changes = read(databases)
        assert [type(c).__name__ for c in changes] == ["RowChanges"]


def test_a_stream_stops_at_a_dropped_partition_or_goes_on_when_asked(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Any
) -> None:
    """Through the streaming source: the default stops the query with the statement; the
    same checkpoint run again with ddl.row-changes=continue delivers every row change."""

    sql.execute(_PARTITIONED)
    opts = options(dev_server, database, "t", **{"server-id": "5530-5534"})
    runs = AvailableNowRuns(spark, opts, tmp_path / "checkpoint")
    runs.catch_up()
    sql.execute("INSERT INTO t VALUES (1, 1), (101, 1)")
    sql.execute("ALTER TABLE t DROP PARTITION p0")
    sql.execute("INSERT INTO t VALUES (102, 2)")
    failure = runs.failure()
    assert "DROP PARTITION" in failure
    assert "ddl.row-changes=continue" in failure
    runs.opts = {**opts, "ddl.row-changes": "continue"}
    runs.catch_up()
    assert [(r["_op"], r["id"]) for r in runs.changelog()] == [
        ("+I", 1),
        ("+I", 101),
        ("+I", 102),
    ]


def test_a_running_stream_stops_at_a_dropped_database_of_its_tables(
    spark: Any, dev_server: DevServer, database: str, sql: Any
) -> None:
    """Through the streaming source, running when the statement comes: the row before it
    is delivered, then the query stops with the statement (it went past it before)."""
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    opts = options(dev_server, database, "t", **{"server-id": "5535-5539"})
    query, batches = start_collecting(spark, opts)
    try:
        sql.execute("INSERT INTO t VALUES (1, 1)")
        wait_for(lambda: len(changelog(batches)) == 1, 60, "the insert")
        sql.execute(f"DROP DATABASE `{database}`")
        with pytest.raises(StreamingQueryException) as caught:
            query.awaitTermination(120)
        failure = str(caught.value)
        assert f"dropped the database {database}" in failure
        assert "ddl.row-changes=continue" in failure
        assert [(r["_op"], r["id"]) for r in changelog(batches)] == [("+I", 1)]
    finally:
        query.stop()


@pytest.mark.parametrize("mode", ["initial", "latest-offset"])
def test_a_query_restarted_after_a_database_of_its_tables_was_dropped_stops_at_the_drop(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Any, mode: str
) -> None:
    """Stopped (after its snapshot, or after a change); a database holding one of its
    tables dropped; started again (the pattern now matches only the other table): the query
    stops at the DROP DATABASE with the message. Before, an ``initial`` query failed with a
    raw KeyError from committing its last batch's offset, which names the vanished table,
    and a ``latest-offset`` query went past the statement: its offsets named no table."""

    other = f"{database}_gone"
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql.execute("INSERT INTO t VALUES (1, 1)")
    sql.execute(f"CREATE DATABASE `{other}`")
    try:
        sql.execute(f"CREATE TABLE `{other}`.u (id INT PRIMARY KEY, v INT)")
        sql.execute(f"INSERT INTO `{other}`.u VALUES (1, 1), (2, 2)")
        # the envelope it starts with (two tables), when one is left
        extra = {"server-id": "5540-5544", "scan.startup.mode": mode, "changelog.shape": "envelope"}
        if mode == "initial":
            extra["state.location"] = str(tmp_path / "state")
        opts = options(dev_server, f"{database}|{other}", "t|u", **extra)
        runs = AvailableNowRuns(spark, opts, tmp_path / "checkpoint")
        runs.catch_up()
        if mode == "latest-offset":
            sql.execute(f"INSERT INTO `{other}`.u VALUES (3, 3)")
            runs.catch_up()
        # the snapshot of both tables, or the insert after the start
        assert sum(map(len, runs.batches.values())) == (3 if mode == "initial" else 1)
        sql.execute(f"DROP DATABASE `{other}`")
        sql.execute("INSERT INTO t VALUES (2, 2)")
        failure = runs.failure()
        assert f"dropped the database {other}" in failure, failure
        assert "ddl.row-changes=continue" in failure
    finally:
        sql.execute(f"DROP DATABASE IF EXISTS `{other}`")


@pytest.mark.parametrize("mode", ["initial", "latest-offset"])
def test_a_table_dropped_while_the_query_was_stopped_reaches_it_or_stops_it(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Any, mode: str
) -> None:
    """A captured table dropped while the query was stopped is in no plan when it starts
    again. Its DROP TABLE is delivered as if the query had run; a row change made to it
    before the drop cannot be (no schema), so the query stops at it, unless
    ddl.row-changes=continue. Before, both passed without a word: the restarted query's
    DDL filter knew only the tables that exist, and its offsets named no table."""

    for name in ("t", "u", "w", "x"):
        sql.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT)")
        sql.execute(f"INSERT INTO {name} VALUES (1, 1)")
    extra = {"server-id": "5545-5549", "scan.startup.mode": mode}
    if mode == "initial":
        extra["state.location"] = str(tmp_path / "state")
    opts = options(dev_server, database, "t|u|w|x", **extra)
    runs = AvailableNowRuns(spark, opts, tmp_path / "c")

    def delivered() -> list[tuple[str, str, str | None]]:
        rows = [r for batch in runs.batches.values() for r in batch]
        # MariaDB logs a DROP TABLE as "DROP TABLE `u` /* generated by server */"
        return [
            (r["table"], r["op"], r["ddl"] and r["ddl"].split("/*")[0].replace("`", "").strip())
            for r in sorted(rows, key=lambda r: r["seq"])
        ]

    runs.catch_up()
    assert len(delivered()) == (4 if mode == "initial" else 0)
    runs.batches.clear()
    # 1. dropped with no change before: the restarted query (t, w) delivers the DROP. x,
    # taken out of the patterns on purpose, is not waited for: its rows pass unread
    sql.execute("DROP TABLE u")
    sql.execute("INSERT INTO x VALUES (2, 2)")
    sql.execute("INSERT INTO t VALUES (2, 2)")
    opts["table-name"] = "t|u|w"
    runs.catch_up()
    assert delivered() == [("u", "ddl", "DROP TABLE u"), ("t", "c", None)]
    runs.batches.clear()
    # 2. changed, then dropped: t alone is left, which changelog.shape=auto would read in
    # the typed shape, under a checkpoint written in the envelope
    sql.execute("INSERT INTO w VALUES (2, 2)")
    sql.execute("DROP TABLE w")
    sql.execute("INSERT INTO t VALUES (3, 3)")
    failure = runs.failure()
    assert "Set changelog.shape=envelope" in failure, failure
    # asked for the typed shape: past w's rows (continue), its DROP has no place in it
    opts.update({"changelog.shape": "typed", "ddl.row-changes": "continue"})
    failure = runs.failure()
    assert "DROP TABLE `w`" in failure and "typed changelog has" in failure, failure
    del opts["ddl.row-changes"]
    # in the envelope: the query cannot deliver the change, it has no schema for w
    opts["changelog.shape"] = "envelope"
    failure = runs.failure()
    assert f"rows of {database}.w changed" in failure, failure
    assert "ddl.row-changes=continue" in failure
    assert runs.batches == {}
    # asked to go on: past the rows, the DROP is delivered
    opts["ddl.row-changes"] = "continue"
    runs.catch_up()
    assert delivered() == [("w", "ddl", "DROP TABLE w"), ("t", "c", None)]


def test_a_table_dropped_mid_snapshot_while_the_query_was_stopped(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Any
) -> None:
    """A table whose snapshot the query left half read is dropped before it starts again:
    its unread chunks are not waited for, its DROP is delivered, and the other table's
    snapshot completes, exactly."""
    for name in ("t", "u"):
        sql.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT)")
        sql.executemany(f"INSERT INTO {name} VALUES (%s, %s)", [(i, i) for i in range(1, 2001)])
    opts = options(
        dev_server,
        database,
        "t|u",
        **{
            "server-id": "5550-5554",
            "scan.startup.mode": "initial",
            "state.location": str(tmp_path / "state"),
            "scan.incremental.snapshot.chunk.size": "200",
            "scan.incremental.snapshot.chunks-per-batch": "4",
            "changelog.shape": "envelope",
        },
    )
    runs = AvailableNowRuns(spark, opts, tmp_path / "c")
    runs.one_batch()  # four of the twenty chunks
    first = [r for batch in runs.batches.values() for r in batch]
    assert 0 < len(first) < 4000
    sql.execute("DROP TABLE u")
    sql.execute("UPDATE t SET v = -v WHERE id % 100 = 0")
    opts["scan.incremental.snapshot.chunks-per-batch"] = "0"  # the rest in one batch
    runs.catch_up()
    rows = sorted(
        (r for batch in runs.batches.values() for r in batch), key=lambda r: (r["seq"], r["op"])
    )
    assert [(r["table"], r["op"]) for r in rows if r["op"] == "ddl"] == [("u", "ddl")]
    # t replayed: every key once, each at its value now
    state: dict[int, int] = {}
    for r in rows:
        if r["table"] == "t" and r["op"] != "ddl":
            image = json.loads(r["after"] or r["before"])
            if r["op"] == "d":
                state.pop(image["id"], None)
            else:
                state[image["id"]] = image["v"]
    with dev_server.connection(database) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, v FROM t")
        assert state == dict(cur.fetchall())
