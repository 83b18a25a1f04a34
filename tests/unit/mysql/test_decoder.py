"""BinlogDecoder on hand-built events of every type, and split_binlog_file."""

from __future__ import annotations

import datetime as dt
import struct
import uuid
import zlib
from decimal import Decimal

import pytest
from tests.harness.binlog_file import split_binlog_file
from tests.unit.mysql.test_values import encode_decimal

from sparkcdc.errors import ProtocolError, SourceError
from sparkcdc.model.events import RowsKind
from sparkcdc.mysql.binlog.decoded_events import (
    MISSING,
    AnnotateRowsEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    MariaGtidEvent,
    MariaGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    UnknownEvent,
    XidEvent,
)
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.protocol.constants import (
    BINLOG_MAGIC,
    EVENT_HEADER,
    EVENT_HEADER_SIZE,
    BinlogChecksum,
    ColumnType,
    EventType,
)

# post-header lengths of a MariaDB 10.11 FORMAT_DESCRIPTION (types 1..171)
_POST_HEADERS = bytearray(171)
for _code, _length in {
    EventType.QUERY: 13,
    EventType.ROTATE: 8,
    EventType.FORMAT_DESCRIPTION: 84,
    EventType.TABLE_MAP: 8,
    EventType.WRITE_ROWS_V1: 8,
    EventType.UPDATE_ROWS_V1: 8,
    EventType.DELETE_ROWS_V1: 8,
    EventType.WRITE_ROWS_V2: 10,
    EventType.UPDATE_ROWS_V2: 10,
    EventType.DELETE_ROWS_V2: 10,
    EventType.MARIA_QUERY_COMPRESSED: 13,
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: 8,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: 8,
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: 8,
    EventType.MARIA_WRITE_ROWS_COMPRESSED: 10,
}.items():
    _POST_HEADERS[_code - 1] = _length


def event(type_code: int, body: bytes, log_pos: int = 1000, flags: int = 0) -> bytes:
    return (
        EVENT_HEADER.pack(1700000000, type_code, 7, EVENT_HEADER_SIZE + len(body), log_pos, flags)
        + body
    )


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    return b"\xfe" + struct.pack("<Q", n)


def fde_body(version: str = "10.11.19-MariaDB-log", checksum: int = 1) -> bytes:
    return (
        struct.pack("<H50sIB", 4, version.encode(), 0, 19)
        + bytes(_POST_HEADERS)
        + bytes([checksum])
    )


def mariadb_compress(data: bytes) -> bytes:
    return bytes([0x80 | 4]) + len(data).to_bytes(4, "big") + zlib.compress(data)


@pytest.fixture
def decoder() -> BinlogDecoder:
    d = BinlogDecoder()
    d.decode(event(EventType.FORMAT_DESCRIPTION, fde_body()))
    return d


# --------------------------------------------------------------------------- simple events


def test_format_description() -> None:
    d = BinlogDecoder()
    ev = d.decode(event(EventType.FORMAT_DESCRIPTION, fde_body()))
    assert isinstance(ev, FormatDescriptionEvent)
    assert ev.binlog_version == 4
    assert ev.server_version == "10.11.19-MariaDB-log"
    assert ev.header_length == 19
    assert ev.checksum is BinlogChecksum.CRC32
    assert ev.post_header_length(EventType.QUERY) == 13
    assert ev.is_mariadb
    assert d.format is ev


def test_format_description_old_server_has_no_checksum_byte() -> None:
    body = struct.pack("<H50sIB", 4, b"5.5.62-log", 0, 19) + bytes(_POST_HEADERS[:35])
    ev = BinlogDecoder().decode(event(EventType.FORMAT_DESCRIPTION, body))
    assert isinstance(ev, FormatDescriptionEvent)
    assert ev.checksum is BinlogChecksum.OFF
    assert len(ev.post_header_lengths) == 35


def test_rotate(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.ROTATE, struct.pack("<Q", 4) + b"mysql-bin.000002", 0))
    assert ev == RotateEvent(ev.header, "mysql-bin.000002", 4)


