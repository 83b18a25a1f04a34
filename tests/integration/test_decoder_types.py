"""Decoder vs server, table-driven (DESIGN.md §8): write values of every column type through
SQL, decode the binlog file from the server's datadir, compare with what SELECT returns."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from tests.harness.binlog_file import split_binlog_file

from sparkcdc.model.dialect import ChunkSelect
from sparkcdc.model.events import RowChanges, RowsKind
from sparkcdc.model.position import BinlogPosition, binlog_file_number
from sparkcdc.mysql.admin.catalog import load_schema
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.charmaps import TABLES
from sparkcdc.mysql.binlog.decoded_events import RowsEvent
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.chunks import textrows
from sparkcdc.mysql.chunks.select import select_pymysql, select_text
from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EVENT_HEADER_SIZE, FIRST_EVENT_POS
from sparkcdc.spark.changelog.tables import TablesBuilder
from sparkcdc.spark.changelog.typed import TypedChangelogBuilder
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Case:
    ddl: str
    values: tuple[str, ...]
    sql_mode: str | None = None  # e.g. '' to allow zero dates

    def __str__(self) -> str:
        return self.ddl


def _fsp_cases(base: str, values: tuple[str, ...]) -> list[Case]:
    return [Case(f"{base}({n})" if n else base, values) for n in range(7)]


CASES: list[Case] = [
    Case("TINYINT", ("-128", "127", "0", "NULL")),
    Case("TINYINT UNSIGNED", ("0", "255", "NULL")),
    Case("TINYINT(1)", ("0", "1", "2", "-1", "-128", "NULL")),  # BOOLEAN: 0 → false, else true
    Case("SMALLINT", ("-32768", "32767", "NULL")),
    Case("SMALLINT UNSIGNED", ("0", "65535")),
    Case("MEDIUMINT", ("-8388608", "8388607", "-1", "NULL")),
    Case("MEDIUMINT UNSIGNED", ("0", "16777215")),
    Case("INT", ("-2147483648", "2147483647", "NULL")),
    Case("INT UNSIGNED", ("0", "4294967295")),
    Case("BIGINT", ("-9223372036854775808", "9223372036854775807", "NULL")),
    Case("BIGINT UNSIGNED", ("0", "18446744073709551615", "NULL")),
    Case("DECIMAL(5,2)", ("-999.99", "999.99", "0", "-0.01", "1.5", "NULL")),
    Case("DECIMAL(10,0)", ("-9999999999", "1234567890", "0")),
    Case(
        "DECIMAL(38,10)",
        (
            "-1234567890123456789012345678.0123456789",
            "9999999999999999999999999999.9999999999",
            "0.0000000001",
            "NULL",
        ),
    ),
    Case(
        "DECIMAL(65,30)",
        (
            "-12345678901234567890123456789012345.123456789012345678901234567890",
            "99999999999999999999999999999999999.999999999999999999999999999999",
            "0.000000000000000000000000000001",
        ),
    ),
    Case("FLOAT", ("1.1", "-3.4e38", "0", "1e-30", "NULL")),
    Case("DOUBLE", ("1.7976931348623157e308", "-2.2250738585072014e-308", "0.1", "NULL")),
    Case("BIT(1)", ("b'0'", "b'1'", "NULL")),
    Case("BIT(10)", ("b'1010101010'", "b'1'", "0")),
    Case("BIT(64)", ("b'" + "1" * 64 + "'", "0", "b'1010'")),
    Case("DATE", ("'1000-01-01'", "'9999-12-31'", "'2024-02-29'", "NULL")),
    Case("DATE", ("'0000-00-00'", "'2020-00-15'", "'2020-05-00'", "'2021-01-01'"), sql_mode=""),
    *_fsp_cases(
        "TIME",
        (
            "'-838:59:59'",
            "'838:59:59'",
            "'00:00:00'",
            "'-00:00:01.5'",
            "'-12:34:56.123456'",
            "'01:02:03.654321'",
            "NULL",
        ),
    ),
    *_fsp_cases(
        "DATETIME",
        ("'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'", "'2024-02-29 13:14:15.123456'", "NULL"),
    ),
    Case(
        "DATETIME(6)",
        ("'0000-00-00 00:00:00'", "'2020-00-00 10:00:00'", "'2020-01-01 00:00:00.000001'"),
        sql_mode="",
    ),
    *[
        Case(
            f"TIMESTAMP({n}) NULL" if n else "TIMESTAMP NULL",
            (
                "'1970-01-01 00:00:01'",
                "'2038-01-19 03:14:07'",
                "'2024-02-29 13:14:15.654321'",
                "NULL",
            ),
        )
        for n in range(7)
    ],
    Case("TIMESTAMP(3) NULL", ("'0000-00-00 00:00:00'", "'2000-01-01 00:00:00.5'"), sql_mode=""),
    Case("YEAR", ("1901", "2155", "0000", "2024", "NULL")),
    Case("CHAR(10)", ("'abc'", "'日本語🎉'", "''", "'trail  '", "NULL")),
    Case("CHAR(255)", ("REPEAT('é', 255)", "'x'")),
    Case("VARCHAR(10)", ("'日本語🎉'", "''", "' lead'", "NULL")),
    Case("VARCHAR(300)", ("REPEAT('🎉', 300)", "'short'")),
    Case("VARCHAR(20) CHARACTER SET utf8mb3", ("'日本語'", "'abc'")),
    Case("TINYTEXT", ("'日本語🎉'", "''", "NULL")),
    Case("TEXT", ("REPEAT('ab', 1000)", "'日本語🎉'")),
    Case("MEDIUMTEXT", ("REPEAT('日', 30000)", "NULL")),
    Case("LONGTEXT", ("REPEAT('z', 70000)", "'🎉'")),
    Case("CHAR(10) CHARACTER SET latin1", ("'çàé€'", "'abc'", "NULL")),
    Case("VARCHAR(20) CHARACTER SET latin1", ("'Größe €'", "''")),
    Case("TEXT CHARACTER SET latin1", ("'naïve café'", "NULL")),
    # the character sets Python has no codec for: every byte, as the server reads it
    *[
        Case(
            f"VARCHAR(300) CHARACTER SET {charset}",
            (
                f"CAST(UNHEX('{bytes(range(32, 256)).hex()}') AS CHAR CHARACTER SET {charset})",
                "'abc'",
            ),
        )
        for charset in TABLES
    ],
    Case("BINARY(5)", ("x'00'", "'ab'", "x'0001020304'", "x'0102000000'", "NULL")),
    Case("VARBINARY(10)", ("x'00ff'", "''", "NULL")),
    Case("TINYBLOB", ("x'00ff10'", "''")),
    Case("BLOB", ("x'00ff'", "REPEAT(x'fe', 5000)", "NULL")),
    Case("MEDIUMBLOB", ("REPEAT(x'01', 70000)",)),
    Case("LONGBLOB", ("x'deadbeef'", "NULL")),
    Case("ENUM('a','b','ç')", ("'a'", "'ç'", "'b'", "NULL")),
    Case("SET('x','y','z')", ("'x,z'", "''", "'z,y'", "'x,y,z'", "NULL")),
    Case("JSON", ('\'{"a": 1, "b": [true, null]}\'', "'[]'", "'\"日本\"'", "NULL")),
    Case(
        "GEOMETRY",
        ("ST_GeomFromText('POINT(1 2)')", "ST_GeomFromText('LINESTRING(0 0,1 1,2 5)')", "NULL"),
    ),
    Case("POINT", ("ST_PointFromText('POINT(3 4)')", "ST_GeomFromText('POINT(1 1)', 4326)")),
]


def _master_status(cur: Any) -> tuple[str, int]:
    cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    return str(row[0]), int(row[1])


def _file_slice(path: Any, start: int | None, end: int | None) -> bytes:
    """The magic and FORMAT_DESCRIPTION of a binlog file, then its events in [start, end):
    decoding a few transactions never walks a large file from its beginning."""
    with open(path, "rb") as f:
        head = f.read(FIRST_EVENT_POS + EVENT_HEADER_SIZE)
        fde_size = EVENT_HEADER.unpack_from(head, FIRST_EVENT_POS)[3]
        f.seek(0)
        prefix = f.read(FIRST_EVENT_POS + fde_size)
        begin = max(start or 0, len(prefix))
        f.seek(begin)
        rest = f.read() if end is None else f.read(max(end - begin, 0))
    return prefix + rest


def decode_range(
    server: DevServer,
    start: tuple[str, int],
    end: tuple[str, int],
    database: str,
    decoder: BinlogDecoder | None = None,
) -> list[RowsEvent]:
    """ROWS events of ``database`` between two SHOW MASTER STATUS positions (across rotations);
    events of tables the decoder's filter excludes are included with ``rows=None``."""
    if decoder is None:
        decoder = BinlogDecoder(table_filter=lambda db, _table: db == database)
    base = start[0].rsplit(".", 1)[0]
    out: list[RowsEvent] = []
    for number in range(binlog_file_number(start[0]), binlog_file_number(end[0]) + 1):
        name = f"{base}.{number:06d}"
        data = _file_slice(
            server.datadir / name,
            start[1] if name == start[0] else None,
            end[1] if name == end[0] else None,
        )
        for raw in split_binlog_file(data):
            event = decoder.decode(raw)
            if name == start[0] and event.header.log_pos <= start[1]:
                continue
            if (
                isinstance(event, RowsEvent)
                and event.table is not None
                and event.table.database == database
            ):
                out.append(event)
    return out


