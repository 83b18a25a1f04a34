"""MySQL 8.0 row-carrying events from hand-built bytes: TRANSACTION_PAYLOAD, PARTIAL_UPDATE_ROWS.

These are MySQL-only events (binlog_transaction_compression=ON, binlog_row_value_options=
PARTIAL_JSON): the private MariaDB of the test set-up never writes them, so they are tested
from bytes built to the documented layouts (libbinlogevents codecs/binary.cpp for the payload
header, sql/rpl_record.cc and sql-common/json_diff.cc for partial JSON). Also here: the
absent-column report of RowsEvent and UnknownEvent.ignorable.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
import zstandard
from tests.unit.mysql.test_decoder import (
    FULL_ROW,
    FULL_VALUES,
    NULL_ROW,
    NULL_VALUES,
    event,
    lenenc,
    row_image,
    rows_body,
    table_map_body,
)
from tests.unit.mysql.test_jsonb import (
    DOUBLE,
    INT16,
    INT64,
    LITERAL,
    SMALL_ARRAY,
    SMALL_OBJECT,
    STRING,
    UINT64,
    container,
    varlen,
)

from sparkcdc.errors import ProtocolError
from sparkcdc.model.events import RowsKind
from sparkcdc.mysql.binlog.decoded_events import (
    MISSING,
    QueryEvent,
    RowsEvent,
    TableMapEvent,
    TransactionPayloadEvent,
    UnknownEvent,
    XidEvent,
)
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.binlog.jsonb import to_json_text
from sparkcdc.mysql.protocol.constants import LOG_EVENT_IGNORABLE_F, ColumnType, EventType

# post-header lengths of a MySQL 8.0 FORMAT_DESCRIPTION (types 1..41)
_MYSQL8_POST_HEADERS = bytearray(41)
for _code, _length in {
    EventType.QUERY: 13,
    EventType.ROTATE: 8,
    EventType.FORMAT_DESCRIPTION: 98,
    EventType.TABLE_MAP: 8,
    EventType.WRITE_ROWS_V1: 8,
    EventType.UPDATE_ROWS_V1: 8,
    EventType.DELETE_ROWS_V1: 8,
    EventType.XID: 0,
    EventType.WRITE_ROWS_V2: 10,
    EventType.UPDATE_ROWS_V2: 10,
    EventType.DELETE_ROWS_V2: 10,
    EventType.GTID: 42,
    EventType.PARTIAL_UPDATE_ROWS: 10,
    EventType.TRANSACTION_PAYLOAD: 0,
}.items():
    _MYSQL8_POST_HEADERS[_code - 1] = _length

# TRANSACTION_PAYLOAD header field types and compression types (MySQL's numbers, spelled
# out here so the test does not just echo the decoder's constants)
END_MARK, PAYLOAD_SIZE, COMPRESSION_TYPE, UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NONE = 0, 255
# Json_diff operations
REPLACE, INSERT, REMOVE = 0, 1, 2
PARTIAL_JSON_UPDATES = 1

_FIX = "binlog_row_value_options=''"


def mysql8_fde() -> bytes:
    body = struct.pack("<H50sIB", 4, b"8.0.36", 0, 19) + bytes(_MYSQL8_POST_HEADERS) + b"\x01"
    return event(EventType.FORMAT_DESCRIPTION, body)


@pytest.fixture
def decoder() -> BinlogDecoder:
    d = BinlogDecoder()
    d.decode(mysql8_fde())
    return d


# ------------------------------------------------------------------ TRANSACTION_PAYLOAD


def tlv(field_type: int, value: int) -> bytes:
    """One payload header field as MySQL writes it: type, net_length_size(value), value."""
    encoded = lenenc(value)
    return lenenc(field_type) + lenenc(len(encoded)) + encoded


def zstd_stream(data: bytes) -> bytes:
    """One zstd frame written in streaming mode, as MySQL's compressor does (no content size)."""
    compressor = zstandard.ZstdCompressor().compressobj()
    return compressor.compress(data) + compressor.flush()


