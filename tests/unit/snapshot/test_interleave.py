from __future__ import annotations

from sparkcdc.model.events import RowChanges, RowsKind
from sparkcdc.model.position import BinlogPosition as P
from sparkcdc.mysql.constants import ColumnType
from sparkcdc.mysql.events import ColumnInfo
from sparkcdc.mysql.tablemeta import image_columns
from sparkcdc.snapshot.filter import (
    InterleavingFilter,
    completed_chunks,
    filter_state,
    tracked_table,
)
from sparkcdc.snapshot.interleave import filter_changes

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
