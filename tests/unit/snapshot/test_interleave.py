from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.mysql.test_decoder import FULL_ROW, event, row_image, rows_body, table_map_body

from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.model.position import BinlogPosition as P
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.decoded_events import ColumnInfo, RowsEvent
from sparkcdc.mysql.binlog.decoder import BinlogDecoder, EventRows
from sparkcdc.mysql.binlog.metadata_from_schema import image_columns
from sparkcdc.mysql.protocol.constants import ColumnType, EventType
from sparkcdc.snapshot.filter import (
    InterleavingFilter,
    completed_chunks,
    filter_state,
    tracked_table,
)
from sparkcdc.snapshot.interleave import _KeyReader, filter_changes

COLUMNS = image_columns(
    (
        ColumnInfo("id", ColumnType.LONG, 0, False, False, None, None, None),
        ColumnInfo("v", ColumnType.LONG, 0, True, False, None, None, None),
    )
)


def changes(kind: RowsKind, rows: list[tuple[object, object]], pos: int) -> RowChanges:
    return RowChanges("app", "t", kind, rows, 0, P("mysql-bin.000001", pos), COLUMNS)  # type: ignore[arg-type]


def a_filter() -> InterleavingFilter:
    chunk = completed_chunks(None, 100, P("mysql-bin.000001", 1000), 0, 1)  # [-inf, 100) read
    return InterleavingFilter.from_state(
        filter_state({"app.t": tracked_table(None, 1, None, [chunk])})
    )


def run(change: RowChanges) -> list[tuple[RowsKind, list[tuple[object, object]]]]:
    out = filter_changes([change], a_filter(), {"app.t": "id"})
    return [(c.kind, c.rows) for c in out]  # type: ignore[union-attr]


def test_rows_of_completed_chunks_after_hw_pass() -> None:
    assert run(changes(RowsKind.INSERT, [(None, (5, 1)), (None, (150, 1))], 2000)) == [
        (RowsKind.INSERT, [(None, (5, 1))])
    ]


def test_rows_before_the_chunk_hw_are_dropped() -> None:
    assert run(changes(RowsKind.DELETE, [((5, 1), None)], 500)) == []


def test_key_changing_update_keeps_the_half_whose_chunk_is_done() -> None:
    # old key 5 (done) -> new key 150 (not read yet): only the delete of 5 comes out
    assert run(changes(RowsKind.UPDATE, [((5, 1), (150, 1))], 2000)) == [
        (RowsKind.DELETE, [((5, 1), None)])
    ]
    # old key 150 (not read) -> new key 6 (done): only the insert of 6
    assert run(changes(RowsKind.UPDATE, [((150, 1), (6, 1))], 2000)) == [
        (RowsKind.INSERT, [(None, (6, 1))])
    ]


def test_the_pieces_of_a_cut_update_event_keep_their_rows_seqs() -> None:
    """An update event cut into an update, a delete and an update: each piece's rows keep
    the seqs they had in the event (row i's images are first_row + 2i and 2i + 1), so no
    two images of the changelog share one."""
    rows = [((1, 1), (1, 2)), ((5, 1), (150, 1)), ((150, 1), (6, 1)), ((2, 1), (2, 2))]
    event = RowChanges("app", "t", RowsKind.UPDATE, rows, 0, P("b.000001", 2000), COLUMNS, 3)  # type: ignore[arg-type]
    out = list(filter_changes([event], a_filter(), {"app.t": "id"}))
    assert [(c.kind, c.first_row) for c in out] == [  # type: ignore[union-attr]
        (RowsKind.UPDATE, 3),
        (RowsKind.DELETE, 3 + 2),
        (RowsKind.INSERT, 3 + 5),
        (RowsKind.UPDATE, 3 + 6),
    ]


def test_updates_inside_one_done_chunk_stay_updates_in_order() -> None:
    rows = [((1, 1), (1, 2)), ((150, 1), (150, 2)), ((2, 1), (3, 1))]
    assert run(changes(RowsKind.UPDATE, rows, 2000)) == [
        (RowsKind.UPDATE, [((1, 1), (1, 2)), ((2, 1), (3, 1))])
    ]


