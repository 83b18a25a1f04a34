"""Specialised row-image decoders, generated as Python source per table map and compiled once.

A ROWS event body after its bitmaps is a sequence of row images::

    image ::= null-bitmap (1 bit per *present* column, LSB first) value(non-NULL present col)*

For each (column list, event kind, columns-present bitmaps) this module writes a function
``decode_rows(buf, pos, end) -> (rows, pos)`` with the per-column work inlined: integers
and floats come from ``struct`` formats (runs of adjacent fixed-width columns in a single
``unpack_from`` when the row has no NULLs), strings are sliced and decoded in place, and
only DECIMAL / temporal / JSON / SET values call a helper. Nothing is dispatched per value.

>>> from sparkcdc.mysql.protocol.constants import ColumnType
>>> from sparkcdc.model.events import RowsKind
>>> from sparkcdc.mysql.binlog.decoded_events import ColumnInfo
>>> col = ColumnInfo("id", ColumnType.LONG, 0, False, True, None, None, None)
>>> decode = build_rows_decoder((col,), RowsKind.INSERT, 0b1, None)
>>> decode(bytes([0x00, 0x2A, 0, 0, 0]), 0, 5)
([(None, (42,))], 5)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from sparkcdc.errors import ProtocolError, SourceError
from sparkcdc.model.events import RowsKind
from sparkcdc.mysql.binlog import column_values as values
from sparkcdc.mysql.binlog.charsets import BINARY_COLLATION, codec_for_collation, errors_for_codec
from sparkcdc.mysql.binlog.decoded_events import MISSING, ColumnInfo, Row
from sparkcdc.mysql.binlog.jsonb import to_json_text
from sparkcdc.mysql.binlog.jsondiff import DIFF_VECTOR_LENGTH, json_diff_applier
from sparkcdc.mysql.protocol.constants import ColumnType, RowsValueOption
from sparkcdc.mysql.protocol.wire import read_lenenc_int

RowsDecoder = Callable[[bytes, int, int], tuple[list[Row], int]]

# struct format characters of fixed-width columns that need no conversion: (signed, unsigned)
_NATIVE_INT_FORMATS: dict[ColumnType, tuple[str, str]] = {
    ColumnType.SHORT: ("h", "H"),
    ColumnType.LONG: ("i", "I"),
    ColumnType.LONGLONG: ("q", "Q"),
}
_FLOAT_FORMATS = {ColumnType.FLOAT: "f", ColumnType.DOUBLE: "d"}
# VARCHAR / CHAR values have a 1-byte length prefix below this max length, else 2 bytes
_ONE_BYTE_LENGTH_LIMIT = 256
STRING_TYPES = (ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING)
BLOB_TYPES = (
    ColumnType.BLOB,
    ColumnType.TINY_BLOB,
    ColumnType.MEDIUM_BLOB,
    ColumnType.LONG_BLOB,
)
_DATE_BYTES = 3
_TIME_V1_BYTES = 3
_DATETIME_V1 = struct.Struct("<Q")
_TIMESTAMP_V1 = struct.Struct("<I")


class _Codegen:
    """Collects generated lines and the helper objects they reference."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"MISSING": MISSING, "from_bytes": int.from_bytes}
        self._ids: dict[int, str] = {}

    def ref(self, obj: Any, hint: str) -> str:
        """A global name for ``obj`` inside the generated module."""
        key = id(obj)
        name = self._ids.get(key)
        if name is None:
            name = f"_{hint}{len(self._ids)}"
            self._ids[key] = name
            self.names[name] = obj
        return name

    def unpacker(self, fmt: str) -> str:
        name = f"_S_{fmt}"
        if name not in self.names:
            self.names[name] = struct.Struct("<" + fmt).unpack_from
        return name


def _length_prefix(g: _Codegen, nbytes: int) -> str:
    """Expression reading an ``nbytes`` little-endian length at ``pos``."""
    if nbytes == 1:
        return "buf[pos]"
    if nbytes == 2:
        return "buf[pos] | buf[pos + 1] << 8"
    if nbytes == 4:
        return f"{g.unpacker('I')}(buf, pos)[0]"
    return f"from_bytes(buf[pos:pos + {nbytes}], 'little')"


def _text_expr(g: _Codegen, col: ColumnInfo, slice_expr: str) -> str:
    charset = col.charset
    # without charset metadata (binlog_row_metadata=MINIMAL) text and binary look the same:
    # keep the bytes and let the caller decode them with the schema it knows
    if charset is None or charset == BINARY_COLLATION:
        return slice_expr
    codec = codec_for_collation(charset)
    if codec is None:
        return slice_expr
    return f"{slice_expr}.decode({codec!r}, {errors_for_codec(codec)!r})"


