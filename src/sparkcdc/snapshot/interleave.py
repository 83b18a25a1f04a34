"""Apply the interleaving filter to the binlog changes of one batch (executor side).

Each row change is judged by its chunk-key value: an insert by its after-image, a
delete by its before-image. An update whose key stays in one chunk is kept or dropped
whole; a key-changing update is a delete of the old key and an insert of the new one,
each judged by its own chunk (DESIGN.md §2), and comes out as whichever halves pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sparkcdc.errors import SnapshotError
from sparkcdc.mysql.binlog_range import RowChanges, SchemaChange
from sparkcdc.mysql.events import RowsKind, TableMapEvent
from sparkcdc.snapshot.filter import InterleavingFilter


def _key_index(table_map: TableMapEvent, key_column: str) -> int:
    for i, column in enumerate(table_map.columns):
        if column.name == key_column:
            return i
    raise SnapshotError(
        f"the binlog's table map of {table_map.database}.{table_map.table} has no column "
        f"named {key_column!r} (chunk key); the snapshot needs binlog_row_metadata=FULL, "
        "or the column was renamed/dropped during the snapshot: re-snapshot the table"
    )


def filter_changes(
    changes: Iterable[RowChanges | SchemaChange],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
) -> Iterator[RowChanges | SchemaChange]:
    """Yield the changes the filter lets through (tables it does not track pass whole)."""
    for change in changes:
        table = f"{change.database}.{change.table}"
        if isinstance(change, SchemaChange) or not flt.is_tracked(table):
            yield change
            continue
        at = change.position
        k = _key_index(change.table_map, key_columns[table])
        if change.kind is RowsKind.UPDATE:
            kept: list[tuple[tuple[object, ...] | None, tuple[object, ...] | None]] = []
            for before, after in change.rows:
                assert before is not None and after is not None
                old_ok = flt.emit(table, before[k], at)
                if before[k] == after[k]:
                    if old_ok:
                        kept.append((before, after))
                    continue
                new_ok = flt.emit(table, after[k], at)
                if old_ok and new_ok:
                    kept.append((before, after))
                elif old_ok or new_ok:
                    # flush what we have to keep row order, then the surviving half
                    if kept:
                        yield _with_rows(change, RowsKind.UPDATE, kept)
                        kept = []
                    if old_ok:
                        yield _with_rows(change, RowsKind.DELETE, [(before, None)])
                    else:
                        yield _with_rows(change, RowsKind.INSERT, [(None, after)])
            if kept:
                yield _with_rows(change, RowsKind.UPDATE, kept)
            continue
        image = 1 if change.kind is RowsKind.INSERT else 0
        rows = [r for r in change.rows if flt.emit(table, r[image][k], at)]  # type: ignore[index]
        if rows:
            yield _with_rows(change, change.kind, rows)


def _with_rows(
    change: RowChanges,
    kind: RowsKind,
    rows: list[tuple[tuple[object, ...] | None, tuple[object, ...] | None]],
) -> RowChanges:
    return RowChanges(
        change.database,
        change.table,
        kind,
        rows,
        change.timestamp,
        change.position,
        change.table_map,
        change.first_row,
    )
