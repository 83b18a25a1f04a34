"""Added columns' existing rows, filled in the sink after the batch is written.

``ALTER TABLE ... ADD COLUMN`` gives the rows the table
already has a value: the DEFAULT, the type's implicit default for a NOT NULL column without
one, the generation expression's result, a number for AUTO_INCREMENT. The binlog carries
none of it (the ALTER is one QUERY event), so the sink column, added empty, would hold NULL
in every row not changed since, silently. The parsed :class:`AddColumn` carries that
:class:`~sparkcdc.model.schema_change.ColumnDefault`, and the plan lists a
:class:`ColumnFill` per added column that reaches the sink (none under ``ignore`` or an
excluded ``add.column``: no column, nothing to fill; a rename carries its values along). The
batch writer fills it after writing the batch, so rows the batch wrote from segments before
the statement (which map without the column) are filled too. Two ways:

* *by constant* (:func:`fill_by_constant`): a literal DEFAULT of a NOT NULL column, on a sink
  column this change created, in a sink table fed by this source table alone. Every NULL of
  that sink column is then a row that existed before the ALTER (or came from a segment
  before it): rows after it come with full images, never NULL. ``SET c = literal WHERE c IS
  NULL`` is exact and idempotent (a replayed batch finds nothing left to fill). The literal
  goes through the decoder's value form and the same JSON image and cast as a binlog row
  (DECIMAL scale, TINYINT(1) → boolean, DATE); a literal whose conversion the server does
  its own way (TIMESTAMP in the session's zone, CHAR padding, SET order, backslashes) is
  read back instead.
* *read back*: everything else (CURRENT_TIMESTAMP and other expressions, generated columns,
  implicit defaults, a nullable column's DEFAULT, whose NULLs may be values set after the
  ALTER). A plain non-locking ``SELECT key, column`` of the source table, keyset-paginated on
  its primary key, is applied with "update the rows of these keys, insert none" (MERGE ...
  WHEN MATCHED / UPDATE ... WHERE key). This converges exactly: it runs after the batch is
  written, so every change up to the batch's end is in the sink; a row read at time R holds
  its value at R. A row not changed between the ALTER and R holds what the ALTER gave it
  (a generated value follows its row's other columns, unchanged; CURRENT_TIMESTAMP was
  fixed at the ALTER). A row changed after the batch's end and before R gets a newer value
  now, and that change, with its full row image, still comes from the binlog in a later
  batch, so the sink ends where the source is; a key deleted since is left alone (the
  delete follows), one inserted since is not in the sink and is not inserted. Running it
  again (a replayed batch) reads newer values, which converge the same way.

MariaDB logs VIRTUAL generated columns in FULL row images (checked on 10.11: the TABLE_MAP
names them and rows carry their values), so they are captured like STORED ones; only
their values in the rows that existed at the ALTER need reading back.

Where the column cannot be read back (the table or column was renamed or dropped since,
the sink's key columns are not source columns), a WARNING names the sink table, the column,
the statement and how to repair it, and ``<checkpoint>/divergences.json`` records it for
``sparkcdc status``. Kafka and console sinks cannot change written messages: a WARNING per
column says consumers that materialize the topic hold NULL for rows not changed since.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sparkcdc.model.schema import Column
from sparkcdc.model.schema_change import (
    AddColumn,
    ColumnDefault,
    DropColumn,
    RenameColumn,
    SchemaChangeEvent,
)
from sparkcdc.pipeline.evolution.state import SchemaState
from sparkcdc.sinks.base import SinkColumn


@dataclass(frozen=True)
class ColumnFill:
    """A column added at the source whose existing rows the server filled (DEFAULT,
    generation expression, implicit default), to be filled in the sink table after the
    batch is written.

    ``column``: the source column as named at the end of the batch; ``target``: the sink
    column it lands in; ``constant``: the value is the DEFAULT literal, and every sink row
    holding NULL in ``target`` is one to fill (see :func:`fill_by_constant`).
    """

    sink_table: str
    source: str
    column: Column
    target: SinkColumn
    default: ColumnDefault
    seq: int
    statement: str
    constant: bool

    def describe(self) -> str:
        what = f"DEFAULT {self.default.text}" if self.default.text else self.default.kind.value
        return (
            f"column {self.column.name} ({what}) added to {self.source} at seq {self.seq} "
            f"({self.statement!r})"
        )


def fill_by_constant(default: ColumnDefault, column: Column, fresh: bool, merged: bool) -> bool:
    """Whether an added column is filled in the sink by its DEFAULT literal, or else read
    back from the source.

    The literal fills every NULL of the sink column, which is exact only when a NULL there
    means "not filled": the column is NOT NULL at the source, the sink column was created
    by this change (a column kept from before, under lenient, holds old values), and no other
    source table feeds the sink table (their rows hold NULL rightly).

    >>> from sparkcdc.model.schema_change import DefaultKind
    >>> c = Column.from_mysql("c", "varchar", "varchar(5)", False)
    >>> fill_by_constant(ColumnDefault(DefaultKind.LITERAL, "'x'", "x"), c, True, False)
    True
    """
    return default.constant and not column.nullable and fresh and not merged


@dataclass
class PendingFill:
    """An added column to fill, followed through the later changes of its batch."""

    source: str
    name: str  # the source column's name, as later renames in the batch make it
    event: AddColumn
    seq: int
    statement: str
    fresh: bool  # the sink column was created by this change
    dropped: bool = False  # dropped at the source later in the batch
    target: str | None = None  # its sink column when it was dropped

    def follow(self, source: str, event: SchemaChangeEvent, mapping: dict[str, str]) -> None:
        """Before ``event`` is applied to the sink (``mapping``: frame → sink column)."""
        if source != self.source or self.dropped:
            return
        if isinstance(event, RenameColumn) and event.old.lower() == self.name.lower():
            self.name = event.new
        elif isinstance(event, DropColumn) and event.name.lower() == self.name.lower():
            self.dropped, self.target = True, mapping.get(self.name)


def column_fills(
    state: SchemaState,
    sink_name: str,
    sources: tuple[str, ...],
    pending: list[PendingFill],
) -> list[ColumnFill]:
    sink_state = state.sinks[sink_name]
    if sink_state.dropped:
        return []
    columns = {c.name: c for c in sink_state.table.columns}
    fills = []
    for item in pending:
        event = item.event
        target = item.target if item.dropped else sink_state.mapping.get(item.name)
        schema = state.schema(item.source)
        found = [c for c in schema.columns if c.name == item.name] if schema else []
        # dropped later in the batch, or its table renamed or dropped: the read-back
        # fails and says so (a sink column lenient keeps holds NULL in those rows)
        column = found[0] if found else replace(event.column, name=item.name)
        if target is None or target not in columns or not event.default:
            continue  # not in the sink (ignore, excluded, dropped there too)
        constant = not item.dropped and fill_by_constant(
            event.default, column, item.fresh, len(sources) > 1
        )
        fills.append(
            ColumnFill(
                sink_name,
                item.source,
                column,
                columns[target],
                event.default,
                item.seq,
                item.statement,
                constant,
            )
        )
    return fills
