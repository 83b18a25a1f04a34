"""The compiled path of the change-row builders: a kernel per table shape (the source's
``EncodedRows.kernel``) decodes an event's encoded rows straight into Arrow columns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

import pyarrow as pa

from sparkcdc.model.events import EncodedRows, RowChanges, RowKernel
from sparkcdc.model.row_kernels import ShapeKernels
from sparkcdc.spark.changelog.arrow import BATCH_ROWS


@dataclass(frozen=True)
class KernelBatch:
    """Rows a kernel decoded: the builder's columns (in its order), the change-row
    metadata, and the table they belong to."""

    columns: list[pa.Array]
    ops: pa.Array
    ts: pa.Array
    seqs: pa.Array
    database: str
    table: str


@dataclass
class Kernel:
    """A compiled decoder of one table shape into one builder's columns: ``slots[j]`` is
    the kernel output of the builder's column j (None: not in the images, NULL)."""

    rows: RowKernel
    slots: list[int | None]
    types: list[pa.DataType]
    database: str
    table: str

    def finish(self) -> KernelBatch:
        """The rows added since the last finish, and start over."""
        *outputs, ops, ts, seqs = self.rows.finish()
        n = len(ops)
        columns = [
            pa.nulls(n, arrow) if slot is None else outputs[slot]
            for slot, arrow in zip(self.slots, self.types, strict=True)
        ]
        return KernelBatch(columns, ops, ts, seqs, self.database, self.table)


class Compiled:
    """The compiled path of a change-row builder: one kernel per table shape, of which one
    holds rows at a time (``holding``), so rows leave in stream order. ``shared_seq``: an
    update's two rows share its ``_seq`` (the tables shape) rather than taking one each (the
    typed changelog)."""

    def __init__(self, shared_seq: bool) -> None:
        self.shared_seq = shared_seq
        self.holding: Kernel | None = None
        self._kernels: ShapeKernels[Kernel] = ShapeKernels()

    def kernel(
        self,
        change: RowChanges,
        variant: bool,
        fields: Callable[[], list[tuple[int | None, pa.DataType]] | None],
    ) -> Kernel | None:
        """The kernel for ``change``'s table shape (and ``variant`` of the builder's
        layout), built the first time from ``fields()`` (per builder column: its image
        position and Arrow type; None: the Python path); None when the change takes the
        Python path."""
        return self._kernels.get(
            change, variant, lambda images: self._build(change, images, fields)
        )

    @staticmethod
    def _build(
        change: RowChanges,
        images: EncodedRows,
        fields: Callable[[], list[tuple[int | None, pa.DataType]] | None],
    ) -> Kernel | None:
        wanted = fields()
        if wanted is None:
            return None
        rows = images.kernel([(pos, arrow) for pos, arrow in wanted if pos is not None])
        if rows is None:
            return None
        outputs = count()
        slots = [None if pos is None else next(outputs) for pos, _ in wanted]
        return Kernel(rows, slots, [arrow for _, arrow in wanted], change.database, change.table)

    def add(self, change: RowChanges, kernel: Kernel) -> tuple[list[KernelBatch], bool]:
        """Add ``change``'s rows to ``kernel``: the rows that must leave first (another
        shape's, or a full batch), and whether the kernel took the change. It does not take
        an event it cannot read exactly (the builder then decodes it in Python, which gives
        the value or the error)."""
        images = change.images
        assert not isinstance(images, list)  # as the kernel was given
        args = (
            images,
            change.kind,
            change.timestamp * 1_000_000,
            change.position.seq(),
            change.first_row,
            self.shared_seq,
        )
        done: list[KernelBatch] = []
        if not kernel.rows.add(*args):
            if not kernel.rows.rows:
                return done, False
            done.append(self.take())  # perhaps full (2 GiB of strings): again in a new batch
            if not kernel.rows.add(*args):
                return done, False
        if self.holding is not None and self.holding is not kernel:
            done.append(self.take())  # only the holding kernel has rows before these
        self.holding = kernel
        if kernel.rows.rows >= BATCH_ROWS:
            done.append(self.take())
        return done, True

    def take(self) -> KernelBatch:
        """The rows the holding kernel has; nothing holds rows after."""
        kernel = self.holding
        assert kernel is not None
        self.holding = None
        return kernel.finish()