def normalize(ddl: str, value: Any) -> Any:
    """Bring a pymysql value to the decoder's representation."""
    kind = ddl.split("(")[0].split()[0].upper()
    if value is None:
        return None
    if kind in ("DATE", "DATETIME", "TIMESTAMP") and isinstance(value, str):
        return None  # zero dates come back as text from pymysql
    if kind == "TIMESTAMP":
        return value.replace(tzinfo=dt.UTC)
    if kind == "FLOAT":
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if kind == "BIT":
        return int.from_bytes(value, "big")
    if kind == "SET" and isinstance(value, set):
        return ",".join(x for x in ("x", "y", "z") if x in value)
    return value


def _snapshot(cur: Any) -> dict[int, Any]:
    cur.execute("SELECT id, c FROM t ORDER BY id")
    return {int(i): v for i, v in cur.fetchall()}


def _write_case(
    sql: Any, case: Case
) -> tuple[tuple[str, int], tuple[str, int], dict[int, Any], dict[int, Any]]:
    """Insert the case's values, update each row to another's value, delete them all:
    (start, end, rows after the inserts, rows after the updates)."""
    sql.execute("SET time_zone = '+00:00'")
    if case.sql_mode is not None:
        sql.execute("SET sql_mode = %s", (case.sql_mode,))
    sql.execute(f"CREATE TABLE t (id INT PRIMARY KEY, c {case.ddl})")
    start = _master_status(sql)
    n = len(case.values)
    for i, literal in enumerate(case.values):
        sql.execute(f"INSERT INTO t VALUES ({i}, {literal})")
    inserted = _snapshot(sql)
    for i in range(n):  # each row takes another row's value (reversed order)
        sql.execute(f"UPDATE t SET c = {case.values[n - 1 - i]} WHERE id = {i}")
    updated = _snapshot(sql)
    sql.execute("DELETE FROM t")
    return start, _master_status(sql), inserted, updated


