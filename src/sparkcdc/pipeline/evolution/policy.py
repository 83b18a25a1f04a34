"""``pipeline.schema.change.behavior`` (Flink CDC's exception, evolve, try_evolve, lenient,
ignore) with the sink's ``include.schema.changes`` / ``exclude.schema.changes``: which schema
changes reach the sink, and how each is made there."""

from __future__ import annotations

import logging
from dataclasses import replace

from sparkcdc.errors import SinkError
from sparkcdc.model.schema_change import SchemaChangeType, matches_kinds
from sparkcdc.pipeline.evolution.schema_diff import SinkChange, diff_frames, type_suffix
from sparkcdc.pipeline.evolution.state import SinkTableState, SourceVersion
from sparkcdc.sinks.base import Sink, SinkColumn, SinkTable

log = logging.getLogger(__name__)

BEHAVIORS = ("exception", "evolve", "try_evolve", "lenient", "ignore")
_LENIENT_EXCLUDED = ("drop.table", "truncate.table")


class ChangePolicy:
    """Makes a sink table's column changes as the behaviour says, and tells whether a table
    change (create, truncate, drop) is forwarded."""

    def __init__(self, sink: Sink, behavior: str) -> None:
        self.sink = sink
        self.behavior = behavior
        options = sink.options
        self.include = options.include_schema_changes
        exclude = tuple(options.exclude_schema_changes)
        if not exclude and behavior == "lenient":
            exclude = _LENIENT_EXCLUDED  # Flink CDC's default; naming any exclusion overrides it
        self.exclude = exclude

    def allowed(self, kind: SchemaChangeType) -> bool:
        """Whether the sink's include / exclude lists let a change of ``kind`` through."""
        if self.include is not None and not matches_kinds(kind, self.include):
            return False
        return not matches_kinds(kind, self.exclude)

    def forward_table_event(
        self, kind: SchemaChangeType, sink_name: str, sources: tuple[str, ...], where: str
    ) -> bool:
        if self.behavior == "ignore" or not self.allowed(kind):
            log.info("%s: %s not forwarded to %s", where, kind.value, sink_name)
            return False
        if self.behavior == "exception":
            raise self.exception(f"{kind.value}", where)
        if len(sources) > 1 and kind is not SchemaChangeType.CREATE_TABLE:
            log.warning(
                "%s: %s not forwarded: sink table %s merges %s, and the change concerns one "
                "of them",
                where,
                kind.value,
                sink_name,
                ", ".join(sources),
            )
            return False
        return True

    def exception(self, what: str, where: str) -> SinkError:
        return SinkError(
            f"schema change on {where}: {what}, and pipeline.schema.change.behavior is "
            "'exception'. Apply it to the sink by hand and restart with another behavior "
            "(evolve, try_evolve, lenient or ignore), or exclude it with the sink's "
            "exclude.schema.changes"
        )

    def apply(
        self,
        state: SinkTableState,
        frame: SinkTable,
        renames: list[tuple[str, str]],
        where: str,
        closed: list[SourceVersion],
    ) -> SinkTableState:
        table, mapping = state.table, dict(state.mapping)
        for change in diff_frames(state.frame, frame, renames):
            if self.behavior == "ignore" or not self.allowed(change.kind):
                log.info("%s: %s not applied to %s", where, change.describe(), table.name)
                mapping = _ignored(change, mapping)
                continue
            if self.behavior == "exception":
                raise self.exception(change.describe(), where)
            key = change.name in table.primary_key
            if self.behavior in ("evolve", "try_evolve") or key:
                try:
                    table, mapping = self._in_place(table, mapping, change, closed)
                    log.info("%s: %s applied to %s", where, change.describe(), table.name)
                    continue
                except SinkError as exc:
                    if self.behavior == "evolve" or key:
                        raise SinkError(
                            f"schema change on {where}: the {self.sink.options.type} sink "
                            f"cannot {change.describe()} in {table.name}: {exc}. Choose "
                            "pipeline.schema.change.behavior lenient or try_evolve, or change "
                            "the sink table by hand and restart"
                        ) from None
                    log.warning(
                        "%s: %s failed in %s (%s); treated as in lenient mode",
                        where,
                        change.describe(),
                        table.name,
                        exc,
                    )
            table, mapping = self._lenient(table, mapping, change)
        return replace(state, frame=frame, table=table, mapping=mapping)

    def _in_place(
        self,
        table: SinkTable,
        mapping: dict[str, str],
        change: SinkChange,
        closed: list[SourceVersion],
    ) -> tuple[SinkTable, dict[str, str]]:
        """Make ``change`` in the sink table; rows of earlier versions follow a renamed column
        and lose a dropped one."""
        target = mapping.get(change.name, change.name)
        columns = list(table.columns)
        if change.kind is SchemaChangeType.ADD_COLUMN:
            assert change.spark_type is not None
            if target not in table.column_names:
                column = SinkColumn(change.name, change.spark_type, True)
                self.sink.add_column(table, column)
                columns.append(column)
            return replace(table, columns=tuple(columns)), {**mapping, change.name: change.name}
        if change.kind is SchemaChangeType.DROP_COLUMN:
            if target in table.column_names:
                self.sink.drop_column(table, target)
                columns = [c for c in columns if c.name != target]
                key = tuple(k for k in table.primary_key if k != target)
                table = replace(table, primary_key=key)
            for version in closed:
                assert version.mapping is not None
                version.mapping = {f: s for f, s in version.mapping.items() if s != target}
            rest = {f: s for f, s in mapping.items() if f != change.name}
            return replace(table, columns=tuple(columns)), rest
        if change.kind is SchemaChangeType.RENAME_COLUMN:
            assert change.new_name is not None
            new = change.new_name
            if target in table.column_names and new not in table.column_names:
                self.sink.rename_column(table, target, new)
                columns = [replace(c, name=new) if c.name == target else c for c in columns]
                key = tuple(new if k == target else k for k in table.primary_key)
                table = replace(table, primary_key=key)
            for version in closed:
                assert version.mapping is not None
                version.mapping = {
                    f: (new if s == target else s) for f, s in version.mapping.items()
                }
            rest = {f: s for f, s in mapping.items() if f != change.name}
            return replace(table, columns=tuple(columns)), {**rest, new: new}
        assert change.spark_type is not None
        if target in table.column_names:
            current = next(c for c in columns if c.name == target)
            if current.spark_type != change.spark_type:
                self.sink.alter_column_type(table, target, change.spark_type)
                columns = [
                    replace(c, spark_type=change.spark_type) if c.name == target else c
                    for c in columns
                ]
        return replace(table, columns=tuple(columns)), mapping

    def _lenient(
        self, table: SinkTable, mapping: dict[str, str], change: SinkChange
    ) -> tuple[SinkTable, dict[str, str]]:
        if change.kind is SchemaChangeType.DROP_COLUMN:
            return table, {f: s for f, s in mapping.items() if f != change.name}
        if change.kind is SchemaChangeType.RENAME_COLUMN:
            assert change.new_name is not None
            mapping = {f: s for f, s in mapping.items() if f != change.name}
            name = change.new_name
            spark_type = change.spark_type or "STRING"  # the column's type as it is now
        else:
            assert change.spark_type is not None
            name, spark_type = change.name, change.spark_type
        by_name = {c.name: c for c in table.columns}
        target = name
        if target in by_name and by_name[target].spark_type != spark_type:
            target = f"{name}_{type_suffix(spark_type)}"
        if target not in by_name:
            column = SinkColumn(target, spark_type, True)
            self.sink.add_column(table, column)
            table = replace(table, columns=(*table.columns, column))
        elif by_name[target].spark_type != spark_type:
            raise SinkError(
                f"sink table {table.name} has a column {target} of type "
                f"{by_name[target].spark_type}, and lenient schema evolution wants it for "
                f"{name} of type {spark_type}; rename or drop that column in the sink"
            )
        return table, {**mapping, name: target}


def _ignored(change: SinkChange, mapping: dict[str, str]) -> dict[str, str]:
    """The mapping when a change is not applied to the sink (its type stays, values cast)."""
    if change.kind in (SchemaChangeType.DROP_COLUMN, SchemaChangeType.RENAME_COLUMN):
        return {f: s for f, s in mapping.items() if f != change.name}
    return mapping
