"""TABLE_MAP events: the columns, types, metadata and optional metadata of a table.

Byte layout: https://dev.mysql.com/doc/dev/mysql-server/latest/classmysql_1_1binlog_1_1event_1_1Table__map__event.html
(and MariaDB's, the same apart from its types and its default of no optional metadata).
"""

from __future__ import annotations

import struct
from enum import IntEnum

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog.charsets import codec_for_collation, is_known_collation
from sparkcdc.mysql.binlog.decoded_events import ColumnInfo
from sparkcdc.mysql.protocol.constants import (
    CHARACTER_TYPES,
    NUMERIC_TYPES,
    ColumnType,
)

_U64 = struct.Struct("<Q")
# after the table id: flags u16 (reserved)
_TABLE_MAP_FLAGS = struct.Struct("<H")
# length-encoded ("packed") integers: < 251 inline; 252, 253, 254 prefix 2, 3, 8 bytes
_LENENC_2, _LENENC_3, _LENENC_8 = 0xFC, 0xFD, 0xFE
_LENENC_INLINE_MAX = 0xFA


class OptionalMetadata(IntEnum):
    """TLV field types of TABLE_MAP optional metadata (``binlog_row_metadata=FULL``)."""

    SIGNEDNESS = 1
    DEFAULT_CHARSET = 2
    COLUMN_CHARSET = 3
    COLUMN_NAME = 4
    SET_STR_VALUE = 5
    ENUM_STR_VALUE = 6
    GEOMETRY_TYPE = 7
    SIMPLE_PRIMARY_KEY = 8
    PRIMARY_KEY_WITH_PREFIX = 9
    ENUM_AND_SET_DEFAULT_CHARSET = 10
    ENUM_AND_SET_COLUMN_CHARSET = 11
    COLUMN_VISIBILITY = 12


# column metadata sizes in the TABLE_MAP metadata block, by binlog column type
_META_ONE_BYTE = frozenset(
    {
        ColumnType.FLOAT,
        ColumnType.DOUBLE,
        ColumnType.BLOB,
        ColumnType.TINY_BLOB,
        ColumnType.MEDIUM_BLOB,
        ColumnType.LONG_BLOB,
        ColumnType.GEOMETRY,
        ColumnType.JSON,
        ColumnType.TIME2,
        ColumnType.DATETIME2,
        ColumnType.TIMESTAMP2,
        ColumnType.VECTOR,
    }
)
_META_TWO_BYTES_LE = frozenset({ColumnType.VARCHAR, ColumnType.VAR_STRING})
_META_TWO_BYTES_BE = frozenset(
    {ColumnType.NEWDECIMAL, ColumnType.BIT, ColumnType.STRING, ColumnType.ENUM, ColumnType.SET}
)
# STRING metadata byte 0 holds the real type; bits 4-5 inverted carry length bits 8-9
_STRING_LENGTH_HIGH_BITS = 0x30
_STRING_LENGTH_HIGH_SHIFT = 4


