"""The jdbc sink against the private MariaDB and the private PostgreSQL.

Change frames are built by hand; what the sink wrote is read back with a plain driver
connection (pymysql / psycopg), not through the sink.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pymysql
import pytest

from sparkcdc.errors import ConfigError, SinkError
from sparkcdc.sinks.base import SinkColumn, SinkContext, SinkTable, sink_class
from sparkcdc.sinks.jdbc import JdbcOptions, JdbcSink, JdbcUrl, target_type
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

SINK_DB = "sink_db"
META = "_op STRING, _op_ts TIMESTAMP, _seq BIGINT, _database STRING, _table STRING"
ORDERS_COLUMNS = (
    SinkColumn("id", "BIGINT", nullable=False),
    SinkColumn("name", "STRING"),
    SinkColumn("amount", "DECIMAL(10,2)"),
    SinkColumn("ts", "TIMESTAMP"),
    SinkColumn("d", "DATE"),
    SinkColumn("raw", "BINARY"),
    SinkColumn("flag", "BOOLEAN"),
)
T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


# -- targets ---------------------------------------------------------------------------


@dataclass
class Target:
    """One database the sink writes to, with an independent reader."""

    family: str  # 'mariadb' | 'postgresql'
    url: str
    password: str
    namespace: str  # MySQL database / PostgreSQL schema the tables land in
    connect: Callable[[], Any]  # an autocommit driver connection as the sink's user
    kill: Callable[[JdbcSink], None]  # ends the sink's connection from the server side
    created: list[str] = field(default_factory=list)  # tables to drop after the test
    sinks: list[JdbcSink] = field(default_factory=list)  # to close first (no open locks)

    def ident(self, name: str) -> str:
        q = "`" if self.family == "mariadb" else '"'
        return q + name + q

    def ref(self, name: str) -> str:
        return f"{self.ident(self.namespace)}.{self.ident(name)}"

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
            cur.close()
            return rows
        finally:
            conn.close()

    def rows(self, table: SinkTable) -> list[tuple[Any, ...]]:
        """The target table's rows in sink-column order, sorted by key, values normalised."""
        columns = ", ".join(self.ident(c) for c in table.column_names)
        order = ", ".join(self.ident(k) for k in table.primary_key)
        types = [c.spark_type for c in table.columns]
        return [
            tuple(_normalise(v, t) for v, t in zip(row, types, strict=True))
            for row in self.query(
                f"SELECT {columns} FROM {self.ref(table.short_name)} ORDER BY {order}"
            )
        ]

    def committed(self, pipeline: str, table: SinkTable) -> list[int]:
        return [
            r[0]
            for r in self.query(
                f"SELECT batch_id FROM {self.ref('sparkcdc_commits')} "
                "WHERE pipeline = %s AND sink_table = %s",
                (pipeline, table.name),
            )
        ]

    def table(self, columns: tuple[SinkColumn, ...], key: tuple[str, ...]) -> SinkTable:
        """A sink table with a fresh name (dropped at the end of the test)."""
        name = f"t_{uuid.uuid4().hex[:10]}"
        self.created.append(name)
        return SinkTable(f"app_db.{name}", columns, key, ("app_db.src",))


def _normalise(value: Any, spark_type: str) -> Any:
    """Driver values in one shape: booleans as bool, instants as naive UTC, bytes as bytes."""
    if value is None:
        return None
    if spark_type == "BOOLEAN":
        return bool(value)
    if spark_type == "TIMESTAMP" and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if spark_type == "BINARY":
        return bytes(value)
    return value


@pytest.fixture(scope="module")
def postgres() -> DevPostgres:
    server = DevPostgres.from_env()
    server.start()
    return server


@pytest.fixture(scope="module")
def mariadb() -> DevServer:
    server = DevServer.from_env()
    server.start()
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {SINK_DB} CHARACTER SET utf8mb4")
        for host in ("127.0.0.1", "localhost"):
            cur.execute(f"GRANT ALL PRIVILEGES ON {SINK_DB}.* TO 'cdc'@'{host}'")
    return server


