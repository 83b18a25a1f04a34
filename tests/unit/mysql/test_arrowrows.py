"""The compiled decoder into Arrow (sparkcdc.mysql.binlog.arrowrows, _rowkernel.c) on hand-built
row images: the values the Python decoder gives, and nothing added (the Python path then
decides) for bytes it cannot read exactly."""

from __future__ import annotations

import datetime as dt
import logging
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.mysql.test_decoder import (
    _COLUMNS,
    FULL_ROW,
    NULL_ROW,
    _dt2,
    event,
    row_image,
    rows_body,
    table_map_body,
)

from sparkcdc.errors import ProtocolError
from sparkcdc.model.events import RowChanges, RowsKind
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.decoded_events import RowsEvent
from sparkcdc.mysql.binlog.decoder import BinlogDecoder, EventRows
from sparkcdc.mysql.protocol.constants import EventType
from sparkcdc.spark.changelog.typed import TypedChangelogBuilder

needs_kernel = pytest.mark.skipif(not arrowrows.COMPILED, reason="the kernel is not built")

# every column of test_decoder's table map but the SET one, as the typed changelog has them
WANTED = [
    (0, pa.int64()),  # id BIGINT
    (1, pa.int16()),  # tiny_u TINYINT UNSIGNED
    (2, pa.string()),  # name VARCHAR(100) utf8mb4
    (3, pa.decimal128(12, 3)),  # amount
    (4, pa.timestamp("us")),  # created DATETIME(3)
    (5, pa.string()),  # color ENUM('red','grün')
    (7, pa.binary()),  # data BLOB
    (8, pa.string()),  # wide_char CHAR(255) utf8mb4
    (9, pa.float64()),  # score
]
TS = 1_700_000_000
AT = BinlogPosition("b.000001", 400)
_KINDS = {
    RowsKind.INSERT: EventType.WRITE_ROWS_V1,
    RowsKind.UPDATE: EventType.UPDATE_ROWS_V1,
    RowsKind.DELETE: EventType.DELETE_ROWS_V1,
}


def encoded(images: bytes, kind: RowsKind = RowsKind.INSERT) -> EventRows:
    decoder = BinlogDecoder(lazy_rows=True)
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    ev = decoder.decode(event(_KINDS[kind], rows_body(42, images, kind)))
    assert isinstance(ev, RowsEvent) and isinstance(ev.rows, EventRows)
    return ev.rows


def kernel() -> arrowrows.KernelRows:
    rows = encoded(row_image(FULL_ROW))
    plan = arrowrows.plan(rows.table.columns, WANTED)
    assert plan is not None
    return arrowrows.KernelRows(plan)


def python_columns(rows: EventRows) -> list[list[Any]]:
    """What the Python decoder gives for the wanted columns, image by image."""
    images = [image for pair in rows.decode() for image in pair if image is not None]
    return [[image[pos] for image in images] for pos, _ in WANTED]


def kernel_columns(k: arrowrows.KernelRows) -> list[list[Any]]:
    arrays = k.finish()
    return [array.to_pylist() for array in arrays[: len(WANTED)]]


@needs_kernel
def test_values_and_metadata_equal_the_python_decoder() -> None:
    k = kernel()
    rows = encoded(row_image(FULL_ROW) + row_image(NULL_ROW))
    assert k.add(rows, RowsKind.INSERT, TS * 1_000_000, AT.seq(), 0, False)
    update = encoded(row_image(NULL_ROW) + row_image(FULL_ROW), RowsKind.UPDATE)
    assert k.add(update, RowsKind.UPDATE, TS * 1_000_000, AT.seq(), 2, False)
    assert k.rows == 4
    arrays = k.finish()
    expected = [a + b for a, b in zip(python_columns(rows), python_columns(update), strict=True)]
    assert [array.to_pylist() for array in arrays[: len(WANTED)]] == expected
    ops, ts, seqs = (array.to_pylist() for array in arrays[len(WANTED) :])
    assert ops == ["+I", "+I", "-U", "+U"]
    assert ts == [dt.datetime.fromtimestamp(TS, dt.UTC)] * 4
    assert seqs == AT.seqs(0, 4)
    assert k.rows == 0 and k.finish()[0].to_pylist() == []  # finish starts over