@pytest.mark.parametrize("case", CASES, ids=str)
def test_type_round_trip(case: Case, dev_server: DevServer, sql: Any, database: str) -> None:
    start, end, inserted, updated = _write_case(sql, case)
    n = len(case.values)

    events = decode_range(dev_server, start, end, database)
    inserts = [r for e in events if e.kind is RowsKind.INSERT for r in e.rows or []]
    updates = [r for e in events if e.kind is RowsKind.UPDATE for r in e.rows or []]
    deletes = [r for e in events if e.kind is RowsKind.DELETE for r in e.rows or []]

    assert len(inserts) == n and len(deletes) == n
    for _, after in inserts:
        assert after is not None
        assert after[1] == normalize(case.ddl, inserted[after[0]]), f"insert id={after[0]}"
    for before, after in updates:
        assert before is not None and after is not None
        assert before[1] == normalize(case.ddl, inserted[before[0]]), (
            f"update before id={before[0]}"
        )
        assert after[1] == normalize(case.ddl, updated[after[0]]), f"update after id={after[0]}"
    changed = sum(1 for i in range(n) if inserted[i] != updated[i])
    assert len(updates) >= changed
    for before, _ in deletes:
        assert before is not None
        assert before[1] == normalize(case.ddl, updated[before[0]]), f"delete id={before[0]}"