def test_untracked_tables_pass_whole() -> None:
    change = RowChanges(
        "app", "other", RowsKind.INSERT, [(None, (1, 1))], 0, P("mysql-bin.000001", 4), COLUMNS
    )
    assert list(filter_changes([change], a_filter(), {"app.t": "id"})) == [change]


class Undecodable:
    """Rows still in their binlog bytes: judging them must not decode them."""

    def decode(self) -> list[tuple[object, object]]:
        raise AssertionError("the filter decoded rows it lets through whole")


def test_events_past_a_finished_snapshot_pass_undecoded() -> None:
    # both chunks done, the last HW at 3000: an event from there on passes whole, its rows
    # left for the compiled decoder; one before it is still judged row by row
    done = [
        completed_chunks(None, 100, P("mysql-bin.000001", 1000), 0, 1),
        completed_chunks(100, None, P("mysql-bin.000001", 3000), 1, 2),
    ]
    flt = InterleavingFilter.from_state(filter_state({"app.t": tracked_table(None, 2, 2, done)}))
    past = RowChanges(
        "app", "t", RowsKind.UPDATE, Undecodable(), 0, P("mysql-bin.000001", 3000), COLUMNS
    )
    assert list(filter_changes([past], flt, {"app.t": "id"})) == [past]
    assert isinstance(past.images, Undecodable)
    before = changes(RowsKind.INSERT, [(None, (5, 1)), (None, (150, 1))], 2000)
    assert [c.rows for c in filter_changes([before], flt, {"app.t": "id"})] == [  # type: ignore[union-attr]
        [(None, (5, 1))]
    ]


# -- events in their binlog bytes: keys read by the compiled decoder ---------------------

needs_kernel = pytest.mark.skipif(not arrowrows.COMPILED, reason="the kernel is not built")
_ROWS_EVENTS = {
    RowsKind.INSERT: EventType.WRITE_ROWS_V1,
    RowsKind.UPDATE: EventType.UPDATE_ROWS_V1,
    RowsKind.DELETE: EventType.DELETE_ROWS_V1,
}


def encoded(kind: RowsKind, keys: list[tuple[int | None, int | None]], pos: int) -> RowChanges:
    """An event of test_decoder's ten-column table (``id`` BIGINT first) whose rows have
    these (before, after) ids, its rows still in their bytes."""
    images = b"".join(
        row_image([struct.pack("<q", key), *FULL_ROW[1:]])
        for pair in keys
        for key in pair
        if key is not None
    )
    decoder = BinlogDecoder(lazy_rows=True)
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    ev = decoder.decode(event(_ROWS_EVENTS[kind], rows_body(42, images, kind)))
    assert isinstance(ev, RowsEvent) and isinstance(ev.rows, EventRows)
    return RowChanges(
        "app", "t", kind, ev.rows, 0, P("mysql-bin.000001", pos), ev.rows.table.image_columns
    )


@needs_kernel
def test_events_judged_whole_by_their_keys_stay_undecoded() -> None:
    """Every row in the read chunk after its HW: the event leaves as it came, for the
    builders' kernel. Every row in an unread chunk: dropped. Neither decoded."""
    passing = encoded(RowsKind.UPDATE, [(5, 5), (7, 8)], 2000)
    dropped = encoded(RowsKind.INSERT, [(None, 150), (None, 151)], 2000)
    early = encoded(RowsKind.DELETE, [(5, None)], 500)
    out = list(filter_changes([passing, dropped, early], a_filter(), {"app.t": "id"}))
    assert out == [passing]
    assert all(isinstance(c.images, EventRows) for c in (passing, dropped, early))


@needs_kernel
def test_an_event_cut_by_the_filter_is_decoded_and_cut() -> None:
    mixed = encoded(RowsKind.INSERT, [(None, 5), (None, 150)], 2000)
    moved = encoded(RowsKind.UPDATE, [(5, 150)], 2000)  # the new key's chunk is unread
    out = list(filter_changes([mixed, moved], a_filter(), {"app.t": "id"}))
    assert [(c.kind, [tuple(i and i[0] for i in r) for r in c.rows]) for c in out] == [  # type: ignore[union-attr]
        (RowsKind.INSERT, [(None, 5)]),
        (RowsKind.DELETE, [(5, None)]),
    ]


