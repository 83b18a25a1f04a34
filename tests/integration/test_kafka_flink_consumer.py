"""Issue 19's proof: Flink SQL, a real independent consumer, reads the Kafka sink's topics exactly.

A pipeline copies a table with every MySQL type family (signed and unsigned integers at their
limits, BIGINT UNSIGNED max, DECIMAL(30,10), FLOAT/DOUBLE, DATE, DATETIME(6), TIMESTAMP(6),
TIME(6), YEAR, text with non-ASCII, binary, ENUM, SET, BIT, JSON, NULLs) and a composite-key
table into Kafka: a snapshot, then binlog changes (inserts, updates, a key change, deletes, a
multi-row UPDATE, an insert deleted again). Flink 1.20 reads each topic with its own
``debezium-json`` / ``canal-json`` format (flink_consumer.py) and the table it ends with must
equal the source table, value by value.

Flink's types are the ones the README tells a Flink user to declare. Normalisation, per Flink
type, of Flink's text (left) and of pymysql's value of the source (right):

| Flink type          | Flink's text →                | source value →                           |
|---------------------|-------------------------------|------------------------------------------|
| TINYINT..BIGINT     | int                           | int                                      |
| DECIMAL(p,s)        | Decimal (exact)               | Decimal (BIGINT UNSIGNED: int → Decimal) |
| FLOAT               | float32 of the text           | float32 of the value (6 digits in MySQL) |
| DOUBLE              | float                         | float                                    |
| DATE                | ISO text                      | ``date.isoformat()``                     |
| TIMESTAMP(6)        | text, 9 fraction digits       | DATETIME as the same text (exact)        |
| TIMESTAMP_LTZ(6)    | UTC text with ``Z``           | TIMESTAMP read with time_zone '+00:00'   |
| STRING              | text                          | text                                     |
| STRING of a TIME    | signed microseconds           | ``CAST(... AS CHAR)``, in microseconds   |
| BYTES               | hex                           | ``bytes.hex()`` (BIT(n>1): its bytes)    |
| BOOLEAN             | ``true`` / ``false``          | BIT(1) / TINYINT(1): 0 false, else true  |

TIME is read as STRING: no Flink type holds MySQL's ±838 hours. It is compared by value here;
its text is checked on its own (``test_time_text_is_the_servers_in_snapshot_and_binlog_rows``).

TINYINT(1) (0, 1, 2, -1, 127, in snapshot and binlog rows) has a table of its own, read as
BOOLEAN; so has TIME's text. A record Flink cannot parse fails the read (the harness never sets
``ignore-parse-errors``, which would turn it into NULLs).

Both timestamp spellings are covered: ``SQL`` (the sink's default, as Flink's: no option on
either side) and ``ISO-8601`` (``<format>.timestamp-format.standard: ISO-8601`` on both sides).
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from flink_consumer import FlinkReadError, flink_rows
from pipelines import fresh_database, pipeline_env, source_block

from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

FORMATS = ("debezium-json", "canal-json")
STANDARDS = ("SQL", "ISO-8601")


def _float32(value: Any) -> float:
    return float(struct.unpack("f", struct.pack("f", float(value)))[0])


def _true(text: str) -> bool:
    return text == "true"


def _bool(value: Any) -> bool:
    return int.from_bytes(value, "big") != 0 if isinstance(value, bytes) else value != 0


def _time_micros(text: str) -> int:
    """A TIME's text (``-838:59:59.000000``, ``12:00:00``) as signed microseconds."""
    sign = -1 if text.startswith("-") else 1
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return sign * (
        (hours * 3600 + minutes * 60 + seconds) * 1_000_000 + int(fraction.ljust(6, "0"))
    )


def _local_text(value: dt.datetime) -> str:
    return f"{value:%Y-%m-%dT%H:%M:%S.%f}000"


@dataclass(frozen=True)
class Column:
    """One source column: its MySQL and Flink types, its values and how both sides compare.

    ``values[i]`` is row ``i + 1``'s SQL literal (NULL past the end); ``flink`` turns Flink's
    text into the compared value, ``source`` pymysql's value of ``select`` (the column itself
    unless given).
    """

    name: str
    mysql: str
    flink_type: str
    values: tuple[str, ...]
    flink: Callable[[str], Any]
    source: Callable[[Any], Any]
    select: str = ""

    def expression(self) -> str:
        return self.select or self.name


