"""Schema evolution in pipelines: Flink CDC 3.x's SchemaOperator and MetadataApplier, for Spark.

The source stream carries each DDL statement as a row of kind ``ddl`` at its binlog position
(``seq``). Per micro-batch, :class:`SchemaEvolver` walks those statements in ``seq`` order:

1. the statement is parsed into schema change events
   (:mod:`sparkcdc.mysql.ddl.schema_changes`) and applied to the source table's schema; the
   table's rows are cut into *segments* at the statement's ``seq``, each decoded with the
   schema of its time;
2. the sink table's wanted shape is computed again (transform, then route merge) and compared
   with the shape it had; the difference becomes sink changes (add / drop / rename / type),
   which ``schema.change.behavior`` and the sink's ``include.schema.changes`` /
   ``exclude.schema.changes`` turn into calls of the sink's metadata applier;
3. every segment remembers which sink column each of its columns lands in, as of the end of
   the batch (a later rename carries earlier rows along; a truncate or drop discards them).

The sink then writes the batch once, in the final shape: for a sink that keeps the last state
per key this is the same result as "rows before the change, the change, rows after", and it
keeps one idempotent write per batch id. The state after each batch that changed something
is kept under ``<checkpoint>/schema/`` so a restart or a replayed batch starts from the shape
of its time.

Behaviours (Flink CDC's): ``exception`` stops on any change; ``evolve`` applies every change
and stops if the sink refuses one; ``try_evolve`` applies, and where the sink refuses, treats
that change as ``lenient`` does; ``lenient`` (default) never loses data in the sink: a new
column is added, a dropped column stays and gets NULLs, a renamed column is added under its
new name (the old one stays), a changed type adds a column ``<name>_<type>`` (the old column
keeps its values), truncate and drop table are not forwarded unless
``exclude.schema.changes`` is set; ``ignore`` keeps the sink as it is.

**Added columns in existing rows.** ``ALTER TABLE ... ADD COLUMN`` gives the rows the table
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

import itertools
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sparkcdc.errors import SinkError, SourceError
from sparkcdc.locations import Location, as_location
from sparkcdc.model.events import SchemaChange
from sparkcdc.model.schema import Column, TableSchema, schema_from_json, schema_to_json
from sparkcdc.model.schema_change import (
    AddColumn,
    ColumnDefault,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChangeEvent,
    SchemaChangeType,
    TableChange,
    TruncateTable,
    evolve,
    matches_kinds,
)
from sparkcdc.mysql.ddl.schema_changes import DdlParseError, SchemaOf, parse_ddl
from sparkcdc.mysql.ddl.table_names import tool_table_of
from sparkcdc.sinks.base import Sink, SinkColumn, SinkTable

log = logging.getLogger(__name__)

BEHAVIORS = ("exception", "evolve", "try_evolve", "lenient", "ignore")
_LENIENT_EXCLUDED = ("drop.table", "truncate.table")


# ------------------------------------------------------------------------------- state


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


def _table_json(table: SinkTable) -> dict[str, Any]:
    return {
        "name": table.name,
        "columns": [[c.name, c.spark_type, c.nullable] for c in table.columns],
        "primary_key": list(table.primary_key),
        "sources": list(table.sources),
    }


def _table_from_json(data: dict[str, Any]) -> SinkTable:
    return SinkTable(
        data["name"],
        tuple(SinkColumn(n, t, bool(null)) for n, t, null in data["columns"]),
        tuple(data["primary_key"]),
        tuple(data["sources"]),
    )


class SchemaHistory:
    """The schema state after each batch that changed it, under ``<checkpoint>/schema/``.

    File ``<n>.json`` is the state after batch ``n - 1`` (``0``: at the first start), written
    whole and renamed into place, so a crash leaves the previous file standing.
    """

    def __init__(self, checkpoint: str | Location) -> None:
        self.checkpoint = as_location(checkpoint)
        self.root = self.checkpoint / "schema"

    def _numbers(self) -> list[int]:
        names = (n.removesuffix(".json") for n in self.root.children() if n.endswith(".json"))
        return sorted(int(n) for n in names if n.isdigit())

    def latest(self) -> SchemaState | None:
        numbers = self._numbers()
        return self._load(numbers[-1]) if numbers else None

    def states(self) -> list[SchemaState]:
        """Every saved state, oldest first (``sparkcdc verify`` follows a column's sink
        columns through them)."""
        return [self._load(n) for n in self._numbers()]

    def before(self, batch_id: int) -> SchemaState | None:
        """The state a batch starts from: written by an earlier batch (or the first start)."""
        numbers = [n for n in self._numbers() if n <= batch_id]
        return self._load(numbers[-1]) if numbers else None

    def has(self, batch_id: int) -> bool:
        """Whether the state after ``batch_id`` was saved (the batch is being replayed)."""
        return (self.root / f"{batch_id + 1:012d}.json").exists()

    def save(self, batch_id: int, state: SchemaState) -> None:
        data = {
            "sources": {
                q: [
                    [
                        v.since,
                        None if v.schema is None else schema_to_json(v.schema),
                        v.mapping,
                        v.discarded,
                        v.batch,
                    ]
                    for v in versions
                ]
                for q, versions in state.sources.items()
            },
            "sinks": {
                name: {
                    "frame": _table_json(s.frame),
                    "table": _table_json(s.table),
                    "mapping": s.mapping,
                    "dropped": s.dropped,
                    "stale": s.stale,
                }
                for name, s in state.sinks.items()
            },
            "shadows": {q: [list(item) for item in items] for q, items in state.shadows.items()},
        }
        (self.root / f"{batch_id + 1:012d}.json").write(json.dumps(data, indent=1))

    def _load(self, number: int) -> SchemaState:
        text = (self.root / f"{number:012d}.json").read_text()
        if text is None:
            raise FileNotFoundError(f"schema history file {number:012d}.json in {self.root}")
        data = json.loads(text)
        return SchemaState(
            {
                q: [
                    SourceVersion(
                        int(since),
                        None if schema is None else schema_from_json(schema),
                        mapping,
                        bool(discarded),
                        int(batch),
                    )
                    for since, schema, mapping, discarded, batch in versions
                ]
                for q, versions in data["sources"].items()
            },
            {
                name: SinkTableState(
                    _table_from_json(s["frame"]),
                    _table_from_json(s["table"]),
                    dict(s["mapping"]),
                    bool(s["dropped"]),
                    # saved by a sparkcdc that did not record it: what happened is unknown
                    bool(s.get("stale", True)),
                )
                for name, s in data["sinks"].items()
            },
            {
                q: [(int(seq), str(db), str(text)) for seq, db, text in items]
                for q, items in data.get("shadows", {}).items()
            },
        )


class Divergences:
    """Sink columns known to differ from the source, with how to repair them, in
    ``<checkpoint>/divergences.json`` (``sparkcdc status`` shows them)."""

    def __init__(self, checkpoint: str | Location) -> None:
        self.path = as_location(checkpoint) / "divergences.json"

    def all(self) -> list[dict[str, Any]]:
        text = self.path.read_text()
        if text is None:
            return []
        data: list[dict[str, Any]] = json.loads(text)
        return data

    def record(self, sink_table: str, column: str, seq: int, message: str) -> None:
        entry = {"sink_table": sink_table, "column": column, "seq": seq, "message": message}
        known = [
            e
            for e in self.all()
            if (e["sink_table"], e["column"], e["seq"]) != (sink_table, column, seq)
        ]
        self.path.write(json.dumps([*known, entry], indent=1))

    def forget(self, sink_table: str, column: str) -> None:
        """Remove what was recorded of ``column`` of ``sink_table`` (it was repaired)."""
        entries = self.all()
        kept = [e for e in entries if (e["sink_table"], e["column"]) != (sink_table, column)]
        if len(kept) != len(entries):
            self.path.write(json.dumps(kept, indent=1))


# ---------------------------------------------------------------------------- segments


@dataclass
class Segment:
    """Rows of one source table with ``lo <= seq < hi`` (None: unbounded), decoded with
    ``schema``; ``mapping``: frame column → sink column at the end of the batch."""

    source: str
    lo: int | None
    hi: int | None
    schema: TableSchema
    mapping: dict[str, str]


@dataclass(frozen=True)
class SinkChange:
    """A change of a sink table's columns, derived from its sources' schema changes."""

    kind: SchemaChangeType
    name: str  # the column (the old name for a rename)
    new_name: str | None = None
    spark_type: str | None = None
    old_type: str | None = None

    def describe(self) -> str:
        if self.kind is SchemaChangeType.RENAME_COLUMN:
            return f"rename column {self.name} to {self.new_name}"
        if self.kind is SchemaChangeType.ALTER_COLUMN_TYPE:
            return f"change column {self.name} from {self.old_type} to {self.spark_type}"
        if self.kind is SchemaChangeType.ADD_COLUMN:
            return f"add column {self.name} {self.spark_type}"
        return f"drop column {self.name}"


def diff_frames(
    old: SinkTable, new: SinkTable, renames: Sequence[tuple[str, str]] = ()
) -> list[SinkChange]:
    """The column changes that take ``old`` to ``new`` (renames where the source renamed).

    >>> a = SinkTable("t", (SinkColumn("id", "INT"), SinkColumn("x", "INT")), ("id",), ())
    >>> b = SinkTable("t", (SinkColumn("id", "BIGINT"), SinkColumn("y", "INT")), ("id",), ())
    >>> [c.describe() for c in diff_frames(a, b, [("x", "y")])]
    ['rename column x to y', 'change column id from INT to BIGINT']
    """
    before = {c.name: c.spark_type for c in old.columns}
    after = {c.name: c.spark_type for c in new.columns}
    changes: list[SinkChange] = []
    renamed_from: set[str] = set()
    renamed_to: set[str] = set()
    for old_name, new_name in renames:
        if (
            old_name in before
            and old_name not in after
            and new_name in after
            and new_name not in before
        ):
            changes.append(
                SinkChange(
                    SchemaChangeType.RENAME_COLUMN,
                    old_name,
                    new_name,
                    spark_type=after[new_name],
                    old_type=before[old_name],
                )
            )
            renamed_from.add(old_name)
            renamed_to.add(new_name)
            if before[old_name] != after[new_name]:
                changes.append(
                    SinkChange(
                        SchemaChangeType.ALTER_COLUMN_TYPE,
                        new_name,
                        spark_type=after[new_name],
                        old_type=before[old_name],
                    )
                )
    for name, spark_type in after.items():
        if name in renamed_to:
            continue
        if name not in before:
            changes.append(SinkChange(SchemaChangeType.ADD_COLUMN, name, spark_type=spark_type))
        elif before[name] != spark_type:
            changes.append(
                SinkChange(
                    SchemaChangeType.ALTER_COLUMN_TYPE,
                    name,
                    spark_type=spark_type,
                    old_type=before[name],
                )
            )
    changes.extend(
        SinkChange(SchemaChangeType.DROP_COLUMN, name)
        for name in before
        if name not in after and name not in renamed_from
    )
    return changes


def type_suffix(spark_type: str) -> str:
    """A column-name suffix for a type: ``DECIMAL(12,2)`` → ``decimal_12_2``."""
    return re.sub(r"[^0-9a-z]+", "_", spark_type.lower()).strip("_")


# ------------------------------------------------------------------------------ evolver

FrameOf = Callable[[str, Sequence[TableSchema]], SinkTable]
"""(sink table name, member source schemas) → the sink table the transform and route make."""


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
        tinyint1_as_boolean: bool = True,
        online_schema_changes: bool = False,
    ) -> None:
        self.sink = sink
        # scan.parse.online.schema.changes.enabled: follow gh-ost / pt-osc copies
        self.online_schema_changes = online_schema_changes
        # the source's treat-tinyint1-as-boolean.enabled: DDL columns typed as the catalog's
        self.tinyint1_as_boolean = tinyint1_as_boolean
        self.behavior = behavior
        self.frame_of = frame_of
        self.members = members  # sink table → its source tables
        self.route = route  # a table new to the pipeline → its sink table
        options = sink.options
        self.include = options.include_schema_changes
        exclude = tuple(options.exclude_schema_changes)
        if not exclude and behavior == "lenient":
            exclude = _LENIENT_EXCLUDED  # Flink CDC's default; naming any exclusion overrides it
        self.exclude = exclude
        self._replay = False
        self._batch = 0

    def allowed(self, kind: SchemaChangeType) -> bool:
        """Whether the sink's include / exclude lists let a change of ``kind`` through."""
        if self.include is not None and not matches_kinds(kind, self.include):
            return False
        return not matches_kinds(kind, self.exclude)

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
            if self._tool_table(state, row, schema_now):
                continue
            try:
                changes = self._parse(row.database, row.statement, schema_now)
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
            copy = self._swapped_in(state, own, changes)
            if copy is not None:  # an online schema change tool's cut-over
                if schema_now(row.database, row.table) is None:  # renamed away before
                    raise _replaced(own, copy, row.seq, row.statement)
                if row.seq > applied[own]:
                    for event in self._copy_events(state, copy, own, row.seq):
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
                    raise _replaced(own, q, row.seq, row.statement)
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

    def _parse(
        self, database: str, statement: str, schema_of: SchemaOf | None = None
    ) -> list[TableChange]:
        return parse_ddl(
            database,
            statement,
            tinyint1_as_boolean=self.tinyint1_as_boolean,
            schema_of=schema_of,
        )

    def _tool_table(
        self,
        state: SchemaState,
        row: SchemaChange,
        schema_now: SchemaOf,
    ) -> bool:
        """Whether ``row`` is a statement on a table an online schema change tool made beside
        a source table (scan.parse.online.schema.changes.enabled), which it then takes in:
        the copy's statements are kept for the cut-over, the tool's other tables (and the
        copy's swap out of its name) are left alone, and none of them joins the pipeline."""
        tool = tool_table_of(row.table) if self.online_schema_changes else None
        if tool is None or f"{row.database}.{tool[0]}" not in state.sources:
            return False
        original, is_copy = tool
        copy = f"{row.database}.{row.table}"
        if not is_copy:
            return True
        try:
            changes = self._parse(row.database, row.statement, schema_now)
        except DdlParseError:
            changes = None  # kept as written: the cut-over says what it cannot read
        own = [c.event for c in changes or [] if c.qualified_name == copy]
        if any(isinstance(e, RenameTable) for e in own):
            return True  # the cut-over: the table's own row of the statement takes the copy
        if any(isinstance(e, DropTable) for e in own):
            state.shadows.pop(copy, None)
            return True
        created = [e for e in own if isinstance(e, CreateTable)]
        if created:
            model = schema_now(row.database, original)
            if model is not None and replace(created[0].schema, table=original) == model:
                state.shadows[copy] = []  # a copy of the table: its statements follow
            else:
                state.shadows.pop(copy, None)  # not a copy: a cut-over stops
            return True
        kept = state.shadows.get(copy)
        if kept is not None and (not kept or kept[-1][0] < row.seq):
            kept.append((row.seq, row.database, row.statement))
        return True

    def _swapped_in(
        self, state: SchemaState, own: str, changes: Sequence[TableChange]
    ) -> str | None:
        """The followed copy a statement renames into ``own`` (the cut-over), or None."""
        for c in changes:
            event = c.event
            if (
                isinstance(event, RenameTable)
                and f"{event.database}.{event.table}" == own
                and c.qualified_name in state.shadows
                and own in state.sources
            ):
                return c.qualified_name
        return None

    def _copy_events(
        self, state: SchemaState, copy: str, own: str, seq: int
    ) -> list[SchemaChangeEvent]:
        """The column changes the tool made to its copy, as changes of ``own`` at the
        cut-over (rows before it have the old shape, rows after it the new one)."""
        events: list[SchemaChangeEvent] = []
        for at, database, statement in state.shadows[copy]:
            try:
                changes = self._parse(database, statement)
            except DdlParseError as exc:
                raise DdlParseError(
                    f"{exc}. The online schema change tool ran it on {copy} (seq {at}), the "
                    f"copy it swapped in for {own} at seq {seq}; sparkcdc cannot tell what it "
                    "did to the columns, so the pipeline stops. Report the statement; to go "
                    "on, take a new snapshot (delete the pipeline's checkpoint and run it again)"
                ) from None
            for c in changes:
                if c.qualified_name != copy:
                    continue
                if isinstance(c.event, CreateTable | DropTable | RenameTable | TruncateTable):
                    raise _replaced(own, copy, seq, statement)
                events.append(c.event)
        return events

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
            if self.behavior == "exception":
                raise self._exception(kind.value, where)
            if self.behavior == "ignore" or not self.allowed(kind):
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
        state.sinks[sink_name] = self._apply(sink_state, frame, [], where, closed)
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
        pending: list[_PendingFill] = []  # added columns whose existing rows have values
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
                if self._forward_table_event(event.kind, sink_name, sources, where):
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
                if self._forward_table_event(kind, sink_name, sources, where):
                    self.sink.create_table(frame)  # CREATE TABLE IF NOT EXISTS: idempotent
                    sink_state = SinkTableState.fresh(frame)
                continue
            renames = [(event.old, event.new)] if isinstance(event, RenameColumn) else []
            before = {c.lower() for c in sink_state.table.column_names}
            for item in pending:
                item.follow(source, event, sink_state.mapping)
            sink_state = self._apply(sink_state, frame, renames, where, closed)
            if isinstance(event, AddColumn) and event.default is not None:
                target = sink_state.mapping.get(event.column.name)
                fresh = target is not None and target.lower() not in before
                pending.append(
                    _PendingFill(source, event.column.name, event, seq, statement, fresh)
                )
        state.sinks[sink_name] = sink_state
        return self._fills(state, sink_name, sources, pending)

    def _fills(
        self,
        state: SchemaState,
        sink_name: str,
        sources: tuple[str, ...],
        pending: list[_PendingFill],
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

    def _forward_table_event(
        self, kind: SchemaChangeType, sink_name: str, sources: tuple[str, ...], where: str
    ) -> bool:
        if self.behavior == "ignore" or not self.allowed(kind):
            log.info("%s: %s not forwarded to %s", where, kind.value, sink_name)
            return False
        if self.behavior == "exception":
            raise self._exception(f"{kind.value}", where)
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

    def _exception(self, what: str, where: str) -> SinkError:
        return SinkError(
            f"schema change on {where}: {what}, and pipeline.schema.change.behavior is "
            "'exception'. Apply it to the sink by hand and restart with another behavior "
            "(evolve, try_evolve, lenient or ignore), or exclude it with the sink's "
            "exclude.schema.changes"
        )

    def _apply(
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
                raise self._exception(change.describe(), where)
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


@dataclass
class _PendingFill:
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


def _replaced(table: str, by: str, seq: int, statement: str) -> SourceError:
    return SourceError(
        f"{table} was replaced at seq {seq} by {statement!r}: the table {by} took its name. "
        "The pipeline knows neither the rows nor the columns of that table (an online schema "
        "change tool, gh-ost or pt-online-schema-change, copies the rows into it and alters "
        "it, then swaps the names), so writing on would leave the sink's rows and columns "
        "wrong. The pipeline stops; take a new snapshot (delete the pipeline's checkpoint and "
        "run it again), or alter the table in place (ALTER TABLE, ALGORITHM=INPLACE or "
        "INSTANT)"
    )


def _ignored(change: SinkChange, mapping: dict[str, str]) -> dict[str, str]:
    """The mapping when a change is not applied to the sink (its type stays, values cast)."""
    if change.kind in (SchemaChangeType.DROP_COLUMN, SchemaChangeType.RENAME_COLUMN):
        return {f: s for f, s in mapping.items() if f != change.name}
    return mapping
