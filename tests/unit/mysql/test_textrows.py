"""The text-protocol result reader (mysql/chunks/textrows.py, protocol/_textrows.c) from bytes.

Result rows are built to the documented layout (length-encoded strings, 0xFB for NULL,
4-byte packet headers; a payload of 0xFFFFFF bytes continues in the next packet); the
server-backed check of every column type against pymysql is in
tests/integration/test_decoder_types.py.
"""

from __future__ import annotations

import datetime as dt
import logging
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pymysql
import pytest
from pymysql import converters
from pymysql.constants import FIELD_TYPE

from sparkcdc.errors import ProtocolError, SnapshotError
from sparkcdc.model.schema import Column
from sparkcdc.mysql.binlog.arrowrows import buffers_array
from sparkcdc.mysql.chunks import textrows
from sparkcdc.mysql.protocol.wire import lenenc_int

pytestmark = pytest.mark.skipif(not textrows.COMPILED, reason="the C splitter is not built")

MAX_PAYLOAD = 0xFFFFFF
EOF = b"\xfe\x00\x00\x02\x00"  # EOF packet payload: warnings 0, status autocommit


def value(v: bytes | None) -> bytes:
    return b"\xfb" if v is None else lenenc_int(len(v)) + v


def row(*values: bytes | None) -> bytes:
    return b"".join(value(v) for v in values)


def packets(payloads: list[bytes], seq: int = 0) -> bytes:
    """Each payload framed, split at 0xFFFFFF bytes as the protocol does."""
    out = bytearray()
    for payload in payloads:
        rest = payload
        while True:
            part, rest = rest[:MAX_PAYLOAD], rest[MAX_PAYLOAD:]
            out += struct.pack("<I", len(part))[:3] + bytes([seq])
            out += part
            seq = (seq + 1) % 256
            if len(part) < MAX_PAYLOAD:
                break
    return bytes(out)


def split(data: bytes, ncols: int, seq: int = 0, step: int | None = None) -> Any:
    """Feed ``data`` (all at once, or ``step`` bytes at a time as a socket would hand it
    over): (rows, the columns as Python values, the state at the end)."""
    assert textrows._textrows is not None
    splitter = textrows._textrows.Splitter(ncols, seq)
    buffer = bytearray()
    state = textrows._textrows.MORE
    for at in range(0, len(data), step or len(data)):
        buffer += data[at : at + (step or len(data))]
        pos, state, *_ = splitter.feed(buffer, 0)
        del buffer[:pos]
        if state != textrows._textrows.MORE:
            break
    rows, columns = splitter.finish()
    values = [buffers_array(pa.large_binary(), rows, *c).to_pylist() for c in columns]
    return rows, values, state


@pytest.mark.parametrize("step", [None, 1, 7])
def test_rows_nulls_and_the_end(step: int | None) -> None:
    data = packets([row(b"1", b"abc"), row(None, b""), row(b"3", None), EOF], seq=3)
    rows, columns, state = split(data, 2, seq=3, step=step)
    assert state == textrows._textrows.END
    assert rows == 3
    assert columns == [[b"1", None, b"3"], [b"abc", b"", None]]


def test_a_row_starting_with_0xfe_is_a_row_not_the_end() -> None:
    # 0xFE opens an 8-byte length: a row, since the payload is 9 bytes or more
    long_prefix = b"\xfe" + (2).to_bytes(8, "little") + b"xy"
    rows, columns, state = split(packets([long_prefix, EOF]), 1)
    assert (rows, columns, state) == (1, [[b"xy"]], textrows._textrows.END)


