"""Apply the interleaving filter to the binlog changes of one batch (executor side).

Each row change is judged by its chunk-key value: an insert by its after-image, a
delete by its before-image. An update whose key stays in one chunk is kept or dropped
whole; a key-changing update is a delete of the old key and an insert of the new one,
each judged by its own chunk (DESIGN.md §2), and comes out as whichever halves pass.

String keys the server orders (``keys.python_orders``) are ranked in batches: changes are
held back up to ``WINDOW_KEYS`` keys, their keys ranked in one query per table, then
judged and yielded in their order.

An event's keys are read by the source's compiled decoder where it can read the key column
exactly (``EncodedRows.key_kernel``), the other columns stepped over: an event whose
rows all pass whole, or all drop, is judged without its rows decoded, and one that passes
whole leaves as it came, for the change-row builders to decode with the kernel too. Only
an event the filter cuts (some rows or halves pass) is decoded here in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sparkcdc.errors import SnapshotError
from sparkcdc.model.events import RowChanges, RowKernel, RowsKind, SchemaChange
from sparkcdc.model.row_kernels import ShapeKernels
from sparkcdc.snapshot.chunks import KeyValue
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


class _KeyReader:
    """Reads the chunk-key value of each image of an event with the source's compiled
    decoder, one kernel per table shape."""

    def __init__(self) -> None:
        self._kernels: ShapeKernels[RowKernel] = ShapeKernels()

    def keys(self, change: RowChanges, k: int) -> list[KeyValue] | None:
        """The key (column ``k``) of every image of ``change``, in image order (an update's
        before and after image, row by row); None where the kernel cannot read them exactly
        (the rows are decoded then)."""
        kernel = self._kernels.get(change, k, lambda images: images.key_kernel(k))
        if kernel is None:
            return None
        images = change.images
        assert not isinstance(images, list)  # as the kernel was given
        if not kernel.add(images, change.kind, 0, 0, 0, True):
            return None
        keys: list[KeyValue] = kernel.finish()[0].to_pylist()
        return keys


def _image_keys(change: RowChanges, k: int, reader: _KeyReader) -> list[KeyValue]:
    """The key of every image of ``change``, read by the kernel or from the decoded rows."""
    keys = reader.keys(change, k)
    if keys is not None:
        return keys
    return [image[k] for pair in change.rows for image in pair if image is not None]


def filter_changes(
    changes: Iterable[RowChanges | SchemaChange],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
) -> Iterator[RowChanges | SchemaChange]:
    """Yield the changes the filter lets through (tables it does not track pass whole).

    A change is held back only while keys before it wait for their server ranking;
    otherwise it is judged and passed on as it comes, so a partition holds at most one
    window of changes (it held its whole range when no key needed the server, a worker's
    memory growing with the batch: ~270 MB for 2,000,000 changes here)."""
    # each change with its image keys where they were read for a ranking (else None)
    window: list[tuple[RowChanges | SchemaChange, list[KeyValue] | None]] = []
    pending: dict[str, list[object]] = {}
    held = 0
    reader = _KeyReader()
    for change in changes:
        table = f"{change.database}.{change.table}"
        if isinstance(change, SchemaChange) or not flt.needs_server(table, _at(change)):
            window.append((change, None))
            if not pending:  # nothing waits for a ranking: on at once, in order
                yield from _decide(window, flt, key_columns, reader)
                window = []
            continue
        keys = _image_keys(change, _key_index(change, key_columns[table]), reader)
        window.append((change, keys))
        pending.setdefault(table, []).extend(keys)
        held += len(keys)
        if held >= WINDOW_KEYS:
            yield from _judge(window, pending, flt, key_columns, reader)
            window, pending, held = [], {}, 0
    yield from _judge(window, pending, flt, key_columns, reader)


def _at(change: RowChanges) -> Any:
    """A change's position in the stream, where the filter's watermarks are too."""
    return change.position


def _judge(
    window: list[tuple[RowChanges | SchemaChange, list[KeyValue] | None]],
    pending: dict[str, list[object]],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
    reader: _KeyReader,
) -> Iterator[RowChanges | SchemaChange]:
    for table, keys in pending.items():
        flt.prepare(table, keys)
    yield from _decide(window, flt, key_columns, reader)


def _decide(
    window: Iterable[tuple[RowChanges | SchemaChange, list[KeyValue] | None]],
    flt: InterleavingFilter,
    key_columns: dict[str, str],
    reader: _KeyReader,
) -> Iterator[RowChanges | SchemaChange]:
    """Judge each change of ``window``, by its image keys where they were read already."""
    for change, read in window:
        table = f"{change.database}.{change.table}"
        # whole: its rows are not decoded here (the compiled decoder reads them later)
        if isinstance(change, SchemaChange) or flt.passes_whole(table, _at(change)):
            yield change
            continue
        at = _at(change)
        k = _key_index(change, key_columns[table])
        keys = read if read is not None else reader.keys(change, k)
        whole = None if keys is None else _all_alike(flt, table, change.kind, keys, at)
        if whole is not None:  # every row passes whole, or none passes in any part
            if whole:
                yield change
            continue
        if change.kind is RowsKind.UPDATE:
            # each piece keeps its rows' own seqs: row i's images are first_row + 2i, 2i + 1
            kept: list[tuple[tuple[object, ...] | None, tuple[object, ...] | None]] = []
            kept_from = 0  # the row index of kept's first row
            for index, (before, after) in enumerate(change.rows):
                assert before is not None and after is not None
                old_ok = flt.emit(table, before[k], at)
                new_ok = old_ok if before[k] == after[k] else flt.emit(table, after[k], at)
                if old_ok and new_ok:
                    kept_from = kept_from if kept else index
                    kept.append((before, after))
                elif old_ok or new_ok:
                    # flush what we have to keep row order, then the surviving half
                    if kept:
                        yield _with_rows(change, RowsKind.UPDATE, kept, 2 * kept_from)
                        kept = []
                    if old_ok:
                        yield _with_rows(change, RowsKind.DELETE, [(before, None)], 2 * index)
                    else:
                        yield _with_rows(change, RowsKind.INSERT, [(None, after)], 2 * index + 1)
            if kept:
                yield _with_rows(change, RowsKind.UPDATE, kept, 2 * kept_from)
            continue
        image = 1 if change.kind is RowsKind.INSERT else 0
        rows = [r for r in change.rows if flt.emit(table, r[image][k], at)]  # type: ignore[index]
        if rows:
            yield _with_rows(change, change.kind, rows)


def _all_alike(
    flt: InterleavingFilter,
    table: str,
    kind: RowsKind,
    keys: list[KeyValue],
    at: Any,
) -> bool | None:
    """True when every row of an event with these image ``keys`` passes whole, False when
    no row passes in any part, None when the rows must be judged one by one (some pass,
    or a key-changing update passes one half)."""
    verdicts: Iterator[bool | None]
    if kind is RowsKind.UPDATE:
        verdicts = (
            _update_verdict(flt, table, before, after, at)
            for before, after in zip(keys[0::2], keys[1::2], strict=True)
        )
    else:
        verdicts = (flt.emit(table, key, at) for key in keys)
    first = next(verdicts, None)
    if first is None:
        return None
    return first if all(v == first for v in verdicts) else None


def _update_verdict(
    flt: InterleavingFilter, table: str, before: KeyValue, after: KeyValue, at: Any
) -> bool | None:
    """Whether an update row passes whole (True) or drops whole (False); None when one
    half passes (a key-changing update whose keys are in chunks judged apart)."""
    old_ok = flt.emit(table, before, at)
    if before != after and flt.emit(table, after, at) != old_ok:
        return None
    return old_ok


def _with_rows(
    change: RowChanges,
    kind: RowsKind,
    rows: list[tuple[tuple[object, ...] | None, tuple[object, ...] | None]],
    images_before: int = 0,
) -> RowChanges:
    """``change`` with ``rows`` of ``kind``, the first numbered ``images_before`` row
    images after ``change``'s first (its seq)."""
    return RowChanges(
        change.database,
        change.table,
        kind,
        rows,
        change.timestamp,
        change.position,
        change.columns,
        change.first_row + images_before,
    )