def payload_event(
    inner: bytes,
    compression: int = ZSTD,
    *,
    compressed: bytes | None = None,
    size: int | None = None,
    uncompressed: int | None = None,
    extra_fields: bytes = b"",
    log_pos: int = 5000,
) -> bytes:
    """A TRANSACTION_PAYLOAD event holding ``inner`` (the transaction's events, no checksums)."""
    if compressed is None:
        compressed = zstd_stream(inner) if compression == ZSTD else inner
    header = tlv(COMPRESSION_TYPE, compression)
    if compression != NONE:
        header += tlv(UNCOMPRESSED_SIZE, len(inner) if uncompressed is None else uncompressed)
    header += extra_fields
    header += tlv(PAYLOAD_SIZE, len(compressed) if size is None else size)
    header += lenenc(END_MARK)
    return event(EventType.TRANSACTION_PAYLOAD, header + compressed, log_pos=log_pos)


def transaction(table_id: int = 42, rows: int = 1) -> bytes:
    """BEGIN, TABLE_MAP, WRITE/UPDATE/DELETE rows (v2), XID: a whole transaction's events."""
    begin = struct.pack("<IIBHH", 9, 0, 4, 0, 0) + b"shop\0BEGIN"
    write = rows_body(table_id, row_image(FULL_ROW) * rows, RowsKind.INSERT, v2=True)
    update = rows_body(table_id, row_image(FULL_ROW) + row_image(NULL_ROW), RowsKind.UPDATE, True)
    delete = rows_body(table_id, row_image(NULL_ROW), RowsKind.DELETE, v2=True)
    return b"".join(
        [
            event(EventType.QUERY, begin),
            event(EventType.TABLE_MAP, table_map_body(table_id)),
            event(EventType.WRITE_ROWS_V2, write),
            event(EventType.UPDATE_ROWS_V2, update),
            event(EventType.DELETE_ROWS_V2, delete),
            event(EventType.XID, struct.pack("<Q", 77)),
        ]
    )


def _check_transaction(ev: object, rows: int = 1) -> None:
    assert isinstance(ev, TransactionPayloadEvent)
    kinds = [type(e).__name__ for e in ev.events]
    assert kinds == [
        "QueryEvent",
        "TableMapEvent",
        "RowsEvent",
        "RowsEvent",
        "RowsEvent",
        "XidEvent",
    ]
    begin, table_map, write, update, delete, xid = ev.events
    assert isinstance(begin, QueryEvent) and begin.query == "BEGIN"
    assert isinstance(table_map, TableMapEvent) and table_map.table == "orders"
    assert isinstance(write, RowsEvent) and write.kind is RowsKind.INSERT
    assert write.table is table_map
    assert write.rows == [(None, FULL_VALUES)] * rows
    assert isinstance(update, RowsEvent) and update.kind is RowsKind.UPDATE
    assert update.rows == [(FULL_VALUES, NULL_VALUES)]
    assert isinstance(delete, RowsEvent) and delete.kind is RowsKind.DELETE
    assert delete.rows == [(NULL_VALUES, None)]
    assert isinstance(xid, XidEvent) and xid.xid == 77


def test_zstd_payload_decodes_every_inner_event(decoder: BinlogDecoder) -> None:
    inner = transaction()
    ev = decoder.decode(payload_event(inner))
    _check_transaction(ev)
    assert isinstance(ev, TransactionPayloadEvent)
    assert ev.compression == ZSTD and ev.uncompressed_size == len(inner)
    assert ev.header.log_pos == 5000


def test_uncompressed_payload(decoder: BinlogDecoder) -> None:
    inner = transaction()
    ev = decoder.decode(payload_event(inner, NONE))
    _check_transaction(ev)
    assert isinstance(ev, TransactionPayloadEvent)
    assert ev.compression == NONE and ev.uncompressed_size == len(inner)


def test_large_payload_has_multi_byte_header_values(decoder: BinlogDecoder) -> None:
    inner = transaction(rows=1500)  # > 64 KiB: the size field needs a 3-byte packed int
    raw = payload_event(inner)
    assert len(inner) > 1 << 16
    _check_transaction(decoder.decode(raw), rows=1500)


def test_unknown_header_fields_are_skipped_by_length(decoder: BinlogDecoder) -> None:
    # later servers may append fields (MySQL's decoder skips them by their length)
    extra = lenenc(9) + lenenc(3) + b"\x01\x02\x03"
    _check_transaction(decoder.decode(payload_event(transaction(), extra_fields=extra)))