@needs_kernel
def test_an_update_shares_its_seq_when_asked() -> None:
    k = kernel()
    update = encoded(row_image(NULL_ROW) * 4, RowsKind.UPDATE)
    assert k.add(update, RowsKind.UPDATE, 0, AT.seq(), 4094, True)
    seqs = k.finish()[-1].to_pylist()
    # rows 4094 and 4095; row indexes past 4095 share the last slot
    assert seqs == [AT.seq(4094), AT.seq(4094), AT.seq(4095), AT.seq(4095)]


def _with(index: int, value: bytes | None) -> bytes:
    row = list(FULL_ROW)
    row[index] = value
    return row_image(row)


@needs_kernel
@pytest.mark.parametrize(
    ("what", "image"),
    [
        ("invalid UTF-8", _with(2, struct.pack("<H", 2) + b"\xc3(")),
        ("a UTF-16 surrogate in UTF-8", _with(2, struct.pack("<H", 3) + b"\xed\xa0\x80")),
        ("an ENUM index without a label", _with(5, bytes([3]))),
        ("a DECIMAL digit group over 999,999,999", _with(3, b"\xff" * 6)),
        ("bytes that end inside a value", row_image(FULL_ROW)[:-3]),
    ],
)
@needs_kernel
def test_what_it_cannot_read_exactly_is_left_whole_to_python(what: str, image: bytes) -> None:
    k = kernel()
    good = encoded(row_image(FULL_ROW))
    assert k.add(good, RowsKind.INSERT, 0, AT.seq(), 0, False)
    bad = encoded(row_image(NULL_ROW) + image)
    assert not k.add(bad, RowsKind.INSERT, 0, AT.seq(), 0, False), what
    assert k.rows == 1  # the refused event's first row was taken back
    assert kernel_columns(k) == python_columns(good)


@needs_kernel
def test_truncated_images_raise_the_python_decoders_error() -> None:
    bad = encoded(row_image(FULL_ROW)[:-3])
    with pytest.raises(ProtocolError, match=r"WRITE_ROWS_V1 event for shop\.orders"):
        bad.decode()


@needs_kernel
def test_dates_python_cannot_hold_are_null_as_in_python() -> None:
    k = kernel()
    images = b"".join(
        _with(4, _dt2(*parts, 0))
        for parts in [(2023, 2, 29, 0, 0, 0), (2024, 2, 29, 23, 59, 59), (0, 0, 0, 0, 0, 0)]
    )
    rows = encoded(images)
    assert k.add(rows, RowsKind.INSERT, 0, AT.seq(), 0, False)
    created = kernel_columns(k)[4]
    assert created == python_columns(rows)[4] == [None, dt.datetime(2024, 2, 29, 23, 59, 59), None]


@needs_kernel
def test_plan_refuses_what_the_python_path_converts_otherwise() -> None:
    columns = encoded(row_image(FULL_ROW)).table.columns
    assert arrowrows.plan(columns, [(6, pa.string())]) is None  # SET: labels joined in Python
    assert arrowrows.plan(columns, [(9, pa.float32())]) is None  # a DOUBLE as FLOAT
    assert arrowrows.plan(columns, [(2, pa.binary())]) is None  # text as bytes
    assert arrowrows.plan(columns, [(0, pa.int64()), (0, pa.int64())]) is None


