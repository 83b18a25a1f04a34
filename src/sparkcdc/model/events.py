"""The change-event vocabulary every layer speaks, from the decoder to the sinks.

:class:`RowChanges` (the rows one source event changes) and :class:`SchemaChange` (a DDL
statement on a captured table) are what a source yields; the change rows that spell them
speak :mod:`sparkcdc.model.changelog`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column


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


class EncodedRows(Protocol):
    """Rows a source has not decoded yet (a binlog ROWS event's bytes): ``decode()`` gives
    them, or raises what the source would have raised reading them."""

    def decode(self) -> Rows: ...


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