def test_wide_table_null_bitmap_and_metadata(
    dev_server: DevServer, sql: Any, database: str
) -> None:
    """20 nullable columns of mixed types: multi-byte null bitmaps, names, primary key."""
    cols = [
        f"c{i} {t}"
        for i, t in enumerate(["INT", "VARCHAR(5)", "DOUBLE", "DATE", "DECIMAL(6,2)"] * 4)
    ]
    sql.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {', '.join(cols)})")
    start = _master_status(sql)
    literals = ["7", "'ab'", "2.5", "'2024-01-01'", "-1.25"] * 4
    for row in range(10):
        vals = [lit if (row + i) % 3 else "NULL" for i, lit in enumerate(literals)]
        sql.execute(f"INSERT INTO t VALUES ({row}, {', '.join(vals)})")
    end = _master_status(sql)
    sql.execute("SELECT * FROM t ORDER BY id")
    expected = {r[0]: tuple(r) for r in sql.fetchall()}
    events = decode_range(dev_server, start, end, database)
    table = events[0].table
    assert table is not None
    assert [c.name for c in table.columns] == ["id"] + [f"c{i}" for i in range(20)]
    assert table.primary_key == (0,)
    rows = [after for e in events for _, after in e.rows or []]
    assert len(rows) == 10
    for after in rows:
        assert after is not None
        assert after == expected[after[0]]


def test_table_filter_leaves_rows_undecoded(dev_server: DevServer, sql: Any, database: str) -> None:
    sql.execute("CREATE TABLE keep (id INT PRIMARY KEY)")
    sql.execute("CREATE TABLE skip (id INT PRIMARY KEY)")
    start = _master_status(sql)
    sql.execute("INSERT INTO keep VALUES (1)")
    sql.execute("INSERT INTO skip VALUES (2)")
    end = _master_status(sql)
    decoder = BinlogDecoder(table_filter=lambda db, table: db == database and table == "keep")
    events = decode_range(dev_server, start, end, database, decoder)
    seen = {e.table.table: e.rows for e in events if e.table is not None}
    assert seen == {"keep": [(None, (1,))], "skip": None}


# the column types the compiled decoder does not read (their tables take the Python path);
# MariaDB's JSON is a LONGTEXT (MySQL's binary JSON is the Python path's alone)
# the kernel decodes UTF-8 text only
_PURE_ONLY = ("DECIMAL(65", "BIT(10)", "BIT(64)", "latin1", *TABLES, "SET(", "GEOMETRY", "POINT")


def _compiled_type(ddl: str) -> bool:
    is_time = ddl.startswith("TIME") and not ddl.startswith("TIMESTAMP")
    return not is_time and not any(word in ddl for word in _PURE_ONLY)


def _row_changes(events: list[RowsEvent]) -> list[RowChanges]:
    changes = []
    for e in events:
        assert e.table is not None and e.rows is not None
        at = BinlogPosition("b.000001", e.header.log_pos - e.header.event_size)
        changes.append(
            RowChanges(
                e.table.database,
                e.table.table,
                e.kind,
                e.rows,
                e.header.timestamp,
                at,
                e.table.image_columns,
            )
        )
    return changes