def test_payload_table_maps_end_with_the_payload(decoder: BinlogDecoder) -> None:
    outer = decoder.decode(event(EventType.TABLE_MAP, table_map_body(7)))
    decoder.decode(payload_event(transaction(table_id=42)))
    # the payload's table 42 does not leak out of it ...
    with pytest.raises(ProtocolError, match="no preceding TABLE_MAP"):
        decoder.decode(
            event(
                EventType.WRITE_ROWS_V2, rows_body(42, row_image(FULL_ROW), RowsKind.INSERT, True)
            )
        )
    # ... and the table mapped before it is still there
    ev = decoder.decode(
        event(EventType.WRITE_ROWS_V2, rows_body(7, row_image(FULL_ROW), RowsKind.INSERT, True))
    )
    assert isinstance(ev, RowsEvent) and ev.table is outer


def test_rows_inside_a_payload_need_its_own_table_map(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body(42)))
    inner = event(
        EventType.WRITE_ROWS_V2, rows_body(42, row_image(FULL_ROW), RowsKind.INSERT, True)
    )
    with pytest.raises(ProtocolError, match=r"inner event 1 at byte 0.*no preceding TABLE_MAP"):
        decoder.decode(payload_event(inner))


def _payload_error(decoder: BinlogDecoder, raw: bytes, match: str) -> str:
    with pytest.raises(ProtocolError, match=match) as info:
        decoder.decode(raw)
    message = str(info.value)
    assert "TRANSACTION_PAYLOAD ending at position 5000" in message
    return message


def test_unknown_compression_type_is_refused(decoder: BinlogDecoder) -> None:
    inner = transaction()
    raw = payload_event(inner, 1, compressed=zstd_stream(inner))
    message = _payload_error(decoder, raw, "compression type 1, expected 0 .ZSTD. or 255 .NONE.")
    assert "binlog_transaction_compression=OFF" in message


@pytest.mark.parametrize("delta", [-1, 1])
def test_payload_size_must_match_the_bytes_that_follow(decoder: BinlogDecoder, delta: int) -> None:
    inner = transaction()
    compressed = zstd_stream(inner)
    raw = payload_event(inner, compressed=compressed, size=len(compressed) + delta)
    _payload_error(decoder, raw, f"payload of {len(compressed) + delta} bytes but")


def test_bytes_after_the_zstd_frame_are_refused(decoder: BinlogDecoder) -> None:
    inner = transaction()
    raw = payload_event(inner, compressed=zstd_stream(inner) + b"\x00\x01")
    _payload_error(decoder, raw, "cannot decompress")


def test_payload_of_several_zstd_frames(decoder: BinlogDecoder) -> None:
    # a zstd stream may be several frames; MySQL's streaming decompressor reads them all
    inner = transaction()
    cut = len(inner) // 2
    raw = payload_event(inner, compressed=zstd_stream(inner[:cut]) + zstd_stream(inner[cut:]))
    _check_transaction(decoder.decode(raw))


def test_truncated_zstd_frame_is_refused(decoder: BinlogDecoder) -> None:
    inner = transaction()
    raw = payload_event(inner, compressed=zstd_stream(inner)[:-4])
    _payload_error(decoder, raw, "cannot decompress|truncated")


def test_uncompressed_size_of_a_none_payload_must_match(decoder: BinlogDecoder) -> None:
    inner = transaction()
    header = (
        tlv(COMPRESSION_TYPE, NONE)
        + tlv(UNCOMPRESSED_SIZE, len(inner) + 1)
        + tlv(PAYLOAD_SIZE, len(inner))
        + lenenc(END_MARK)
    )
    raw = event(EventType.TRANSACTION_PAYLOAD, header + inner, log_pos=5000)
    _payload_error(decoder, raw, f"holds {len(inner)} bytes of events, its header says")


@pytest.mark.parametrize("delta", [-1, 1])
def test_uncompressed_size_must_match(decoder: BinlogDecoder, delta: int) -> None:
    inner = transaction()
    raw = payload_event(inner, uncompressed=len(inner) + delta)
    message = _payload_error(decoder, raw, "payload inflates to")
    assert f"says {len(inner) + delta}" in message


def test_payload_without_end_mark_is_refused(decoder: BinlogDecoder) -> None:
    header = tlv(COMPRESSION_TYPE, NONE) + tlv(PAYLOAD_SIZE, 0)
    raw = event(EventType.TRANSACTION_PAYLOAD, header, log_pos=5000)
    _payload_error(decoder, raw, "before the end mark")


