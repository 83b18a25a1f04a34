"""Which sink columns verify compares, fed by which source column, and how each side computes
their canonical values (``pipeline/canonical.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkcdc.model.canonical import ChecksumTable
from sparkcdc.model.dialect import SourceDialect
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.schema_change import SchemaChangeType, matches_kinds
from sparkcdc.pipeline import canonical as cn
from sparkcdc.pipeline.config import PipelineConfig, TransformRule
from sparkcdc.sinks.base import SinkColumn, SinkTable

if TYPE_CHECKING:
    import pyarrow as pa

    from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState
    from sparkcdc.pipeline.routes import SourceTablePlan


@dataclass(frozen=True)
class Compared:
    """A sink column verify compares, and the source column (of the transformed frame) whose
    values the pipeline writes into it."""

    column: SinkColumn
    source: str
    # sink columns lenient kept when this one replaced them (a changed type gives a new
    # column ``<name>_<type>``): rows written before hold the value there, this one NULL
    older: tuple[SinkColumn, ...] = ()


@dataclass(frozen=True)
class ColumnPlan:
    """Which sink columns are compared, and how each side computes them."""

    table: SinkTable
    compared: tuple[Compared, ...]

    @classmethod
    def whole(cls, table: SinkTable) -> ColumnPlan:
        """Every column, fed by the source column of its name (no schema change yet)."""
        return cls(table, tuple(Compared(c, c.name) for c in table.columns))

    @property
    def names(self) -> list[str]:
        return [c.column.name for c in self.compared]

    @property
    def mapping(self) -> dict[str, str]:
        """Source column -> the sink column it is compared in."""
        return {c.source: c.column.name for c in self.compared}

    def spark_values(self, types: dict[str, str], *, older: bool = False) -> list[str]:
        """Canonical values over a frame of sink columns (``types``: its actual Spark types);
        ``older``: as lenient promises, a row's value is in the first of the column and the
        columns it replaced that is not NULL (the sink; the source side has no such rows)."""
        out = []
        for compared in self.compared:
            column = compared.column
            actual = types.get(column.name, column.spark_type)
            # a TIMESTAMP read back as TIMESTAMP_NTZ is its UTC wall time: same micros
            kind = actual if actual in ("TIMESTAMP", "TIMESTAMP_NTZ") else column.spark_type
            if not (older and compared.older):
                out.append(cn.spark_value(column.name, kind))
                continue
            chain = [column, *compared.older]
            value = ", ".join(
                f"TRY_CAST({quote_spark(c.name)} AS {column.spark_type})" for c in chain
            )
            out.append(cn.spark_value_of(f"COALESCE({value})", column.spark_type))
        return out

    def arrow_columns(self) -> list[str]:
        """The sink columns :meth:`arrow_values` reads."""
        return [c.name for compared in self.compared for c in (compared.column, *compared.older)]

    def arrow_fields(self, batch: pa.RecordBatch) -> list[pa.Array] | None:
        """The fields (``canonical.arrow_fields``) of a batch of :meth:`arrow_columns`, one
        array per compared column (older columns as in :meth:`spark_values`); None where a
        type has no Arrow form."""
        import pyarrow.compute as pc

        out = []
        for compared in self.compared:
            values = batch.column(compared.column.name)
            for older in compared.older:
                values = pc.coalesce(values, cn.arrow_cast(batch.column(older.name), values))
            texts = cn.arrow_texts(values, compared.column.spark_type)
            if texts is None:
                return None
            out.append(cn.arrow_fields(texts))
        return out

    def key_index(self) -> list[int]:
        names = self.names
        return [names.index(k) for k in self.table.primary_key]

    def source_values(
        self, schema: TableSchema, source: SourceDialect[Any]
    ) -> ChecksumTable | None:
        """The compared columns over a source table as the database computes them (its
        dialect's canonical values), or None if one cannot be pushed down."""
        by_name: dict[str, Column] = {c.name: c for c in schema.columns}
        out = []
        for compared in self.compared:
            column = by_name.get(compared.source)
            if column is None:  # a member of a merged table without the column
                out.append("NULL")
                continue
            value = source.canonical_value(column, compared.column.spark_type)
            if value is None:
                return None
            out.append(value)
        return ChecksumTable.of(schema, out, self.key_index())


def pushes_down(rule: TransformRule | None) -> bool:
    return rule is None or (rule.projection is None and rule.filter is None)


def column_plan(
    config: PipelineConfig,
    planned: SinkTable,
    state: SinkTableState | None,
    history: Sequence[SchemaState],
    members: Sequence[SourceTablePlan],
) -> tuple[ColumnPlan, list[dict[str, str]]]:
    """The sink columns verify compares, as the pipeline promises them, and the columns it
    does not compare, each with why.

    ``state``: the sink table as the pipeline left it (its schema history), None before any
    schema change (``planned``, whole). A sink column no source column feeds any more is
    not compared: lenient (or an excluded ``drop.column``) keeps it with the values it had
    and NULL in rows written since, and the source has no values to compare with. A sink
    column that lenient made for a changed type (``<name>_<type>``) is compared with the
    source column, its value read from it, else (rows written before the change) from the
    column it replaced. A source column that did not reach the sink (an excluded change,
    ``ignore``, a transform's projection) is listed.
    """
    notes: list[dict[str, str]] = []
    frame = planned if state is None else state.frame
    for member in members:
        rule = member.transform
        if rule is None or rule.projection is None:
            continue
        for name in member.schema.column_names:
            if name not in frame.column_names:
                why = f"not in the transform's projection of {member.schema.qualified_name}"
                notes.append({"column": name, "side": "source", "why": why})
    if state is None:
        return ColumnPlan.whole(planned), notes
    table, mapping = state.table, state.mapping
    by_name = {c.name: c for c in table.columns}
    fed = {sink: source for source, sink in mapping.items() if sink in by_name}
    older: dict[str, list[SinkColumn]] = {}
    for earlier in reversed(history):  # newest first: the column replaced last comes first
        was = earlier.sinks.get(table.name)
        for source, sink in (was.mapping if was is not None else {}).items():
            now = mapping.get(source)
            if now is None or sink in (now, *fed) or sink not in by_name:
                continue
            chain = older.setdefault(now, [])
            if by_name[sink] not in chain:
                chain.append(by_name[sink])
    compared = tuple(
        Compared(c, fed[c.name], tuple(older.get(c.name, ())))
        for c in table.columns
        if c.name in fed
    )
    used = set(fed) | {c.name for chain in older.values() for c in chain}
    for column in table.columns:
        if column.name not in used:
            notes.append({"column": column.name, "side": "sink", "why": _why_kept(config)})
    for column in state.frame.columns:
        if mapping.get(column.name) not in by_name:
            why = _not_applied(config, SchemaChangeType.ADD_COLUMN) or "the sink did not take it"
            notes.append(
                {"column": column.name, "side": "source", "why": f"not in the sink: {why}"}
            )
    return ColumnPlan(table, compared), notes


def _not_applied(config: PipelineConfig, kind: SchemaChangeType) -> str | None:
    """Why the pipeline does not apply a schema change of ``kind`` to the sink (None: it
    does)."""
    behavior = config.pipeline.schema_change_behavior
    if behavior == "ignore":
        return "schema.change.behavior is ignore"
    include = config.sink.include_schema_changes
    if include is not None and not matches_kinds(kind, include):
        return f"{kind.value} is not in the sink's include.schema.changes"
    if matches_kinds(kind, config.sink.exclude_schema_changes):
        return f"{kind.value} is in the sink's exclude.schema.changes"
    return None


def _why_kept(config: PipelineConfig) -> str:
    why = _not_applied(config, SchemaChangeType.DROP_COLUMN)
    if why is None:
        why = f"schema.change.behavior {config.pipeline.schema_change_behavior} keeps it"
    return (
        f"its source column was dropped or renamed, and {why}: rows keep the values they "
        "had, rows written since hold NULL; the source has nothing to compare them with"
    )


def same_key(schema: TableSchema, table: SinkTable) -> bool:
    # the SQL side reads rows again by the source key, which must be the sink's
    return tuple(schema.primary_key) == tuple(table.primary_key)
