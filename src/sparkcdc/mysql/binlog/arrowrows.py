"""Row images straight from binlog bytes into Arrow columns, by the compiled kernel.

The pure-Python path decodes a ROWS event into a Python value per column
(:mod:`sparkcdc.mysql.binlog.rowcodec`) and the change-row builders turn those into Arrow arrays
(:mod:`sparkcdc.spark.changelog`): two passes over Python objects. The kernel
(``_rowkernel.c``, built with the package when a C compiler is present) reads the bytes of
one table shape's row images into Arrow buffers directly, with the change-row metadata
(``_op``, ``_op_ts``, ``_seq``) beside them.

It takes a table shape only when it gives exactly the Arrow value the Python path gives
for every column the output wants (:func:`plan`): integers, BOOLEAN, FLOAT, DOUBLE,
DECIMAL up to 38 digits, DATE, DATETIME2, TIMESTAMP2, ENUM with labels, and UTF-8 or binary
strings and BLOBs, each stored as the output column is (``same_storage``). Other columns
of the image are skipped over; a shape that wants anything else (TIME, SET, JSON, BIT(n),
other charsets, images without every column) stays on the Python path, and so does any one
event the kernel cannot read exactly (invalid UTF-8, a value out of range, bytes that do
not hold the images): ``add`` then returns False with nothing added, and the Python path
gives the value or the error.

Where the kernel is not built (no C compiler when the package was installed, or the
package shipped as a zip to a cluster's executors) everything takes the Python path,
which says so once in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import pyarrow as pa

from sparkcdc.model.events import EncodedRows, RowsKind
from sparkcdc.mysql.binlog import column_values as values
from sparkcdc.mysql.binlog.charsets import BINARY_COLLATION, codec_for_collation
from sparkcdc.mysql.binlog.decoded_events import ColumnInfo
from sparkcdc.mysql.binlog.rowcodec import BLOB_TYPES, STRING_TYPES, length_prefix
from sparkcdc.mysql.protocol.constants import ColumnType

try:
    from sparkcdc.mysql.binlog import _rowkernel  # type: ignore[attr-defined]
except ImportError:  # not built: the pure-Python path
    _rowkernel = None

log = logging.getLogger(__name__)
COMPILED = _rowkernel is not None
_announced = False


class Read(IntEnum):
    """How the kernel reads an image column (``_rowkernel.c``, ``R_*``)."""

    INT = 1
    YEAR = 2
    BITS = 3
    FLOAT = 4
    DOUBLE = 5
    DECIMAL = 6
    DATE = 7
    DATETIME2 = 8
    TIMESTAMP2 = 9
    STR = 10
    ENUM = 11
    SKIP_FIXED = 12
    SKIP_VAR = 13


class Out(IntEnum):
    """The Arrow type of an output column (``_rowkernel.c``, ``O_*``)."""

    INT8 = 1
    INT16 = 2
    INT32 = 3
    INT64 = 4
    BOOL = 5
    DEC128 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    DATE32 = 9
    TS = 10
    UTF8 = 11
    BINARY = 12


_SIGNED, _UTF8, _NULLABLE = 1, 2, 4
_KINDS = {RowsKind.INSERT: 0, RowsKind.UPDATE: 1, RowsKind.DELETE: 2}
_INT_BYTES = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.INT24: 3,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
}
_SKIPPED_FIXED = {  # columns the kernel steps over but never delivers: bytes per value
    ColumnType.TIME: 3,
    ColumnType.DATETIME: 8,
    ColumnType.TIMESTAMP: 4,
}
_INT_OUTS = {
    pa.int8(): Out.INT8,
    pa.int16(): Out.INT16,
    pa.int32(): Out.INT32,
    pa.int64(): Out.INT64,
}
_META = (pa.string(), pa.timestamp("us", tz="UTC"), pa.int64())  # _op, _op_ts, _seq


def compiled() -> bool:
    """Whether the compiled kernel is there; says once in the log when it is not."""
    global _announced
    if not COMPILED and not _announced:
        _announced = True
        log.info(
            "the compiled row decoder (sparkcdc.mysql.binlog._rowkernel) is not built: binlog rows "
            "are decoded in pure Python (same results, slower). Reinstall the package where "
            "a C compiler is present (pip install -e . with gcc) to build it"
        )
    return COMPILED


Spec = tuple[int, int, int, int, int, int, tuple[bytes, ...] | None]


# what MySQL and MariaDB write as column metadata (sql/field.h): the kernel takes a column
# only within it; a TABLE_MAP that says otherwise is left to the Python path, which refuses
_MAX_FSP = 6
_MAX_DECIMAL_PRECISION = 65
_MAX_DECIMAL_SCALE = 30
_MAX_BIT_BYTES = 8
_LENGTH_PREFIXES = range(1, 5)


def _documented(col: ColumnInfo) -> bool:
    """Whether ``col``'s metadata is within what the servers write, for its type."""
    t, meta = col.type, col.meta
    if t in (ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2):
        return meta <= _MAX_FSP
    if t == ColumnType.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        return 1 <= precision <= _MAX_DECIMAL_PRECISION and scale <= min(
            precision, _MAX_DECIMAL_SCALE
        )
    if t == ColumnType.BIT:
        return (meta >> 8) + (1 if meta & 0xFF else 0) in range(1, _MAX_BIT_BYTES + 1)
    if t in BLOB_TYPES or t in (ColumnType.JSON, ColumnType.GEOMETRY):
        return meta in _LENGTH_PREFIXES
    if t == ColumnType.SET:
        return 1 <= meta <= _MAX_BIT_BYTES
    if t == ColumnType.ENUM:
        return meta in (1, 2)
    return True