def test_payload_without_compression_type_is_refused(decoder: BinlogDecoder) -> None:
    inner = transaction()
    header = tlv(PAYLOAD_SIZE, len(inner)) + lenenc(END_MARK)
    raw = event(EventType.TRANSACTION_PAYLOAD, header + inner, log_pos=5000)
    _payload_error(decoder, raw, "no compression type")


def test_header_field_whose_value_disagrees_with_its_length(decoder: BinlogDecoder) -> None:
    inner = transaction()
    header = (
        lenenc(COMPRESSION_TYPE)
        + lenenc(4)
        + lenenc(NONE)  # three bytes, but the field says four
        + b"\x00"
        + tlv(PAYLOAD_SIZE, len(inner))
        + lenenc(END_MARK)
    )
    raw = event(EventType.TRANSACTION_PAYLOAD, header + inner, log_pos=5000)
    _payload_error(decoder, raw, "COMPRESSION_TYPE announces 4 bytes but its value takes 3")


def test_inner_event_running_past_the_payload_is_refused(decoder: BinlogDecoder) -> None:
    inner = transaction()
    _payload_error(decoder, payload_event(inner[:-3]), "announces 27 bytes but the payload has 24")


def test_bytes_left_after_the_last_inner_event_are_refused(decoder: BinlogDecoder) -> None:
    inner = transaction() + b"\x00" * 5
    _payload_error(decoder, payload_event(inner), "ends inside an event header")


def test_checksummed_inner_events_are_refused(decoder: BinlogDecoder) -> None:
    # inner events carry no checksum; one that did would leave 4 bytes after its rows
    table_map = event(EventType.TABLE_MAP, table_map_body(42))
    body = rows_body(42, row_image(FULL_ROW), RowsKind.INSERT, True) + b"\x11\x22\x33\x44"
    inner = table_map + event(EventType.WRITE_ROWS_V2, body)
    _payload_error(decoder, payload_event(inner), "inner event 2 at byte 172 of the payload")


def test_nested_payload_is_refused(decoder: BinlogDecoder) -> None:
    nested = payload_event(transaction(), NONE)
    _payload_error(decoder, payload_event(nested), "payloads do not nest")


# ------------------------------------------------------------------ PARTIAL_UPDATE_ROWS


def jsonb_value(value: Any) -> tuple[int, bytes]:
    """(type byte, payload) of ``value`` in MySQL's binary JSON (small containers only)."""
    if value is None or isinstance(value, bool):
        return LITERAL, bytes([{None: 0, True: 1, False: 2}[value]])
    if isinstance(value, int):
        if -(2**15) <= value < 2**15:
            return INT16, struct.pack("<h", value)
        if value >= 2**63:
            return UINT64, struct.pack("<Q", value)
        return INT64, struct.pack("<q", value)
    if isinstance(value, float):
        return DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode()
        return STRING, varlen(len(raw)) + raw
    if isinstance(value, dict):
        # MySQL stores object keys shorter first, then bytewise
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return SMALL_OBJECT, container([jsonb_value(value[k]) for k in keys], keys, False)
    return SMALL_ARRAY, container([jsonb_value(v) for v in value], None, False)


def jsonb(value: Any) -> bytes:
    type_byte, payload = jsonb_value(value)
    return bytes([type_byte]) + payload


def server_text(value: Any) -> str:
    """What the decoder yields for ``value`` logged whole (no partial update)."""
    return to_json_text(jsonb(value))


def diff(op: int, path: str, value: Any = None) -> bytes:
    raw_path = path.encode()
    out = bytes([op]) + lenenc(len(raw_path)) + raw_path
    if op != REMOVE:
        document = jsonb(value)
        out += lenenc(len(document)) + document
    return out


def json_cell(document: bytes) -> bytes:
    return struct.pack("<I", len(document)) + document


def diff_cell(*diffs: bytes) -> bytes:
    vector = b"".join(diffs)
    return struct.pack("<I", len(vector)) + vector


