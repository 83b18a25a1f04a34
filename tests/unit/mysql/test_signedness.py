"""A TABLE_MAP with column names but no SIGNEDNESS block (a MySQL-flavoured server was seen
writing one): an integer's signedness comes from the stream's schema version, never from a
default, and where neither says, the stream stops.

The events are built to MySQL's documented layouts: the TABLE_MAP body and its optional
metadata as https://dev.mysql.com/doc/dev/mysql-server/latest/classmysql_1_1binlog_1_1event_1_1Table__map__event.html
describes them (after the NULL bitmap, TLV fields: type u8, packed-int length, value;
``Optional_metadata_field_type`` SIGNEDNESS = 1, DEFAULT_CHARSET = 2, COLUMN_NAME = 4, in
libbinlogevents ``rows_event.h``), the ROWS_V2 events as the Rows_event page of the same
documentation, and a MySQL 8.0 FORMAT_DESCRIPTION.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from tests.unit.mysql.test_decoder import lenenc, row_image
from tests.unit.mysql.test_decoder_mysql8 import event, mysql8_fde

from sparkcdc.errors import SourceError
from sparkcdc.model.events import RowChanges
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.binlog.table_map import OptionalMetadata
from sparkcdc.mysql.protocol.constants import ColumnType, EventType
from sparkcdc.mysql.stream.binlog_range import changes_of_events
from sparkcdc.spark.changelog.typed import TypedChangelogBuilder

START = BinlogPosition("binlog.000001", 4)
TABLE_ID = 71
# (binlog type, column metadata, name, the schema's DATA_TYPE and COLUMN_TYPE)
COLUMNS = [
    (ColumnType.LONGLONG, b"", "id", "bigint", "bigint unsigned"),
    (ColumnType.LONG, b"", "i", "int", "int unsigned"),
    (ColumnType.TINY, b"", "t", "tinyint", "tinyint unsigned"),
    (ColumnType.SHORT, b"", "s", "smallint", "smallint unsigned"),
    (ColumnType.INT24, b"", "m", "mediumint", "mediumint unsigned"),
    (ColumnType.LONGLONG, b"", "signed_b", "bigint", "bigint"),
    (ColumnType.VARCHAR, struct.pack("<H", 80), "note", "varchar", "varchar(20)"),
]
SCHEMA = TableSchema(
    "app",
    "counters",
    tuple(
        Column.from_mysql(
            name, data, column, name != "id", charset="utf8mb4" if name == "note" else None
        )
        for _, _, name, data, column in COLUMNS
    ),
    ("id",),
)
# every integer at its unsigned maximum; the signed BIGINT at -1 (the same bytes)
IMAGE = row_image(
    [
        b"\xff" * 8,
        b"\xff" * 4,
        b"\xff",
        b"\xff" * 2,
        b"\xff" * 3,
        b"\xff" * 8,
        b"\x02ok",
    ]
)
VALUES = (2**64 - 1, 2**32 - 1, 255, 65535, 2**24 - 1, -1, "ok")


def tlv(kind: OptionalMetadata, value: bytes) -> bytes:
    return bytes([kind]) + lenenc(len(value)) + value


def table_map(signedness: bool) -> bytes:
    """The TABLE_MAP body: names and a default charset (utf8mb4_0900_ai_ci), and the
    SIGNEDNESS block (one bit per numeric column, most significant bit first) or not."""
    meta = b"".join(m for _, m, _, _, _ in COLUMNS)
    names = b"".join(lenenc(len(n)) + n.encode() for _, _, n, _, _ in COLUMNS)
    optional = b""
    if signedness:
        optional += tlv(OptionalMetadata.SIGNEDNESS, bytes([0b11111000]))
    optional += tlv(OptionalMetadata.DEFAULT_CHARSET, lenenc(255))
    optional += tlv(OptionalMetadata.COLUMN_NAME, names)
    return (
        TABLE_ID.to_bytes(6, "little")
        + b"\x01\x00"
        + b"\x03app\0\x08counters\0"
        + lenenc(len(COLUMNS))
        + bytes(t for t, _, _, _, _ in COLUMNS)
        + lenenc(len(meta))
        + meta
        + bytes([0b1111110])  # NULL bitmap: every column but id nullable
        + optional
    )


def events(signedness: bool) -> list[bytes]:
    write = (
        TABLE_ID.to_bytes(6, "little")
        + b"\x01\x00"
        + struct.pack("<H", 2)  # ROWS_V2 extra data: only its own length
        + lenenc(len(COLUMNS))
        + b"\x7f"  # every column present
        + IMAGE
    )
    return [
        mysql8_fde(),
        event(EventType.TABLE_MAP, table_map(signedness), log_pos=1000),
        event(EventType.WRITE_ROWS_V2, write, log_pos=1100),
        event(EventType.XID, struct.pack("<Q", 9), log_pos=1200),
    ]


def read(raw: list[bytes], versions: TableVersions | None) -> list[RowChanges]:
    end = BinlogPosition("binlog.000001", 1200)
    changes = changes_of_events(
        raw, START, end, lambda d, t: (d, t) == ("app", "counters"), versions
    )
    return [c for c in changes if isinstance(c, RowChanges)]


def test_the_table_map_leaves_the_signedness_unknown() -> None:
    decoder = BinlogDecoder()
    decoder.decode(mysql8_fde())
    columns = decoder.decode(event(EventType.TABLE_MAP, table_map(False))).columns  # type: ignore[union-attr]
    assert [c.unsigned for c in columns] == [None] * 6 + [False]
    with pytest.raises(SourceError, match=r"app\.counters.*'id'.*no SIGNEDNESS block"):
        decoder.decode(events(False)[2])


def test_signedness_comes_from_the_schema_version() -> None:
    (change,) = read(events(False), TableVersions.of([SCHEMA]))
    assert change.rows == [(None, VALUES)]
    # the very values a TABLE_MAP with its SIGNEDNESS block gives
    (full,) = read(events(True), None)
    assert full.rows == change.rows


def test_without_a_schema_version_the_stream_stops() -> None:
    with pytest.raises(SourceError) as caught:
        read(events(False), None)
    message = str(caught.value)
    assert "app.counters" in message and "no SIGNEDNESS block" in message
    assert "binlog_row_metadata='FULL'" in message


def test_the_schema_version_decides_signed_too() -> None:
    signed = TableSchema(
        "app",
        "counters",
        (Column.from_mysql("id", "bigint", "bigint", False), *SCHEMA.columns[1:]),
        ("id",),
    )
    (change,) = read(events(False), TableVersions.of([signed]))
    assert change.rows[0][1][:2] == (-1, 2**32 - 1)  # id signed in that version


@pytest.mark.skipif(not arrowrows.COMPILED, reason="the kernel is not built")
def test_the_compiled_kernel_and_the_python_path_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[bool] = []
    add = arrowrows.KernelRows.add

    def counting_add(self: arrowrows.KernelRows, *args: object) -> bool:
        taken.append(add(self, *args))  # type: ignore[arg-type]
        return taken[-1]

    def typed() -> pa.Table:
        changes = read(events(False), TableVersions.of([SCHEMA]))
        return pa.Table.from_batches(list(TypedChangelogBuilder(SCHEMA, -1).batches(changes)))

    monkeypatch.setattr(arrowrows.KernelRows, "add", counting_add)
    compiled = typed()
    monkeypatch.setattr(arrowrows, "COMPILED", False)
    pure = typed()
    assert taken == [True]
    assert compiled.to_pylist() == pure.to_pylist()
    row = compiled.to_pylist()[0]
    assert [int(row[name]) for _, _, name, _, _ in COLUMNS[:6]] == list(VALUES[:6])