def length_prefix(col: ColumnInfo) -> int:
    """Bytes of the length before a string, BLOB, JSON or GEOMETRY value: VARCHAR / CHAR
    take 1 below a max length of 256 bytes, else 2; the others say it in their metadata."""
    if col.type in STRING_TYPES:
        return 1 if col.meta < _ONE_BYTE_LENGTH_LIMIT else 2
    return col.meta


def _unsigned(col: ColumnInfo) -> bool:
    """Whether an integer column is unsigned; SourceError when its TABLE_MAP does not say
    and nothing completed it (``tablemeta.complete_columns``): never decoded by a guess."""
    if col.unsigned is None:
        raise SourceError(
            f"the TABLE_MAP does not say whether integer column {col.name or '(unnamed)'!r} "
            "is signed (it has no SIGNEDNESS block), and no schema completed it, so its "
            "values cannot be decoded without guessing (an UNSIGNED 18446744073709551615 "
            "would read as -1). Decode the rows with the stream's schema history, or SET "
            "GLOBAL binlog_row_metadata='FULL' on the source"
        )
    return col.unsigned


def _fixed_format(col: ColumnInfo) -> str | None:
    """The struct format char of a column that unpacks to its final value, else None."""
    if col.type in _NATIVE_INT_FORMATS:
        signed, unsigned = _NATIVE_INT_FORMATS[col.type]
        return unsigned if _unsigned(col) else signed
    if col.type == ColumnType.TINY:
        return "B" if _unsigned(col) else "b"
    return _FLOAT_FORMATS.get(col.type)


def _column_lines(g: _Codegen, col: ColumnInfo, var: str, index: int) -> list[str]:
    """Lines that decode one non-NULL value of ``col`` at ``pos`` into ``var``."""
    t = col.type
    fmt = _fixed_format(col)
    if fmt is not None:
        if fmt == "B":
            return [f"{var} = buf[pos]", "pos += 1"]
        if fmt == "b":
            return [f"{var} = (buf[pos] ^ 128) - 128", "pos += 1"]
        size = struct.calcsize("<" + fmt)
        return [f"{var} = {g.unpacker(fmt)}(buf, pos)[0]", f"pos += {size}"]
    if t == ColumnType.INT24:
        signed = not _unsigned(col)
        return [f"{var} = from_bytes(buf[pos:pos + 3], 'little', signed={signed})", "pos += 3"]
    if t == ColumnType.YEAR:
        return [f"{var} = buf[pos]", f"{var} = {var} + 1900 if {var} else 0", "pos += 1"]
    if t == ColumnType.NEWDECIMAL:
        size, decode = values.decimal_decoder(col.meta >> 8, col.meta & 0xFF)
        fn = g.ref(decode, "dec")
        return [f"{var} = {fn}(buf[pos:pos + {size}])", f"pos += {size}"]
    if t == ColumnType.BIT:
        size = (col.meta >> 8) + (1 if col.meta & 0xFF else 0)
        return [f"{var} = from_bytes(buf[pos:pos + {size}], 'big')", f"pos += {size}"]
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        fn = g.ref(values.decode_date, "date")
        return [
            f"{var} = {fn}(buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16)",
            f"pos += {_DATE_BYTES}",
        ]
    if t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2, ColumnType.TIME2):
        factory = {
            ColumnType.DATETIME2: values.datetime2_decoder,
            ColumnType.TIMESTAMP2: values.timestamp2_decoder,
            ColumnType.TIME2: values.time2_decoder,
        }[t]
        size, decode2 = factory(col.meta)
        fn = g.ref(decode2, "tm")
        return [f"{var} = {fn}(buf, pos)", f"pos += {size}"]
    if t == ColumnType.TIME:
        fn = g.ref(values.decode_time_v1, "time")
        return [
            f"{var} = {fn}(from_bytes(buf[pos:pos + 3], 'little', signed=True))",
            f"pos += {_TIME_V1_BYTES}",
        ]
    if t == ColumnType.DATETIME:
        fn = g.ref(values.decode_datetime_v1, "dtv1")
        return [
            f"{var} = {fn}({g.unpacker('Q')}(buf, pos)[0])",
            f"pos += {_DATETIME_V1.size}",
        ]
    if t == ColumnType.TIMESTAMP:
        fn = g.ref(values.decode_timestamp_v1, "tsv1")
        return [
            f"{var} = {fn}({g.unpacker('I')}(buf, pos)[0])",
            f"pos += {_TIMESTAMP_V1.size}",
        ]
    if t == ColumnType.ENUM:
        read = "buf[pos]" if col.meta == 1 else _length_prefix(g, col.meta)
        if col.enum_values is None:
            return [f"{var} = {read}", f"pos += {col.meta}"]
        labels = g.ref(("", *col.enum_values), "enum")
        return [f"{var} = {labels}[{read}]", f"pos += {col.meta}"]
    if t == ColumnType.SET:
        read = f"from_bytes(buf[pos:pos + {col.meta}], 'little')"
        if col.set_values is None:
            return [f"{var} = {read}", f"pos += {col.meta}"]
        fn = g.ref(values.set_decoder(col.set_values), "set")
        return [f"{var} = {fn}({read})", f"pos += {col.meta}"]
    if t in STRING_TYPES:
        prefix = length_prefix(col)
        value = _text_expr(g, col, "buf[pos:pos + n]")
        if t == ColumnType.STRING and col.charset == BINARY_COLLATION:
            # BINARY(n) is logged without its trailing 0x00 padding; SELECT returns n bytes
            value = f"{value}.ljust({col.meta}, b'\\x00')"
        return [
            f"n = {_length_prefix(g, prefix)}",
            f"pos += {prefix}",
            f"{var} = {value}",
            "pos += n",
        ]
    if t in BLOB_TYPES or t in (ColumnType.JSON, ColumnType.GEOMETRY):
        prefix = length_prefix(col)
        if t == ColumnType.JSON:
            expr = f"{g.ref(to_json_text, 'json')}(buf[pos:pos + n])"
        elif t == ColumnType.GEOMETRY:
            expr = "buf[pos:pos + n]"
        else:
            expr = _text_expr(g, col, "buf[pos:pos + n]")
        return [
            f"n = {_length_prefix(g, prefix)}",
            f"pos += {prefix}",
            f"{var} = {expr}",
            "pos += n",
        ]
    raise ProtocolError(
        f"column {index} ({col.name or '?'}) has type {t.name}, which sparkcdc cannot decode "
        "from row images; change the column type or exclude the table"
    )