# docs table: id BIGINT NOT NULL, doc JSON, note VARCHAR(20), extra JSON
_DOC_COLUMNS = [
    (ColumnType.LONGLONG, b"", "id", False),
    (ColumnType.JSON, b"\x04", "doc", True),
    (ColumnType.VARCHAR, struct.pack("<H", 80), "note", True),
    (ColumnType.JSON, b"\x04", "extra", True),
]
_DOCS_ID = 55


def docs_table_map() -> bytes:
    types = bytes(t for t, _, _, _ in _DOC_COLUMNS)
    meta = b"".join(m for _, m, _, _ in _DOC_COLUMNS)
    nullable = sum(n << i for i, (_, _, _, n) in enumerate(_DOC_COLUMNS))
    names = b"".join(lenenc(len(n)) + n.encode() for _, _, n, _ in _DOC_COLUMNS)
    charset = lenenc(255)  # DEFAULT_CHARSET utf8mb4_0900_ai_ci
    return (
        _DOCS_ID.to_bytes(6, "little")
        + b"\x01\x00"
        + b"\x04shop\0\x04docs\0"
        + lenenc(len(_DOC_COLUMNS))
        + types
        + lenenc(len(meta))
        + meta
        + bytes([nullable])
        + bytes([1, 1, 0])  # SIGNEDNESS: id is signed
        + bytes([2])
        + lenenc(len(charset))
        + charset
        + bytes([4])
        + lenenc(len(names))
        + names
    )


def before_image(doc: Any, extra: Any = None, note: str = "n") -> bytes:
    return row_image(
        [
            struct.pack("<q", 1),
            json_cell(jsonb(doc)),
            bytes([len(note)]) + note.encode(),
            None if extra is None else json_cell(jsonb(extra)),
        ]
    )


def after_image(
    cells: list[bytes | None], *, partial_bits: int | None = None, value_options: int | None = None
) -> bytes:
    """value_options [partial bitmap: one bit per JSON column of the table] + a row image."""
    if value_options is None:
        value_options = PARTIAL_JSON_UPDATES if partial_bits is not None else 0
    head = lenenc(value_options)
    if value_options & PARTIAL_JSON_UPDATES:
        head += bytes([partial_bits or 0])  # 2 JSON columns: one byte
    return head + row_image(cells)


def partial_rows(rows: bytes, before: int = 0b1111, after: int = 0b1111) -> bytes:
    return (
        _DOCS_ID.to_bytes(6, "little")
        + b"\x01\x00"
        + struct.pack("<H", 2)  # v2 extra-data length, no extra data
        + lenenc(len(_DOC_COLUMNS))
        + bytes([before])
        + bytes([after])
        + rows
    )


def decode_partial(
    decoder: BinlogDecoder, rows: bytes, before: int = 0b1111, after: int = 0b1111
) -> RowsEvent:
    decoder.decode(event(EventType.TABLE_MAP, docs_table_map()))
    raw = event(EventType.PARTIAL_UPDATE_ROWS, partial_rows(rows, before, after), log_pos=8123)
    ev = decoder.decode(raw)
    assert isinstance(ev, RowsEvent)
    return ev


BEFORE_DOC = {
    "id": 7,
    "tags": ["a", "b", "c"],
    "price": 1.5,
    "big": 2**64 - 1,
    "owner": {"name": "ann", "langs": ["de", {"code": "en", "level": 2}]},
    "unit price": 3,
}


def _patched(path: list[Any], op: int, value: Any = None) -> Any:
    """BEFORE_DOC with one change applied in Python (the independent expectation)."""
    doc = json.loads(json.dumps(BEFORE_DOC))
    *parents, last = path
    node = doc
    for leg in parents:
        node = node[leg]
    if op == REMOVE:
        del node[last]
    elif op == INSERT and isinstance(node, list):
        node.insert(min(last, len(node)), value)
    else:
        node[last] = value
    return doc


