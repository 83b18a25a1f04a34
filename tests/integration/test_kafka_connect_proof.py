"""Proof that the kafka sink's schema mode is read exactly by Kafka Connect's own reader.

A pipeline writes a table of every MySQL type family (extremes, NULLs, non-ASCII, a key
change, deletes; rows by snapshot and by binlog) as ``debezium-json`` with
``include-schema.enabled``, under a Spark session time zone of Asia/Kolkata. Every key and
value is then converted by ``org.apache.kafka.connect.json.JsonConverter`` (schemas enabled,
the connect-json jar pinned beside the broker's) in a small Java harness
(tests/harness/ConnectJsonRead.java), which prints each field as exact text; the messages
replayed per key must equal the source table, value for value.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pipelines import fresh_database, pipeline_env, source_block

from sparkcdc.model.schema import fraction_digits
from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc_dev.devkafka import DEFAULT_DIR, LIB_DIR, DevKafka
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

DATABASE = "kafka_connect_proof"
HARNESS = Path(__file__).parent.parent / "harness" / "ConnectJsonRead.java"
COLUMNS = {  # name → DDL; the Java type JsonConverter gives for the declared schema
    "flag": "TINYINT(1)",
    "ti": "TINYINT",
    "si": "SMALLINT UNSIGNED",
    "mi": "MEDIUMINT",
    "i": "INT",
    "bi": "BIGINT",
    "ubi": "BIGINT UNSIGNED",
    "d": "DECIMAL(30,10) NOT NULL DEFAULT 0",
    "d2": "DECIMAL(5,2)",
    "db": "DOUBLE",
    "dt": "DATETIME(6)",
    "dt0": "DATETIME",
    "ts": "TIMESTAMP(6) NULL",
    "day": "DATE",
    "tm": "TIME(6)",
    "yr": "YEAR",
    "c": "VARCHAR(40) CHARACTER SET utf8mb4",
    "txt": "TEXT CHARACTER SET utf8mb4",
    "bin": "VARBINARY(16)",
    "e": "ENUM('a','b','ü')",
    "j": "JSON",
    "b1": "BIT(1)",
    "dt3": "DATETIME(3)",  # milliseconds, exact up to year 9999 (no double on the way)
}
SNAPSHOT_ROWS = [
    "(1, 0, -128, 0, -8388608, -2147483648, -9223372036854775808, 0, 0, -999.99, -1.5e300,"
    " '1000-01-01 00:00:00', '1000-01-01 00:00:00', '1970-01-01 00:00:01', '1000-01-01',"
    " '-838:59:59', 1901, '', '', '', 'a', '[]', b'0', '1000-01-01 00:00:00.000')",
    "(2, 1, 127, 65535, 8388607, 2147483647, 9223372036854775807, 18446744073709551615,"
    " 99999999999999999999.9999999999, 999.99, 1e20,"
    " '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59', '2038-01-19 03:14:07.999999',"
    " '9999-12-31', '838:59:59.000001', 2155, 'ü€😀 \"q\" \\\\ \\n', 'ñ', x'00ff10',"
    " 'ü', '{\"k\": [1, \"ü\"]}', b'1', '9999-12-31 23:59:59.002')",
    "(3, 2, -1, 1, 0, 0, 0, 1, -0.0000000001, 0.5, 0.1,"
    " '2024-02-29 12:30:45.5', '2024-02-29 12:30:45', '2024-05-01 12:00:00.120000',"
    " '2024-02-29', '00:00:00.5', 2024, 'x', 'y', x'', 'b', 'null', b'0',"
    " '2024-02-29 12:30:45.123')",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]
BINLOG_STATEMENTS = [
    "INSERT INTO wide VALUES (5, -1, 5, 5, 5, 5, 5, 12345678901234567890,"
    " -12345678901234567890.1234567890, -0.01, 2.5, '2001-02-03 04:05:06.000007',"
    " '2001-02-03 04:05:06', '2001-02-03 04:05:06.7', '2001-02-03', '-00:00:00.000001',"
    " 2001, 'новый', '日本語', x'ff', 'a', '{}', b'1', '1969-12-31 23:59:59.999')",
    "INSERT INTO wide (id, d) VALUES (6, 1)",
    "UPDATE wide SET c = 'changed ✓', d = 0.0000000001, ts = '2030-06-15 08:00:00' WHERE id = 2",
    "UPDATE wide SET id = 30 WHERE id = 3",  # a key change: delete 3, insert 30
    "DELETE FROM wide WHERE id = 1",
    "UPDATE wide SET flag = 127, ubi = 18446744073709551615 WHERE id = 4",
]


def raw_messages(servers: str, topic: str) -> list[str]:
    """Every message of the (one-partition) topic as the text ``key<TAB>value``, untouched."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": uuid.uuid4().hex})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        lines: list[str] = []
        while len(lines) < high:
            msg = consumer.poll(10.0)
            assert msg is not None and msg.error() is None, f"reading {topic} stopped"
            lines.append(f"{msg.key().decode()}\t{msg.value().decode()}")
        return lines
    finally:
        consumer.close()