def test_query_skips_status_vars(decoder: BinlogDecoder) -> None:
    status = b"\x00\x00\x00\x00\x00\x01\x00\x00\xa0\x55\x00\x00\x00\x00"
    body = (
        struct.pack("<IIBHH", 11, 2, 4, 0, len(status))
        + status
        + b"shop\0"
        + b"CREATE TABLE t (id INT)"
    )
    ev = decoder.decode(event(EventType.QUERY, body))
    assert isinstance(ev, QueryEvent)
    assert (ev.thread_id, ev.exec_time, ev.error_code) == (11, 2, 0)
    assert (ev.database, ev.query) == ("shop", "CREATE TABLE t (id INT)")


def test_compressed_query(decoder: BinlogDecoder) -> None:
    query = "INSERT INTO t VALUES " + ",".join(f"({i})" for i in range(200))
    body = struct.pack("<IIBHH", 1, 0, 1, 0, 0) + b"d\0" + mariadb_compress(query.encode())
    ev = decoder.decode(event(EventType.MARIA_QUERY_COMPRESSED, body))
    assert isinstance(ev, QueryEvent)
    assert ev.query == query
    assert ev.database == "d"


def test_xid(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.XID, struct.pack("<Q", 2**64 - 1)))
    assert isinstance(ev, XidEvent)
    assert ev.xid == 2**64 - 1


def test_mysql_gtid(decoder: BinlogDecoder) -> None:
    sid = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
    body = struct.pack("<B16sq", 1, sid.bytes, 23) + bytes(17)
    ev = decoder.decode(event(EventType.GTID, body))
    assert ev == GtidEvent(ev.header, "3e11fa47-71ca-11e1-9e33-c80aa9429562", 23)


@pytest.mark.parametrize(("flags", "standalone"), [(0x01, True), (0x0C, False), (0x21, True)])
def test_mariadb_gtid(decoder: BinlogDecoder, flags: int, standalone: bool) -> None:
    body = struct.pack("<QIB", 100, 3, flags) + bytes(6)
    ev = decoder.decode(event(EventType.MARIA_GTID, body))
    assert isinstance(ev, MariaGtidEvent)
    assert (ev.domain_id, ev.sequence, ev.standalone, ev.header.server_id) == (
        3,
        100,
        standalone,
        7,
    )


def test_mariadb_gtid_list(decoder: BinlogDecoder) -> None:
    body = struct.pack("<I", 2) + struct.pack("<IIQ", 0, 1, 100) + struct.pack("<IIQ", 1, 2, 7)
    ev = decoder.decode(event(EventType.MARIA_GTID_LIST, body))
    assert isinstance(ev, MariaGtidListEvent)
    assert ev.gtids == ((0, 1, 100), (1, 2, 7))


def test_previous_gtids_text_form(decoder: BinlogDecoder) -> None:
    a = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
    b = uuid.UUID("00000000-0000-0000-0000-000000000001")
    body = (
        struct.pack("<Q", 2)
        + struct.pack("<16sQ", a.bytes, 2)
        + struct.pack("<qq", 1, 6)
        + struct.pack("<qq", 7, 8)
        + struct.pack("<16sQ", b.bytes, 1)
        + struct.pack("<qq", 1, 101)
    )
    ev = decoder.decode(event(EventType.PREVIOUS_GTIDS, body))
    assert isinstance(ev, PreviousGtidsEvent)
    assert ev.gtid_set == (
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,00000000-0000-0000-0000-000000000001:1-100"
    )


def test_heartbeats(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.HEARTBEAT, b"mysql-bin.000003"))
    assert ev == HeartbeatEvent(ev.header, "mysql-bin.000003")
    body = (
        b"\x01"
        + lenenc(16)
        + b"mysql-bin.000004"
        + b"\x02"
        + lenenc(8)
        + struct.pack("<Q", 5000)
        + b"\x00"
    )
    body = body[:-1]
    ev2 = decoder.decode(event(EventType.HEARTBEAT_V2, body))
    assert ev2 == HeartbeatEvent(ev2.header, "mysql-bin.000004")


def test_annotate_rows(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.MARIA_ANNOTATE_ROWS, "UPDATE t SET v='é'".encode()))
    assert ev == AnnotateRowsEvent(ev.header, "UPDATE t SET v='é'")


