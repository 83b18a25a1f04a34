"""The fuzz targets: functions of one byte string that raise only on a defect.

Every input must end in a correct decode or a clean error of the project (ProtocolError,
SourceError); anything else that escapes (IndexError, MemoryError, an AssertionError of a
check here) is a finding, and so is a crash, a hang or an out-of-bounds read in the C kernels
(run under AddressSanitizer by ``scripts/fuzz.sh``).

``binlog``: binlog events back to back, each as long as its header says (what a binlog
file holds after its magic, without checksums), decoded by :class:`BinlogDecoder`; every
ROWS event's images are decoded in Python and, where the compiled kernel takes the table
shape, by the kernel too (``_rowkernel.c``), which must give the Python decoder's values.

``range``: the same inputs read as a stream reads a binlog range
(``binlog_range.changes_of_events``): statements classified, DDL parsed, TABLE_MAPs without
metadata completed from a schema version.

``textrows``: three bytes of set-up (columns, first sequence id, read size), then what a
connection delivers after a result set's column definitions, split by the compiled splitter
(``_textrows.c``) block by block as ``mysql.chunks.textrows.select_text`` feeds it, checked
against a reading of the same bytes by the protocol's documented layout in Python, and the
values converted to their columns' types as the snapshot reader converts them.
"""

from __future__ import annotations

import contextlib
import math
import struct
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pymysql import converters
from pymysql.constants import FIELD_TYPE

from sparkcdc.errors import ProtocolError, SourceError
from sparkcdc.model.events import RowChanges, RowsKind
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.decoded_events import (
    BinlogEvent,
    ColumnInfo,
    RowsEvent,
    TransactionPayloadEvent,
)
from sparkcdc.mysql.binlog.decoder import BinlogDecoder, EventRows
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.chunks import textrows
from sparkcdc.mysql.protocol.constants import EVENT_HEADER_SIZE
from sparkcdc.mysql.stream.binlog_range import changes_of_events

_RANGE_START = BinlogPosition("binlog.000001", 4)
_RANGE_END = BinlogPosition("binlog.999999", 4)
# the seeds' tables are t (id INT, c <one type>); a version for one of them
_RANGE_SCHEMA = TableSchema(
    "fuzz_corpus",
    "t",
    (
        Column.from_mysql("id", "int", "int(11)", False),
        Column.from_mysql("c", "bigint", "bigint(20) unsigned", True),
    ),
    ("id",),
)
# what an input may end in: the stream stops with one of these, and says why
CLEAN = (ProtocolError, SourceError)
_EVENT_SIZE = struct.Struct("<I")  # the header's event_size, at byte 9
_EVENT_SIZE_AT = 9


def split_events(data: bytes) -> Iterator[bytes]:
    """The events of ``data``: each as long as its header says, at least a header and at
    most what is left."""
    pos = 0
    while pos < len(data):
        left = len(data) - pos
        size = left
        if left >= _EVENT_SIZE_AT + _EVENT_SIZE.size:
            size = _EVENT_SIZE.unpack_from(data, pos + _EVENT_SIZE_AT)[0]
        size = min(max(size, EVENT_HEADER_SIZE), left)
        yield data[pos : pos + size]
        pos += size


# ------------------------------------------------------------------------------ binlog


def binlog(data: bytes) -> None:
    """Decode ``data``'s events; check every ROWS event's images (:func:`check_rows`)."""
    decoder = BinlogDecoder(lazy_rows=True)
    for raw in split_events(data):
        try:
            event = decoder.decode(raw)
        except CLEAN:
            continue  # the stream stops here; the fuzzer reads on to reach further code
        for inner in _events(event):
            if isinstance(inner, RowsEvent) and isinstance(inner.rows, EventRows):
                check_rows(inner.rows, inner.kind)


