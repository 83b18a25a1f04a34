"""The walk over a batch's schema-change statements (Flink CDC's SchemaOperator): each applied
to its source table's schema, the sink tables changed through the policy, the batch's rows cut
into segments by the schema of their time (see :mod:`sparkcdc.pipeline.evolution`)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sparkcdc.errors import DdlParseError
from sparkcdc.model.events import SchemaChange
from sparkcdc.model.schema import TableSchema
from sparkcdc.model.schema_change import (
    AddColumn,
    CreateTable,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChangeEvent,
    SchemaChangeType,
    SourceDdl,
    TruncateTable,
    evolve,
)
from sparkcdc.pipeline.evolution.fills import ColumnFill, PendingFill, column_fills
from sparkcdc.pipeline.evolution.online_schema_change import (
    copy_events,
    replaced_error,
    swapped_in,
    tool_statement,
)
from sparkcdc.pipeline.evolution.policy import ChangePolicy
from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState, SourceVersion
from sparkcdc.sinks.base import Sink, SinkTable

log = logging.getLogger(__name__)

FrameOf = Callable[[str, Sequence[TableSchema]], SinkTable]
"""(sink table name, member source schemas) → the sink table the transform and route make."""


@dataclass
class Segment:
    """Rows of one source table with ``lo <= seq < hi`` (None: unbounded), decoded with
    ``schema``; ``mapping``: frame column → sink column at the end of the batch."""

    source: str
    lo: int | None
    hi: int | None
    schema: TableSchema
    mapping: dict[str, str]


@dataclass
class BatchPlan:
    """What one batch writes: per sink table, its final shape and the segments that feed it,
    and the added columns to fill once it is written."""

    state: SchemaState
    segments: dict[str, list[Segment]] = field(default_factory=dict)
    changed: bool = False
    fills: list[ColumnFill] = field(default_factory=list)


class SchemaEvolver:
    """Applies a batch's schema changes to the sink and cuts its rows into segments."""

    def __init__(
        self,
        sink: Sink,
        behavior: str,
        frame_of: FrameOf,
        members: dict[str, tuple[str, ...]],
        route: Callable[[TableSchema], str] | None = None,
        *,
        ddl: SourceDdl,
        online_schema_changes: bool = False,
    ) -> None:
        self.sink = sink
        # scan.parse.online.schema.changes.enabled: follow gh-ost / pt-osc copies
        self.online_schema_changes = online_schema_changes
        self.ddl = ddl  # the source's DDL statements, read as its catalog types columns
        self.policy = ChangePolicy(sink, behavior)
        self.frame_of = frame_of
        self.members = members  # sink table → its source tables
        self.route = route  # a table new to the pipeline → its sink table
        self._replay = False
        self._batch = 0

    def allowed(self, kind: SchemaChangeType) -> bool:
        """Whether the sink's include / exclude lists let a change of ``kind`` through."""
        return self.policy.allowed(kind)

    def plan(
        self,
        state: SchemaState,
        ddl: Sequence[SchemaChange],
        *,
        batch_id: int = 0,
        replay: bool = False,
    ) -> BatchPlan:
        """Apply the batch's schema changes to the sink; cut its rows into segments.

        ``replay``: the batch ran before up to its writes, so truncate / drop / create, which
        are not idempotent against those writes, are not done again (column changes are).
        """
        self._replay = replay

        shadows = state.shadows  # the caller's state is not changed: the plan works on a copy
        state = state.copy()
        result = BatchPlan(state)
        # a statement already applied (a snapshot chunk carried it a batch early, or several
        # chunks did) comes again: each table takes a statement once, by its position
        applied = {q: vs[-1].since for q, vs in state.sources.items()}
        for versions in state.sources.values():
            # Rows of a version arrive at most one batch after the next version was made (a
            # chunk brings a statement ahead of the binlog rows before it, which come in the
            # following batch); older versions are dropped
            versions[:-1] = [
                v for v, nxt in itertools.pairwise(versions) if nxt.batch >= batch_id - 1
            ]
        self._batch = batch_id
        events: list[tuple[int, str, SchemaChangeEvent, str]] = []
        seen: set[tuple[str, str, int]] = set()
        # each source table's schema as the statements so far leave it (None: none exists)
        current: dict[str, TableSchema | None] = {}

        def schema_now(database: str, table: str) -> TableSchema | None:
            q = f"{database}.{table}"
            return current[q] if q in current else state.schema(q)

        for row in sorted(ddl, key=lambda r: r.seq):
            if (row.database, row.table, row.seq) in seen:
                continue
            seen.add((row.database, row.table, row.seq))
            if self.online_schema_changes and tool_statement(state, row, schema_now, self.ddl):
                continue
            try:
                changes = self.ddl.parse(row.database, row.statement, schema_now)
            except DdlParseError as exc:
                if f"{row.database}.{row.table}" not in state.sources and self.route is None:
                    continue  # a table this pipeline does not write, nor could join
                raise DdlParseError(
                    f"{exc}. It is a DDL statement on the captured table "
                    f"{row.database}.{row.table} (seq {row.seq}), and sparkcdc cannot tell what "
                    "it did to the table's columns, so the pipeline stops rather than write "
                    "rows in a shape that may be wrong. Report the statement; to go on, take a "
                    "new snapshot (delete the pipeline's checkpoint and run it again)"
                ) from None
            # a statement on several captured tables (DROP TABLE a, b) comes as a row per
            # table, each with the whole statement: a row brings its own table's changes
            own = f"{row.database}.{row.table}"
            written = own in state.sources or self.route is not None
            copy = swapped_in(state, own, changes)
            if copy is not None:  # an online schema change tool's cut-over
                if schema_now(row.database, row.table) is None:  # renamed away before
                    raise replaced_error(own, copy, row.seq, row.statement)
                if row.seq > applied[own]:
                    for event in copy_events(state, copy, own, row.seq, self.ddl):
                        events.append((row.seq, own, event, row.statement))
                        current[own] = evolve(schema_now(row.database, row.table), event)
                del state.shadows[copy]
                continue
            for c in changes:
                q = c.qualified_name
                event = c.event
                renamed_in = (
                    isinstance(event, RenameTable)
                    and q != own
                    and f"{event.database}.{event.table}" == own
                )
                if renamed_in and written:
                    raise replaced_error(own, q, row.seq, row.statement)
                if q != own:
                    continue
                if q not in state.sources and isinstance(c.event, CreateTable):
                    if self._join(state, q, c.event.schema, row.seq, row.statement):
                        applied[q] = row.seq
                        current[q] = c.event.schema
                        result.changed = True
                elif q in state.sources and row.seq > applied[q]:
                    if isinstance(c.event, CreateTable) and schema_now(row.database, row.table):
                        if c.event.if_not_exists:
                            continue  # the server left the table as it was
                        # the server created it, so the table the stream knows was gone:
                        # CREATE OR REPLACE, or a drop the binlog names no table in (DROP
                        # DATABASE); its rows went with it
                        events.append((row.seq, q, DropTable(), row.statement))
                    events.append((row.seq, q, c.event, row.statement))
                    if isinstance(c.event, RenameTable):  # the new name has these columns
                        renamed = f"{c.event.database}.{c.event.table}"
                        current.setdefault(renamed, schema_now(row.database, row.table))
                    current[q] = evolve(schema_now(row.database, row.table), c.event)
        for sink_name, sources in self._members(state).items():
            fills = self._sink_table(
                state, sink_name, sources, [e for e in events if e[1] in sources]
            )
            result.fills.extend(fills)
            result.segments[sink_name] = self._segments(state, sink_name, sources)
        result.changed = result.changed or bool(events) or state.shadows != shadows
        return result

    def _members(self, state: SchemaState) -> dict[str, tuple[str, ...]]:
        """Sink table → its source tables: the plan's, and the sink tables an earlier run
        wrote whose sources this run no longer captures (dropped or renamed while the
        pipeline was stopped): the stream brings their DDL (source.py, "gone" tables), and a
        DROP TABLE reaches their sink table as if the pipeline had run."""
        orphans = {
            name: sink_state.table.sources
            for name, sink_state in state.sinks.items()
            if name not in self.members and not sink_state.dropped
        }
        return {**self.members, **orphans}

    def _join(
        self, state: SchemaState, source: str, schema: TableSchema, seq: int, statement: str
    ) -> bool:
        """A table that joined the stream (scan.newly-added-table.enabled): route it, create
        its sink table or add it to the one its route merges into."""
        if self.route is None:
            return False
        sink_name = self.route(schema)
        where = f"{source} at seq {seq} (a table new to the pipeline)"
        state.sources[source] = [SourceVersion(seq, schema, batch=self._batch)]
        members = self.members.get(sink_name, ())
        self.members[sink_name] = (*members, source)
        sink_state = state.sinks.get(sink_name)
        if sink_state is None or sink_state.dropped:
            frame = self.frame_of(sink_name, [schema])
            kind = SchemaChangeType.CREATE_TABLE
            if self.policy.behavior == "exception":
                raise self.policy.exception(kind.value, where)
            if self.policy.behavior == "ignore" or not self.policy.allowed(kind):
                log.warning("%s: %s not forwarded; its rows are not written", where, kind.value)
                self.members[sink_name] = members
                del state.sources[source]
                return False
            self.sink.create_table(frame)  # CREATE TABLE IF NOT EXISTS: idempotent
            state.sinks[sink_name] = SinkTableState.fresh(frame)
            log.info("%s: sink table %s created", where, sink_name)
            return True
        schemas = [s for s in (state.schema(m) for m in self.members[sink_name]) if s is not None]
        closed = [v for m in members for v in state.sources[m][:-1]]
        frame = self.frame_of(sink_name, schemas)
        state.sinks[sink_name] = self.policy.apply(sink_state, frame, [], where, closed)
        return True

    def _segments(
        self, state: SchemaState, sink_name: str, sources: tuple[str, ...]
    ) -> list[Segment]:
        current = state.sinks[sink_name].mapping
        segments = []
        for source in sources:
            versions = state.sources[source]
            for i, version in enumerate(versions):
                if version.schema is None or version.discarded:
                    continue
                low = version.since if i > 0 else None
                high = versions[i + 1].since if i + 1 < len(versions) else None
                mapping = current if version.mapping is None else version.mapping
                segments.append(Segment(source, low, high, version.schema, dict(mapping)))
        return segments

    def _sink_table(
        self,
        state: SchemaState,
        sink_name: str,
        sources: tuple[str, ...],
        events: list[tuple[int, str, SchemaChangeEvent, str]],
    ) -> list[ColumnFill]:
        sink_state = state.sinks[sink_name]
        pending: list[PendingFill] = []  # added columns whose existing rows have values
        for seq, source, event, statement in events:
            versions = state.sources[source]
            schema = versions[-1].schema
            new_schema = evolve(schema, event)
            if new_schema is schema and not isinstance(event, TruncateTable):
                continue
            closed = [v for m in sources for v in state.sources[m][:-1]]
            versions[-1].mapping = dict(sink_state.mapping)
            versions.append(SourceVersion(seq, new_schema, batch=self._batch))
            closed.append(versions[-2])
            where = f"{source} at seq {seq} ({statement!r})"
            if isinstance(event, TruncateTable | DropTable):
                if self.policy.forward_table_event(event.kind, sink_name, sources, where):
                    if not self._replay:
                        if isinstance(event, TruncateTable):
                            self.sink.truncate_table(sink_state.table)
                        else:
                            self.sink.drop_table(sink_state.table)
                    # emptied as the source table was
                    sink_state = replace(sink_state, stale=False)
                    if isinstance(event, DropTable):
                        sink_state = replace(sink_state, dropped=True)
                    for version in versions[:-1]:
                        version.discarded = True  # the change wipes out every earlier row
                else:
                    sink_state = replace(sink_state, stale=True)
                continue
            if isinstance(event, RenameTable | CreateTable) and not sink_state.dropped:
                # rows the sink table keeps that the table under this name no longer has
                sink_state = replace(sink_state, stale=True)
            if isinstance(event, RenameTable):
                log.warning(
                    "%s: table renamed to %s.%s; its sink table %s keeps what it has, and the "
                    "new name is captured after a restart if it matches the source tables",
                    where,
                    event.database,
                    event.table,
                    sink_name,
                )
                continue
            members = [s for s in (state.schema(m) for m in sources) if s is not None]
            if not members:
                continue
            frame = self.frame_of(sink_name, members)
            if sink_state.dropped:
                kind = SchemaChangeType.CREATE_TABLE
                if self.policy.forward_table_event(kind, sink_name, sources, where):
                    self.sink.create_table(frame)  # CREATE TABLE IF NOT EXISTS: idempotent
                    sink_state = SinkTableState.fresh(frame)
                continue
            renames = [(event.old, event.new)] if isinstance(event, RenameColumn) else []
            before = {c.lower() for c in sink_state.table.column_names}
            for item in pending:
                item.follow(source, event, sink_state.mapping)
            sink_state = self.policy.apply(sink_state, frame, renames, where, closed)
            if isinstance(event, AddColumn) and event.default is not None:
                target = sink_state.mapping.get(event.column.name)
                fresh = target is not None and target.lower() not in before
                pending.append(PendingFill(source, event.column.name, event, seq, statement, fresh))
        state.sinks[sink_name] = sink_state
        return column_fills(state, sink_name, sources, pending)