@pytest.mark.parametrize(
    ("op", "path_text", "path", "value"),
    [
        (REPLACE, "$.owner.name", ["owner", "name"], "bob"),
        (REPLACE, "$.owner.langs[1].level", ["owner", "langs", 1, "level"], {"x": [1, None]}),
        (REPLACE, "$.tags[2]", ["tags", 2], False),
        (REPLACE, '$."unit price"', ["unit price"], 4.25),
        (INSERT, "$.owner.age", ["owner", "age"], 41),
        (INSERT, "$.owner.langs[1].z", ["owner", "langs", 1, "z"], "zz"),
        (INSERT, "$.a", ["a"], [1, 2]),
        (INSERT, "$.tags[0]", ["tags", 0], "first"),
        (INSERT, "$.tags[3]", ["tags", 3], "last"),
        (INSERT, "$.tags[99]", ["tags", 99], "appended"),
        (REMOVE, "$.owner.langs[0]", ["owner", "langs", 0], None),
        (REMOVE, "$.owner.langs[1].code", ["owner", "langs", 1, "code"], None),
        (REMOVE, "$.big", ["big"], None),
    ],
)
def test_partial_json_diff_is_applied_to_the_before_image(
    decoder: BinlogDecoder, op: int, path_text: str, path: list[Any], value: Any
) -> None:
    rows = before_image(BEFORE_DOC) + after_image(
        [struct.pack("<q", 1), diff_cell(diff(op, path_text, value)), b"\x01n", None],
        partial_bits=0b01,
    )
    ev = decode_partial(decoder, rows)
    expected = _patched(path, op, value)
    assert ev.kind is RowsKind.UPDATE
    assert ev.rows is not None
    before, after = ev.rows[0]
    assert before == (1, server_text(BEFORE_DOC), "n", None)
    assert after is not None
    # exactly the text the server's full after image would have decoded to
    assert after == (1, server_text(expected), "n", None)
    assert json.loads(after[1]) == expected
    assert (ev.absent_before, ev.absent_after) == ((), ())


def test_several_diffs_apply_in_order_and_keep_untouched_numbers(decoder: BinlogDecoder) -> None:
    diffs = diff_cell(
        diff(INSERT, "$.tags[1]", "x"),
        diff(REMOVE, "$.tags[0]"),
        diff(REPLACE, "$.owner", {"name": "cy"}),
        diff(INSERT, "$.owner.bb", True),
    )
    rows = before_image(BEFORE_DOC) + after_image(
        [struct.pack("<q", 1), diffs, b"\x01n", None], partial_bits=0b01
    )
    ev = decode_partial(decoder, rows)
    assert ev.rows is not None and ev.rows[0][1] is not None
    expected = dict(BEFORE_DOC, tags=["x", "b", "c"], owner={"bb": True, "name": "cy"})
    text = ev.rows[0][1][1]
    assert text == server_text(expected)
    assert '"big": 18446744073709551615' in text and '"price": 1.5' in text


def test_replace_of_the_whole_document(decoder: BinlogDecoder) -> None:
    rows = before_image([1, 2]) + after_image(
        [struct.pack("<q", 1), diff_cell(diff(REPLACE, "$", {"k": "v"})), b"\x01n", None],
        partial_bits=0b01,
    )
    ev = decode_partial(decoder, rows)
    assert ev.rows is not None and ev.rows[0][1] == (1, '{"k": "v"}', "n", None)


def test_partial_bits_count_every_json_column(decoder: BinlogDecoder) -> None:
    # the after image lacks `doc` (MINIMAL), yet `doc` still owns bit 0: `extra` is bit 1
    before = before_image({"a": 1}, extra={"e": [1]})
    after = lenenc(PARTIAL_JSON_UPDATES) + bytes([0b10])
    after += row_image([struct.pack("<q", 1), diff_cell(diff(INSERT, "$.e[1]", 2))])
    ev = decode_partial(decoder, before + after, after=0b1001)
    assert ev.rows is not None
    assert ev.rows[0][1] == (1, MISSING, MISSING, server_text({"e": [1, 2]}))
    assert (ev.absent_before, ev.absent_after) == ((), (1, 2))


@pytest.mark.parametrize("value_options", [0, PARTIAL_JSON_UPDATES])
def test_whole_json_values_in_partial_update_rows(
    decoder: BinlogDecoder, value_options: int
) -> None:
    cells = [struct.pack("<q", 2), json_cell(jsonb({"new": 1})), None, json_cell(jsonb([]))]
    rows = before_image({"old": 1}) + after_image(cells, value_options=value_options)
    ev = decode_partial(decoder, rows * 2)
    assert ev.rows is not None and len(ev.rows) == 2
    assert ev.rows[1] == ((1, '{"old": 1}', "n", None), (2, '{"new": 1}', None, "[]"))