@dataclass(frozen=True)
class SourceTable:
    """A source table as the test compares it: its key columns (first), the compared columns."""

    name: str
    key: tuple[Column, ...]
    columns: tuple[Column, ...]

    def all_columns(self) -> tuple[Column, ...]:
        return self.key + self.columns

    def flink_columns(self) -> str:
        """The Flink DDL's column list, e.g. ``id INT, ..., PRIMARY KEY (id) NOT ENFORCED``."""
        columns = ", ".join(f"{c.name} {c.flink_type}" for c in self.all_columns())
        return f"{columns}, PRIMARY KEY ({', '.join(c.name for c in self.key)}) NOT ENFORCED"


def _same(
    name: str, mysql: str, flink_type: str, convert: Callable[[Any], Any], *values: str
) -> Column:
    """A column compared as ``convert`` of either side's value."""
    return Column(name, mysql, flink_type, values, convert, convert)


def _int(name: str, mysql: str, flink_type: str, *values: int) -> Column:
    return _same(name, mysql, flink_type, int, *map(str, values))


def _text(name: str, mysql: str, *values: str) -> Column:
    return _same(name, mysql, "STRING", str, *values)


def _bytes(name: str, mysql: str, *values: str) -> Column:
    return Column(name, mysql, "BYTES", values, str, bytes.hex)


NON_ASCII = "Grüße, 世界 😀 \u2018quotes\u2019"
TRICKY = "a\"b\\\\c\\nd\\te''"  # SQL literal body: a"b\c, newline, d, tab, e'
COLUMNS = (
    _int("ti", "TINYINT", "TINYINT", -128, 127, 0),
    _int("tiu", "TINYINT UNSIGNED", "SMALLINT", 0, 255, 7),
    _int("si", "SMALLINT", "SMALLINT", -32768, 32767, -1),
    _int("siu", "SMALLINT UNSIGNED", "INT", 0, 65535, 1),
    _int("mi", "MEDIUMINT", "INT", -8388608, 8388607, 0),
    _int("miu", "MEDIUMINT UNSIGNED", "INT", 0, 16777215, 42),
    _int("i", "INT", "INT", -2147483648, 2147483647, 0),
    _int("iu", "INT UNSIGNED", "BIGINT", 0, 4294967295, 3),
    _int("bi", "BIGINT", "BIGINT", -9223372036854775808, 9223372036854775807, 0),
    # 2^53 + 1: no double holds it
    _same(
        "biu",
        "BIGINT UNSIGNED",
        "DECIMAL(20, 0)",
        Decimal,
        "0",
        "18446744073709551615",
        "9007199254740993",
    ),
    _same(
        "num",
        "DECIMAL(30,10)",
        "DECIMAL(30, 10)",
        Decimal,
        "-99999999999999999999.9999999999",
        "99999999999999999999.9999999999",
        "-0.0000000001",
    ),
    _same("f", "FLOAT", "FLOAT", _float32, "-3.40282e38", "3.40282e38", "0.1"),
    _same(
        "dbl",
        "DOUBLE",
        "DOUBLE",
        float,
        "-1.7976931348623157e308",
        "1.7976931348623157e308",
        "2.2250738585072014e-308",
    ),
    _same("d", "DATE", "DATE", str, "'1000-01-01'", "'9999-12-31'", "'2024-02-29'"),
    Column(
        "dtm",
        "DATETIME(6)",
        "TIMESTAMP(6)",
        ("'1000-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'", "'2024-02-29 12:34:56.789012'"),
        str,
        _local_text,
    ),
    Column(
        "ts",
        "TIMESTAMP(6) NULL",
        "TIMESTAMP_LTZ(6)",
        ("'1970-01-01 00:00:01'", "'2038-01-19 03:14:07.999999'", "'2024-02-29 12:34:56.789012'"),
        str,
        lambda v: _local_text(v) + "Z",
    ),
    Column(
        "tm",
        "TIME(6)",
        "STRING",
        ("'-838:59:59'", "'838:59:59.000000'", "'-00:00:00.000001'"),
        _time_micros,
        _time_micros,
        "CAST(tm AS CHAR)",
    ),
    _int("y", "YEAR", "INT", 1901, 2155, 2000),
    _text("c", "CHAR(10)", "''", "'ü€😀 a'", "'x'"),
    _text("vc", "VARCHAR(100)", "''", f"'{TRICKY}'", f"'{NON_ASCII}'"),
    _text("tx", "TEXT", "''", f"REPEAT('{NON_ASCII}', 40)", "'plain'"),
    _bytes("bn", "BINARY(4)", "x'00000000'", "x'0001feff'", "x'41'"),
    _bytes("vb", "VARBINARY(16)", "x''", "x'00ff'", "x'c3bc'"),
    _bytes("bl", "BLOB", "x''", "UNHEX(REPEAT('00FF7F80C3', 60))", "x'000102'"),
    _text("en", "ENUM('a','b','ü')", "'a'", "'ü'", "'b'"),
    _text("st", "SET('x','y','z')", "''", "'x,y,z'", "'x,z'"),
    Column("bt1", "BIT(1)", "BOOLEAN", ("0", "1", "1"), _true, _bool),
    _bytes("bt12", "BIT(12)", "b'0'", "b'111111111111'", "b'000000000101'"),
    _text("js", "JSON", "'[]'", """'{"a": [1, 2.5, "ü"], "b": null, "c": {"d": true}}'""", "'1'"),
)
ROWS = 3  # rows 1..3: the minimums, the maximums, ordinary values; row 4: every column NULL
BULK = range(10, 70)  # rows copied from row 3, for the multi-row UPDATE and bulk deletes
LINES = """CREATE TABLE order_lines (order_id INT NOT NULL, line VARCHAR(10) NOT NULL,
  amount DECIMAL(12,2), note VARCHAR(20), PRIMARY KEY (order_id, line))"""
