"""Apply the interleaving filter to the binlog changes of one batch (executor side).

Each row change is judged by its chunk-key value: an insert by its after-image, a
delete by its before-image. An update whose key stays in one chunk is kept or dropped
whole; a key-changing update is a delete of the old key and an insert of the new one,
each judged by its own chunk (DESIGN.md §2), and comes out as whichever halves pass.

String keys the server orders (``keys.python_orders``) are ranked in batches: changes are
held back up to ``WINDOW_KEYS`` keys, their keys ranked in one query per table, then
judged and yielded in their order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sparkcdc.errors import SnapshotError
from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.snapshot.filter import InterleavingFilter

WINDOW_KEYS = 2000  # keys held back for one server ranking per table


def _key_index(change: RowChanges, key_column: str) -> int:
    for i, name in enumerate(change.columns.names):
        if name == key_column:
            return i
    raise SnapshotError(
        f"the binlog's table map of {change.database}.{change.table} has no column "
        f"named {key_column!r} (chunk key); the snapshot needs binlog_row_metadata=FULL, "
        "or the column was renamed/dropped during the snapshot: re-snapshot the table"
    )


def filter_changes(
    changes: Iterable[RowChanges | SchemaChange],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
) -> Iterator[RowChanges | SchemaChange]:
    """Yield the changes the filter lets through (tables it does not track pass whole)."""
    window: list[RowChanges | SchemaChange] = []
    pending: dict[str, list[object]] = {}
    held = 0
    for change in changes:
        window.append(change)
        if isinstance(change, SchemaChange):
            continue
        table = f"{change.database}.{change.table}"
        if not flt.needs_server(table, change.position):
            continue
        k = _key_index(change, key_columns[table])
        keys = pending.setdefault(table, [])
        for before, after in change.rows:
            keys.extend(image[k] for image in (before, after) if image is not None)
        held += len(change.rows)
        if held >= WINDOW_KEYS:
            yield from _judge(window, pending, flt, key_columns)
            window, pending, held = [], {}, 0
    yield from _judge(window, pending, flt, key_columns)


def _judge(
    window: list[RowChanges | SchemaChange],
    pending: dict[str, list[object]],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
) -> Iterator[RowChanges | SchemaChange]:
    for table, keys in pending.items():
        flt.prepare(table, keys)
    yield from _decide(window, flt, key_columns)


def _decide(
    changes: Iterable[RowChanges | SchemaChange],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
) -> Iterator[RowChanges | SchemaChange]:
    for change in changes:
        table = f"{change.database}.{change.table}"
        # whole: its rows are not decoded here (the compiled decoder reads them later)
        if isinstance(change, SchemaChange) or flt.passes_whole(table, change.position):
            yield change
            continue
        at = change.position
        k = _key_index(change, key_columns[table])
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
        change.columns,
        change.first_row,
    )