_KEY = st.sampled_from([-(2**63), 1, 5, 99, 100, 101, 150, 2**63 - 1])


@st.composite
def _events(draw: st.DrawFn) -> tuple[RowsKind, list[tuple[int | None, int | None]], int]:
    kind = draw(st.sampled_from(list(RowsKind)))
    count = draw(st.integers(1, 4))
    keys: list[tuple[int | None, int | None]] = [
        (
            None if kind is RowsKind.INSERT else draw(_KEY),
            None if kind is RowsKind.DELETE else draw(_KEY),
        )
        for _ in range(count)
    ]
    return kind, keys, draw(st.sampled_from([500, 1000, 2000]))


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(st.lists(_events(), min_size=1, max_size=4))
def test_keys_read_by_the_kernel_judge_as_decoded_rows_do(
    events: list[tuple[RowsKind, list[tuple[int | None, int | None]], int]],
) -> None:
    """Whatever the rows, the filter lets through the same rows whether it reads the keys
    with the kernel (events in their bytes) or from rows decoded in Python."""
    in_bytes = [encoded(kind, keys, pos) for kind, keys, pos in events]
    decoded = [encoded(kind, keys, pos) for kind, keys, pos in events]
    for change in decoded:
        change.images = change.rows  # decoded: the keys are read from the rows
    judged = [
        [(c.kind, c.position, c.rows) for c in filter_changes(changes, a_filter(), {"app.t": "id"})]  # type: ignore[union-attr]
        for changes in (in_bytes, decoded)
    ]
    assert judged[0] == judged[1]


@needs_kernel
@pytest.mark.parametrize(
    ("column", "read"),
    [
        (0, True),  # id BIGINT
        (1, True),  # tiny_u TINYINT UNSIGNED
        (2, True),  # name VARCHAR utf8mb4
        (3, False),  # amount DECIMAL: Decimal in Python, left to the decoded rows
        (4, False),  # created DATETIME(3)
        (7, True),  # data BLOB
        (8, True),  # wide_char CHAR(255) utf8mb4
    ],
)
def test_keys_the_kernel_reads_are_the_decoded_values(column: int, read: bool) -> None:
    """Whatever a key column the kernel reads (integers, UTF-8 and binary strings, NULL),
    its values are the Python decoder's, so the filter compares them as it always did;
    other columns are left to the decoded rows."""
    images = row_image(FULL_ROW) + row_image([struct.pack("<q", 1), *([None] * 9)])
    decoder = BinlogDecoder(lazy_rows=True)
    decoder.decode(event(EventType.TABLE_MAP, table_map_body()))
    ev = decoder.decode(event(EventType.UPDATE_ROWS_V1, rows_body(42, images, RowsKind.UPDATE)))
    assert isinstance(ev, RowsEvent) and isinstance(ev.rows, EventRows)
    change = RowChanges(
        "app", "t", RowsKind.UPDATE, ev.rows, 0, P("b.000001", 4), ev.rows.table.image_columns
    )
    keys = _KeyReader().keys(change, column)
    decoded = [image[column] for pair in ev.rows.decode() for image in pair if image is not None]
    assert keys == (decoded if read else None)
    if read:
        assert [type(k) for k in keys] == [type(v) for v in decoded]  # type: ignore[union-attr]


def test_changes_pass_on_as_they_come_when_no_key_waits_for_the_server() -> None:
    """A partition must not hold its range: each change leaves before the next is read
    (it held every change to the range's end when no key needed a server ranking)."""
    read: list[int] = []

    def source() -> Iterator[RowChanges | SchemaChange]:
        for pos in (2000, 2100, 2200):
            read.append(pos)
            yield changes(RowsKind.INSERT, [(None, (5, 1))], pos)
            yield SchemaChange("app", "t", "ALTER TABLE t ADD c INT", pos + 50)

    out = filter_changes(source(), a_filter(), {"app.t": "id"})
    first = next(out)
    assert isinstance(first, RowChanges) and first.position == P("mysql-bin.000001", 2000)
    assert read == [2000]
    assert isinstance(next(out), SchemaChange) and read == [2000]
    assert len(list(out)) == 4 and read == [2000, 2100, 2200]