def binlog_range(data: bytes) -> None:
    """``data``'s events read as a stream reads a range (``changes_of_events``): statements
    classified and DDL parsed, TABLE_MAPs completed from a schema version where they lack
    metadata, every change's rows decoded; the read stops at the first clean error."""
    events = [raw for raw in split_events(data) if len(raw) >= EVENT_HEADER_SIZE]
    if not events:
        return
    versions = TableVersions.of([_RANGE_SCHEMA])
    try:
        for change in changes_of_events(
            events, _RANGE_START, _RANGE_END, lambda _d, _t: True, versions
        ):
            if isinstance(change, RowChanges):
                assert len(change.rows) > 0
    except CLEAN:
        pass


def _events(event: BinlogEvent) -> tuple[BinlogEvent, ...]:
    if isinstance(event, TransactionPayloadEvent):
        return event.events
    return (event,)


def check_rows(rows: EventRows, kind: RowsKind) -> None:
    """The images decoded in Python (or a clean error), and, for every kernel plan of the
    shape, the kernel's values equal to the Python decoder's or the event refused."""
    try:
        decoded: list[Any] | None = rows.decode()
    except CLEAN:
        decoded = None
    if not arrowrows.COMPILED or not rows.complete:
        return
    columns = rows.table.columns
    plans = [arrowrows.plan(columns, wanted) for wanted in _outputs(columns)]
    plans += [arrowrows.key_plan(columns, i) for i in range(len(columns))]
    for plan in plans:
        if plan is None:
            continue
        kernel = arrowrows.KernelRows(plan)
        if not kernel.add(rows, kind, 0, 0, 0, False):
            assert kernel.rows == 0, "a refused event left rows behind"
            continue
        assert decoded is not None, "the kernel read an event the Python decoder refuses"
        images = [image for pair in decoded for image in pair if image is not None]
        arrays = kernel.finish()
        for (position, arrow), array in zip(_wanted(plan, columns), arrays, strict=False):
            array.validate(full=True)
            expected = [image[position] for image in images]
            got = array.to_pylist()
            assert _same(got, _as_arrow(expected, arrow)), (
                f"column {position} ({columns[position].type.name} as {arrow}): kernel "
                f"{got!r}, Python {expected!r}"
            )


def _wanted(plan: arrowrows.Plan, columns: tuple[ColumnInfo, ...]) -> list[tuple[int, Any]]:
    """(image position, Arrow type) of each output of ``plan``, in output order."""
    positions = sorted((spec[3], i) for i, spec in enumerate(plan.specs) if spec[3] >= 0)
    return [(i, plan.types[out]) for out, i in positions]


def _outputs(columns: tuple[ColumnInfo, ...]) -> list[list[tuple[int, pa.DataType]]]:
    """Two output layouts for a shape: each column as its own Arrow type, and the integers
    narrowed to int8 (so the kernel's range checks are reached)."""
    natural, narrow = [], []
    integers = (arrowrows.Read.INT, arrowrows.Read.YEAR, arrowrows.Read.BITS)
    for i, col in enumerate(columns):
        arrow = _natural(col)
        if arrow is None:
            continue
        natural.append((i, arrow))
        read = arrowrows._read(col)
        narrow.append((i, pa.int8() if read and read[0] in integers else arrow))
    return [natural, narrow]


def _natural(col: ColumnInfo) -> pa.DataType | None:
    read = arrowrows._read(col)
    if read is None:
        return None
    kind, size, flags, a, *_ = read
    if kind == arrowrows.Read.INT:
        return pa.decimal128(20, 0) if size == 8 and not flags & 1 else pa.int64()
    if kind == arrowrows.Read.BITS:
        return pa.decimal128(20, 0)
    if kind == arrowrows.Read.DECIMAL:
        return pa.decimal128(a, col.meta & 0xFF) if a <= 38 else None
    simple: dict[arrowrows.Read, pa.DataType] = {
        arrowrows.Read.YEAR: pa.int16(),
        arrowrows.Read.FLOAT: pa.float32(),
        arrowrows.Read.DOUBLE: pa.float64(),
        arrowrows.Read.DATE: pa.date32(),
        arrowrows.Read.DATETIME2: pa.timestamp("us"),
        arrowrows.Read.TIMESTAMP2: pa.timestamp("us", tz="UTC"),
        arrowrows.Read.ENUM: pa.string(),
    }
    if kind in simple:
        return simple[kind]
    if kind == arrowrows.Read.STR:
        return pa.string() if flags & 2 else pa.binary()
    return None