def _partial_error(decoder: BinlogDecoder, rows: bytes, match: str, before: int = 0b1111) -> None:
    with pytest.raises(ProtocolError, match=match) as info:
        decode_partial(decoder, rows, before=before)
    message = str(info.value)
    assert "PARTIAL_UPDATE_ROWS event for shop.docs ending at position 8123" in message
    assert _FIX in message


@pytest.mark.parametrize(
    ("diffs", "match"),
    [
        (
            diff(REPLACE, "$.nope", 1),
            r"column doc: .*REPLACE at '\$.nope': the member does not exist",
        ),
        (diff(REPLACE, "$.owner.zz.y", 1), r"'\$.owner.zz.y' does not exist"),
        (diff(REPLACE, "$.tags[3]", 1), "index 3 is outside the array of 3"),
        (diff(REMOVE, "$.tags[5]"), "index 5 is outside"),
        (diff(REMOVE, "$.missing"), "REMOVE at '.*': the member does not exist"),
        (diff(INSERT, "$.id", 1), "INSERT at '.*': the member exists"),
        (diff(REPLACE, "$.tags.x", 1), "parent is a JSON array"),
        (diff(REPLACE, "$.id[0]", 1), "parent is a JSON scalar"),
        (diff(REMOVE, "$"), "REMOVE on the whole document"),
        (diff(REPLACE, "$.tags[last]", 1), "not of the forms sparkcdc applies"),
        (diff(REPLACE, "$.tags[*]", 1), "not of the forms"),
        (diff(REPLACE, "$**.id", 1), "not of the forms"),
        (diff(REPLACE, "$.*", 1), "not of the forms"),
        (diff(REPLACE, "id", 1), "does not start with"),
        (bytes([3]) + lenenc(1) + b"$", "operation 3, expected 0"),
    ],
)
def test_partial_json_that_cannot_be_applied_exactly(
    decoder: BinlogDecoder, diffs: bytes, match: str
) -> None:
    rows = before_image(BEFORE_DOC) + after_image(
        [struct.pack("<q", 1), diff_cell(diffs), b"\x01n", None], partial_bits=0b01
    )
    _partial_error(decoder, rows, match)


def test_partial_json_without_the_column_in_the_before_image(decoder: BinlogDecoder) -> None:
    before = row_image([struct.pack("<q", 1), b"\x01n", None])  # doc not logged
    after = after_image(
        [struct.pack("<q", 1), diff_cell(diff(REPLACE, "$.id", 2)), b"\x01n", None],
        partial_bits=0b01,
    )
    _partial_error(decoder, before + after, "is not in the before image", before=0b1101)


def test_partial_json_on_a_null_before_value(decoder: BinlogDecoder) -> None:
    before = row_image([struct.pack("<q", 1), None, b"\x01n", None])
    after = after_image(
        [struct.pack("<q", 1), None, b"\x01n", diff_cell(diff(REPLACE, "$.a", 2))],
        partial_bits=0b10,
    )
    _partial_error(decoder, before + after, "column extra: the JSON column is NULL")


def test_unknown_value_options_are_refused(decoder: BinlogDecoder) -> None:
    cells = [struct.pack("<q", 1), json_cell(jsonb(1)), b"\x01n", None]
    rows = before_image(1) + after_image(cells, value_options=2)
    _partial_error(decoder, rows, "value_options 2, expected 0 or 1")


def test_diff_vector_longer_than_the_event_is_refused(decoder: BinlogDecoder) -> None:
    vector = diff(REPLACE, "$.id", 12345)
    cell = struct.pack("<I", len(vector) + 50) + vector
    rows = before_image(BEFORE_DOC) + after_image(
        [struct.pack("<q", 1), cell, b"\x01n", None], partial_bits=0b01
    )
    _partial_error(decoder, rows, "runs past the event")


def test_truncated_diff_vector_is_refused(decoder: BinlogDecoder) -> None:
    vector = diff(REPLACE, "$.id", 12345)
    cell = struct.pack("<I", len(vector) - 2) + vector[:-2]
    rows = before_image(BEFORE_DOC) + after_image(
        [struct.pack("<q", 1), cell, b"\x01n", None], partial_bits=0b01
    )
    _partial_error(decoder, rows, "runs past the diff vector")


# ------------------------------------------------------------------ absent columns