def _value_options(buf: bytes, pos: int) -> tuple[int, int]:
    """Read the ``value_options`` packed int that starts a PARTIAL_UPDATE_ROWS after image."""
    options, pos = read_lenenc_int(buf, pos)
    if options is None or options & ~int(RowsValueOption.PARTIAL_JSON_UPDATES):
        raise ProtocolError(
            f"PARTIAL_UPDATE_ROWS after image has value_options {options!r}, expected 0 or "
            f"{int(RowsValueOption.PARTIAL_JSON_UPDATES)} (PARTIAL_JSON_UPDATES)"
        )
    return options, pos


def _partial_json_lines(g: _Codegen, col: ColumnInfo, var: str, index: int, bit: int) -> list[str]:
    """Lines decoding JSON column ``index`` of a PARTIAL_UPDATE_ROWS after image.

    When bit ``bit`` of ``pbits`` is set the value is a diff vector (4-byte size + diffs),
    applied to the same column of the row's before image; else a whole JSON document.
    """
    name = col.name if col.name is not None else f"#{index}"
    apply = g.ref(json_diff_applier(name), "jdiff")
    lines = [
        f"if pbits & {1 << bit}:",
        f"    n = {_length_prefix(g, DIFF_VECTOR_LENGTH.size)}",
        f"    pos += {DIFF_VECTOR_LENGTH.size}",
        f"    {var} = {apply}(before[{index}], buf, pos, pos + n)",
        "    pos += n",
        "else:",
    ]
    lines.extend("    " + line for line in _column_lines(g, col, var, index))
    return lines