def _as_arrow(values: list[Any], arrow: pa.DataType) -> list[Any] | None:
    """The Python decoder's values as the typed changelog stores them, None if they do not
    fit (then the kernel must have refused the event)."""
    if pa.types.is_decimal(arrow):
        values = [None if v is None else Decimal(v) for v in values]
    try:
        converted: list[Any] = pa.array(values, type=arrow).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return None
    return converted


def _same(got: list[Any], expected: list[Any] | None) -> bool:
    if expected is None or len(got) != len(expected):
        return False
    return all(a == b or _both_nan(a, b) for a, b in zip(got, expected, strict=True))


def _both_nan(a: Any, b: Any) -> bool:
    return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)


# ---------------------------------------------------------------------------- text rows

_HEADER = 4
_MAX_PAYLOAD = 0xFFFFFF
_ERR, _EOF, _NULL = 0xFF, 0xFE, 0xFB
_LENENC_WIDTHS = {0xFC: 2, 0xFD: 3, 0xFE: 8}
_BATCH_ROWS = 4  # rows a batch holds before the splitter is finished (BATCH_ROWS, small)

# column types the values are converted to, in turn: (column, pymysql field type, charset)
_TEXT_COLUMNS: list[tuple[Column, int, int]] = [
    (Column.from_mysql("i", "int", "int(11)", True), FIELD_TYPE.LONG, 63),
    (
        Column.from_mysql("s", "varchar", "varchar(20)", True, charset="utf8mb4"),
        FIELD_TYPE.VAR_STRING,
        45,
    ),
    (Column.from_mysql("d", "decimal", "decimal(10,2)", True), FIELD_TYPE.NEWDECIMAL, 63),
    (Column.from_mysql("t", "datetime", "datetime(6)", True), FIELD_TYPE.DATETIME, 63),
    (Column.from_mysql("b", "varbinary", "varbinary(20)", True), FIELD_TYPE.VAR_STRING, 63),
    (Column.from_mysql("u", "bigint", "bigint(20) unsigned", True), FIELD_TYPE.LONGLONG, 63),
    (Column.from_mysql("f", "float", "float", True), FIELD_TYPE.FLOAT, 63),
    (Column.from_mysql("tm", "time", "time", True), FIELD_TYPE.TIME, 63),
    (Column.from_mysql("dt", "date", "date", True), FIELD_TYPE.DATE, 63),
    (Column.from_mysql("bt", "bit", "bit(10)", True), FIELD_TYPE.BIT, 63),
]


class _Field:
    def __init__(self, charsetnr: int) -> None:
        self.charsetnr = charsetnr


def _converter(field_type: int, charsetnr: int) -> tuple[str | None, Callable[..., Any] | None]:
    """(encoding, converter) as pymysql's result gives them for a field (_get_descriptions)."""
    text = field_type in (FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB)
    encoding = ("utf8" if charsetnr != 63 else None) if text else "ascii"
    convert = converters.decoders.get(field_type)
    return encoding, None if convert is converters.through else convert


def textrows_input(data: bytes) -> tuple[int, int, int, bytes]:
    """(columns, first sequence id, bytes fed at a time, stream) of a fuzz input."""
    return 1 + data[0] % 8, data[1], 1 + data[2] * 61, data[3:]