ID = _same("id", "", "INT", int)
TABLES = (
    SourceTable("wide", (ID,), COLUMNS),
    SourceTable(
        "order_lines",
        (_same("order_id", "", "INT", int), _same("line", "", "STRING", str)),
        (_same("amount", "", "DECIMAL(12, 2)", Decimal), _same("note", "", "STRING", str)),
    ),
)


def row_literals(row: int) -> str:
    values = [c.values[row - 1] if row <= len(c.values) else "NULL" for c in COLUMNS]
    return ", ".join(values)


def create_source(conn: Any) -> None:
    """The wide and the composite-key tables, with what the snapshot reads."""
    columns = ", ".join(f"{c.name} {c.mysql}" for c in COLUMNS)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE wide (id INT NOT NULL PRIMARY KEY, {columns}) CHARSET utf8mb4")
        for row in range(1, ROWS + 2):
            cur.execute(f"INSERT INTO wide VALUES ({row}, {row_literals(row)})")
        for row in BULK:
            cur.execute(
                f"INSERT INTO wide SELECT {row}, {', '.join(c.name for c in COLUMNS)} "
                "FROM wide WHERE id = 3"
            )
        cur.execute(LINES)
        cur.execute(
            "INSERT INTO order_lines VALUES (1, 'a', 1.50, 'ü'), (1, 'b', -2.00, NULL), "
            "(2, 'a', 99999.99, 'x'), (3, 'z', NULL, NULL)"
        )


def change_source(conn: Any) -> None:
    """Binlog changes of every kind, after the snapshot."""
    with conn.cursor() as cur:
        for row in (5, 6, 7):  # maximums, NULLs, minimums again under new keys
            cur.execute(f"INSERT INTO wide VALUES ({row}, {row_literals((2, 4, 1)[row - 5])})")
        cur.execute(
            "UPDATE wide SET num = 12345.6789012345, ts = '2001-02-03 04:05:06.000007', "
            f"vc = '{NON_ASCII}', bl = x'ff00', js = '{{}}', bt12 = b'1', bt1 = 0, "
            "tm = '-00:00:01.5', f = NULL WHERE id = 3"
        )
        cur.execute(  # NULLs become values
            "UPDATE wide SET ti = 1, dtm = '2020-01-01 00:00:00.5', c = 'ü', bn = x'01' "
            "WHERE id = 4"
        )
        cur.execute("UPDATE wide SET id = 200 WHERE id = 2")  # a key change
        cur.execute("DELETE FROM wide WHERE id = 1")
        cur.execute(  # one UPDATE of many rows
            "UPDATE wide SET i = i + id, vc = CONCAT(vc, 'ü'), num = num / 3, biu = biu + id "
            "WHERE id BETWEEN 10 AND 99"
        )
        cur.execute("DELETE FROM wide WHERE id BETWEEN 20 AND 25")
        cur.execute(f"INSERT INTO wide VALUES (8, {row_literals(3)})")
        cur.execute("DELETE FROM wide WHERE id = 8")  # inserted and deleted again
        cur.execute("UPDATE order_lines SET line = 'c' WHERE order_id = 1 AND line = 'b'")  # key
        cur.execute("UPDATE order_lines SET amount = amount * 2, note = 'ß' WHERE order_id = 1")
        cur.execute("DELETE FROM order_lines WHERE order_id = 2")
        cur.execute("INSERT INTO order_lines VALUES (4, 'ä', 0.01, '😀')")


