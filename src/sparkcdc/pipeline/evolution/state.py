"""The schema state a pipeline carries from batch to batch: every source table's schema
versions and every sink table's shape and column mapping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sparkcdc.model.schema import TableSchema
from sparkcdc.sinks.base import SinkTable


@dataclass(frozen=True)
class SinkTableState:
    """A sink table as it is (``table``), the shape its sources want (``frame``), and which
    sink column each frame column is written to (``mapping``; absent: not written).

    ``stale``: the table may hold rows its sources no longer have and the stream did not
    remove: a truncate or drop that was not forwarded, a source table renamed away or
    created again over the name. An insert at the source may then meet its key in the sink
    table, so inserts are upserted there, never appended (``BatchWriter._write``).
    """

    frame: SinkTable
    table: SinkTable
    mapping: dict[str, str]
    dropped: bool = False
    stale: bool = False

    @classmethod
    def fresh(cls, table: SinkTable) -> SinkTableState:
        return cls(table, table, {c: c for c in table.column_names})


@dataclass
class SourceVersion:
    """A source table's schema from binlog position ``since`` on (-1: from the start).

    ``mapping``: frame column → sink column for rows of this version, kept once a newer
    version exists (the newest version uses its sink table's current mapping). ``discarded``:
    a forwarded truncate or drop came after it, so its rows are not written.
    """

    since: int
    schema: TableSchema | None
    mapping: dict[str, str] | None = None
    discarded: bool = False
    batch: int = -1  # the batch whose statement made it


@dataclass
class SchemaState:
    """Every source table's schema versions and every sink table's state."""

    sources: dict[str, list[SourceVersion]]
    sinks: dict[str, SinkTableState]
    # an online schema change tool's copy of a source table (gh-ost's _t_gho, pt-osc's
    # _t_new) → its DDL statements so far, as (seq, database, statement): applied to the
    # table when the tool swaps the copy in (scan.parse.online.schema.changes.enabled)
    shadows: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)

    @classmethod
    def start(cls, schemas: Sequence[TableSchema], sinks: Sequence[SinkTable]) -> SchemaState:
        return cls(
            {s.qualified_name: [SourceVersion(-1, s)] for s in schemas},
            {t.name: SinkTableState.fresh(t) for t in sinks},
        )

    def schema(self, source: str) -> TableSchema | None:
        """The source table's newest schema (None: dropped, or not captured)."""
        versions = self.sources.get(source)
        return versions[-1].schema if versions else None

    def copy(self) -> SchemaState:
        return SchemaState(
            {
                q: [replace(v, mapping=None if v.mapping is None else dict(v.mapping)) for v in vs]
                for q, vs in self.sources.items()
            },
            dict(self.sinks),
            {q: list(statements) for q, statements in self.shadows.items()},
        )