def text_rows(data: bytes) -> None:
    """Split ``data``'s stream as the snapshot reader does and check it (module docstring)."""
    if len(data) < 3 or textrows._textrows is None:
        return
    ncols, seq, step, stream = textrows_input(data)
    expected_rows, expected_end = reference_rows(ncols, seq, stream)
    splitter = textrows._textrows.Splitter(ncols, seq)
    rows: list[tuple[bytes | None, ...]] = []
    buffer, pos, fed = bytearray(), 0, 0
    end: str = "more"
    while True:
        del buffer[:pos]
        chunk = stream[fed : fed + step]
        fed += len(chunk)
        buffer += chunk
        try:
            pos, state, *_ = splitter.feed(buffer, 0)
        except ValueError:
            end = "malformed"
            break
        if state == textrows._textrows.ERROR:
            end = "error"
            break
        if state == textrows._textrows.END:
            end = "end"
            break
        if splitter.rows >= _BATCH_ROWS:
            rows += _finish(splitter, ncols)
        if not chunk:
            break
    assert end == expected_end, f"the splitter ends {end}, the layout says {expected_end}"
    if end != "malformed":  # a malformed read is dropped whole, with its connection
        rows += _finish(splitter, ncols)
        assert rows == expected_rows, f"rows {rows!r}, by the layout {expected_rows!r}"


def _finish(splitter: Any, ncols: int) -> list[tuple[bytes | None, ...]]:
    n, raw = splitter.finish()
    arrays = []
    for i, buffers in enumerate(raw):
        text = arrowrows.buffers_array(pa.large_binary(), n, *buffers)
        text.validate(full=True)
        column, field_type, charsetnr = _TEXT_COLUMNS[i % len(_TEXT_COLUMNS)]
        # a clean error: the server's text is not a value of its column, the read stops
        with contextlib.suppress(CLEAN):
            textrows.typed(text, column, charsetnr, _converter(field_type, charsetnr))
        arrays.append(text.to_pylist())
    assert len(arrays) == ncols
    return list(zip(*arrays, strict=True)) if n else []


def reference_rows(
    ncols: int, seq: int, stream: bytes
) -> tuple[list[tuple[bytes | None, ...]], str]:
    """The rows of ``stream`` by the documented layouts (packets, text result rows, EOF and
    ERR packets; see ``_textrows.c``), and how it ends: "end", "error", "malformed" or
    "more" (an incomplete packet)."""
    rows: list[tuple[bytes | None, ...]] = []
    pos = 0
    while True:
        payload = b""
        while True:
            if len(stream) - pos < _HEADER:
                return rows, "more"
            n = int.from_bytes(stream[pos : pos + 3], "little")
            if stream[pos + 3] != seq:
                return rows, "malformed"
            if len(stream) - pos - _HEADER < n:
                return rows, "more"
            payload += stream[pos + _HEADER : pos + _HEADER + n]
            pos += _HEADER + n
            seq = (seq + 1) & 0xFF
            if n < _MAX_PAYLOAD:
                break
        if payload[:1] == bytes([_ERR]):
            return rows, "error"
        if payload[:1] == bytes([_EOF]) and len(payload) < 9:
            return rows, "end"
        row = _row(payload, ncols)
        if row is None:
            return rows, "malformed"
        rows.append(row)


def _row(payload: bytes, ncols: int) -> tuple[bytes | None, ...] | None:
    values: list[bytes | None] = []
    at = 0
    for _ in range(ncols):
        if at >= len(payload):
            return None
        first = payload[at]
        at += 1
        if first == _NULL:
            values.append(None)
            continue
        n = first
        if first > _NULL:
            width = _LENENC_WIDTHS.get(first)
            if width is None or len(payload) - at < width:
                return None
            n = int.from_bytes(payload[at : at + width], "little")
            at += width
        if n > len(payload) - at:
            return None
        values.append(payload[at : at + n])
        at += n
    return tuple(values) if at == len(payload) else None


# the seed corpus of each target (tests/fuzz/corpus/...)
SEEDS = {"binlog": "binlog", "range": "binlog", "textrows": "textrows"}
TARGETS: dict[str, Callable[[bytes], None]] = {
    "binlog": binlog,
    "range": binlog_range,
    "textrows": text_rows,
}
