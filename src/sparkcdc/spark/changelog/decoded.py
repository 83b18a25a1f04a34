"""Decoded rows on their way into record batches: a snapshot chunk's rows, the images and
row kinds of a ROWS event, and rows pending a batch, column by column."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Protocol, cast

import pyarrow as pa

from sparkcdc.errors import SourceError
from sparkcdc.model.changelog import RowKind
from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.model.schema import Column


@dataclass(frozen=True)
class SnapshotRows:
    """The rows of one snapshot chunk (decoder-form values) and where they belong."""

    database: str
    table: str
    column_names: tuple[str, ...]
    rows: pa.Table
    seq: int  # the chunk's high watermark
    ddl: tuple[SchemaChange, ...] = ()  # DDL before the rows, not yet in the stream's binlog
    read_with: tuple[Column, ...] = ()  # the columns as the chunk was read (if known)


def row_images(change: RowChanges) -> tuple[list[Sequence[Any]], list[str]]:
    """The row images of one ROWS event in stream order, and the op of each: an update
    gives its before image (``-U``), then its after image (``+U``)."""
    n = len(change.rows)
    if change.kind is RowsKind.INSERT:
        images = [after for _, after in change.rows]
        ops = [RowKind.INSERT.value] * n
    elif change.kind is RowsKind.DELETE:
        images = [before for before, _ in change.rows]
        ops = [RowKind.DELETE.value] * n
    else:
        images = [image for pair in change.rows for image in pair]
        ops = [RowKind.UPDATE_BEFORE.value, RowKind.UPDATE_AFTER.value] * n
    if None in images:
        raise SourceError(
            f"a {change.kind.value} of {change.database}.{change.table} at binlog position "
            f"{change.position} lacks a row image the event kind must have"
        )
    return cast(list[Sequence[Any]], images), ops


class RowLayout(Protocol):
    """Where a builder puts each value of an image: per builder column, its image position
    (None: NULL) and the converter of its values (None: as decoded)."""

    positions: list[int | None]
    converters: list[Callable[[Any], Any] | None]


class PendingRows:
    """Rows not yet in a record batch, column by column."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.clear()

    def clear(self) -> None:
        self.ops: list[str] = []
        self.ts: list[int] = []
        self.seqs: list[int] = []
        self.databases: list[str] = []  # the typed changelog's
        self.tables: list[str] = []
        self.text: list[list[tuple[str, str]] | None] = []  # the tables shape's
        self.columns: list[list[Any]] = [[] for _ in range(self.width)]

    def __len__(self) -> int:
        return len(self.ops)

    def add(
        self,
        ops: Sequence[str],
        ts: int,
        seqs: Sequence[int],
        images: Sequence[Sequence[Any]],
        layout: RowLayout,
    ) -> None:
        """One event's rows: ``images`` (table-map order) go to the columns as ``layout``
        places and converts them, a column at a time (no Python call per row)."""
        n = len(images)
        if not n:
            return
        self.ops.extend(ops)
        self.ts.extend(repeat(ts, n))
        self.seqs.extend(seqs)
        by_position = list(zip(*images, strict=True))
        for values, pos, convert in zip(
            self.columns, layout.positions, layout.converters, strict=True
        ):
            if pos is None:
                values.extend(repeat(None, n))
            elif convert is None:
                values.extend(by_position[pos])
            else:
                values.extend([None if v is None else convert(v) for v in by_position[pos]])

    def name(self, database: str, table: str, n: int) -> None:
        self.databases.extend(repeat(database, n))
        self.tables.extend(repeat(table, n))


def op_ts_micros(timestamp: int | None) -> int | None:
    """Event time (seconds since the epoch) as ``op_ts`` microseconds; NULL if unknown."""
    return None if timestamp is None else timestamp * 1_000_000
