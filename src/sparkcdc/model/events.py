"""The change-event vocabulary every layer speaks, from the decoder to the sinks.

:class:`RowChanges` (the rows one source event changes) and :class:`SchemaChange` (a DDL
statement on a captured table) are what a source yields; the change rows that spell them
speak :mod:`sparkcdc.model.changelog`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column

if TYPE_CHECKING:  # the compiled decoders' columns; the vocabulary itself needs no Arrow
    import pyarrow as pa


class RowPosition(Protocol):
    """Where a source event is in its change stream (a ``BinlogPosition``, a PostgreSQL
    ``Lsn``): what a row's ``seq`` is made of."""

    def seq(self, row_index: int = 0) -> int: ...

    def seqs(self, first: int, count: int) -> list[int]:
        """``[seq(first), ..., seq(first + count - 1)]``."""
        ...

    def to_offset(self) -> dict[str, Any]: ...


class RowsKind(Enum):
    """What one source event (a binlog ROWS event) does to each of its rows."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


Image = tuple[object, ...]
"""One row image: a value per column, in the order :class:`ImageColumns` describes."""


@dataclass(frozen=True, slots=True, eq=False)
class ImageColumns:
    """The columns of a table's row images, in image order, as the source logged them.

    ``names[i]`` names the column at image position i (None: the source did not name it;
    the binlog range reader names every column of the changes it yields, or stops).
    ``same_storage(i, column)`` says whether the values at position i are stored exactly
    as ``column`` stores them (type, signedness, precision, bytes or text), so a value
    there is a value of ``column``; otherwise (a row written before a schema change, or
    metadata the source did not log) it must be carried in its own decoded form.

    The source builds one per table shape (per distinct binlog TABLE_MAP), not one per
    event: a consumer may cache what it derives from one by identity.

    >>> columns = ImageColumns(("id", "name"), lambda i, column: column.name == "id")
    >>> columns.names.index("name")
    1
    """

    names: tuple[str | None, ...]
    same_storage: Callable[[int, Column], bool] = field(repr=False)


Rows = list[tuple[Image | None, Image | None]]
"""The rows of one source event: (before, after) images per row."""


class RowKernel(Protocol):
    """A source's compiled decoder of one table shape's encoded rows into Arrow columns
    (:meth:`EncodedRows.kernel`): ``add`` events' images in stream order, ``finish`` into
    the wanted columns, then ``_op``, ``_op_ts`` and ``_seq`` (DESIGN.md §4.2)."""

    @property
    def rows(self) -> int:
        """Images added since the last ``finish``."""
        ...

    def add(
        self,
        images: EncodedRows,
        kind: RowsKind,
        ts_us: int,
        seq_base: int,
        first_row: int,
        shared_seq: bool,
    ) -> bool:
        """Add one event's images (an update's before then after image); ``_seq`` of image
        i is ``seq_base + min(first_row + i, 4095)``, or per row when ``shared_seq`` (an
        update's two images share it). False: nothing added, the rows take ``decode()``."""
        ...

    def finish(self) -> list[pa.Array]:
        """The rows added since the last ``finish``, and start over."""
        ...


class EncodedRows(Protocol):
    """Rows a source has not decoded yet: ``data[pos:end]``, as the source read them (a
    binlog ROWS event's images). ``decode()`` gives them, or raises what the source would
    have raised reading them; a source with a compiled decoder reads them into Arrow
    instead (``kernel``, ``key_kernel``: None where it would not give exactly the values
    ``decode()`` gives, or it is not built), a source without one returns None there."""

    @property
    def data(self) -> bytes: ...

    @property
    def pos(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def complete(self) -> bool:
        """Whether a kernel may read these images (every image has every column)."""
        ...

    def decode(self) -> Rows: ...

    def kernel(self, wanted: Sequence[tuple[int, pa.DataType]]) -> RowKernel | None:
        """A decoder of rows of this table shape into the Arrow columns ``wanted[j] =
        (image position, Arrow type)``; each wanted column is stored as its output column
        is (``ImageColumns.same_storage``, which the caller has checked)."""
        ...

    def key_kernel(self, position: int) -> RowKernel | None:
        """A decoder of the column at image ``position`` alone (the others stepped over)
        into values equal to ``decode()``'s, for keys compared as decoded values are."""
        ...


@dataclass(slots=True)
class RowChanges:
    """The rows one source event changes in a captured table: complete images, laid out
    as ``columns`` describes (every column named).

    ``images`` holds them decoded, or encoded as the source read them: ``rows`` decodes
    them the first time it is asked, so a consumer that reads the encoded form itself (the
    compiled decoder into Arrow) never pays for Python values.

    ``first_row``: row images before these at the same position (the events of a
    compressed transaction share its position): image ``i`` has
    ``seq = position.seq(first_row + i)``.
    """

    database: str
    table: str
    kind: RowsKind
    images: Rows | EncodedRows
    timestamp: int  # event time, seconds since the epoch
    position: RowPosition  # where the event starts
    columns: ImageColumns
    first_row: int = 0

    @property
    def rows(self) -> Rows:
        """(before, after) per row, decoded."""
        images = self.images
        if isinstance(images, list):
            return images
        rows = images.decode()
        self.images = rows
        return rows


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """A DDL statement on a captured table, at its place in the stream.

    ``seq`` orders it among its table's rows. One the source read from the binlog also
    says when (``timestamp``, seconds since the epoch) and where (``position``); one read
    back from the change stream (a pipeline's schema evolution) knows its ``seq`` only.
    A statement on several captured tables is a schema change of each.

    >>> at = BinlogPosition("mysql-bin.000002", 4)
    >>> change = SchemaChange.from_binlog("app", "t", "ALTER TABLE t ADD c INT", 0, at)
    >>> change.seq == at.seq(), change.where
    (True, 'binlog position mysql-bin.000002:4')
    """

    database: str
    table: str
    statement: str
    seq: int
    timestamp: int | None = None
    position: BinlogPosition | None = None

    @classmethod
    def from_binlog(
        cls, database: str, table: str, statement: str, timestamp: int, position: BinlogPosition
    ) -> SchemaChange:
        """The schema change of a statement the binlog holds at ``position``."""
        return cls(database, table, statement, position.seq(), timestamp, position)

    @property
    def where(self) -> str:
        """Its place, for messages: the binlog position where known, else its seq."""
        if self.position is not None:
            return f"binlog position {self.position}"
        return f"seq {self.seq}"