@needs_kernel
def test_typed_changelog_takes_an_event_the_kernel_refuses_through_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows stay in stream order across the two paths, and a refused event's values are the
    Python decoder's (here U+FFFD for invalid UTF-8), as with no kernel at all."""
    names = [name for _, _, name, _ in _COLUMNS]
    types = [
        ("bigint", "bigint(20)"),
        ("tinyint", "tinyint(3) unsigned"),
        ("varchar", "varchar(100)"),
        ("decimal", "decimal(12,3)"),
        ("datetime", "datetime(3)"),
        ("enum", "enum('red','grün')"),
        ("set", "set('a','b','c')"),
        ("blob", "blob"),
        ("char", "char(255)"),
        ("double", "double"),
    ]
    columns = tuple(
        Column.from_mysql(n, d, c, n != "id")
        for n, (d, c) in zip(names, types, strict=True)
        if n != "tags"
    )
    schema = TableSchema("shop", "orders", columns, ("id",))
    # the rows were written before the stream's schema was read, while the table still had
    # its SET column (dropped since): the kernel steps over it
    schema_seq = BinlogPosition("b.000002", 4).seq()
    images = [
        row_image(FULL_ROW),
        _with(2, struct.pack("<H", 2) + b"\xc3("),
        row_image(NULL_ROW),
    ]

    def changes() -> list[RowChanges]:
        out = []
        for i, image in enumerate(images):
            rows = encoded(image)
            at = BinlogPosition("b.000001", 400 + 100 * i)
            out.append(
                RowChanges(
                    "shop", "orders", RowsKind.INSERT, rows, TS, at, rows.table.image_columns
                )
            )
        return out

    taken: list[bool] = []
    add = arrowrows.KernelRows.add

    def counting_add(self: arrowrows.KernelRows, *args: Any) -> bool:
        taken.append(add(self, *args))
        return taken[-1]

    monkeypatch.setattr(arrowrows.KernelRows, "add", counting_add)
    compiled = pa.Table.from_batches(
        list(TypedChangelogBuilder(schema, schema_seq).batches(changes()))
    )
    monkeypatch.setattr(arrowrows, "COMPILED", False)
    pure = pa.Table.from_batches(list(TypedChangelogBuilder(schema, schema_seq).batches(changes())))
    assert taken == [True, False, True]
    assert compiled.to_pylist() == pure.to_pylist()
    assert compiled.column("name").to_pylist() == ["日本語🎉", "\ufffd(", None]


@needs_kernel
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_whatever_the_bytes_the_kernel_reads_exactly_or_refuses(data: st.DataObject) -> None:
    """Row images with bytes changed, cut or added: the kernel never reads past the event and
    never gives a value the Python decoder would not."""
    images = bytearray(row_image(FULL_ROW) + row_image(NULL_ROW))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(images) - 1))
        images[at] = data.draw(st.integers(0, 255))
    images = images[: data.draw(st.integers(0, len(images)))]
    images += data.draw(st.binary(max_size=8))
    rows = encoded(bytes(images))
    k = kernel()
    if not k.add(rows, RowsKind.INSERT, 0, AT.seq(), 0, False):
        assert k.rows == 0
        return
    assert kernel_columns(k) == python_columns(rows)


def test_without_the_kernel_the_log_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(arrowrows, "COMPILED", False)
    monkeypatch.setattr(arrowrows, "_announced", False)
    with caplog.at_level(logging.INFO, logger="sparkcdc.mysql.binlog.arrowrows"):
        assert not arrowrows.compiled() and not arrowrows.compiled()
    said = [r.getMessage() for r in caplog.records if "pure Python" in r.getMessage()]
    assert len(said) == 1 and "C compiler" in said[0]


@needs_kernel
@pytest.mark.timeout(60)
def test_images_of_no_column_are_refused_not_looped_over() -> None:
    """They take no bytes: the kernel's loop over an event's images would never end."""
    k = arrowrows.KernelRows(arrowrows.Plan((), (), ()))
    rows = encoded(row_image(FULL_ROW))
    assert not k.add(rows, RowsKind.INSERT, 0, AT.seq(), 0, False)
    assert k.rows == 0


@needs_kernel
def test_an_events_rows_give_the_kernels_of_their_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layers above reach the kernel through the encoded rows (``EncodedRows.kernel``,
    ``key_kernel``), never through this module: the rows of a shape it reads give a kernel
    that reads them as the Python decoder does; others, or no kernel built, give None."""
    rows = encoded(row_image(FULL_ROW) + row_image(NULL_ROW))
    k = rows.kernel(WANTED)
    assert k is not None and k.add(rows, RowsKind.INSERT, 0, AT.seq(), 0, False)
    assert kernel_columns(k) == python_columns(rows)  # type: ignore[arg-type]
    key = rows.key_kernel(0)  # id BIGINT
    assert key is not None and key.add(rows, RowsKind.INSERT, 0, 0, 0, True)
    assert key.finish()[0].to_pylist() == [pair[1][0] for pair in rows.decode()]  # type: ignore[index]
    assert rows.kernel([(6, pa.string())]) is None  # SET: labels joined in Python
    assert rows.key_kernel(4) is None  # a DATETIME key is compared as Python values
    assert rows.key_kernel(len(rows.table.columns)) is None
    monkeypatch.setattr(arrowrows, "COMPILED", False)
    assert rows.kernel(WANTED) is None and rows.key_kernel(0) is None