def _pg_target(server: DevPostgres) -> Target:
    s = server.settings

    def kill(sink: JdbcSink) -> None:
        sink_conn: Any = sink._conn
        pid = sink_conn.info.backend_pid
        with server.superuser_connection() as conn:
            # waits (up to 5 s) until the backend is gone
            conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))

    return Target(
        "postgresql",
        f"jdbc:postgresql://{s.host}:{s.port}/{s.database}",
        s.password,
        "public",
        server.connection,
        kill,
    )


def _mariadb_target(server: DevServer) -> Target:
    s = server.settings

    def kill(sink: JdbcSink) -> None:
        sink_conn: Any = sink._conn
        thread_id = sink_conn.thread_id()
        with server.root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"KILL CONNECTION {int(thread_id)}")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.processlist WHERE id = %s",
                    (thread_id,),
                )
                if cur.fetchone()[0] == 0:
                    return
                time.sleep(0.05)
            raise AssertionError(f"connection {thread_id} still alive after KILL")

    return Target(
        "mariadb",
        f"jdbc:mariadb://{s.host}:{s.port}/{SINK_DB}",
        s.password,
        SINK_DB,
        lambda: server.connection(SINK_DB),
        kill,
    )


@pytest.fixture(params=["mariadb", "postgresql"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "postgresql":
        t = _pg_target(request.getfixturevalue("postgres"))
    else:
        t = _mariadb_target(request.getfixturevalue("mariadb"))
    yield t
    for sink in t.sinks:
        sink.close()
    for name in t.created:
        t.query(f"DROP TABLE IF EXISTS {t.ref(name)}")


def make_sink(spark: Any, target: Target, pipeline: str | None = None, **extra: Any) -> JdbcSink:
    options = JdbcOptions.model_validate(
        {"type": "jdbc", "url": target.url, "username": "cdc", "password": target.password} | extra
    )
    context = SinkContext(pipeline or f"p_{uuid.uuid4().hex[:8]}", "/nonexistent/checkpoint")
    sink = JdbcSink(options, spark, context)
    target.sinks.append(sink)
    return sink


def orders_frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """A change frame of the orders columns; each row is (op, seq, id, name, amount, ...)."""
    full = []
    for op, seq, *values in rows:
        values += [None] * (len(ORDERS_COLUMNS) - len(values))
        full.append((op, None, seq, "app_db", "src", *values))
    return spark.createDataFrame(
        full,
        f"{META}, id BIGINT, name STRING, amount DECIMAL(10,2), ts TIMESTAMP, d DATE, "
        "raw BINARY, flag BOOLEAN",
    )


def expected(*rows: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Rows as the reader returns them: padded with NULLs, instants as naive UTC."""
    out = []
    for row in rows:
        padded = list(row) + [None] * (len(ORDERS_COLUMNS) - len(row))
        if padded[3] is not None:
            padded[3] = padded[3].astimezone(UTC).replace(tzinfo=None)
        out.append(tuple(padded))
    return sorted(out, key=lambda r: r[0])


# -- behaviour -------------------------------------------------------------------------


def test_registered_under_jdbc() -> None:
    assert sink_class("jdbc") is JdbcSink


def test_inserts_updates_and_deletes(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    one = (1, "ann", Decimal("10.50"), T0, date(2024, 1, 31), b"\x00\xff", True)
    two = (2, "bob", Decimal("-0.01"), T0 + timedelta(days=1), date(1999, 12, 31), b"", False)
    three = (3, "cy ☃", Decimal("99999999.99"))
    sink.write(table, orders_frame(spark, [("+I", 1, *one), ("+I", 2, *two), ("+I", 3, *three)]), 0)
    assert target.rows(table) == expected(one, two, three)

    one_b = (1, "ann b", Decimal("11.00"), T0, date(2024, 1, 31), None, None)
    frame = orders_frame(
        spark,
        [
            ("-U", 10, *one),
            ("+U", 10, *one_b),
            ("-D", 11, *two),
            ("+I", 12, 4, "dee"),
        ],
    )
    sink.write(table, frame, 1)
    assert target.rows(table) == expected(one_b, three, (4, "dee"))
    assert target.committed(sink.context.pipeline_name, table) == [1]


def test_key_changing_update(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 3, "old"), ("+I", 2, 5, "other")]), 0)
    # the update moves the row from key 3 to key 30: both halves share their _seq
    frame = orders_frame(spark, [("-U", 7, 3, "old"), ("+U", 7, 30, "new")])
    sink.write(table, frame, 1)
    assert target.rows(table) == expected((5, "other"), (30, "new"))


def test_latest_change_of_a_key_wins(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 7, "seven")]), 0)
    frame = orders_frame(
        spark,
        [  # deliberately out of order: _seq decides, not the row order
            ("+U", 12, 5, "v3"),
            ("+I", 10, 5, "v1"),
            ("-U", 11, 5, "v1"),
            ("+U", 11, 5, "v2"),
            ("-U", 12, 5, "v2"),
            ("+I", 20, 6, "gone soon"),
            ("-D", 21, 6, "gone soon"),
            ("-D", 30, 7, "seven"),
            ("+I", 31, 7, "seven again"),
        ],
    )
    sink.write(table, frame, 1)
    assert target.rows(table) == expected((5, "v3"), (7, "seven again"))


def test_replayed_and_older_batches_are_skipped(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 1, "first")]), 5)
    assert target.rows(table) == expected((1, "first"))

    # the same batch id with other content (it could not differ in a real replay: the
    # difference proves that the second write was skipped, not re-applied)
    sink.write(table, orders_frame(spark, [("+U", 2, 1, "changed"), ("+I", 3, 2, "x")]), 5)
    assert target.rows(table) == expected((1, "first"))
    # a lower id after a higher one
    sink.write(table, orders_frame(spark, [("-D", 4, 1, "first")]), 4)
    assert target.rows(table) == expected((1, "first"))
    assert target.committed(sink.context.pipeline_name, table) == [5]

    # the next batch id applies
    sink.write(table, orders_frame(spark, [("+U", 5, 1, "changed")]), 6)
    assert target.rows(table) == expected((1, "changed"))
    assert target.committed(sink.context.pipeline_name, table) == [6]

    # another pipeline writing the same table keeps its own batch ids
    other = make_sink(spark, target)
    other.open([table])
    other.write(table, orders_frame(spark, [("+I", 1, 9, "nine")]), 0)
    assert target.rows(table) == expected((1, "changed"), (9, "nine"))


def test_a_restarted_sink_skips_what_it_committed(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    first = make_sink(spark, target, pipeline="restart-me-" + uuid.uuid4().hex[:6])
    first.open([table])
    first.write(table, orders_frame(spark, [("+I", 1, 1, "a")]), 0)
    first.close()
    second = make_sink(spark, target, pipeline=first.context.pipeline_name)
    second.open([table])  # the table exists now: reused as it is
    second.write(table, orders_frame(spark, [("+I", 1, 2, "b")]), 0)  # replay of batch 0
    second.write(table, orders_frame(spark, [("+I", 2, 3, "c")]), 1)
    assert target.rows(table) == expected((1, "a"), (3, "c"))


def test_composite_primary_key(spark: Any, target: Target) -> None:
    columns = (
        SinkColumn("tenant", "STRING", nullable=False),
        SinkColumn("id", "INT", nullable=False),
        SinkColumn("qty", "SMALLINT"),
    )
    table = target.table(columns, ("tenant", "id"))
    sink = make_sink(spark, target)
    sink.open([table])

    def frame(rows: list[tuple[Any, ...]]) -> Any:
        return spark.createDataFrame(
            [(op, None, seq, "app_db", "src", *values) for op, seq, *values in rows],
            f"{META}, tenant STRING, id INT, qty SMALLINT",
        )

    sink.write(
        table,
        frame([("+I", 1, "a", 1, 10), ("+I", 2, "a", 2, 20), ("+I", 3, "b", 1, 30)]),
        0,
    )
    assert target.rows(table) == [("a", 1, 10), ("a", 2, 20), ("b", 1, 30)]
    sink.write(
        table,
        frame(
            [
                ("-U", 4, "a", 1, 10),
                ("+U", 4, "a", 1, 11),
                ("-D", 5, "a", 2, 20),
                ("-U", 6, "b", 1, 30),  # one key component changes
                ("+U", 6, "c", 1, 30),
                ("+I", 7, "A", 1, 1),  # differs from 'a' only by case: another key
            ]
        ),
        1,
    )
    assert target.rows(table) == sorted([("A", 1, 1), ("a", 1, 11), ("c", 1, 30)])


ALL_TYPES = (
    SinkColumn("k", "BIGINT", nullable=False),
    SinkColumn("b", "BOOLEAN"),
    SinkColumn("i8", "TINYINT"),
    SinkColumn("i16", "SMALLINT"),
    SinkColumn("i32", "INT"),
    SinkColumn("i64", "BIGINT"),
    SinkColumn("f32", "FLOAT"),
    SinkColumn("f64", "DOUBLE"),
    SinkColumn("dec", "DECIMAL(38,10)"),
    SinkColumn("s", "STRING"),
    SinkColumn("bin", "BINARY"),
    SinkColumn("d", "DATE"),
    SinkColumn("ts", "TIMESTAMP"),
    SinkColumn("ntz", "TIMESTAMP_NTZ"),
)


def test_every_type_round_trips(spark: Any, target: Target) -> None:
    table = target.table(ALL_TYPES, ("k",))
    sink = make_sink(spark, target)
    sink.open([table])
    east = timezone(timedelta(hours=5, minutes=30))
    full = (
        1,
        True,
        -128,
        -32768,
        -(2**31),
        2**63 - 1,
        1.5,
        -0.1,
        Decimal("1234567890123456789012345678.0123456789"),
        "ünïcødé 😀 'quote' \\ back",
        bytes(range(256)),
        date(1000, 1, 1),
        datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=east),
        datetime(9999, 12, 31, 23, 59, 59, 999999),
    )
    nulls = (2, *([None] * (len(ALL_TYPES) - 1)))
    frame = spark.createDataFrame(
        [("+I", None, 1, "app_db", "src", *full), ("+I", None, 2, "app_db", "src", *nulls)],
        f"{META}, {table.spark_ddl().replace(' NOT NULL', '')}",
    )
    sink.write(table, frame, 0)
    want = list(full)
    want[12] = datetime(2024, 2, 29, 18, 29, 59, 999999)  # the same instant in UTC
    assert target.rows(table) == [tuple(want), nulls]


def test_lost_connection_mid_write_commits_nothing(
    spark: Any, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]), 0)
    # a connection the server closed between batches is replaced without a fuss
    target.kill(sink)
    sink.write(table, orders_frame(spark, [("+I", 3, 3, "c")]), 1)
    assert target.rows(table) == expected((1, "a"), (2, "b"), (3, "c"))

    batch = orders_frame(spark, [("-D", 4, 1, "a"), ("+U", 5, 2, "b2"), ("+I", 6, 4, "d")])
    upsert = sink._upsert_rows

    def killed_after_the_deletes(*args: Any) -> None:
        target.kill(sink)
        upsert(*args)

    monkeypatch.setattr(sink, "_upsert_rows", killed_after_the_deletes)
    with pytest.raises(SinkError) as raised:
        sink.write(table, batch, 2)
    message = str(raised.value)
    assert "batch 2 of sink table app_db." in message
    assert "Nothing was committed for this batch" in message
    assert "restart of the pipeline replays it" in message
    # the delete of key 1 was rolled back with the rest
    assert target.rows(table) == expected((1, "a"), (2, "b"), (3, "c"))
    assert target.committed(sink.context.pipeline_name, table) == [1]

    monkeypatch.undo()
    sink.write(table, batch, 2)  # the replay, on a new connection
    assert target.rows(table) == expected((2, "b2"), (3, "c"), (4, "d"))
    assert target.committed(sink.context.pipeline_name, table) == [2]


def test_existing_tables_are_checked(spark: Any, target: Target) -> None:
    wrong_key = target.table(ORDERS_COLUMNS[:2], ("id",))
    target.query(f"CREATE TABLE {target.ref(wrong_key.short_name)} (id BIGINT, name TEXT)")
    sink = make_sink(spark, target)
    with pytest.raises(SinkError, match=r"has primary key \(none\).*keyed by \(id\)"):
        sink.open([wrong_key])

    narrow = target.table(ORDERS_COLUMNS[:2], ("id",))
    target.query(f"CREATE TABLE {target.ref(narrow.short_name)} (id BIGINT PRIMARY KEY)")
    with pytest.raises(SinkError, match=r"lacks column\(s\) name"):
        sink.open([narrow])

    missing = target.table(ORDERS_COLUMNS[:2], ("id",))
    no_create = make_sink(spark, target, **{"table.create": False})
    with pytest.raises(SinkError, match=r"does not exist.*table\.create: true"):
        no_create.open([missing])


# -- appends and staging ---------------------------------------------------------------

SNAPSHOT = [("+I", 1, k, f"n{k}") for k in range(1, 6)]
BATCH_ONE = [("-U", 10, 2, "n2"), ("+U", 10, 2, "two"), ("-D", 11, 3, "n3"), ("+I", 12, 6, "six")]
AFTER_BATCH_ONE = expected((1, "n1"), (2, "two"), (4, "n4"), (5, "n5"), (6, "six"))


def staging_tables(target: Target) -> list[str]:
    return [
        r[0]
        for r in target.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name LIKE 'sparkcdc\\_stage\\_%%'",
            (target.namespace,),
        )
    ]


def test_append_then_write_in_one_batch(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    assert JdbcSink.appends
    assert sink.append(table, orders_frame(spark, SNAPSHOT), 1)
    assert sink.write(table, orders_frame(spark, BATCH_ONE), 1)
    assert target.rows(table) == AFTER_BATCH_ONE
    assert target.committed(sink.context.writer_id, table) == [1]
    assert target.committed(sink.context.writer_id + "/append", table) == [1]
    assert staging_tables(target) == []


def test_replayed_append_and_write_are_skipped(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    sink.append(table, orders_frame(spark, SNAPSHOT), 1)
    sink.write(table, orders_frame(spark, BATCH_ONE), 1)
    # a restarted run replays batch 1 (other content proves a skip, not a re-apply)
    again = make_sink(spark, target, pipeline=sink.context.pipeline_name)
    assert not again.append(table, orders_frame(spark, [("+I", 1, 9, "nine")]), 1)
    assert not again.write(table, orders_frame(spark, [("-D", 20, 1, "n1")]), 1)
    assert target.rows(table) == AFTER_BATCH_ONE


def test_crash_between_append_and_write(spark: Any, target: Target) -> None:
    table = target.table(ORDERS_COLUMNS, ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    sink.append(table, orders_frame(spark, SNAPSHOT), 1)  # ... and the process dies
    again = make_sink(spark, target, pipeline=sink.context.pipeline_name)
    assert not again.append(table, orders_frame(spark, SNAPSHOT), 1)
    assert again.write(table, orders_frame(spark, BATCH_ONE), 1)
    assert target.rows(table) == AFTER_BATCH_ONE


def test_partitions_load_in_parallel_without_collect(
    spark: Any, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every Spark partition loads its own rows; nothing goes through the driver, and a
    staging table a crash left behind is dropped and refilled."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    table = target.table(ORDERS_COLUMNS[:2], ("id",))
    sink = make_sink(spark, target)
    sink.open([table])
    rows, partitions = 20_000, 8

    def frame(op: str, seq: int, keys: Any) -> Any:
        return keys.repartition(partitions).select(
            F.lit(op).alias("_op"),
            F.lit(None).cast("timestamp").alias("_op_ts"),
            F.lit(seq).cast("bigint").alias("_seq"),
            F.lit("app_db").alias("_database"),
            F.lit("src").alias("_table"),
            F.col("id"),
            F.concat(F.lit(f"{op}-"), F.col("id").cast("string")).alias("name"),
        )

    def no_collect(*_: Any, **__: Any) -> Any:
        raise AssertionError("the batch's rows were collected to the driver")

    for name in ("toArrow", "toPandas", "toLocalIterator"):
        monkeypatch.setattr(DataFrame, name, no_collect)
    loaded: list[tuple[int, ...]] = []
    load = sink._load

    def counting_load(*args: Any) -> Any:
        per_partition = load(*args)
        loaded.append(per_partition)
        return per_partition

    monkeypatch.setattr(sink, "_load", counting_load)

    assert sink.append(table, frame("+I", 1, spark.range(1, rows + 1)), 1)
    # a leftover staging table of batch 2's write, with a stray row of a key never written
    leftover = sink._staging_ref(sink.context.writer_id, table, 2, append=False)
    target.query(
        f"CREATE TABLE {leftover} AS SELECT id, name, FALSE AS _deleted FROM "
        f"{target.ref(table.short_name)} WHERE id = 1"
    )
    target.query(f"UPDATE {leftover} SET id = -5")
    updates = spark.range(1, rows + 1, 2)  # odd keys
    assert sink.write(
        table, frame("+U", 2, updates).unionByName(frame("+I", 2, spark.range(0, 1))), 2
    )
    monkeypatch.undo()

    # the append loaded from its 8 partitions (the write from the partitions its final
    # states have after the shuffle, which Spark's AQE coalesces for a batch this small)
    appended, written = loaded
    assert len([c for c in appended if c]) == partitions
    assert (sum(appended), sum(written)) == (rows, rows // 2 + 1)
    got = dict(target.query(f"SELECT id, name FROM {target.ref(table.short_name)}"))
    assert len(got) == rows + 1 and -5 not in got
    assert got[0] == "+I-0" and got[1] == "+U-1" and got[2] == "+I-2" and got[rows] == "+I-20000"
    assert staging_tables(target) == []


# -- errors ----------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("scheme", ["mysql", "mariadb", "postgresql"])
def test_unreachable_target_fails_fast_without_the_password(spark: Any, scheme: str) -> None:
    port = _closed_port()
    secret = "s3cret-never-shown"
    options = JdbcOptions.model_validate(
        {
            "type": "jdbc",
            "url": f"jdbc:{scheme}://127.0.0.1:{port}/{SINK_DB}",
            "username": "cdc",
            "password": secret,
        }
    )
    sink = JdbcSink(options, spark, SinkContext("p", "/nonexistent"))
    started = time.monotonic()
    with pytest.raises(SinkError) as raised:
        sink.open([SinkTable("a.t", ORDERS_COLUMNS, ("id",), ("a.t",))])
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert f"jdbc:{scheme}://127.0.0.1:{port}/{SINK_DB} is not reachable" in message
    assert "Check that the server runs" in message
    assert secret not in message
    assert secret not in repr(options)


def test_wrong_password_is_not_in_the_message(spark: Any, target: Target) -> None:
    secret = "s3cret-but-wrong"
    sink = make_sink(spark, target, password=secret)
    with pytest.raises(SinkError, match="is not reachable as user cdc") as raised:
        sink.open([])
    assert secret not in str(raised.value)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("jdbc:oracle:thin:@//db:1521/x", "does not support URL scheme 'jdbc:oracle'"),
        ("jdbc:sqlserver://db;databaseName=x", "does not support URL scheme 'jdbc:sqlserver'"),
        ("mysql://db:3306/x", "a JDBC URL starts with 'jdbc:'"),
        ("jdbc:mysql://cdc:s3cret@db:3306/x", "put the credentials in the sink's 'username'"),
        ("jdbc:mysql://db/x?password=s3cret&useSSL=false", "not supported (got password, useSSL)"),
        ("jdbc:postgresql://db:54x/x", "numeric port"),
        ("jdbc:postgresql://db:5432/", "a database name"),
        ("jdbc:mysql://db1,db2:3306/x", "one host"),
    ],
)
def test_bad_urls_are_config_errors(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        JdbcOptions.model_validate({"type": "jdbc", "url": url, "password": "s3cret"})
    message = str(raised.value)
    assert says in message
    assert message.startswith("sink.url: ")
    assert "s3cret" not in message
    if "scheme" in says:
        assert "jdbc:mysql://host:port/database" in message
        assert "jdbc:mariadb://host:port/database" in message
        assert "jdbc:postgresql://host:port/database" in message


def test_schema_option_is_for_postgresql_only() -> None:
    with pytest.raises(ConfigError, match="PostgreSQL targets only"):
        JdbcOptions.model_validate({"type": "jdbc", "url": "jdbc:mysql://h/db", "schema": "s"})
    options = JdbcOptions.model_validate(
        {"type": "jdbc", "url": "jdbc:postgresql://h/db", "schema": "cdc"}
    )
    assert options.namespace == "cdc"
    assert JdbcUrl.parse("jdbc:postgresql://h/db").port == 5432


# -- type mapping ----------------------------------------------------------------------

TYPE_CASES = [
    # Spark DDL type     MySQL / MariaDB      PostgreSQL
    ("BOOLEAN", "BOOLEAN", "boolean"),
    ("TINYINT", "TINYINT", "smallint"),
    ("SMALLINT", "SMALLINT", "smallint"),
    ("INT", "INT", "integer"),
    ("INTEGER", "INT", "integer"),
    ("BIGINT", "BIGINT", "bigint"),
    ("FLOAT", "FLOAT", "real"),
    ("DOUBLE", "DOUBLE", "double precision"),
    ("DECIMAL(10,2)", "DECIMAL(10,2)", "numeric(10,2)"),
    ("decimal(38, 0)", "DECIMAL(38,0)", "numeric(38,0)"),
    ("DECIMAL", "DECIMAL(10,0)", "numeric(10,0)"),
    ("STRING", "LONGTEXT", "text"),
    ("BINARY", "LONGBLOB", "bytea"),
    ("DATE", "DATE", "date"),
    ("TIMESTAMP", "DATETIME(6)", "timestamp(6) with time zone"),
    ("TIMESTAMP_NTZ", "DATETIME(6)", "timestamp(6) without time zone"),
]
KEY_CASES = [
    ("STRING", "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "text"),
    ("BINARY", "VARBINARY(255)", "bytea"),
    ("BIGINT", "BIGINT", "bigint"),
]


@pytest.mark.parametrize(("spark_type", "mysql", "postgresql"), TYPE_CASES)
def test_type_mapping(spark_type: str, mysql: str, postgresql: str) -> None:
    assert target_type(spark_type, "mysql") == mysql
    assert target_type(spark_type, "postgresql") == postgresql


@pytest.mark.parametrize(("spark_type", "mysql", "postgresql"), KEY_CASES)
def test_key_type_mapping(spark_type: str, mysql: str, postgresql: str) -> None:
    assert target_type(spark_type, "mysql", key=True) == mysql
    assert target_type(spark_type, "postgresql", key=True) == postgresql


@pytest.mark.parametrize("spark_type", ["ARRAY<INT>", "MAP<STRING,INT>", "STRUCT<a:INT>"])
def test_unsupported_types_say_what_to_do(spark_type: str) -> None:
    with pytest.raises(SinkError, match=r"app\.t\.c has Spark type .*Cast it in a transform"):
        target_type(spark_type, "postgresql", where="app.t.c")


def test_pymysql_batches_the_staging_load() -> None:
    """pymysql's executemany turns only this INSERT shape into multi-row INSERTs."""
    from sparkcdc.sinks.jdbc.mysql import MySqlDialect

    sql = MySqlDialect().insert_values("`db`.`t%`", ("id", "name"))
    assert pymysql.cursors.RE_INSERT_VALUES.match(sql), sql
    assert "`t%%`" in sql  # run with parameters


def test_mysql_gets_instants_as_utc_wall_time() -> None:
    """MySQL's DATETIME has no zone: an aware value is shifted to UTC, not just stripped."""
    from sparkcdc.sinks.jdbc.mysql import MySqlDialect

    convert = MySqlDialect().converter("TIMESTAMP")
    assert convert is not None
    east = timezone(timedelta(hours=5, minutes=30))
    assert convert(datetime(2024, 1, 1, 3, 0, tzinfo=east)) == datetime(2023, 12, 31, 21, 30)
    assert convert(None) is None
    assert MySqlDialect().converter("TIMESTAMP_NTZ") is None