def read_lenenc(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a length-encoded integer; returns (value, next position)."""
    first = buf[pos]
    if first <= _LENENC_INLINE_MAX:
        return first, pos + 1
    if first == _LENENC_2:
        return buf[pos + 1] | buf[pos + 2] << 8, pos + 3
    if first == _LENENC_3:
        return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
    if first == _LENENC_8:
        return _U64.unpack_from(buf, pos + 1)[0], pos + 9
    raise ProtocolError(f"invalid length-encoded integer prefix {first:#04x} at byte {pos}")


def _bits_msb_first(data: bytes, count: int) -> list[bool]:
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _real_string_type(meta0: int, meta1: int) -> tuple[ColumnType, int]:
    """(real type, length) from STRING metadata; CHAR > 255 bytes hides length bits in byte 0."""
    if meta0 and meta0 & _STRING_LENGTH_HIGH_BITS != _STRING_LENGTH_HIGH_BITS:
        length = meta1 | (
            ((meta0 & _STRING_LENGTH_HIGH_BITS) ^ _STRING_LENGTH_HIGH_BITS)
            << _STRING_LENGTH_HIGH_SHIFT
        )
        return ColumnType(meta0 | _STRING_LENGTH_HIGH_BITS), length
    try:
        return ColumnType(meta0), meta1
    except ValueError:
        return ColumnType.STRING, meta1


def _column_type(code: int) -> ColumnType:
    try:
        return ColumnType(code)
    except ValueError:
        raise ProtocolError(f"TABLE_MAP names unknown column type {code}") from None


def parse_table_map_body(
    body: bytes, table_id_bytes: int, mariadb: bool
) -> tuple[int, str, str, tuple[ColumnInfo, ...], tuple[int, ...]]:
    """Parse a TABLE_MAP post-header + body: ``(table_id, database, table, columns, pk)``.

    ``mariadb`` selects MariaDB's notion of character columns in the charset metadata
    (it counts GEOMETRY; MySQL does not).
    """
    table_id = int.from_bytes(body[:table_id_bytes], "little")
    pos = table_id_bytes + _TABLE_MAP_FLAGS.size
    db_len = body[pos]
    database = _text(body[pos + 1 : pos + 1 + db_len])
    pos += 1 + db_len + 1  # NUL terminator
    table_len = body[pos]
    table = _text(body[pos + 1 : pos + 1 + table_len])
    pos += 1 + table_len + 1
    count, pos = read_lenenc(body, pos)
    if count == 0:  # a table has a column; rows of none would take no bytes, without end
        raise ProtocolError(f"TABLE_MAP of {database}.{table} has no columns")
    types = [_column_type(code) for code in body[pos : pos + count]]
    pos += count
    meta_len, pos = read_lenenc(body, pos)
    meta_end = pos + meta_len
    real_types: list[ColumnType] = []
    metas: list[int] = []
    for t in types:
        if t in _META_ONE_BYTE:
            metas.append(body[pos])
            pos += 1
            real_types.append(t)
        elif t in _META_TWO_BYTES_LE:
            metas.append(body[pos] | body[pos + 1] << 8)
            pos += 2
            real_types.append(t)
        elif t in _META_TWO_BYTES_BE:
            b0, b1 = body[pos], body[pos + 1]
            pos += 2
            if t == ColumnType.STRING:
                real, length = _real_string_type(b0, b1)
                real_types.append(real)
                metas.append(length)
            elif t == ColumnType.BIT:
                real_types.append(t)
                metas.append(b1 << 8 | b0)  # bytes << 8 | bits
            else:
                real_types.append(t)
                metas.append(b0 << 8 | b1)
        else:
            real_types.append(t)
            metas.append(0)
    if pos != meta_end:
        raise ProtocolError(
            f"TABLE_MAP of {database}.{table}: column metadata is {meta_len} bytes but the "
            f"column types account for {pos - (meta_end - meta_len)}"
        )
    null_bytes = (count + 7) // 8
    nullable = [bool(body[pos + (i >> 3)] >> (i & 7) & 1) for i in range(count)]
    pos += null_bytes

    # MariaDB's SIGNEDNESS also counts YEAR and its charsets count GEOMETRY; MySQL's do not
    numeric_types = NUMERIC_TYPES | {ColumnType.YEAR} if mariadb else NUMERIC_TYPES
    numeric = [i for i, t in enumerate(types) if t in numeric_types]
    character_types = CHARACTER_TYPES | {ColumnType.GEOMETRY} if mariadb else CHARACTER_TYPES
    character = [
        i
        for i, (t, real) in enumerate(zip(types, real_types, strict=True))
        if t in character_types and real not in (ColumnType.ENUM, ColumnType.SET)
    ]
    enum_set = [i for i, real in enumerate(real_types) if real in (ColumnType.ENUM, ColumnType.SET)]
    # a numeric column's signedness is what a SIGNEDNESS block says, else unknown (None):
    # the schema history then says it (tablemeta.complete_columns), never a default
    unsigned: list[bool | None] = [None if t in NUMERIC_TYPES else False for t in types]
    charsets: list[int | None] = [None] * count
    names: list[str | None] = [None] * count
    enum_values: list[tuple[str, ...] | None] = [None] * count
    set_values: list[tuple[str, ...] | None] = [None] * count
    primary_key: tuple[int, ...] = ()
    label_values: dict[OptionalMetadata, list[tuple[bytes, ...]]] = {}

    while pos < len(body):
        kind = body[pos]
        length, pos = read_lenenc(body, pos + 1)
        value = body[pos : pos + length]
        pos += length
        if kind == OptionalMetadata.SIGNEDNESS:
            for i, flag in zip(numeric, _bits_msb_first(value, len(numeric)), strict=True):
                unsigned[i] = flag
        elif kind in (OptionalMetadata.DEFAULT_CHARSET, OptionalMetadata.COLUMN_CHARSET):
            _apply_charsets(value, kind == OptionalMetadata.DEFAULT_CHARSET, character, charsets)
        elif kind in (
            OptionalMetadata.ENUM_AND_SET_DEFAULT_CHARSET,
            OptionalMetadata.ENUM_AND_SET_COLUMN_CHARSET,
        ):
            default = kind == OptionalMetadata.ENUM_AND_SET_DEFAULT_CHARSET
            _apply_charsets(value, default, enum_set, charsets)
        elif kind == OptionalMetadata.COLUMN_NAME:
            p = 0
            for i in range(count):
                n, p = read_lenenc(value, p)
                names[i] = _text(value[p : p + n])
                p += n
        elif kind in (OptionalMetadata.SET_STR_VALUE, OptionalMetadata.ENUM_STR_VALUE):
            label_values[OptionalMetadata(kind)] = _parse_label_lists(value)
        elif kind == OptionalMetadata.SIMPLE_PRIMARY_KEY:
            p, keys = 0, []
            while p < len(value):
                index, p = read_lenenc(value, p)
                keys.append(index)
            primary_key = tuple(keys)
        elif kind == OptionalMetadata.PRIMARY_KEY_WITH_PREFIX:
            p, keys = 0, []
            while p < len(value):
                index, p = read_lenenc(value, p)
                _prefix, p = read_lenenc(value, p)
                keys.append(index)
            primary_key = tuple(keys)
        # GEOMETRY_TYPE, COLUMN_VISIBILITY and later additions are not needed to decode rows

    for kind, target, real in (
        (OptionalMetadata.ENUM_STR_VALUE, enum_values, ColumnType.ENUM),
        (OptionalMetadata.SET_STR_VALUE, set_values, ColumnType.SET),
    ):
        lists = label_values.get(kind)
        if lists is None:
            continue
        cols = [i for i, r in enumerate(real_types) if r == real]
        for i, labels in zip(cols, lists, strict=False):
            collation = charsets[i]
            if collation is not None and not is_known_collation(collation):
                continue  # the labels come from the schema (tablemeta.complete_columns)
            codec = codec_for_collation(collation) if collation is not None else "utf-8"
            target[i] = tuple(label.decode(codec or "utf-8", "replace") for label in labels)

    columns = tuple(
        ColumnInfo(
            name=names[i],
            type=real_types[i],
            meta=metas[i],
            nullable=nullable[i],
            unsigned=unsigned[i],
            charset=charsets[i],
            enum_values=enum_values[i],
            set_values=set_values[i],
        )
        for i in range(count)
    )
    return table_id, database, table, columns, primary_key


def _apply_charsets(
    value: bytes, default_form: bool, targets: list[int], charsets: list[int | None]
) -> None:
    """DEFAULT form: default collation + (index, collation) exceptions; COLUMN form: one
    collation per target column."""
    p = 0
    if default_form:
        default, p = read_lenenc(value, p)
        for i in targets:
            charsets[i] = default
        while p < len(value):
            index, p = read_lenenc(value, p)
            collation, p = read_lenenc(value, p)
            if index < len(targets):
                charsets[targets[index]] = collation
    else:
        for i in targets:
            if p >= len(value):
                break
            charsets[i], p = read_lenenc(value, p)


def _parse_label_lists(value: bytes) -> list[tuple[bytes, ...]]:
    lists: list[tuple[bytes, ...]] = []
    p = 0
    while p < len(value):
        n, p = read_lenenc(value, p)
        labels = []
        for _ in range(n):
            size, p = read_lenenc(value, p)
            labels.append(value[p : p + size])
            p += size
        lists.append(tuple(labels))
    return lists