def _image_lines(
    g: _Codegen,
    columns: tuple[ColumnInfo, ...],
    present: int,
    out: str,
    partial_bits: dict[int, int] | None = None,
) -> list[str]:
    """Lines decoding one row image at ``pos`` into the tuple variable ``out``.

    ``partial_bits`` (PARTIAL_UPDATE_ROWS after images) maps JSON column indexes to their
    bit in the partial-JSON bitmap ``pbits``.
    """
    present_idx = [i for i in range(len(columns)) if present >> i & 1]
    null_bytes = (len(present_idx) + 7) // 8
    nullable = [(bit, i) for bit, i in enumerate(present_idx) if columns[i].nullable]
    lines: list[str] = []
    if nullable:
        lines.append(f"nb = {_length_prefix(g, null_bytes)}")
    lines.append(f"pos += {null_bytes}")

    def straight(check_nulls: bool) -> list[str]:
        body: list[str] = []
        run: list[tuple[int, str]] = []

        def flush() -> None:
            if not run:
                return
            if len(run) == 1:
                i, fmt = run[0]
                body.extend(_column_lines(g, columns[i], f"v{i}", i))
            else:
                fmt = "".join(f for _, f in run)
                targets = ", ".join(f"v{i}" for i, _ in run)
                body.append(f"{targets} = {g.unpacker(fmt)}(buf, pos)")
                body.append(f"pos += {struct.calcsize('<' + fmt)}")
            run.clear()

        def value_lines(col: ColumnInfo, i: int) -> list[str]:
            if partial_bits is not None and i in partial_bits:
                return _partial_json_lines(g, col, f"v{i}", i, partial_bits[i])
            return _column_lines(g, col, f"v{i}", i)

        for bit, i in enumerate(present_idx):
            col = columns[i]
            fmt = _fixed_format(col)
            if check_nulls and col.nullable:
                flush()
                body.append(f"if nb & {1 << bit}:")
                body.append(f"    v{i} = None")
                body.append("else:")
                body.extend("    " + line for line in value_lines(col, i))
            elif fmt is not None:
                run.append((i, fmt))
            else:
                flush()
                body.extend(value_lines(col, i))
        flush()
        return body

    if nullable:
        lines.append("if nb:")
        lines.extend("    " + line for line in straight(check_nulls=True))
        lines.append("else:")
        lines.extend("    " + line for line in straight(check_nulls=False))
    else:
        lines.extend(straight(check_nulls=False))
    items = [f"v{i}" if present >> i & 1 else "MISSING" for i in range(len(columns))]
    lines.append(f"{out} = ({', '.join(items)}{',' if len(items) == 1 else ''})")
    return lines


def _partial_prefix_lines(g: _Codegen, json_columns: int) -> list[str]:
    """Lines reading ``value_options`` and the partial-JSON bitmap into ``pbits``.

    The bitmap has one bit per JSON column of the table, present in the image or not
    (MySQL ``rpl_record.cc``, ``unpack_row``: ``json_column_count()`` bits, LSB first).
    """
    size = (json_columns + 7) // 8
    return [
        f"opts, pos = {g.ref(_value_options, 'vopts')}(buf, pos)",
        f"if opts & {int(RowsValueOption.PARTIAL_JSON_UPDATES)}:",
        f"    pbits = from_bytes(buf[pos:pos + {size}], 'little')",
        f"    pos += {size}",
        "else:",
        "    pbits = 0",
    ]


def generate_source(
    columns: tuple[ColumnInfo, ...],
    kind: RowsKind,
    present: int,
    present_after: int | None,
    partial_json: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Python source of ``decode_rows`` for these columns, and the globals it needs.

    ``present`` is the columns-present bitmap (bit i = column i) of the first image,
    ``present_after`` that of the after image of UPDATE rows. ``partial_json``: the rows
    are those of PARTIAL_UPDATE_ROWS (each after image starts with ``value_options`` and
    may carry JSON values as diffs against the before image).
    """
    g = _Codegen()
    first = "after" if kind is RowsKind.INSERT else "before"
    lines = [
        "def decode_rows(buf, pos, end):",
        "    rows = []",
        "    append = rows.append",
        "    while pos < end:",
    ]
    lines.extend("        " + line for line in _image_lines(g, columns, present, first))
    if kind is RowsKind.UPDATE:
        second = present if present_after is None else present_after
        partial_bits: dict[int, int] | None = None
        if partial_json:
            json_idx = [i for i, c in enumerate(columns) if c.type == ColumnType.JSON]
            partial_bits = {i: bit for bit, i in enumerate(json_idx)}
            lines.extend("        " + line for line in _partial_prefix_lines(g, len(json_idx)))
        after_lines = _image_lines(g, columns, second, "after", partial_bits)
        lines.extend("        " + line for line in after_lines)
        lines.append("        append((before, after))")
    elif kind is RowsKind.INSERT:
        lines.append("        append((None, after))")
    else:
        lines.append("        append((before, None))")
    lines.append("    return rows, pos")
    return "\n".join(lines) + "\n", g.names


def build_rows_decoder(
    columns: tuple[ColumnInfo, ...],
    kind: RowsKind,
    present: int,
    present_after: int | None,
    partial_json: bool = False,
) -> RowsDecoder:
    """Compile the specialised ``decode_rows(buf, pos, end) -> (rows, end_pos)``.

    See the module docstring for an example; ``partial_json`` as in :func:`generate_source`.
    """
    if partial_json and kind is not RowsKind.UPDATE:
        raise ValueError("partial JSON rows are UPDATE rows")
    source, names = generate_source(columns, kind, present, present_after, partial_json)
    code = compile(source, f"<sparkcdc rows decoder {kind.value}>", "exec")
    namespace: dict[str, Any] = dict(names)
    exec(code, namespace)  # generated from the table map only, never from row data
    decoder: RowsDecoder = namespace["decode_rows"]
    return decoder