def source_rows(conn: Any, table: SourceTable) -> dict[str, dict[str, Any]]:
    """The source table, normalised; TIMESTAMPs read in UTC."""
    expressions = ", ".join(c.expression() for c in table.all_columns())
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {expressions} FROM {table.name}")
        names = [c.name for c in table.all_columns()]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    return normalised(table, rows, "source")


def normalised(
    table: SourceTable, rows: Sequence[dict[str, Any]], side: str
) -> dict[str, dict[str, Any]]:
    """Rows keyed by their primary key's text, each value normalised by its column's ``side``
    function (``source`` or ``flink``); NULL stays None."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        values = {
            c.name: None if row[c.name] is None else getattr(c, side)(row[c.name])
            for c in table.all_columns()
        }
        out["|".join(repr(values[c.name]) for c in table.key)] = values
    return out


def assert_flink_reads_source(
    conn: Any,
    kafka: str,
    database: str,
    value_format: str,
    tables: Sequence[SourceTable],
    options: dict[str, str] | None = None,
) -> None:
    """Each table as Flink reads it from its topic (``database.table``) equals the source.

    The reads run side by side (one JVM each; 2 cores): half the wait of one after the other.
    """
    with ThreadPoolExecutor(len(tables)) as pool:
        reads = [
            pool.submit(
                flink_rows, kafka, f"{database}.{t.name}", value_format, t.flink_columns(), options
            )
            for t in tables
        ]
        for table, read in zip(tables, reads, strict=True):
            got = normalised(table, read.result(), "flink")
            compare(got, source_rows(conn, table), f"{table.name} ({value_format})")


def compare(got: dict[str, dict[str, Any]], want: dict[str, dict[str, Any]], what: str) -> None:
    """Equal tables, or every difference named by key, column and both values."""
    problems = [f"{what}: key {k} missing in Flink's table" for k in want if k not in got]
    problems += [f"{what}: key {k} in Flink's table only: {got[k]}" for k in got if k not in want]
    for key in sorted(set(got) & set(want)):
        for name, value in want[key].items():
            if got[key][name] != value:
                problems.append(
                    f"{what}: key {key}, {name}: Flink {got[key][name]!r}, source {value!r}"
                )
    assert not problems, "\n".join(problems[:40])


def run_kafka_pipeline(
    spark: Any,
    server: DevServer,
    kafka: str,
    database: str,
    tmp_path: Path,
    value_format: str,
    standard: str,
) -> Callable[[], Any]:
    """A pipeline of every table of ``database`` into Kafka; a function that runs it once.

    Each table goes to the sink's default topic, its name (``database.table``): no topic
    mapping, whose option is being renamed to Flink CDC's spelling (issue 19)."""
    sink = [
        "sink:",
        "  type: kafka",
        f"  properties.bootstrap.servers: {kafka}",
        f"  value.format: {value_format}",
    ]
    if standard != "SQL":
        sink.append(f"  {value_format}.timestamp-format.standard: {standard}")
    text = (
        source_block(server, f"{database}.\\.*", "6100-6109")
        + "\n".join(sink)
        + f"\npipeline:\n  name: flink-{value_format}\n  checkpoint: {tmp_path / 'checkpoint'}\n"
    )
    config = parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)
    return lambda: run_pipeline(config, available_now=True, spark=spark)


def flink_options(value_format: str, standard: str) -> dict[str, str]:
    return {} if standard == "SQL" else {f"{value_format}.timestamp-format.standard": standard}


@pytest.fixture(scope="module")
def kafka() -> str:
    """The development broker of $SPARKCDC_DEV_KAFKA_PORT (never stopped here)."""
    return DevKafka.from_env().start()


@contextmanager
def source_database(server: DevServer, prefix: str) -> Iterator[tuple[str, Any]]:
    """A new database named ``prefix`` and a random suffix (so its tables' topics are new
    too) and an autocommit connection to it; dropped afterwards."""
    database = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with closing(fresh_database(server, database)) as conn:
        try:
            yield database, conn
        finally:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE {database}")


CASES = [
    pytest.param(value_format, standard, id=f"{value_format}-{standard}")
    for value_format in FORMATS
    for standard in STANDARDS
]