def _read(col: ColumnInfo) -> tuple[Read, int, int, int, int, tuple[bytes, ...] | None] | None:
    """(read, size, flags, a, b, labels) of an image column, or None: the kernel cannot
    even step over it."""
    if not _documented(col):
        return None
    t = col.type
    if t in _INT_BYTES:
        if col.unsigned is None:
            return None  # signedness unknown: the Python path refuses it
        return Read.INT, _INT_BYTES[t], 0 if col.unsigned else _SIGNED, 0, 0, None
    if t == ColumnType.YEAR:
        return Read.YEAR, 1, 0, 0, 0, None
    if t == ColumnType.BIT:
        size = (col.meta >> 8) + (1 if col.meta & 0xFF else 0)
        return Read.BITS, size, 0, 0, 0, None
    if t == ColumnType.FLOAT:
        return Read.FLOAT, 4, 0, 0, 0, None
    if t == ColumnType.DOUBLE:
        return Read.DOUBLE, 8, 0, 0, 0, None
    if t == ColumnType.NEWDECIMAL:
        precision, scale = col.meta >> 8, col.meta & 0xFF
        return Read.DECIMAL, values.decimal_size(precision, scale), 0, precision, scale, None
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        return Read.DATE, 3, 0, 0, 0, None
    if t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2):
        read = Read.DATETIME2 if t == ColumnType.DATETIME2 else Read.TIMESTAMP2
        fbytes = values.fsp_bytes(col.meta)
        size = (5 if read == Read.DATETIME2 else 4) + fbytes
        return read, size, 0, fbytes, values.fsp_multiplier(col.meta), None
    if t == ColumnType.TIME2:
        return Read.SKIP_FIXED, 3 + values.fsp_bytes(col.meta), 0, 0, 0, None
    if t in _SKIPPED_FIXED:
        return Read.SKIP_FIXED, _SKIPPED_FIXED[t], 0, 0, 0, None
    if t == ColumnType.ENUM:
        if col.enum_values is None or col.meta not in (1, 2):
            return Read.SKIP_FIXED, col.meta, 0, 0, 0, None
        labels = tuple(label.encode("utf-8") for label in col.enum_values)
        return Read.ENUM, col.meta, 0, 0, 0, labels
    if t == ColumnType.SET:
        return Read.SKIP_FIXED, col.meta, 0, 0, 0, None
    if t in STRING_TYPES or t in BLOB_TYPES:
        prefix = length_prefix(col)
        if col.charset is None:
            return Read.SKIP_VAR, prefix, 0, 0, 0, None
        if col.charset == BINARY_COLLATION:
            pad = col.meta if t == ColumnType.STRING else 0  # BINARY(n) loses its 0x00 padding
            return Read.STR, prefix, 0, pad, 0, None
        if codec_for_collation(col.charset) != "utf-8":
            return Read.SKIP_VAR, prefix, 0, 0, 0, None
        return Read.STR, prefix, _UTF8, 0, 0, None
    if t == ColumnType.JSON:
        # MySQL's binary JSON, which the Python path judges value by value and the kernel
        # cannot even when stepping over it: a shape with one is Python's, whole
        return None
    if t == ColumnType.GEOMETRY:
        return Read.SKIP_VAR, length_prefix(col), 0, 0, 0, None
    return None


def _out(read: Read, flags: int, size: int, arrow: pa.DataType) -> tuple[Out, int] | None:
    """The kernel output of ``read`` values as ``arrow``, when it equals the Python path's."""
    if read in (Read.INT, Read.YEAR) or (read == Read.BITS and size <= 8):
        if arrow in _INT_OUTS:
            return _INT_OUTS[arrow], 0
        if pa.types.is_boolean(arrow):
            return Out.BOOL, 0
        if pa.types.is_decimal128(arrow) and arrow.scale == 0:
            return Out.DEC128, arrow.precision
        return None
    simple = {
        Read.FLOAT: (pa.float32(), Out.FLOAT32),
        Read.DOUBLE: (pa.float64(), Out.FLOAT64),
        Read.DATE: (pa.date32(), Out.DATE32),
        Read.DATETIME2: (pa.timestamp("us"), Out.TS),
        Read.TIMESTAMP2: (pa.timestamp("us", tz="UTC"), Out.TS),
        Read.ENUM: (pa.string(), Out.UTF8),
    }
    if read in simple:
        wanted, out = simple[read]
        return (out, 0) if arrow == wanted else None
    if read == Read.DECIMAL:
        return (Out.DEC128, arrow.precision) if pa.types.is_decimal128(arrow) else None
    if read == Read.STR:
        wanted, out = (pa.string(), Out.UTF8) if flags & _UTF8 else (pa.binary(), Out.BINARY)
        return (out, 0) if arrow == wanted else None
    return None