@pytest.mark.parametrize(
    ("type_code", "kind", "present", "absent_before", "absent_after"),
    [
        (EventType.WRITE_ROWS_V1, RowsKind.INSERT, b"\xff\x03", (), ()),
        (EventType.WRITE_ROWS_V1, RowsKind.INSERT, b"\x05\x00", (), (1, 3, 4, 5, 6, 7, 8, 9)),
        (EventType.DELETE_ROWS_V1, RowsKind.DELETE, b"\xff\x01", (9,), ()),
        (EventType.DELETE_ROWS_V1, RowsKind.DELETE, b"\xff\x03", (), ()),
    ],
)
def test_absent_columns_of_insert_and_delete(
    decoder: BinlogDecoder,
    type_code: int,
    kind: RowsKind,
    present: bytes,
    absent_before: tuple[int, ...],
    absent_after: tuple[int, ...],
) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    bits = int.from_bytes(present, "little")
    image = row_image([v for i, v in enumerate(FULL_ROW) if bits >> i & 1])
    ev = decoder.decode(event(type_code, rows_body(42, image, kind, present=present)))
    assert isinstance(ev, RowsEvent)
    assert (ev.absent_before, ev.absent_after) == (absent_before, absent_after)
    assert ev.rows is not None
    values = ev.rows[0][1] if kind is RowsKind.INSERT else ev.rows[0][0]
    assert values is not None
    assert [i for i, v in enumerate(values) if v is MISSING] == list(absent_after or absent_before)


def test_absent_columns_of_update_differ_per_image(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    # MINIMAL: before image = primary key (id), after image = the changed columns
    before = row_image([FULL_ROW[0]])
    after = row_image([FULL_ROW[2], FULL_ROW[9]])
    body = (
        (42).to_bytes(6, "little")
        + b"\x00\x00"
        + lenenc(10)
        + (0b1).to_bytes(2, "little")
        + (0b10_0000_0100).to_bytes(2, "little")
        + before
        + after
    )
    ev = decoder.decode(event(EventType.UPDATE_ROWS_V1, body))
    assert isinstance(ev, RowsEvent)
    assert ev.absent_before == (1, 2, 3, 4, 5, 6, 7, 8, 9)
    assert ev.absent_after == (0, 1, 3, 4, 5, 6, 7, 8)
    assert ev.rows == [
        (
            (FULL_VALUES[0],) + (MISSING,) * 9,
            (MISSING, MISSING, FULL_VALUES[2]) + (MISSING,) * 6 + (FULL_VALUES[9],),
        )
    ]


def test_absent_columns_are_computed_once_per_bitmap(decoder: BinlogDecoder) -> None:
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    raw = event(
        EventType.DELETE_ROWS_V1,
        rows_body(42, row_image([FULL_ROW[0], FULL_ROW[2]]), RowsKind.DELETE, present=b"\x05\x00"),
    )
    first, second = decoder.decode(raw), decoder.decode(raw)
    assert isinstance(first, RowsEvent) and isinstance(second, RowsEvent)
    assert first.absent_before == (1, 3, 4, 5, 6, 7, 8, 9)
    assert first.absent_before is second.absent_before


def test_filtered_table_reports_nothing_absent() -> None:
    d = BinlogDecoder(table_filter=lambda db, table: False)
    d.decode(mysql8_fde())
    d.decode(event(EventType.TABLE_MAP, table_map_body()))
    ev = d.decode(
        event(EventType.WRITE_ROWS_V2, rows_body(42, b"", RowsKind.INSERT, True, b"\x01\x00"))
    )
    assert isinstance(ev, RowsEvent) and ev.rows is None
    assert (ev.absent_before, ev.absent_after) == ((), ())


# ------------------------------------------------------------------ unknown events


@pytest.mark.parametrize(("flags", "ignorable"), [(LOG_EVENT_IGNORABLE_F, True), (0x0001, False)])
def test_unknown_event_says_whether_it_may_be_skipped(
    decoder: BinlogDecoder, flags: int, ignorable: bool
) -> None:
    ev = decoder.decode(event(EventType.TRANSACTION_CONTEXT, b"\x01\x02", flags=flags))
    assert isinstance(ev, UnknownEvent)
    assert ev.ignorable is ignorable


def test_ignorable_flag_is_the_documented_bit() -> None:
    assert LOG_EVENT_IGNORABLE_F == 0x80