@pytest.mark.parametrize("case", CASES, ids=str)
def test_compiled_decoder_agrees_with_pure(
    case: Case, dev_server: DevServer, sql: Any, database: str, monkeypatch: Any
) -> None:
    """Both decoders into Arrow (the typed changelog and the tables shape), value for
    value: the pure one is judged against SELECT above, so the compiled one is too. The
    types the kernel reads must really take it."""
    assert arrowrows.COMPILED, "the compiled row decoder was not built (pip install -e .)"
    start, end, _, _ = _write_case(sql, case)
    decoder = BinlogDecoder(table_filter=lambda db, _table: db == database, lazy_rows=True)
    events = decode_range(dev_server, start, end, database, decoder)
    schema = load_schema(sql.connection, database, "t")
    taken = []
    add = arrowrows.KernelRows.add

    def counting_add(self: arrowrows.KernelRows, *args: Any) -> bool:
        ok = add(self, *args)
        taken.append(ok)
        return ok

    monkeypatch.setattr(arrowrows.KernelRows, "add", counting_add)
    builders: list[Callable[[], TypedChangelogBuilder | TablesBuilder]] = [
        lambda: TypedChangelogBuilder(schema),
        lambda: TablesBuilder([schema]),
    ]
    for make in builders:
        taken.clear()
        compiled = pa.Table.from_batches(list(make().batches(_row_changes(events))))
        took = any(taken)
        monkeypatch.setattr(arrowrows, "COMPILED", False)
        pure = pa.Table.from_batches(list(make().batches(_row_changes(events))))
        monkeypatch.setattr(arrowrows, "COMPILED", True)
        assert compiled.to_pylist() == pure.to_pylist()
        assert compiled.schema == pure.schema
        assert took == _compiled_type(case.ddl), f"compiled path taken: {took}"
        assert all(taken), "the kernel refused an event the server wrote"


def _cast_type(case: Case) -> bool:
    """Whether the text reader casts the case's column vectorised (textrows._cast), rather
    than value by value: all but TIME, BIT and the zero dates."""
    is_time = case.ddl.startswith("TIME") and not case.ddl.startswith("TIMESTAMP")
    return not is_time and not case.ddl.startswith("BIT") and case.sql_mode is None


@pytest.mark.parametrize("case", CASES, ids=str)
def test_text_reader_agrees_with_pymysql(
    case: Case, dev_server: DevServer, sql: Any, database: str, monkeypatch: Any
) -> None:
    """The compiled text splitter's chunk (mysql/chunks/textrows.py) and pymysql's, value for
    value and type for type, over TLS: pymysql's values are judged against the binlog
    decoder's by the reader tests, so the text reader's are too. The types the casts
    take must really take them."""
    assert textrows.COMPILED, "the compiled text splitter was not built (pip install -e .)"
    _write_case(sql, case)
    sql.execute("DELETE FROM t")
    for i, literal in enumerate(case.values):
        sql.execute(f"INSERT INTO t VALUES ({i}, {literal})")
    s = dev_server.settings
    conn = sql_connection(ConnectionSettings(s.host, s.port, s.user, s.password), database)
    try:
        assert conn._secure, "the dev server offers TLS: the connection should have it"
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        schema = load_schema(conn, database, "t")
        slow: list[str] = []
        per_value = textrows.per_value

        def counting(text: Any, column: Any, *args: Any) -> Any:
            slow.append(column.name)
            return per_value(text, column, *args)

        monkeypatch.setattr(textrows, "per_value", counting)
        text = select_text(conn, ChunkSelect(schema, "id"))
        plain = select_pymysql(conn, ChunkSelect(schema, "id"))  # the same connection, in step
    finally:
        conn.close()
    assert text.schema == plain.schema
    assert text.to_pylist() == plain.to_pylist()
    for got, want in zip(text.column("c").to_pylist(), plain.column("c").to_pylist(), strict=True):
        assert type(got) is type(want)
    assert (slow == []) == _cast_type(case), f"converted value by value: {slow}"