@dataclass(frozen=True)
class Plan:
    """How the kernel reads one table shape into one output layout."""

    specs: tuple[Spec, ...]
    outs: tuple[tuple[int, int], ...]
    types: tuple[pa.DataType, ...]


def plan(columns: Sequence[ColumnInfo], wanted: Sequence[tuple[int, pa.DataType]]) -> Plan | None:
    """The kernel's plan for images of ``columns`` into outputs ``wanted[j] = (image
    position, Arrow type)``, or None when the kernel would not give exactly the Python
    path's values (the caller has checked that each wanted column is stored as its output
    column is: ``ImageColumns.same_storage``).

    >>> from sparkcdc.mysql.protocol.constants import ColumnType
    >>> col = ColumnInfo("id", ColumnType.LONG, 0, False, False, None, None, None)
    >>> plan([col], [(0, pa.int32())]).outs, plan([col], [(0, pa.string())])
    (((3, 0),), None)
    """
    target = {position: j for j, (position, _) in enumerate(wanted)}
    if len(target) != len(wanted):
        return None
    specs: list[Spec] = []
    outs: list[tuple[int, int] | None] = [None] * len(wanted)
    for i, col in enumerate(columns):
        read = _read(col)
        if read is None:
            return None
        kind, size, flags, a, b, labels = read
        out = target.get(i, -1)
        if out >= 0:
            chosen = _out(kind, flags, size, wanted[out][1])
            if chosen is None:
                return None
            outs[out] = (int(chosen[0]), chosen[1])
        if col.nullable:
            flags |= _NULLABLE
        specs.append((int(kind), size, flags, out, a, b, labels))
    if any(o is None for o in outs):
        return None
    return Plan(
        tuple(specs),
        tuple(o for o in outs if o is not None),
        tuple(t for _, t in wanted),
    )


def key_plan(columns: Sequence[ColumnInfo], position: int) -> Plan | None:
    """The kernel's plan that reads the column at ``position`` alone (the others stepped
    over), when that column's Arrow value converts back to the Python decoder's own value:
    an integer (as int64: a BIGINT UNSIGNED value above its range makes the kernel refuse
    the event), or a UTF-8 or binary string. None for any other column.

    >>> from sparkcdc.mysql.protocol.constants import ColumnType
    >>> key = ColumnInfo("id", ColumnType.LONG, 0, False, False, None, None, None)
    >>> when = ColumnInfo("at", ColumnType.DATETIME2, 0, False, False, None, None, None)
    >>> key_plan([when, key], 1).outs, key_plan([when, key], 0)
    (((4, 0),), None)
    """
    read = _read(columns[position])
    if read is None:
        return None
    kind, _, flags, *_ = read
    if kind == Read.INT:
        arrow = pa.int64()
    elif kind == Read.STR:
        arrow = pa.string() if flags & _UTF8 else pa.binary()
    else:
        return None
    return plan(columns, [(position, arrow)])


class KernelRows:
    """The kernel's builder for one plan (the :class:`~sparkcdc.model.events.RowKernel` a
    binlog event's ``EventRows`` gives): ``add`` events' images, ``finish`` into Arrow
    arrays (the wanted columns, then ``_op``, ``_op_ts``, ``_seq``)."""

    def __init__(self, p: Plan) -> None:
        assert _rowkernel is not None
        self._builder: Any = _rowkernel.Builder(p.specs, p.outs)
        self._types = (*p.types, *_META)

    @property
    def rows(self) -> int:
        """Images added since the last ``finish``."""
        rows: int = self._builder.rows
        return rows

    def add(
        self,
        images: EncodedRows,
        kind: RowsKind,
        ts_us: int,
        seq_base: int,
        first_row: int,
        shared_seq: bool,
    ) -> bool:
        """As ``RowKernel.add``: False where the kernel would not read the event exactly."""
        added: int = self._builder.add(
            images.data,
            images.pos,
            images.end,
            _KINDS[kind],
            ts_us,
            seq_base,
            first_row,
            shared_seq,
        )
        return added >= 0

    def finish(self) -> list[pa.Array]:
        n, columns = self._builder.finish()
        return [
            buffers_array(arrow, n, *column)
            for arrow, column in zip(self._types, columns, strict=True)
        ]


def buffers_array(
    arrow: pa.DataType,
    n: int,
    nulls: int,
    valid: bytes | None,
    offsets: bytes | None,
    data: bytes,
) -> pa.Array:
    """An Arrow array of ``n`` values from a C builder's column as its ``finish()`` hands
    it over (``_rowkernel``, ``_textrows``): null count, validity bitmap or None, offsets
    (variable-width types) or None, values."""
    validity = None if valid is None else pa.py_buffer(valid)
    buffers = [validity, pa.py_buffer(data)]
    if offsets is not None:
        buffers.insert(1, pa.py_buffer(offsets))
    return pa.Array.from_buffers(arrow, n, buffers, null_count=nulls)