def test_a_value_over_several_packets() -> None:
    big = bytes(range(256)) * (MAX_PAYLOAD // 256 + 3)  # one row over two packets
    exact = b"a" * (MAX_PAYLOAD - 4)  # a payload of exactly 0xFFFFFF: an empty packet follows
    data = packets([row(big), row(exact), row(b"z"), EOF], seq=250)
    assert len(row(exact)) == MAX_PAYLOAD
    rows, columns, state = split(data, 1, seq=250, step=1 << 20)
    assert state == textrows._textrows.END
    assert rows == 3
    assert columns[0][0] == big and columns[0][1] == exact and columns[0][2] == b"z"


def test_an_error_packet_is_handed_back() -> None:
    err = b"\xff" + struct.pack("<H", 1146) + b"#42S02" + b"Table 'x' doesn't exist"
    data = packets([row(b"1"), err])
    splitter = textrows._textrows.Splitter(1, 0)
    pos, state, end = splitter.feed(data, 0)
    assert state == textrows._textrows.ERROR
    assert data[pos:end] == err


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x05abc\x00", "value past the row's end"),
        (b"\x01a\xff", "length prefix 0xFF"),  # (a first byte 0xFF is an ERR packet)
        (b"\x01a\x01b\x00", "bytes left after the last value"),
        (b"\x00\xfc\x01", "length prefix past the row's end"),
        (b"\x00", "fewer values than columns"),
    ],
)
def test_a_malformed_row_is_refused(payload: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split(packets([payload, EOF]), 2)


def test_a_packet_out_of_sequence_is_refused() -> None:
    data = packets([row(b"1")], seq=1) + packets([EOF], seq=5)
    with pytest.raises(ValueError, match="sequence id 5 where 2 was due"):
        split(data, 1, seq=1)


# ------------------------------------------------------------------ select_text, end to end


class FakeField:
    def __init__(self, type_code: int, charsetnr: int = 45) -> None:
        self.type_code = type_code
        self.charsetnr = charsetnr


class FakeResult:
    def __init__(self, fields: list[FakeField]) -> None:
        self.field_count = len(fields)
        self.fields = fields
        self.converters = [
            ("ascii" if f.charsetnr != 63 else None, converters.decoders.get(f.type_code))
            for f in fields
        ]


class FakeConnection:
    """A connection whose rows come from ``data``, handed over ``size`` bytes at a time."""

    encoding = "utf8"

    def __init__(self, fields: list[FakeField], data: bytes, size: int = 5) -> None:
        self.result, self.data, self.size, self.abandoned = FakeResult(fields), data, size, False

    def start_result(self, sql: str) -> tuple[FakeResult, int]:
        return self.result, 2

    def read_some(self, size: int) -> bytes:
        if not self.data:
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server")
        out, self.data = self.data[: self.size], self.data[self.size :]
        return out

    def abandon(self) -> None:
        self.abandoned = True


COLUMNS = (
    Column.from_mysql("id", "bigint", "bigint(20)", False),
    Column.from_mysql("d", "date", "date", True),
    Column.from_mysql("amount", "decimal", "decimal(12,2)", True),
)
FIELDS = [
    FakeField(FIELD_TYPE.LONGLONG),
    FakeField(FIELD_TYPE.DATE),
    FakeField(FIELD_TYPE.NEWDECIMAL),
]


def test_select_text_reads_rows_in_types() -> None:
    data = packets([row(b"1", b"2024-02-29", b"-1.50"), row(b"2", b"0000-00-00", None), EOF], seq=2)
    conn = FakeConnection(FIELDS, data)
    table = textrows.select_text(conn, "SELECT", COLUMNS)
    assert table.to_pylist() == [
        {"id": 1, "d": dt.date(2024, 2, 29), "amount": Decimal("-1.50")},
        {"id": 2, "d": None, "amount": None},  # a zero date, as pymysql's reader gives it
    ]
    assert not conn.abandoned


def test_select_text_abandons_the_connection_when_the_rows_are_bad() -> None:
    conn = FakeConnection(FIELDS, packets([b"\x05abc", EOF], seq=2))
    with pytest.raises(ProtocolError, match=r"value past the row's end.*restart"):
        textrows.select_text(conn, "SELECT", COLUMNS)
    assert conn.abandoned


def test_select_text_stops_on_bytes_after_the_end() -> None:
    conn = FakeConnection(FIELDS, packets([EOF], seq=2) + b"\x00", size=100)
    with pytest.raises(SnapshotError, match="1 byte"):
        textrows.select_text(conn, "SELECT", COLUMNS)
    assert conn.abandoned


def test_select_text_raises_the_servers_error_and_keeps_the_connection() -> None:
    err = b"\xff" + struct.pack("<H", 1317) + b"#70100" + b"Query execution was interrupted"
    conn = FakeConnection(FIELDS, packets([row(b"1", None, None), err], seq=2))
    with pytest.raises(pymysql.err.OperationalError, match="interrupted"):
        textrows.select_text(conn, "SELECT", COLUMNS)
    assert not conn.abandoned


def test_select_text_refuses_a_result_of_other_columns() -> None:
    conn = FakeConnection(FIELDS[:2], packets([EOF], seq=2))
    with pytest.raises(SnapshotError, match="returned 2 column"):
        textrows.select_text(conn, "SELECT", COLUMNS)
    assert conn.abandoned


@pytest.mark.parametrize(
    ("column", "field", "texts"),  # pymysql decodes all but BIT (binary charset) as ASCII
    [
        (Column.from_mysql("c", "float", "float", True), FIELD_TYPE.FLOAT, [b"3.14159", b"-1e-40"]),
        (
            Column.from_mysql("c", "datetime", "datetime(3)", True),
            FIELD_TYPE.DATETIME,
            [b"2026-01-01 00:00:01.123", b"2020-02-30 00:00:00", b"0000-01-01 00:00:00"],
        ),
        (
            Column.from_mysql("c", "timestamp", "timestamp(6)", True),
            FIELD_TYPE.TIMESTAMP,
            [b"1970-01-01 00:00:01.000001", None],
        ),
        (
            Column.from_mysql("c", "time", "time(2)", True),
            FIELD_TYPE.TIME,
            [b"-838:59:59.00", b"12:00:01.50"],
        ),
        (
            Column.from_mysql("c", "bit", "bit(10)", True),
            FIELD_TYPE.BIT,
            [b"\x02\xaa", b"\x00\x00"],
        ),
        (Column.from_mysql("c", "year", "year(4)", True), FIELD_TYPE.YEAR, [b"0000", b"2155"]),
        (
            Column.from_mysql("c", "bigint", "bigint(20) unsigned", True),
            FIELD_TYPE.LONGLONG,
            [b"18446744073709551615", b"0"],
        ),
    ],
)
def test_casts_agree_with_the_value_by_value_path(
    column: Column, field: int, texts: list[bytes | None]
) -> None:
    """Each column's cast gives what pymysql's converters (then sql_converter) give, and
    refused casts (an invalid date, year 0) fall back to them."""
    text = pa.array(texts, type=pa.large_binary())
    converter = (None if field == FIELD_TYPE.BIT else "ascii", converters.decoders.get(field))
    target = textrows.arrow_type(column)
    assert textrows.typed(text, column, 45, converter).to_pylist() == (
        textrows.per_value(text, column, converter, target).to_pylist()
    )


def test_without_the_splitter_the_log_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(textrows, "COMPILED", False)
    monkeypatch.setattr(textrows, "_announced", False)
    conn = FakeConnection(FIELDS, b"")
    with caplog.at_level(logging.INFO, logger="sparkcdc.mysql.chunks.textrows"):
        assert not textrows.available(conn) and not textrows.available(conn)
    said = [r.getMessage() for r in caplog.records if "read by pymysql" in r.getMessage()]
    assert len(said) == 1 and "C compiler" in said[0]
    monkeypatch.setattr(textrows, "COMPILED", True)
    assert textrows.available(conn)