def _harness(dev_dir: Path) -> list[str]:
    """``java`` command line of the harness, compiled once into the dev dir's cache."""
    classes = dev_dir / "harness-classes"
    classpath = f"{LIB_DIR}/*"
    target = classes / "ConnectJsonRead.class"
    if not target.exists() or target.stat().st_mtime < HARNESS.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-d", str(classes), "-cp", classpath, str(HARNESS)], check=True)
    return ["java", "-cp", f"{classes}{os.pathsep}{classpath}", "ConnectJsonRead"]


def connect_read(dev_dir: Path, lines: list[str]) -> list[dict[str, Any]]:
    run = subprocess.run(
        _harness(dev_dir),
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads(line) for line in run.stdout.splitlines()]


def expected_text(name: str, value: Any) -> Any:
    """A source value as the harness prints what JsonConverter gives for its column."""
    if value is None:
        return None
    ddl = COLUMNS.get(name, "INT")
    if ddl.startswith(("TINYINT(1)", "BIT(1)")):
        true = value not in (0, bytes(1))  # BIT(1) comes as bytes, TINYINT(1) as a number
        return f"Boolean:{'true' if true else 'false'}"
    if ddl.startswith(("TINYINT", "SMALLINT UNSIGNED")):  # int16 (SMALLINT UNSIGNED: INT)
        return f"Short:{value}" if ddl.startswith("TINYINT") else f"Integer:{value}"
    if ddl.startswith(("MEDIUMINT", "INT", "YEAR")):
        return f"Integer:{value}"
    if ddl.startswith("BIGINT UNSIGNED") or ddl.startswith("DECIMAL"):
        return format(Decimal(value), "f")
    if ddl.startswith("BIGINT"):
        return f"Long:{value}"
    if ddl.startswith("DOUBLE"):
        return float(value)
    if ddl.startswith("DATETIME"):  # io.debezium.time.Timestamp (0..3) / MicroTimestamp
        unit = dt.timedelta(milliseconds=1 if fraction_digits(ddl.lower()) <= 3 else 0.001)
        return f"Long:{(value - dt.datetime(1970, 1, 1)) // unit}"
    if ddl.startswith("TIMESTAMP"):  # io.debezium.time.ZonedTimestamp, in UTC
        text = value.strftime("%Y-%m-%dT%H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text + "Z"
    if ddl.startswith("DATE"):  # io.debezium.time.Date
        return f"Integer:{(value - dt.date(1970, 1, 1)).days}"
    if ddl.startswith("TIME"):  # io.debezium.time.MicroTime: signed microseconds
        return f"Long:{value // dt.timedelta(microseconds=1)}"
    if ddl.startswith("VARBINARY"):
        return f"hex:{value.hex()}"
    return value if isinstance(value, str) else value.decode()


def normalized(fields: dict[str, Any]) -> dict[str, Any]:
    """Doubles compare as numbers (Java and Python print them differently)."""
    return {
        k: float(v.partition(":")[2]) if isinstance(v, str) and v.startswith("Double:") else v
        for k, v in fields.items()
    }


# Debezium's MySQL connector (adaptive_time_microseconds, precise)
DEBEZIUM_NAMES: dict[str, str | None] = {
    "ubi": "org.apache.kafka.connect.data.Decimal",
    "d": "org.apache.kafka.connect.data.Decimal",
    "dt": "io.debezium.time.MicroTimestamp",  # DATETIME(6)
    "dt0": "io.debezium.time.Timestamp",  # DATETIME: milliseconds
    "dt3": "io.debezium.time.Timestamp",
    "ts": "io.debezium.time.ZonedTimestamp",
    "day": "io.debezium.time.Date",
    "tm": "io.debezium.time.MicroTime",
    "yr": "io.debezium.time.Year",
    "e": "io.debezium.data.Enum",
    "j": None,  # MariaDB's JSON is LONGTEXT (with a CHECK): a string, as Debezium reads it
}


def assert_declared_as_debezium(conn: Any, lines: list[str]) -> None:
    """Every message's value schema names each column's Debezium type, and declares it
    optional exactly when the source column is nullable (the key never)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, IS_NULLABLE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'wide'",
            (DATABASE,),
        )
        nullable = {name: flag == "YES" for name, flag in cur.fetchall()}
    assert not all(nullable.values()) and any(nullable.values())
    for line in lines:
        schema = json.loads(line.partition("\t")[2])["schema"]
        after = next(f for f in schema["fields"] if f["field"] == "after")
        fields = {f["field"]: f for f in after["fields"]}
        assert {n: f["optional"] for n, f in fields.items()} == nullable
        assert {n: fields[n].get("name") for n in DEBEZIUM_NAMES} == DEBEZIUM_NAMES
    assert fields["e"]["parameters"] == {"allowed": "a,b,ü"}


def test_json_converter_reads_the_schema_mode_exactly(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    servers = DevKafka.from_env().start()
    topic = f"connect_{uuid.uuid4().hex[:8]}"
    conn = fresh_database(server, DATABASE)
    columns = ", ".join(f"{n} {ddl}" for n, ddl in COLUMNS.items())
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"CREATE TABLE wide (id INT PRIMARY KEY, {columns}) CHARACTER SET utf8mb4")
        for row in SNAPSHOT_ROWS:
            cur.execute(f"INSERT INTO wide VALUES {row}")
    text = (
        source_block(server, f"{DATABASE}.wide", "5960-5969")
        + "sink:\n  type: kafka\n"
        + f"  properties.bootstrap.servers: {servers}\n  topic: {topic}\n"
        + "  debezium-json.include-schema.enabled: true\n"
        + f"pipeline:\n  name: connect-proof\n  checkpoint: {tmp_path / 'checkpoint'}\n"
    )
    config = parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        run_pipeline(config, available_now=True, spark=spark)
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            for statement in BINLOG_STATEMENTS:
                cur.execute(statement)
        run_pipeline(config, available_now=True, spark=spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)

    lines = raw_messages(servers, topic)
    assert '"d":18446744073709551615' not in "".join(lines)  # schema mode: base64 bytes
    assert_declared_as_debezium(conn, lines)
    state: dict[str, dict[str, Any]] = {}
    ops = []
    for message in connect_read(DEFAULT_DIR, lines):
        key, value = message["key"]["id"], message["value"]
        ops.append(value["op"])
        if value["op"] == "d":
            assert state.pop(key) == value["before"]
        else:
            state[key] = value["after"]
    assert {"r", "c", "u", "d"} <= set(ops)

    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT * FROM wide ORDER BY id")
        names = [d[0] for d in cur.description]
        source = {
            f"Integer:{row[0]}": {n: expected_text(n, v) for n, v in zip(names, row, strict=True)}
            for row in cur.fetchall()
        }
    assert {k: normalized(v) for k, v in state.items()} == source