@pytest.mark.parametrize(("value_format", "standard"), CASES)
def test_flink_reads_every_type_exactly(
    spark: Any,
    server: DevServer,
    kafka: str,
    flink_harness: str,
    tmp_path: Path,
    value_format: str,
    standard: str,
) -> None:
    prefix = f"flink_{value_format.split('-')[0]}_{standard.split('-')[0].lower()}"
    with source_database(server, prefix) as (database, conn):
        run = run_kafka_pipeline(spark, server, kafka, database, tmp_path, value_format, standard)
        create_source(conn)
        assert run().total_rows == ROWS + 1 + len(BULK) + 4  # and order_lines' 4 rows
        change_source(conn)
        assert run().total_rows > 0

        keys = {row["id"] for row in source_rows(conn, TABLES[0]).values()}
        assert {200, 3, 4, 5, 6, 7} <= keys, "the changes happened"
        options = flink_options(value_format, standard)
        assert_flink_reads_source(conn, kafka, database, value_format, TABLES, options)


def copy_values(
    spark: Any,
    server: DevServer,
    kafka: str,
    tmp_path: Path,
    value_format: str,
    table: SourceTable,
    mysql_columns: str,
    values: Sequence[str],
) -> None:
    """``table`` (``id INT`` and ``mysql_columns``) through a pipeline into its topic, and
    Flink's read of it checked: row ``i`` holds ``values[i]`` (an SQL literal, in every
    column) and is read by the snapshot, row ``10 + i`` the same from the binlog."""
    width = len(table.columns)
    with source_database(server, f"flink_{table.name}_{value_format.split('-')[0]}") as (
        database,
        conn,
    ):
        run = run_kafka_pipeline(spark, server, kafka, database, tmp_path, value_format, "SQL")
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {table.name} (id INT PRIMARY KEY, {mysql_columns})")
            for i, value in enumerate(values):
                cur.execute(f"INSERT INTO {table.name} VALUES ({i}, {', '.join([value] * width)})")
            run()
            for i, value in enumerate(values):
                cur.execute(
                    f"INSERT INTO {table.name} VALUES ({10 + i}, {', '.join([value] * width)})"
                )
        run()
        assert_flink_reads_source(conn, kafka, database, value_format, [table])


@pytest.mark.parametrize("value_format", FORMATS)
def test_flink_reads_tinyint1_as_documented(
    spark: Any, server: DevServer, kafka: str, flink_harness: str, tmp_path: Path, value_format: str
) -> None:
    """TINYINT(1) → BOOLEAN, 0 false and anything else true, in snapshot and binlog rows."""
    flags = SourceTable("flags", (ID,), (Column("flag", "", "BOOLEAN", (), _true, _bool),))
    values = ("0", "1", "2", "-1", "127")
    copy_values(spark, server, kafka, tmp_path, value_format, flags, "flag TINYINT(1)", values)


def test_time_text_is_the_servers_in_snapshot_and_binlog_rows(
    spark: Any, server: DevServer, kafka: str, flink_harness: str, tmp_path: Path
) -> None:
    """A Flink user reads TIME as STRING, so its text is its value: it must be the server's
    text (``CAST(t AS CHAR)``: ``[-]HH:MM:SS`` and as many fraction digits as the column has),
    for snapshot and binlog rows alike."""
    times = SourceTable(
        "times",
        (ID,),
        tuple(
            Column(n, "", "STRING", (), str, str, f"CAST({n} AS CHAR)") for n in ("t0", "t3", "t6")
        ),
    )
    values = ("'838:59:59'", "'-838:59:59'", "'00:00:00'", "'12:34:56.5'", "'-00:00:00.000001'")
    copy_values(
        spark,
        server,
        kafka,
        tmp_path,
        "debezium-json",
        times,
        "t0 TIME, t3 TIME(3), t6 TIME(6)",
        values,
    )


def test_an_unreadable_record_fails_the_read_with_flinks_message(
    kafka: str, flink_harness: str
) -> None:
    """The consumer never turns a value it cannot parse into NULL: the read fails instead."""
    topic = f"flink-broken-{uuid.uuid4().hex[:10]}"
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(topic, b'{"before": null, "after": {"id": 1, "ts": "not a time"}, "op": "c"}')
    producer.flush(30)
    with pytest.raises(FlinkReadError) as failure:
        flink_rows(
            kafka, topic, "debezium-json", "id INT, ts TIMESTAMP(6), PRIMARY KEY (id) NOT ENFORCED"
        )
    assert "Corrupt Debezium JSON message" in str(failure.value), str(failure.value)
    assert "Text 'not a time' could not be parsed" in str(failure.value), str(failure.value)
