"""MySQL binary JSON -> text, from documents built by hand after json_binary.h."""

from __future__ import annotations

import json
import struct

import pytest
from tests.unit.mysql.test_values import encode_decimal

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog.jsonb import to_json_text

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0, 1, 2, 3
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = (
    4, 5, 6, 7, 8, 9, 10, 11, 12, 15,
)  # fmt: skip


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def scalar(type_byte: int, payload: bytes) -> tuple[int, bytes]:
    return type_byte, payload


def string(text: str) -> tuple[int, bytes]:
    raw = text.encode()
    return STRING, varlen(len(raw)) + raw


def container(items: list[tuple[int, bytes]], keys: list[str] | None, large: bool) -> bytes:
    """Build an object/array body (without its type byte)."""
    width = 4 if large else 2
    fmt = "<I" if large else "<H"
    n = len(items)
    header = 2 * width
    key_entries = (width + 2) * n if keys is not None else 0
    value_entries = (1 + width) * n
    offset = header + key_entries + value_entries
    key_bytes = b""
    key_part = b""
    if keys is not None:
        for k in keys:
            kb = k.encode()
            key_part += struct.pack(fmt, offset + len(key_bytes)) + struct.pack("<H", len(kb))
            key_bytes += kb
    offset += len(key_bytes)
    entries = b""
    data = b""
    inline = {LITERAL, INT16, UINT16} | ({INT32, UINT32} if large else set())
    for type_byte, payload in items:
        if type_byte in inline:
            entries += bytes([type_byte]) + payload.ljust(width, b"\0")
        else:
            entries += bytes([type_byte]) + struct.pack(fmt, offset + len(data))
            data += payload
    body_tail = key_part + entries + key_bytes + data
    size = header + len(body_tail)
    return struct.pack(fmt, n) + struct.pack(fmt, size) + body_tail


def doc(type_byte: int, payload: bytes) -> bytes:
    return bytes([type_byte]) + payload


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (doc(LITERAL, b"\x00"), "null"),
        (doc(LITERAL, b"\x01"), "true"),
        (doc(LITERAL, b"\x02"), "false"),
        (doc(INT16, struct.pack("<h", -32768)), "-32768"),
        (doc(UINT16, struct.pack("<H", 65535)), "65535"),
        (doc(INT32, struct.pack("<i", -(2**31))), "-2147483648"),
        (doc(UINT32, struct.pack("<I", 2**32 - 1)), "4294967295"),
        (doc(INT64, struct.pack("<q", -(2**63))), "-9223372036854775808"),
        (doc(UINT64, struct.pack("<Q", 2**64 - 1)), "18446744073709551615"),
        (doc(DOUBLE, struct.pack("<d", 1.5)), "1.5"),
        (doc(*string('日本語🎉 "q"\n')), '"日本語🎉 \\"q\\"\\n"'),
        (doc(*string("x" * 300)), '"' + "x" * 300 + '"'),  # 2-byte varlen length
        (b"", "null"),
    ],
)
def test_scalars(document: bytes, expected: str) -> None:
    assert to_json_text(document) == expected


def test_small_object_with_nested_array() -> None:
    inner = container(
        [scalar(INT16, struct.pack("<h", 1)), string("two"), scalar(LITERAL, b"\x00")],
        None,
        large=False,
    )
    obj = container(
        [scalar(INT32, struct.pack("<i", 70000)), (SMALL_ARRAY, inner), scalar(LITERAL, b"\x01")],
        ["a", "bb", "ccc"],
        large=False,
    )
    text = to_json_text(doc(SMALL_OBJECT, obj))
    assert text == '{"a": 70000, "bb": [1, "two", null], "ccc": true}'
    assert json.loads(text) == {"a": 70000, "bb": [1, "two", None], "ccc": True}


def test_large_object_and_array_inline_32_bit() -> None:
    arr = container(
        [scalar(INT32, struct.pack("<i", -5)), scalar(UINT32, struct.pack("<I", 7)), string("s")],
        None,
        large=True,
    )
    obj = container(
        [(LARGE_ARRAY, arr), scalar(DOUBLE, struct.pack("<d", -0.25))], ["k", "kk"], True
    )
    assert to_json_text(doc(LARGE_OBJECT, obj)) == '{"k": [-5, 7, "s"], "kk": -0.25}'


def test_empty_containers() -> None:
    assert to_json_text(doc(SMALL_OBJECT, container([], [], False))) == "{}"
    assert to_json_text(doc(SMALL_ARRAY, container([], None, False))) == "[]"


def _opaque(field_type: int, data: bytes) -> bytes:
    return doc(OPAQUE, bytes([field_type]) + varlen(len(data)) + data)


def _packed_datetime(y: int, mo: int, d: int, h: int, mi: int, s: int, us: int) -> bytes:
    ymd = ((y * 13 + mo) << 5) | d
    hms = h << 12 | mi << 6 | s
    return struct.pack("<q", ((ymd << 17 | hms) << 24) + us)


def test_opaque_decimal() -> None:
    payload = bytes([10, 3]) + encode_decimal("-1234.567", 10, 3)
    assert to_json_text(_opaque(246, payload)) == "-1234.567"


def test_opaque_temporal() -> None:
    assert to_json_text(_opaque(10, _packed_datetime(2024, 2, 29, 0, 0, 0, 0))) == '"2024-02-29"'
    assert (
        to_json_text(_opaque(12, _packed_datetime(2024, 2, 29, 13, 14, 15, 123456)))
        == '"2024-02-29 13:14:15.123456"'
    )
    assert (
        to_json_text(_opaque(7, _packed_datetime(1999, 12, 31, 23, 59, 59, 0)))
        == '"1999-12-31 23:59:59.000000"'
    )
    time_packed = -(((12 << 12 | 34 << 6 | 56) << 24) + 500000)
    assert to_json_text(_opaque(11, struct.pack("<q", time_packed))) == '"-12:34:56.500000"'


def test_opaque_other_types_are_base64() -> None:
    assert to_json_text(_opaque(252, b"\x01\x02")) == '"base64:type252:AQI="'


def test_corrupt_document_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="binary JSON"):
        to_json_text(doc(SMALL_OBJECT, b"\x05\x00"))
