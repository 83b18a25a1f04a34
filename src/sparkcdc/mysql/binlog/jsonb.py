"""MySQL binary JSON (the storage format of JSON columns) to JSON text.

Layout (MySQL ``sql-common/json_binary.h``): a document is one type byte plus a value.
Objects and arrays come in a *small* (2-byte counts and offsets) and a *large* (4-byte)
form::

    object ::= element-count size key-entry* value-entry* key* value*
    array  ::= element-count size value-entry* value*
    key-entry   ::= key-offset(2|4) key-length(2)
    value-entry ::= type(1) offset-or-inlined-value(2|4)

Offsets count from the first byte of ``element-count``. Literals and 16-bit integers (and,
in the large form, 32-bit integers) are inlined in the value entry. Strings and opaque data
carry a variable-length size: 7 bits per byte, least significant first, high bit = more.
Opaque values hold a MySQL field type byte, a size, and data (DECIMAL as precision, scale,
binary decimal; DATE/TIME/DATETIME/TIMESTAMP as a packed little-endian int64).

The text matches MySQL's own rendering: ``", "`` and ``": "`` separators, keys in stored
order, datetimes with 6 fractional digits, unknown opaque values as ``"base64:typeN:..."``.

>>> to_json_text(bytes([0x04, 0x01]))
'true'
>>> to_json_text(bytes([0x02, 0x01, 0x00, 0x07, 0x00, 0x05, 0x2A, 0x00]))
'[42]'
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from enum import IntEnum

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog.column_values import decimal_decoder
from sparkcdc.mysql.protocol.constants import ColumnType


class JsonbType(IntEnum):
    """Value type bytes of the binary JSON format."""

    SMALL_OBJECT = 0x00
    LARGE_OBJECT = 0x01
    SMALL_ARRAY = 0x02
    LARGE_ARRAY = 0x03
    LITERAL = 0x04
    INT16 = 0x05
    UINT16 = 0x06
    INT32 = 0x07
    UINT32 = 0x08
    INT64 = 0x09
    UINT64 = 0x0A
    DOUBLE = 0x0B
    STRING = 0x0C
    OPAQUE = 0x0F


class JsonbLiteral(IntEnum):
    NULL = 0x00
    TRUE = 0x01
    FALSE = 0x02


_LITERAL_TEXT = {JsonbLiteral.NULL: "null", JsonbLiteral.TRUE: "true", JsonbLiteral.FALSE: "false"}
_SMALL_OFFSET = struct.Struct("<H")
_LARGE_OFFSET = struct.Struct("<I")
_KEY_LENGTH = struct.Struct("<H")
_SCALARS = {
    JsonbType.INT16: struct.Struct("<h"),
    JsonbType.UINT16: struct.Struct("<H"),
    JsonbType.INT32: struct.Struct("<i"),
    JsonbType.UINT32: struct.Struct("<I"),
    JsonbType.INT64: struct.Struct("<q"),
    JsonbType.UINT64: struct.Struct("<Q"),
    JsonbType.DOUBLE: struct.Struct("<d"),
}
_PACKED_TEMPORAL = struct.Struct("<q")
_VARLEN_MORE = 0x80
_VARLEN_BITS = 0x7F
_VARLEN_SHIFT = 7
# packed temporal (MySQL my_time.h): int part << 24 | microseconds
_PACKED_FRAC_BITS = 24
_PACKED_FRAC_MASK = (1 << _PACKED_FRAC_BITS) - 1
# MySQL's JSON_DOCUMENT_MAX_DEPTH: the server refuses deeper documents
_MAX_DEPTH = 100


def to_json_text(data: bytes) -> str:
    """Decode one binary JSON document to JSON text; an empty document is ``null``.

    >>> to_json_text(bytes([0x0C, 0x02]) + b"hi")
    '"hi"'
    """
    if not data:
        return "null"
    try:
        return _value(data, data[0], 1, len(data), _Walk(len(data)))
    except (IndexError, struct.error, ValueError) as exc:
        raise ProtocolError(
            f"cannot decode MySQL binary JSON value ({len(data)} bytes, starts "
            f"{data[:16].hex()}): {exc}; the JSON column bytes are truncated or corrupt"
        ) from None


def _varlen(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & _VARLEN_BITS) << shift
        if not byte & _VARLEN_MORE:
            return value, pos
        shift += _VARLEN_SHIFT


def _string(data: bytes, pos: int) -> str:
    length, pos = _varlen(data, pos)
    return json.dumps(data[pos : pos + length].decode("utf-8", "replace"), ensure_ascii=False)


@dataclass
class _Walk:
    """What is left of a document's walk: its bytes bound its values (each has at least
    one: its type byte in its container's entry) and its nesting is MySQL's at most."""

    values: int
    depth: int = 0


def _value(data: bytes, type_byte: int, pos: int, end: int, walk: _Walk) -> str:
    """Render the value of ``type_byte`` whose data starts at ``pos``."""
    walk.values -= 1
    if walk.values < 0:
        # offsets that point back into a container, or to one value many times
        raise ValueError("more values than the document has bytes: its offsets overlap")
    if type_byte in (JsonbType.SMALL_OBJECT, JsonbType.LARGE_OBJECT):
        large = type_byte == JsonbType.LARGE_OBJECT
        return _container(data, pos, large, is_object=True, walk=walk)
    if type_byte in (JsonbType.SMALL_ARRAY, JsonbType.LARGE_ARRAY):
        large = type_byte == JsonbType.LARGE_ARRAY
        return _container(data, pos, large, is_object=False, walk=walk)
    if type_byte == JsonbType.LITERAL:
        return _LITERAL_TEXT[JsonbLiteral(data[pos])]
    if type_byte == JsonbType.STRING:
        return _string(data, pos)
    if type_byte == JsonbType.OPAQUE:
        return _opaque(data, pos)
    scalar = _SCALARS.get(JsonbType(type_byte))
    if scalar is None:
        raise ValueError(f"unknown JSON value type {type_byte:#04x}")
    (number,) = scalar.unpack_from(data, pos)
    if isinstance(number, float):
        return json.dumps(number)
    return str(number)


def _inlined(type_byte: int, large: bool) -> bool:
    if type_byte in (JsonbType.LITERAL, JsonbType.INT16, JsonbType.UINT16):
        return True
    return large and type_byte in (JsonbType.INT32, JsonbType.UINT32)


def _container(data: bytes, start: int, large: bool, is_object: bool, walk: _Walk) -> str:
    if walk.depth == _MAX_DEPTH:
        raise ValueError(f"nested deeper than MySQL's {_MAX_DEPTH} levels")
    walk.depth += 1
    text = _entries(data, start, large, is_object, walk)
    walk.depth -= 1
    return text


def _entries(data: bytes, start: int, large: bool, is_object: bool, walk: _Walk) -> str:
    offset = _LARGE_OFFSET if large else _SMALL_OFFSET
    width = offset.size
    (count,) = offset.unpack_from(data, start)
    (size,) = offset.unpack_from(data, start + width)
    end = start + size
    pos = start + 2 * width
    keys: list[str] = []
    if is_object:
        for _ in range(count):
            (key_offset,) = offset.unpack_from(data, pos)
            (key_length,) = _KEY_LENGTH.unpack_from(data, pos + width)
            key = data[start + key_offset : start + key_offset + key_length]
            keys.append(json.dumps(key.decode("utf-8", "replace"), ensure_ascii=False))
            pos += width + _KEY_LENGTH.size
    values: list[str] = []
    for _ in range(count):
        type_byte = data[pos]
        if _inlined(type_byte, large):
            values.append(_value(data, type_byte, pos + 1, end, walk))
        else:
            (value_offset,) = offset.unpack_from(data, pos + 1)
            values.append(_value(data, type_byte, start + value_offset, end, walk))
        pos += 1 + width
    if is_object:
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, values, strict=True)) + "}"
    return "[" + ", ".join(values) + "]"


def _opaque(data: bytes, pos: int) -> str:
    field_type = data[pos]
    length, pos = _varlen(data, pos + 1)
    raw = data[pos : pos + length]
    if field_type == ColumnType.NEWDECIMAL:
        precision, scale = raw[0], raw[1]
        size, decode = decimal_decoder(precision, scale)
        return str(decode(raw[2 : 2 + size]))
    if field_type in (ColumnType.DATE, ColumnType.NEWDATE):
        return '"' + _packed_datetime(raw, date_only=True) + '"'
    if field_type in (ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.DATETIME2):
        return '"' + _packed_datetime(raw, date_only=False) + '"'
    if field_type in (ColumnType.TIME, ColumnType.TIME2):
        return '"' + _packed_time(raw) + '"'
    return f'"base64:type{field_type}:{base64.b64encode(raw).decode("ascii")}"'


def _packed_datetime(raw: bytes, date_only: bool) -> str:
    (packed,) = _PACKED_TEMPORAL.unpack_from(raw, 0)
    packed = abs(packed)
    us = packed & _PACKED_FRAC_MASK
    ip = packed >> _PACKED_FRAC_BITS
    ymd = ip >> 17
    year, month = divmod(ymd >> 5, 13)
    day = ymd & 0x1F
    if date_only:
        return f"{year:04d}-{month:02d}-{day:02d}"
    hms = ip & 0x1FFFF
    hour, minute, second = hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{us:06d}"


def _packed_time(raw: bytes) -> str:
    (packed,) = _PACKED_TEMPORAL.unpack_from(raw, 0)
    sign = "-" if packed < 0 else ""
    packed = abs(packed)
    us = packed & _PACKED_FRAC_MASK
    ip = packed >> _PACKED_FRAC_BITS
    hour, minute, second = (ip >> 12) & 0x3FF, (ip >> 6) & 0x3F, ip & 0x3F
    return f"{sign}{hour:02d}:{minute:02d}:{second:02d}.{us:06d}"