def test_unknown_event_never_crashes(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.MARIA_BINLOG_CHECKPOINT, b"\x01\x02"))
    assert ev == UnknownEvent(ev.header, b"\x01\x02")
    ev2 = decoder.decode(event(99, b"xyz"))
    assert isinstance(ev2, UnknownEvent)


def test_memoryview_input(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(memoryview(event(EventType.XID, struct.pack("<Q", 5))))
    assert isinstance(ev, XidEvent)
    assert ev.xid == 5


def test_short_event_raises(decoder: BinlogDecoder) -> None:
    with pytest.raises(ProtocolError, match="shorter than"):
        decoder.decode(b"\x00" * 10)
    with pytest.raises(ProtocolError, match="type 16"):
        decoder.decode(event(EventType.XID, b"\x01"))


# ------------------------------------------------------------------- table maps and rows

# (type, metadata bytes, name, nullable)
_COLUMNS = [
    (ColumnType.LONGLONG, b"", "id", False),
    (ColumnType.TINY, b"", "tiny_u", True),
    (ColumnType.VARCHAR, struct.pack("<H", 400), "name", True),
    (ColumnType.NEWDECIMAL, bytes([12, 3]), "amount", True),
    (ColumnType.DATETIME2, bytes([3]), "created", True),
    (ColumnType.STRING, bytes([ColumnType.ENUM, 1]), "color", True),
    (ColumnType.STRING, bytes([ColumnType.SET, 1]), "tags", True),
    (ColumnType.BLOB, bytes([2]), "data", True),
    (ColumnType.STRING, bytes([0xCE, 0xFC]), "wide_char", True),  # CHAR(255) utf8mb4: 1020 bytes
    (ColumnType.DOUBLE, bytes([8]), "score", True),
]


def table_map_body(table_id: int = 42, optional: bool = True) -> bytes:
    types = bytes(t for t, _, _, _ in _COLUMNS)
    meta = b"".join(m for _, m, _, _ in _COLUMNS)
    nullable = 0
    for i, (_, _, _, n) in enumerate(_COLUMNS):
        nullable |= n << i
    body = (
        table_id.to_bytes(6, "little")
        + b"\x01\x00"
        + b"\x04shop\0"
        + b"\x06orders\0"
        + lenenc(len(_COLUMNS))
        + types
        + lenenc(len(meta))
        + meta
        + nullable.to_bytes(2, "little")
    )
    if not optional:
        return body

    def tlv(kind: int, value: bytes) -> bytes:
        return bytes([kind]) + lenenc(len(value)) + value

    # numeric columns: id, tiny_u, amount, score -> signedness bits MSB first: 0,1,0,0
    signedness = tlv(1, bytes([0b01000000]))
    # character columns: name, data, wide_char; default utf8mb4 (45), 'data' is binary (63)
    default_charset = tlv(2, lenenc(45) + lenenc(1) + lenenc(63))
    names = tlv(4, b"".join(lenenc(len(n)) + n.encode() for _, _, n, _ in _COLUMNS))
    set_values = tlv(5, lenenc(3) + b"".join(lenenc(len(x)) + x for x in (b"a", b"b", b"c")))
    enum_values = tlv(6, lenenc(2) + lenenc(3) + b"red" + lenenc(5) + b"gr\xc3\xbcn")
    pk = tlv(8, lenenc(0))
    enum_set_charset = tlv(10, lenenc(45))
    visibility = tlv(12, bytes([0xFF, 0xC0]))
    return (
        body
        + signedness
        + default_charset
        + names
        + set_values
        + enum_values
        + pk
        + enum_set_charset
        + visibility
    )


def row_image(values: list[bytes | None]) -> bytes:
    nulls = 0
    data = b""
    for i, v in enumerate(values):
        if v is None:
            nulls |= 1 << i
        else:
            data += v
    return nulls.to_bytes((len(values) + 7) // 8, "little") + data


def _dt2(y: int, mo: int, d: int, h: int, mi: int, s: int, ms: int) -> bytes:
    ip = ((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s
    return (ip + 0x8000000000).to_bytes(5, "big") + ms.to_bytes(2, "big")


FULL_ROW = [
    struct.pack("<q", -(2**63)),
    bytes([255]),
    lenenc(0)[:0] + struct.pack("<H", len("日本語🎉".encode())) + "日本語🎉".encode(),
    encode_decimal("-123456789.123", 12, 3),
    _dt2(2024, 2, 29, 1, 2, 3, 4560),
    bytes([2]),
    bytes([0b101]),
    struct.pack("<H", 3) + b"\x00\xff\x01",
    struct.pack("<H", 3) + b"abc",
    struct.pack("<d", -1.25),
]
FULL_VALUES = (
    -(2**63),
    255,
    "日本語🎉",
    Decimal("-123456789.123"),
    dt.datetime(2024, 2, 29, 1, 2, 3, 456000),
    "grün",
    "a,c",
    b"\x00\xff\x01",
    "abc",
    -1.25,
)
NULL_ROW = [struct.pack("<q", 1)] + [None] * 9
NULL_VALUES = (1,) + (None,) * 9


def rows_body(
    table_id: int, images: bytes, kind: RowsKind, v2: bool = False, present: bytes = b"\xff\x03"
) -> bytes:
    head = table_id.to_bytes(6, "little") + b"\x01\x00"
    if v2:
        extra = b"\x00\x01\x02"  # some extra data
        head += struct.pack("<H", 2 + len(extra)) + extra
    bitmaps = present + (present if kind is RowsKind.UPDATE else b"")
    return head + lenenc(len(_COLUMNS)) + bitmaps + images


def test_table_map_with_full_metadata(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    assert isinstance(ev, TableMapEvent)
    assert (ev.table_id, ev.database, ev.table, ev.primary_key) == (42, "shop", "orders", (0,))
    cols = {c.name: c for c in ev.columns}
    assert [c.name for c in ev.columns] == [n for _, _, n, _ in _COLUMNS]
    assert cols["tiny_u"].unsigned and not cols["id"].unsigned and not cols["score"].unsigned
    assert not cols["id"].nullable and cols["name"].nullable
    assert (
        cols["name"].charset == 45
        and cols["data"].charset == 63
        and cols["wide_char"].charset == 45
    )
    assert cols["color"].type is ColumnType.ENUM and cols["color"].enum_values == ("red", "grün")
    assert cols["tags"].type is ColumnType.SET and cols["tags"].set_values == ("a", "b", "c")
    assert cols["wide_char"].type is ColumnType.STRING and cols["wide_char"].meta == 1020
    assert cols["amount"].meta == 12 << 8 | 3
    assert decoder.table(42) is ev


@pytest.mark.parametrize(
    ("type_code", "v2"),
    [(EventType.WRITE_ROWS_V1, False), (EventType.WRITE_ROWS_V2, True)],
)
def test_insert_rows_v1_v2(decoder: BinlogDecoder, type_code: int, v2: bool) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    images = row_image(FULL_ROW) + row_image(NULL_ROW)
    ev = decoder.decode(event(type_code, rows_body(42, images, RowsKind.INSERT, v2)))
    assert isinstance(ev, RowsEvent)
    assert ev.kind is RowsKind.INSERT
    assert ev.table is not None and ev.table.table == "orders"
    assert ev.rows == [(None, FULL_VALUES), (None, NULL_VALUES)]


def test_update_and_delete_rows(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    update = decoder.decode(
        event(
            EventType.UPDATE_ROWS_V1,
            rows_body(42, row_image(NULL_ROW) + row_image(FULL_ROW), RowsKind.UPDATE),
        )
    )
    assert isinstance(update, RowsEvent)
    assert update.rows == [(NULL_VALUES, FULL_VALUES)]
    delete = decoder.decode(
        event(EventType.DELETE_ROWS_V2, rows_body(42, row_image(FULL_ROW), RowsKind.DELETE, True))
    )
    assert isinstance(delete, RowsEvent)
    assert delete.kind is RowsKind.DELETE
    assert delete.rows == [(FULL_VALUES, None)]


def test_compressed_rows(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    images = mariadb_compress(row_image(FULL_ROW) * 3)
    ev = decoder.decode(
        event(EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, rows_body(42, images, RowsKind.INSERT))
    )
    assert isinstance(ev, RowsEvent)
    assert ev.rows == [(None, FULL_VALUES)] * 3


def test_columns_absent_from_image_are_missing(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    # only id (bit 0) and name (bit 2) present: the null bitmap covers 2 columns
    image = row_image([FULL_ROW[0], FULL_ROW[2]])
    ev = decoder.decode(
        event(EventType.DELETE_ROWS_V1, rows_body(42, image, RowsKind.DELETE, present=b"\x05\x00"))
    )
    assert isinstance(ev, RowsEvent)
    assert ev.rows is not None
    before, after = ev.rows[0]
    assert after is None and before is not None
    assert before[0] == -(2**63) and before[2] == "日本語🎉"
    assert all(before[i] is MISSING for i in (1, 3, 4, 5, 6, 7, 8, 9))


def test_table_filter_skips_rows() -> None:
    d = BinlogDecoder(table_filter=lambda db, table: table != "orders")
    d.decode(event(EventType.FORMAT_DESCRIPTION, fde_body()))
    tm = d.decode(event(EventType.TABLE_MAP, table_map_body()))
    ev = d.decode(event(EventType.WRITE_ROWS_V1, rows_body(42, b"garbage", RowsKind.INSERT)))
    assert isinstance(ev, RowsEvent)
    assert ev.rows is None and ev.table is tm


def test_new_table_map_replaces_old_mapping(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    other = (
        (42).to_bytes(6, "little")
        + b"\x01\x00"
        + b"\x01x\0"
        + b"\x01y\0"
        + lenenc(1)
        + bytes([ColumnType.LONG])
        + lenenc(0)
        + b"\x00"
        + b"\x01\x01\x00"  # SIGNEDNESS: the one numeric column is signed
    )
    decoder.decode(event(EventType.TABLE_MAP, other))
    ev = decoder.decode(
        event(
            EventType.WRITE_ROWS_V1,
            (42).to_bytes(6, "little")
            + b"\x00\x00"
            + lenenc(1)
            + b"\x01"
            + b"\x00"
            + struct.pack("<i", -7),
        )
    )
    assert isinstance(ev, RowsEvent)
    assert ev.table is not None and (ev.table.database, ev.table.table) == ("x", "y")
    assert ev.rows == [(None, (-7,))]


def test_table_map_without_optional_metadata(decoder: BinlogDecoder) -> None:
    ev = decoder.decode(event(EventType.TABLE_MAP, table_map_body(optional=False)))
    assert isinstance(ev, TableMapEvent)
    assert ev.primary_key == () and all(c.name is None for c in ev.columns)
    # no SIGNEDNESS: an integer's signedness is unknown, never taken as signed
    assert [c.unsigned for c in ev.columns[:2]] == [None, None]
    with pytest.raises(SourceError, match=r"shop\.orders.*no SIGNEDNESS block"):
        decoder.decode(
            event(EventType.WRITE_ROWS_V1, rows_body(42, row_image(FULL_ROW), RowsKind.INSERT))
        )


def test_a_table_map_of_no_columns_is_refused(decoder: BinlogDecoder) -> None:
    """Rows of no column take no bytes: decoding them would never end."""
    body = (5).to_bytes(6, "little") + b"\x00\x00\x01d\0\x01t\0" + lenenc(0) + lenenc(0)
    with pytest.raises(ProtocolError, match=r"TABLE_MAP of d\.t has no columns"):
        decoder.decode(event(EventType.TABLE_MAP, body))


@pytest.mark.parametrize("kind", [RowsKind.DELETE, RowsKind.UPDATE])
def test_rows_whose_images_hold_no_column_are_refused(
    decoder: BinlogDecoder, kind: RowsKind
) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    # bits past the table's ten columns do not count
    body = rows_body(42, b"abc", kind, present=b"\x00\xfc")
    type_code = EventType.DELETE_ROWS_V1 if kind is RowsKind.DELETE else EventType.UPDATE_ROWS_V1
    with pytest.raises(ProtocolError, match="names no column present in its row images"):
        decoder.decode(event(type_code, body))


def test_rows_without_table_map_raise(decoder: BinlogDecoder) -> None:
    with pytest.raises(ProtocolError, match="no preceding TABLE_MAP"):
        decoder.decode(event(EventType.WRITE_ROWS_V1, rows_body(77, b"", RowsKind.INSERT)))


def test_rows_that_do_not_match_the_map_raise(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    with pytest.raises(ProtocolError):
        decoder.decode(
            event(
                EventType.WRITE_ROWS_V1,
                rows_body(42, row_image(FULL_ROW) + b"\x00", RowsKind.INSERT),
            )
        )


def test_integer_extremes() -> None:
    d = BinlogDecoder()
    types = [
        ColumnType.TINY,
        ColumnType.SHORT,
        ColumnType.INT24,
        ColumnType.LONG,
        ColumnType.LONGLONG,
    ]
    n = len(types) * 2
    body = (
        (5).to_bytes(6, "little")
        + b"\x00\x00"
        + b"\x01d\0\x01t\0"
        + lenenc(n)
        + bytes(types * 2)
        + lenenc(0)
        + b"\x00\x00"
        + bytes([1])
        + lenenc(2)
        + bytes([0b11111000, 0b00000000])  # first five unsigned
    )
    d.decode(event(EventType.TABLE_MAP, body))
    maxes = bytes([255]) + b"\xff\xff" + b"\xff\xff\xff" + b"\xff" * 4 + b"\xff" * 8
    mins = (
        bytes([128]) + b"\x00\x80" + b"\x00\x00\x80" + b"\x00\x00\x00\x80" + b"\x00" * 7 + b"\x80"
    )
    rows = (
        (5).to_bytes(6, "little")
        + b"\x00\x00"
        + lenenc(n)
        + b"\xff\x03"
        + b"\x00\x00"
        + maxes
        + mins
    )
    ev = d.decode(event(EventType.WRITE_ROWS_V1, rows))
    assert isinstance(ev, RowsEvent)
    assert ev.rows == [
        (
            None,
            (
                255,
                65535,
                16777215,
                4294967295,
                18446744073709551615,
                -128,
                -32768,
                -8388608,
                -(2**31),
                -(2**63),
            ),
        )
    ]


# ------------------------------------------------------------------------- binlog files


def _with_crc(ev: bytes) -> bytes:
    patched = bytearray(ev)
    patched[9:13] = struct.pack("<I", len(ev) + 4)
    return bytes(patched) + struct.pack("<I", zlib.crc32(bytes(patched)))


def test_split_binlog_file_verifies_and_strips_crc() -> None:
    fde = _with_crc(event(EventType.FORMAT_DESCRIPTION, fde_body(), flags=0))
    # the server sets "binlog in use" in the FDE after computing its checksum
    fde_in_use = bytearray(fde)
    fde_in_use[17] |= 1
    xid = _with_crc(event(EventType.XID, struct.pack("<Q", 9)))
    events = list(split_binlog_file(BINLOG_MAGIC + bytes(fde_in_use) + xid))
    assert len(events) == 2
    d = BinlogDecoder()
    assert isinstance(d.decode(events[0]), FormatDescriptionEvent)
    last = d.decode(events[1])
    assert isinstance(last, XidEvent)
    assert last.xid == 9
    corrupt = bytearray(xid)
    corrupt[EVENT_HEADER_SIZE] ^= 0xFF
    with pytest.raises(ProtocolError, match="CRC32 mismatch"):
        list(split_binlog_file(BINLOG_MAGIC + fde + bytes(corrupt)))


def test_split_binlog_file_without_checksums() -> None:
    fde = _with_crc(event(EventType.FORMAT_DESCRIPTION, fde_body(checksum=0)))
    xid = event(EventType.XID, struct.pack("<Q", 3))
    events = list(split_binlog_file(BINLOG_MAGIC + fde + xid))
    assert events[1] == xid


def test_split_binlog_file_rejects_bad_input() -> None:
    with pytest.raises(ProtocolError, match="not a binlog file"):
        list(split_binlog_file(b"nope"))
    fde = _with_crc(event(EventType.FORMAT_DESCRIPTION, fde_body()))
    with pytest.raises(ProtocolError, match="announces"):
        list(split_binlog_file(BINLOG_MAGIC + fde[:-3]))
