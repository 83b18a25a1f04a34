"""The schema evolver's plans against an in-memory sink that records its applier calls.

The source table ``db.t`` (id INT key, b VARCHAR(20), c INT) is its own sink table ``db.t``.
Statements of a batch come at seq 10, 20, 30, ... Each plan is checked three ways: the
calls the sink saw, the sink table and mapping in the new state, and the segments the
batch's rows are cut into. Where the sink accepts every change, the columns it ends up with
must be those the state says it has.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import DdlParseError, SinkError, SourceError
from sparkcdc.model.events import SchemaChange
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.schema_change import SchemaChangeType
from sparkcdc.mysql.ddl.schema_changes import MySqlDdl
from sparkcdc.pipeline.evolution.evolver import BatchPlan, SchemaEvolver
from sparkcdc.pipeline.evolution.persistence import SchemaHistory
from sparkcdc.pipeline.evolution.schema_diff import SinkChange, diff_frames, type_suffix
from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState, SourceVersion
from sparkcdc.sinks.base import Sink, SinkColumn, SinkContext, SinkOptions, SinkTable

T = "db.t"  # the source table, and the sink table it is written to

ADD = "ALTER TABLE t ADD COLUMN e BIGINT"
DROP = "ALTER TABLE t DROP COLUMN c"
RENAME = "ALTER TABLE t RENAME COLUMN b TO bb"
RETYPE = "ALTER TABLE t MODIFY c BIGINT"
TRUNCATE = "TRUNCATE TABLE t"
DROP_TABLE = "DROP TABLE t"

Call = tuple[str, ...]
SegmentView = tuple[int | None, int | None, tuple[str, ...], dict[str, str]]


class RecordingSink(Sink):
    """Keeps each table's columns, records every applier call, refuses the named ones."""

    def __init__(
        self,
        options: SinkOptions,
        spark: Any,
        context: SinkContext,
        refuse: Sequence[str] = (),
    ) -> None:
        super().__init__(options, spark, context)
        self.tables: dict[str, list[SinkColumn]] = {}
        self.calls: list[Call] = []
        self.refuse = frozenset(refuse)

    def open(self, tables: Sequence[SinkTable]) -> None:
        for table in tables:
            self.tables.setdefault(table.name, list(table.columns))

    def write(
        self, table: SinkTable, changes: Any, batch_id: int, *, size: int | None = None
    ) -> bool:
        return True

    def _record(self, method: str, *args: str) -> None:
        if method in self.refuse:
            raise SinkError(f"the memory sink refuses {method}")
        self.calls.append((method, *args))

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        self._record("add_column", column.name, column.spark_type)
        self.tables[table.name].append(column)

    def drop_column(self, table: SinkTable, name: str) -> None:
        self._record("drop_column", name)
        self.tables[table.name] = [c for c in self.tables[table.name] if c.name != name]

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        self._record("rename_column", old, new)
        self.tables[table.name] = [
            replace(c, name=new) if c.name == old else c for c in self.tables[table.name]
        ]

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        self._record("alter_column_type", name, spark_type)
        self.tables[table.name] = [
            replace(c, spark_type=spark_type) if c.name == name else c
            for c in self.tables[table.name]
        ]

    def truncate_table(self, table: SinkTable) -> None:
        self._record("truncate_table", table.name)

    def drop_table(self, table: SinkTable) -> None:
        self._record("drop_table", table.name)
        del self.tables[table.name]

    def create_table(self, table: SinkTable) -> None:
        self._record("create_table", table.name)
        self.tables.setdefault(table.name, list(table.columns))


def frame_of(name: str, schemas: Sequence[TableSchema]) -> SinkTable:
    """No transform, no route merge: the sink table is the source table."""
    (schema,) = schemas
    columns = tuple(
        SinkColumn(c.name, c.spark_type, c.name not in schema.primary_key) for c in schema.columns
    )
    return SinkTable(name, columns, schema.primary_key, (schema.qualified_name,))


SCHEMA = TableSchema(
    "db",
    "t",
    (
        Column.from_mysql("id", "int", "int", False),
        Column.from_mysql("b", "varchar", "varchar(20)", True),
        Column.from_mysql("c", "int", "int", True),
    ),
    ("id",),
)


def start(schema: TableSchema = SCHEMA) -> SchemaState:
    return SchemaState(
        sources={T: [SourceVersion(-1, schema)]},
        sinks={T: SinkTableState.fresh(frame_of(T, [schema]))},
    )


def make(
    behavior: str,
    options: dict[str, Any] | None = None,
    *,
    refuse: Sequence[str] = (),
    schema: TableSchema = SCHEMA,
) -> tuple[SchemaEvolver, RecordingSink]:
    """An evolver and its sink; ``options``: the sink block's (Flink-style) keys."""
    sink = RecordingSink(
        SinkOptions(type="memory", **(options or {})),
        spark=None,
        context=SinkContext("p", "/tmp/x"),
        refuse=refuse,
    )
    sink.open([frame_of(T, [schema])])
    return SchemaEvolver(sink, behavior, frame_of, {T: (T,)}, ddl=MySqlDdl()), sink


def rows(*statements: str) -> list[SchemaChange]:
    return [SchemaChange("db", "t", s, 10 * (i + 1)) for i, s in enumerate(statements)]


def columns(plan: BatchPlan) -> list[str]:
    return [f"{c.name}:{c.spark_type}" for c in plan.state.sinks[T].table.columns]


def segments(plan: BatchPlan) -> list[SegmentView]:
    return [(s.lo, s.hi, s.schema.column_names, s.mapping) for s in plan.segments[T]]


def assert_sink_matches_state(sink: RecordingSink, plan: BatchPlan) -> None:
    assert sink.tables[T] == list(plan.state.sinks[T].table.columns)


IDENTITY = {"id": "id", "b": "b", "c": "c"}
OLD = ("id", "b", "c")
START_COLUMNS = ["id:INT", "b:STRING", "c:INT"]


# ------------------------------------------------------------------- column changes


# behaviour, statement → applier calls, sink columns, mapping, segments
COLUMN_CHANGES = [
    # add: every behaviour but ignore adds the column
    pytest.param(
        "evolve",
        ADD,
        [("add_column", "e", "BIGINT")],
        [*START_COLUMNS, "e:BIGINT"],
        {**IDENTITY, "e": "e"},
        [(None, 10, OLD, IDENTITY), (10, None, (*OLD, "e"), {**IDENTITY, "e": "e"})],
        id="evolve-add",
    ),
    pytest.param(
        "try_evolve",
        ADD,
        [("add_column", "e", "BIGINT")],
        [*START_COLUMNS, "e:BIGINT"],
        {**IDENTITY, "e": "e"},
        [(None, 10, OLD, IDENTITY), (10, None, (*OLD, "e"), {**IDENTITY, "e": "e"})],
        id="try_evolve-add",
    ),
    pytest.param(
        "lenient",
        ADD,
        [("add_column", "e", "BIGINT")],
        [*START_COLUMNS, "e:BIGINT"],
        {**IDENTITY, "e": "e"},
        [(None, 10, OLD, IDENTITY), (10, None, (*OLD, "e"), {**IDENTITY, "e": "e"})],
        id="lenient-add",
    ),
    pytest.param(
        "ignore",
        ADD,
        [],
        START_COLUMNS,
        IDENTITY,
        [(None, 10, OLD, IDENTITY), (10, None, (*OLD, "e"), IDENTITY)],
        id="ignore-add",
    ),
    # drop: evolve drops it (and earlier rows lose it), lenient keeps it unmapped
    pytest.param(
        "evolve",
        DROP,
        [("drop_column", "c")],
        ["id:INT", "b:STRING"],
        {"id": "id", "b": "b"},
        [(None, 10, OLD, {"id": "id", "b": "b"}), (10, None, ("id", "b"), {"id": "id", "b": "b"})],
        id="evolve-drop",
    ),
    pytest.param(
        "lenient",
        DROP,
        [],
        START_COLUMNS,
        {"id": "id", "b": "b"},
        [(None, 10, OLD, IDENTITY), (10, None, ("id", "b"), {"id": "id", "b": "b"})],
        id="lenient-drop",
    ),
    pytest.param(
        "ignore",
        DROP,
        [],
        START_COLUMNS,
        {"id": "id", "b": "b"},
        [(None, 10, OLD, IDENTITY), (10, None, ("id", "b"), {"id": "id", "b": "b"})],
        id="ignore-drop",
    ),
    # rename: evolve renames (earlier rows follow), lenient adds the new name, keeps the old
    pytest.param(
        "evolve",
        RENAME,
        [("rename_column", "b", "bb")],
        ["id:INT", "bb:STRING", "c:INT"],
        {"id": "id", "bb": "bb", "c": "c"},
        [
            (None, 10, OLD, {"id": "id", "b": "bb", "c": "c"}),
            (10, None, ("id", "bb", "c"), {"id": "id", "bb": "bb", "c": "c"}),
        ],
        id="evolve-rename",
    ),
    pytest.param(
        "lenient",
        RENAME,
        [("add_column", "bb", "STRING")],
        [*START_COLUMNS, "bb:STRING"],
        {"id": "id", "bb": "bb", "c": "c"},
        [
            (None, 10, OLD, IDENTITY),
            (10, None, ("id", "bb", "c"), {"id": "id", "bb": "bb", "c": "c"}),
        ],
        id="lenient-rename",
    ),
    pytest.param(
        "ignore",
        RENAME,
        [],
        START_COLUMNS,
        {"id": "id", "c": "c"},
        [(None, 10, OLD, IDENTITY), (10, None, ("id", "bb", "c"), {"id": "id", "c": "c"})],
        id="ignore-rename",
    ),
    # type change: evolve alters, lenient adds <name>_<type>, ignore keeps (values cast)
    pytest.param(
        "evolve",
        RETYPE,
        [("alter_column_type", "c", "BIGINT")],
        ["id:INT", "b:STRING", "c:BIGINT"],
        IDENTITY,
        [(None, 10, OLD, IDENTITY), (10, None, OLD, IDENTITY)],
        id="evolve-retype",
    ),
    pytest.param(
        "lenient",
        RETYPE,
        [("add_column", "c_bigint", "BIGINT")],
        [*START_COLUMNS, "c_bigint:BIGINT"],
        {**IDENTITY, "c": "c_bigint"},
        [(None, 10, OLD, IDENTITY), (10, None, OLD, {**IDENTITY, "c": "c_bigint"})],
        id="lenient-retype",
    ),
    pytest.param(
        "ignore",
        RETYPE,
        [],
        START_COLUMNS,
        IDENTITY,
        [(None, 10, OLD, IDENTITY), (10, None, OLD, IDENTITY)],
        id="ignore-retype",
    ),
    pytest.param(
        "lenient",
        "ALTER TABLE t MODIFY c DECIMAL(12,2)",
        [("add_column", "c_decimal_12_2", "DECIMAL(12,2)")],
        [*START_COLUMNS, "c_decimal_12_2:DECIMAL(12,2)"],
        {**IDENTITY, "c": "c_decimal_12_2"},
        [(None, 10, OLD, IDENTITY), (10, None, OLD, {**IDENTITY, "c": "c_decimal_12_2"})],
        id="lenient-retype-decimal",
    ),
    # CHANGE old new TYPE: a rename, then a type change (an empty segment between them)
    pytest.param(
        "evolve",
        "ALTER TABLE t CHANGE b bb BIGINT",
        [("rename_column", "b", "bb"), ("alter_column_type", "bb", "BIGINT")],
        ["id:INT", "bb:BIGINT", "c:INT"],
        {"id": "id", "bb": "bb", "c": "c"},
        [
            (None, 10, OLD, {"id": "id", "b": "bb", "c": "c"}),
            (10, 10, ("id", "bb", "c"), {"id": "id", "bb": "bb", "c": "c"}),
            (10, None, ("id", "bb", "c"), {"id": "id", "bb": "bb", "c": "c"}),
        ],
        id="evolve-change",
    ),
    # a statement that changes no column
    pytest.param(
        "evolve",
        "ALTER TABLE t ADD INDEX i (c)",
        [],
        START_COLUMNS,
        IDENTITY,
        [(None, None, OLD, IDENTITY)],
        id="evolve-add-index",
    ),
]


@pytest.mark.parametrize(
    ("behavior", "statement", "calls", "sink_columns", "mapping", "cut"), COLUMN_CHANGES
)
def test_column_change(
    behavior: str,
    statement: str,
    calls: list[Call],
    sink_columns: list[str],
    mapping: dict[str, str],
    cut: list[SegmentView],
) -> None:
    evolver, sink = make(behavior)
    plan = evolver.plan(start(), rows(statement))
    assert sink.calls == calls
    assert columns(plan) == sink_columns
    assert plan.state.sinks[T].mapping == mapping
    assert segments(plan) == cut
    assert_sink_matches_state(sink, plan)


def test_ignore_keeps_only_unchanged_columns_mapped() -> None:
    evolver, sink = make("ignore")
    plan = evolver.plan(start(), rows(ADD, DROP, RENAME, "ALTER TABLE t MODIFY id BIGINT"))
    assert sink.calls == []
    assert columns(plan) == START_COLUMNS
    assert plan.state.sinks[T].mapping == {"id": "id"}
    assert plan.changed


def test_a_plan_leaves_the_state_it_starts_from_alone() -> None:
    state = start()
    evolver, _ = make("evolve")
    evolver.plan(state, rows(ADD, RENAME, DROP))
    assert state == start()


# --------------------------------------------------------------- exception behaviour


@pytest.mark.parametrize(
    ("statement", "what"),
    [
        pytest.param(ADD, "add column e BIGINT", id="add"),
        pytest.param(DROP, "drop column c", id="drop"),
        pytest.param(RENAME, "rename column b to bb", id="rename"),
        pytest.param(RETYPE, "change column c from INT to BIGINT", id="retype"),
        pytest.param(TRUNCATE, "truncate.table", id="truncate"),
        pytest.param(DROP_TABLE, "drop.table", id="drop-table"),
    ],
)
def test_exception_raises_before_any_call(statement: str, what: str) -> None:
    evolver, sink = make("exception")
    with pytest.raises(SinkError) as info:
        evolver.plan(start(), rows("ALTER TABLE t ADD INDEX i (c)", statement))
    message = str(info.value)
    assert f"db.t at seq 20 ({statement!r})" in message
    assert what in message
    assert "'exception'" in message
    assert sink.calls == []


def test_exception_lets_statements_that_change_no_column_through() -> None:
    evolver, sink = make("exception")
    plan = evolver.plan(start(), rows("ALTER TABLE t ADD INDEX i (c)", "ALTER TABLE t ENGINE=X"))
    assert sink.calls == []
    assert segments(plan) == [(None, None, OLD, IDENTITY)]


def test_exception_lets_excluded_changes_through() -> None:
    evolver, sink = make("exception", {"exclude.schema.changes": ["drop"]})
    plan = evolver.plan(start(), rows(DROP))
    assert sink.calls == []
    assert plan.state.sinks[T].mapping == {"id": "id", "b": "b"}


# ------------------------------------------------------------- a sink that refuses


@pytest.mark.parametrize(
    ("refused", "statement", "calls", "sink_columns", "mapping"),
    [
        pytest.param(
            "alter_column_type",
            RETYPE,
            [("add_column", "c_bigint", "BIGINT")],
            [*START_COLUMNS, "c_bigint:BIGINT"],
            {**IDENTITY, "c": "c_bigint"},
            id="retype",
        ),
        pytest.param(
            "rename_column",
            RENAME,
            [("add_column", "bb", "STRING")],
            [*START_COLUMNS, "bb:STRING"],
            {"id": "id", "bb": "bb", "c": "c"},
            id="rename",
        ),
        pytest.param("drop_column", DROP, [], START_COLUMNS, {"id": "id", "b": "b"}, id="drop"),
    ],
)
def test_try_evolve_falls_back_to_lenient(
    refused: str,
    statement: str,
    calls: list[Call],
    sink_columns: list[str],
    mapping: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    evolver, sink = make("try_evolve", refuse=[refused])
    with caplog.at_level(logging.WARNING, logger="sparkcdc.pipeline.evolution"):
        plan = evolver.plan(start(), rows(statement))
    assert sink.calls == calls
    assert columns(plan) == sink_columns
    assert plan.state.sinks[T].mapping == mapping
    assert_sink_matches_state(sink, plan)
    assert "treated as in lenient mode" in caplog.text
    assert f"refuses {refused}" in caplog.text


@pytest.mark.parametrize(
    ("refused", "statement", "what"),
    [
        pytest.param("add_column", ADD, "add column e BIGINT", id="add"),
        pytest.param("drop_column", DROP, "drop column c", id="drop"),
        pytest.param("rename_column", RENAME, "rename column b to bb", id="rename"),
        pytest.param(
            "alter_column_type", RETYPE, "change column c from INT to BIGINT", id="retype"
        ),
    ],
)
def test_evolve_stops_on_a_refused_change(refused: str, statement: str, what: str) -> None:
    evolver, _ = make("evolve", refuse=[refused])
    with pytest.raises(SinkError) as info:
        evolver.plan(start(), rows(statement))
    message = str(info.value)
    assert f"the memory sink cannot {what} in db.t" in message
    assert f"refuses {refused}" in message  # the sink's own reason
    assert "lenient or try_evolve" in message  # what to do instead


def test_lenient_changes_a_key_column_in_place() -> None:
    evolver, sink = make("lenient")
    plan = evolver.plan(start(), rows("ALTER TABLE t MODIFY id BIGINT"))
    assert sink.calls == [("alter_column_type", "id", "BIGINT")]
    assert columns(plan) == ["id:BIGINT", "b:STRING", "c:INT"]


@pytest.mark.parametrize("behavior", ["lenient", "try_evolve"])
def test_a_refused_key_column_change_stops_every_behavior(behavior: str) -> None:
    evolver, _ = make(behavior, refuse=["alter_column_type"])
    with pytest.raises(SinkError, match=r"cannot change column id from INT to BIGINT in db\.t"):
        evolver.plan(start(), rows("ALTER TABLE t MODIFY id BIGINT"))


# ------------------------------------------------- include / exclude.schema.changes


@pytest.mark.parametrize(
    ("behavior", "options", "allowed"),
    [
        pytest.param("evolve", {}, list(SchemaChangeType), id="evolve"),
        pytest.param(
            "lenient",
            {},
            [k for k in SchemaChangeType if k.value not in ("drop.table", "truncate.table")],
            id="lenient-default",
        ),
        pytest.param(
            "lenient",
            {"exclude.schema.changes": ["rename.table"]},
            [k for k in SchemaChangeType if k is not SchemaChangeType.RENAME_TABLE],
            id="lenient-exclude-overrides-default",
        ),
        pytest.param(
            "evolve",
            {"exclude.schema.changes": ["drop"]},
            [k for k in SchemaChangeType if not k.value.startswith("drop.")],
            id="evolve-exclude-prefix",
        ),
        pytest.param(
            "evolve",
            {"include.schema.changes": ["add.column", "alter"]},
            [SchemaChangeType.ADD_COLUMN, SchemaChangeType.ALTER_COLUMN_TYPE],
            id="evolve-include",
        ),
        pytest.param(
            "evolve",
            {"include.schema.changes": ["drop"], "exclude.schema.changes": ["drop.table"]},
            [SchemaChangeType.DROP_COLUMN],
            id="include-and-exclude",
        ),
        pytest.param(
            # Flink CDC's documented example (core-concept/schema-evolution.md), verbatim
            "evolve",
            {
                "include.schema.changes": ["create.table.event", "column"],
                "exclude.schema.changes": ["drop.column"],
            },
            [
                SchemaChangeType.ADD_COLUMN,
                SchemaChangeType.ALTER_COLUMN_TYPE,
                SchemaChangeType.CREATE_TABLE,
                SchemaChangeType.RENAME_COLUMN,
            ],
            id="flink-cdc-example",
        ),
        pytest.param(
            "evolve",
            {"include.schema.changes": ["all"], "exclude.schema.changes": ["table"]},
            [
                SchemaChangeType.ADD_COLUMN,
                SchemaChangeType.ALTER_COLUMN_TYPE,
                SchemaChangeType.DROP_COLUMN,
                SchemaChangeType.RENAME_COLUMN,
            ],
            id="all-but-table",
        ),
    ],
)
def test_allowed(behavior: str, options: dict[str, Any], allowed: list[SchemaChangeType]) -> None:
    evolver, _ = make(behavior, options)
    assert [k for k in SchemaChangeType if evolver.allowed(k)] == allowed


@pytest.mark.parametrize(
    ("behavior", "options", "statement", "calls"),
    [
        pytest.param("evolve", {}, TRUNCATE, [("truncate_table", T)], id="evolve-truncate"),
        pytest.param("evolve", {}, DROP_TABLE, [("drop_table", T)], id="evolve-drop-table"),
        pytest.param("lenient", {}, TRUNCATE, [], id="lenient-truncate"),
        pytest.param("lenient", {}, DROP_TABLE, [], id="lenient-drop-table"),
        pytest.param(
            "lenient",
            {"exclude.schema.changes": ["rename"]},
            TRUNCATE,
            [("truncate_table", T)],
            id="lenient-exclude-set-truncate",
        ),
        pytest.param(
            "lenient",
            {"exclude.schema.changes": ["rename"]},
            DROP_TABLE,
            [("drop_table", T)],
            id="lenient-exclude-set-drop-table",
        ),
        pytest.param(
            "lenient",
            {"exclude.schema.changes": ["drop.table"]},
            TRUNCATE,
            [("truncate_table", T)],
            id="lenient-exclude-drop-table-only",
        ),
        pytest.param("ignore", {}, TRUNCATE, [], id="ignore-truncate"),
        pytest.param(
            "evolve", {"exclude.schema.changes": ["truncate"]}, TRUNCATE, [], id="exclude-truncate"
        ),
        pytest.param("evolve", {"exclude.schema.changes": ["drop"]}, DROP, [], id="exclude-drop"),
        pytest.param(
            "evolve",
            {"exclude.schema.changes": ["drop"]},
            DROP_TABLE,
            [],
            id="exclude-drop-drop-table",
        ),
        pytest.param(
            "evolve",
            {"exclude.schema.changes": ["drop.column"]},
            DROP_TABLE,
            [("drop_table", T)],
            id="exclude-drop-column-not-table",
        ),
        pytest.param(
            "evolve",
            {"include.schema.changes": ["add.column"]},
            ADD,
            [("add_column", "e", "BIGINT")],
            id="include-add",
        ),
        pytest.param(
            "evolve", {"include.schema.changes": ["add.column"]}, RENAME, [], id="include-no-rename"
        ),
    ],
)
def test_include_and_exclude_lists(
    behavior: str, options: dict[str, Any], statement: str, calls: list[Call]
) -> None:
    evolver, sink = make(behavior, options)
    evolver.plan(start(), rows(statement))
    assert sink.calls == calls


def test_evolve_with_drop_excluded_keeps_the_column_unmapped() -> None:
    evolver, sink = make("evolve", {"exclude.schema.changes": ["drop"]})
    plan = evolver.plan(start(), rows(ADD, DROP))
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert columns(plan) == [*START_COLUMNS, "e:BIGINT"]
    assert plan.state.sinks[T].mapping == {"id": "id", "b": "b", "e": "e"}
    # rows before the drop still write c: the column is kept
    assert segments(plan)[0] == (None, 10, OLD, IDENTITY)


def test_evolve_with_rename_excluded_writes_the_new_name_nowhere() -> None:
    evolver, sink = make("evolve", {"exclude.schema.changes": ["rename.column"]})
    plan = evolver.plan(start(), rows(RENAME))
    assert sink.calls == []
    assert plan.state.sinks[T].mapping == {"id": "id", "c": "c"}


# ------------------------------------------------------------- truncate and drop table


def test_truncate_under_evolve_discards_earlier_segments() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(ADD, TRUNCATE, "ALTER TABLE t ADD f INT"))
    assert sink.calls == [
        ("add_column", "e", "BIGINT"),
        ("truncate_table", T),
        ("add_column", "f", "INT"),
    ]
    with_e = {**IDENTITY, "e": "e"}
    assert segments(plan) == [
        (20, 30, (*OLD, "e"), with_e),
        (30, None, (*OLD, "e", "f"), {**with_e, "f": "f"}),
    ]


def test_truncate_not_forwarded_keeps_every_segment() -> None:
    evolver, sink = make("lenient")
    plan = evolver.plan(start(), rows(ADD, TRUNCATE))
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert [(lo, hi) for lo, hi, _, _ in segments(plan)] == [(None, 10), (10, 20), (20, None)]


def test_drop_table_under_evolve_leaves_nothing_to_write() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(ADD, DROP_TABLE))
    assert sink.calls == [("add_column", "e", "BIGINT"), ("drop_table", T)]
    assert plan.state.sinks[T].dropped
    assert plan.state.schema(T) is None
    assert segments(plan) == []
    assert T not in sink.tables


def test_drop_then_create_table_under_evolve() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(DROP_TABLE, "CREATE TABLE t (id BIGINT PRIMARY KEY, z TEXT)"))
    assert sink.calls == [("drop_table", T), ("create_table", T)]
    state = plan.state.sinks[T]
    assert not state.dropped
    assert columns(plan) == ["id:BIGINT", "z:STRING"]
    assert state.mapping == {"id": "id", "z": "z"}
    assert segments(plan) == [(20, None, ("id", "z"), {"id": "id", "z": "z"})]
    assert_sink_matches_state(sink, plan)


def test_create_table_if_not_exists_of_a_table_that_exists_changes_nothing() -> None:
    """MySQL logs the statement even when the table exists and the server did nothing:
    taking its columns would drop b and c from the sink."""
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows("CREATE TABLE IF NOT EXISTS t (id BIGINT PRIMARY KEY)", ADD))
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert columns(plan) == [*START_COLUMNS, "e:BIGINT"]


def test_create_table_if_not_exists_after_a_drop_in_the_same_batch_creates_it() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(
        start(), rows(DROP_TABLE, "CREATE TABLE IF NOT EXISTS t (id BIGINT PRIMARY KEY, z TEXT)")
    )
    assert sink.calls == [("drop_table", T), ("create_table", T)]
    assert columns(plan) == ["id:BIGINT", "z:STRING"]


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("CREATE OR REPLACE TABLE t (id BIGINT PRIMARY KEY, z TEXT)", id="or-replace"),
        # the stream knew t, yet the server created it: it was dropped unseen (DROP DATABASE)
        pytest.param("CREATE TABLE t (id BIGINT PRIMARY KEY, z TEXT)", id="created-again"),
    ],
)
def test_a_create_of_a_table_that_exists_drops_its_rows_first(statement: str) -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(ADD, statement))
    assert sink.calls == [("add_column", "e", "BIGINT"), ("drop_table", T), ("create_table", T)]
    assert columns(plan) == ["id:BIGINT", "z:STRING"]
    assert segments(plan) == [(20, None, ("id", "z"), {"id": "id", "z": "z"})]


def test_create_table_like_takes_the_columns_its_model_has_at_that_point() -> None:
    """t re-created LIKE u takes u's columns as the statements before it left them."""
    u = replace(SCHEMA, table="u")
    frames = [frame_of(T, [SCHEMA]), frame_of("db.u", [u])]
    sink = RecordingSink(SinkOptions(type="memory"), spark=None, context=SinkContext("p", "/x"))
    sink.open(frames)
    evolver = SchemaEvolver(sink, "evolve", frame_of, {T: (T,), "db.u": ("db.u",)}, ddl=MySqlDdl())
    state = SchemaState(
        sources={T: [SourceVersion(-1, SCHEMA)], "db.u": [SourceVersion(-1, u)]},
        sinks={f.name: SinkTableState.fresh(f) for f in frames},
    )
    plan = evolver.plan(
        state,
        [
            SchemaChange("db", "u", "ALTER TABLE u ADD COLUMN e BIGINT", 10),
            SchemaChange("db", "t", DROP_TABLE, 20),
            SchemaChange("db", "t", "CREATE TABLE t LIKE u", 30),
        ],
    )
    assert ("drop_table", T) in sink.calls
    assert ("create_table", T) in sink.calls
    assert columns(plan) == [*START_COLUMNS, "e:BIGINT"]
    assert plan.state.schema(T) == replace(plan.state.schema("db.u"), table="t")


def test_a_table_rotated_by_rename_and_create_like_keeps_its_columns() -> None:
    """RENAME TABLE logs TO logs_2024; CREATE TABLE logs LIKE logs_2024: the renamed table
    is not captured, but its columns are the ones the table had."""
    evolver, sink = make("evolve")
    plan = evolver.plan(
        start(), rows(ADD, "RENAME TABLE t TO t_2024", "CREATE TABLE t LIKE t_2024")
    )
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert columns(plan) == [*START_COLUMNS, "e:BIGINT"]
    assert plan.state.schema(T) is not None


def test_create_table_like_a_table_the_stream_does_not_know_stops_the_pipeline() -> None:
    evolver, _ = make("evolve")
    with pytest.raises(DdlParseError) as info:
        evolver.plan(start(), rows(DROP_TABLE, "CREATE TABLE t LIKE db.template"))
    assert "db.template" in str(info.value)
    assert "db.t (seq 20)" in str(info.value)


@pytest.mark.parametrize(
    "swap",
    [
        pytest.param("RENAME TABLE t TO _t_del, _t_gho TO t", id="gh-ost"),
        pytest.param("RENAME TABLE t TO _t_old, db._t_new TO db.t", id="pt-osc"),
        pytest.param("ALTER TABLE t_new RENAME TO t", id="alter-rename"),
    ],
)
@pytest.mark.parametrize("behavior", ["evolve", "lenient", "try_evolve"])
def test_a_table_renamed_into_a_written_table_stops_the_pipeline(swap: str, behavior: str) -> None:
    """The table that takes t's name holds rows and columns the pipeline never saw (an online
    schema change tool's copy, altered): before, every row of t after the swap was dropped
    (t's schema was gone) and the columns the tool added never reached the sink."""
    evolver, _ = make(behavior)
    with pytest.raises(SourceError) as info:
        evolver.plan(start(), rows(ADD, swap))
    message = str(info.value)
    assert "db.t was replaced at seq 20" in message
    assert swap in message
    assert "new snapshot" in message


def test_a_table_renamed_away_alone_keeps_its_sink_table() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(ADD, "RENAME TABLE t TO t_archive"))
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert plan.state.schema(T) is None


def osc(behavior: str = "evolve") -> tuple[SchemaEvolver, RecordingSink]:
    """An evolver that follows online schema change tools' copies."""
    evolver, sink = make(behavior)
    evolver.online_schema_changes = True
    return evolver, sink


def on(table: str, seq: int, statement: str) -> SchemaChange:
    return SchemaChange("db", table, statement, seq)


GH_OST = [
    on("_t_ghc", 10, "CREATE TABLE _t_ghc (id BIGINT PRIMARY KEY, hint VARCHAR(64))"),
    on("_t_gho", 20, "CREATE TABLE _t_gho LIKE t"),
    on("_t_gho", 30, "ALTER TABLE _t_gho ADD COLUMN e BIGINT NOT NULL DEFAULT 7, DROP COLUMN c"),
    on("t", 40, "RENAME TABLE t TO _t_del, _t_gho TO t"),
    on("_t_gho", 40, "RENAME TABLE t TO _t_del, _t_gho TO t"),
    on("_t_del", 40, "RENAME TABLE t TO _t_del, _t_gho TO t"),
    on("_t_del", 50, "DROP TABLE IF EXISTS _t_del"),
]


def test_a_gh_ost_migration_is_applied_to_its_table_at_the_cut_over() -> None:
    evolver, sink = osc()
    plan = evolver.plan(start(), GH_OST)
    assert sink.calls == [("add_column", "e", "BIGINT"), ("drop_column", "c")]
    assert columns(plan) == ["id:INT", "b:STRING", "e:BIGINT"]
    # rows before the cut-over keep the old shape, rows after it have the copy's
    # (the copy's two changes take effect at one seq: the one between holds no row)
    assert segments(plan) == [
        (None, 40, OLD, {"id": "id", "b": "b"}),
        (40, 40, (*OLD, "e"), {"id": "id", "b": "b", "e": "e"}),
        (40, None, ("id", "b", "e"), {"id": "id", "b": "b", "e": "e"}),
    ]
    # the existing rows get the copy's default, as the tool's copy gave them
    (fill,) = plan.fills
    assert (fill.column.name, fill.default.literal) == ("e", "7")
    assert plan.state.shadows == {}


def test_the_cut_over_does_not_depend_on_the_order_of_its_rows() -> None:
    """The statement comes as a row of each table it names, all at one seq."""
    evolver, sink = osc()
    plan = evolver.plan(start(), [*GH_OST[:3], GH_OST[5], GH_OST[4], GH_OST[3]])
    assert sink.calls == [("add_column", "e", "BIGINT"), ("drop_column", "c")]
    assert plan.state.shadows == {}


def test_a_migration_across_batches_is_kept_in_the_state() -> None:
    evolver, sink = osc()
    first = evolver.plan(start(), GH_OST[:3], batch_id=1)
    assert sink.calls == []
    assert first.changed  # so the batch writer saves the state with the copy's statements
    assert first.state.shadows == {"db._t_gho": [(30, "db", GH_OST[2].statement)]}
    plan = evolver.plan(first.state, GH_OST[3:], batch_id=2)
    assert sink.calls == [("add_column", "e", "BIGINT"), ("drop_column", "c")]
    assert columns(plan) == ["id:INT", "b:STRING", "e:BIGINT"]


def test_a_pt_osc_migration_with_a_created_copy() -> None:
    evolver, sink = osc("lenient")
    plan = evolver.plan(
        start(),
        [
            on(
                "_t_new",
                10,
                "CREATE TABLE _t_new (id INT NOT NULL, b VARCHAR(20), c INT, PRIMARY KEY (id))",
            ),
            on("_t_new", 20, "ALTER TABLE _t_new ADD COLUMN z VARCHAR(5)"),
            on("t", 30, "RENAME TABLE t TO _t_old, _t_new TO t"),
            on("_t_old", 40, "DROP TABLE IF EXISTS _t_old"),
        ],
    )
    assert sink.calls == [("add_column", "z", "STRING")]
    assert columns(plan) == [*START_COLUMNS, "z:STRING"]


@pytest.mark.parametrize(
    "rows_before",
    [
        pytest.param([], id="copy-made-before-the-stream"),
        pytest.param(
            [on("_t_gho", 20, "CREATE TABLE _t_gho (id INT PRIMARY KEY)")], id="not-a-copy"
        ),
    ],
)
def test_a_cut_over_of_a_copy_it_did_not_follow_stops(rows_before: list[SchemaChange]) -> None:
    evolver, _ = osc()
    with pytest.raises(SourceError, match=r"db\.t was replaced at seq 40"):
        evolver.plan(start(), [*rows_before, *GH_OST[2:4]])


def test_without_the_option_a_tool_copy_is_a_table_like_any() -> None:
    evolver, _ = make("evolve")
    with pytest.raises(SourceError, match=r"db\.t was replaced at seq 40"):
        evolver.plan(start(), GH_OST)


# ------------------------------------------------------- segments cut before a rename


def test_rename_under_evolve_repoints_earlier_segments() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(ADD, RENAME))
    assert sink.calls == [("add_column", "e", "BIGINT"), ("rename_column", "b", "bb")]
    assert segments(plan) == [
        (None, 10, OLD, {"id": "id", "b": "bb", "c": "c"}),
        (10, 20, (*OLD, "e"), {"id": "id", "b": "bb", "c": "c", "e": "e"}),
        (20, None, ("id", "bb", "c", "e"), {"id": "id", "bb": "bb", "c": "c", "e": "e"}),
    ]


def test_swapping_names_under_evolve() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(
        start(), rows("ALTER TABLE t RENAME COLUMN b TO x", "ALTER TABLE t RENAME COLUMN c TO b")
    )
    assert sink.calls == [("rename_column", "b", "x"), ("rename_column", "c", "b")]
    assert columns(plan) == ["id:INT", "x:STRING", "b:INT"]
    assert segments(plan) == [
        (None, 10, OLD, {"id": "id", "b": "x", "c": "b"}),
        (10, 20, ("id", "x", "c"), {"id": "id", "x": "x", "c": "b"}),
        (20, None, ("id", "x", "b"), {"id": "id", "x": "x", "b": "b"}),
    ]
    assert_sink_matches_state(sink, plan)


def test_rename_of_the_key_under_evolve_renames_the_sink_key() -> None:
    evolver, _ = make("evolve")
    plan = evolver.plan(start(), rows("ALTER TABLE t RENAME COLUMN id TO pk"))
    assert plan.state.sinks[T].table.primary_key == ("pk",)


def test_lenient_retype_back_to_the_sink_type_uses_the_old_column() -> None:
    evolver, sink = make("lenient")
    plan = evolver.plan(start(), rows(RETYPE, "ALTER TABLE t MODIFY c INT"))
    assert sink.calls == [("add_column", "c_bigint", "BIGINT")]
    assert [m for _, _, _, m in segments(plan)] == [
        IDENTITY,
        {**IDENTITY, "c": "c_bigint"},
        IDENTITY,
    ]


# ------------------------------------------------------------------------ replays


@pytest.mark.parametrize(
    ("statements", "calls"),
    [
        pytest.param([TRUNCATE], [], id="truncate"),
        pytest.param([DROP_TABLE], [], id="drop-table"),
        # column changes are made again (the sink's appliers are idempotent)
        pytest.param([ADD, TRUNCATE], [("add_column", "e", "BIGINT")], id="add-truncate"),
    ],
)
def test_replay_does_not_truncate_or_drop_again(statements: list[str], calls: list[Call]) -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(*statements), replay=True)
    assert sink.calls == calls
    # rows before the truncate / drop are discarded as in the first run
    assert all(lo is not None for lo, _, _, _ in segments(plan))


def test_replay_keeps_the_state_of_a_drop() -> None:
    evolver, _ = make("evolve")
    plan = evolver.plan(start(), rows(DROP_TABLE), replay=True)
    assert plan.state.sinks[T].dropped


# ------------------------------------------------------ statements that change nothing


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("ALTER TABLE t ADD COLUMN g POINT", id="add-a-column-sqlglot-cannot-read"),
        pytest.param("ALTER TABLE t CONVERT TO CHARACTER SET latin1", id="convert-charset"),
        pytest.param(
            "ALTER TABLE t ADD COLUMN x INT, REMOVE PARTITIONING", id="one-clause-unknown"
        ),
    ],
)
def test_a_statement_it_cannot_read_stops_the_pipeline(statement: str) -> None:
    """Its effect on the columns is unknown: taking them as unchanged would write the rows
    after it without the column it added (a NULL standing in for every value)."""
    evolver, sink = make("evolve")
    with pytest.raises(DdlParseError) as info:
        evolver.plan(start(), rows(statement, ADD))
    message = str(info.value)
    assert statement in message
    assert "db.t (seq 10)" in message
    assert "new snapshot" in message
    assert sink.calls == []


def test_a_statement_it_cannot_read_on_a_table_not_written_is_ignored() -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), [SchemaChange("db", "other", "ALTER TABLE other ADD g POINT", 10)])
    assert sink.calls == []
    assert plan.state == start()


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t REMOVE PARTITIONING",
        "ALTER TABLE t DROP PARTITION p2023",
        "ALTER TABLE t ADD INDEX i (a), ALGORITHM=INPLACE, WAIT 5",
        "ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION a VALUES LESS THAN (5))",
    ],
)
def test_a_statement_sqlglot_cannot_read_that_keeps_the_columns_changes_nothing(
    statement: str,
) -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), rows(statement, ADD))
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert [(lo, hi) for lo, hi, _, _ in segments(plan)] == [(None, 20), (20, None)]


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(
            SchemaChange("db", "other", "ALTER TABLE other ADD x INT", 10), id="other-table"
        ),
        pytest.param(SchemaChange("db2", "t", "ALTER TABLE t ADD x INT", 10), id="other-database"),
        pytest.param(SchemaChange("db", "t", "ALTER TABLE db2.t DROP c", 10), id="qualified-other"),
        pytest.param(
            SchemaChange("db", "u", "CREATE TABLE u (id INT PRIMARY KEY)", 10), id="create"
        ),
        pytest.param(SchemaChange("db", "u", "DROP TABLE u", 10), id="drop-other"),
    ],
)
def test_ddl_of_a_table_not_captured_is_ignored(row: SchemaChange) -> None:
    evolver, sink = make("evolve")
    plan = evolver.plan(start(), [row])
    assert sink.calls == []
    assert not plan.changed
    assert plan.state == start()


def test_a_row_brings_the_changes_of_its_own_table() -> None:
    """The source sends a statement on several captured tables as a row per table, each
    with the whole statement (and that table's database): each row applies its table's
    changes once, and an unqualified name resolves in the row's database."""
    evolver, sink = make("evolve")
    statement = "ALTER TABLE db.t ADD COLUMN e BIGINT"
    evolver.plan(start(), [SchemaChange("other", "x", statement, 10)])
    assert sink.calls == []  # a row of another table: its changes are not t's
    evolver, sink = make("evolve")
    drop_two = "DROP TABLE other.x, db.t"
    evolver.plan(
        start(), [SchemaChange("other", "x", drop_two, 10), SchemaChange("db", "t", drop_two, 10)]
    )
    assert sink.calls == [("drop_table", T)]  # once, though both rows carry it


def test_a_statement_is_applied_once() -> None:
    evolver, sink = make("evolve")
    first = evolver.plan(start(), rows(ADD) * 2, batch_id=1)  # the same row twice
    again = evolver.plan(first.state, rows(ADD), batch_id=2)  # and in the next batch
    assert sink.calls == [("add_column", "e", "BIGINT")]
    assert first.changed and not again.changed
    # rows of the batch after the change may still be older than it: both versions are cut;
    # two batches on, only the newest version is left
    assert [(x.lo, x.hi) for x in again.segments[T]] == [(None, 10), (10, None)]
    later = evolver.plan(again.state, [], batch_id=4)
    assert [(x.lo, x.hi) for x in later.segments[T]] == [(None, None)]


# --------------------------------------------------------------------- SchemaHistory


def test_history_of_a_new_checkpoint_is_empty(tmp_path: Path) -> None:
    history = SchemaHistory(str(tmp_path))
    assert history.latest() is None
    assert history.before(0) is None
    assert not history.has(-1)


def test_history_keeps_a_followed_copy(tmp_path: Path) -> None:
    history = SchemaHistory(str(tmp_path))
    evolver, _ = osc()
    state = evolver.plan(start(), GH_OST[:3], batch_id=0).state
    history.save(0, state)
    assert history.latest() == state
    assert history.latest().shadows == {"db._t_gho": [(30, "db", GH_OST[2].statement)]}


@pytest.mark.parametrize(
    ("behavior", "statements", "stale"),
    [
        pytest.param("lenient", [ADD], False, id="column-change"),
        pytest.param("lenient", [TRUNCATE], True, id="truncate-kept"),
        pytest.param("ignore", [TRUNCATE], True, id="truncate-ignored"),
        pytest.param("evolve", [TRUNCATE], False, id="truncate-forwarded"),
        # a column change after it keeps the mark
        pytest.param("lenient", [TRUNCATE, ADD], True, id="truncate-kept-then-add"),
        pytest.param("lenient", [DROP_TABLE, "CREATE TABLE t (id BIGINT PRIMARY KEY)"], True),
        pytest.param("evolve", [DROP_TABLE, "CREATE TABLE t (id BIGINT PRIMARY KEY)"], False),
        pytest.param("evolve", ["CREATE TABLE t (id BIGINT PRIMARY KEY, z TEXT)"], False),
        pytest.param("evolve", ["RENAME TABLE t TO t_archive"], True, id="renamed-away"),
    ],
)
def test_a_sink_table_is_stale_once_source_rows_left_without_it_following(
    behavior: str, statements: list[str], stale: bool
) -> None:
    """Stale: the sink table may hold keys its source no longer has, so a source insert may
    meet its key there (the batch writer then upserts inserts, never appends them)."""
    evolver, _ = make(behavior)
    state = evolver.plan(start(), rows(*statements), batch_id=0).state
    assert state.sinks[T].stale is stale
    later = evolver.plan(
        state, [SchemaChange("db", "t", "ALTER TABLE t ADD g INT", 99)], batch_id=1
    )
    assert later.state.sinks[T].stale is stale, "kept by the batches after"


def test_history_keeps_the_stale_mark_and_takes_an_unmarked_file_as_stale(
    tmp_path: Path,
) -> None:
    history = SchemaHistory(str(tmp_path))
    evolver, _ = make("lenient")
    stale = evolver.plan(start(), rows(TRUNCATE), batch_id=0).state
    history.save(-1, start())
    history.save(0, stale)
    assert history.before(0) == start()
    assert history.latest() == stale
    # a file an earlier sparkcdc wrote: whether its stream kept rows it should not is unknown
    path = tmp_path / "schema" / "000000000000.json"
    data = json.loads(path.read_text())
    del data["sinks"][T]["stale"]
    path.write_text(json.dumps(data))
    before = history.before(0)
    assert before is not None
    assert before.sinks[T].stale


def test_history_round_trip(tmp_path: Path) -> None:
    history = SchemaHistory(str(tmp_path))
    evolver, _ = make("evolve")
    initial = start()
    renamed = evolver.plan(initial, rows(ADD, RENAME), batch_id=0).state
    truncated = evolver.plan(renamed, [SchemaChange("db", "t", TRUNCATE, 50)], batch_id=2).state
    history.save(-1, initial)  # at the first start
    history.save(0, renamed)
    history.save(2, truncated)

    assert sorted(p.name for p in (tmp_path / "schema").iterdir()) == [
        "000000000000.json",
        "000000000001.json",
        "000000000003.json",
    ]
    assert [history.has(b) for b in (-1, 0, 1, 2, 3)] == [True, True, False, True, False]
    assert history.before(-1) is None
    assert history.before(0) == initial  # what batch 0 starts from, also when replayed
    assert history.before(1) == renamed
    assert history.before(2) == renamed
    assert history.before(3) == truncated
    assert history.before(99) == truncated
    assert history.latest() == truncated


def test_history_keeps_dropped_tables_and_discarded_versions(tmp_path: Path) -> None:
    history = SchemaHistory(str(tmp_path))
    evolver, _ = make("evolve")
    state = evolver.plan(start(), rows(TRUNCATE, DROP_TABLE), batch_id=4).state
    history.save(4, state)
    loaded = history.latest()
    assert loaded == state
    assert loaded is not None
    assert loaded.sinks[T].dropped
    assert [(v.since, v.schema is None, v.discarded) for v in loaded.sources[T]] == [
        (-1, False, True),
        (10, False, True),
        (20, True, False),
    ]


def test_history_skips_files_that_are_not_states(tmp_path: Path) -> None:
    history = SchemaHistory(str(tmp_path))
    history.save(0, start())
    (tmp_path / "schema" / "000000000005.tmp").write_text("{half a fi")
    (tmp_path / "schema" / "notes.json").write_text("{}")
    assert history.latest() == start()
    assert history.before(9) == start()


# ---------------------------------------------------------- diff_frames, type_suffix


def table(*spec: str) -> SinkTable:
    pairs = (c.split(":") for c in spec)
    return SinkTable("t", tuple(SinkColumn(n, t) for n, t in pairs), ("id",), ("db.t",))


def add(name: str, spark_type: str) -> SinkChange:
    return SinkChange(SchemaChangeType.ADD_COLUMN, name, spark_type=spark_type)


def drop(name: str) -> SinkChange:
    return SinkChange(SchemaChangeType.DROP_COLUMN, name)


def rename(old: str, new: str, old_type: str, new_type: str) -> SinkChange:
    """A rename carries the column's types before and after (lenient adds the new name with
    the type it has now)."""
    return SinkChange(
        SchemaChangeType.RENAME_COLUMN, old, new, spark_type=new_type, old_type=old_type
    )


def retype(name: str, old: str, new: str) -> SinkChange:
    return SinkChange(SchemaChangeType.ALTER_COLUMN_TYPE, name, spark_type=new, old_type=old)


@pytest.mark.parametrize(
    ("old", "new", "renames", "expected"),
    [
        pytest.param(("id:INT", "x:INT"), ("id:INT", "x:INT"), [], [], id="same"),
        pytest.param(("id:INT", "x:INT"), ("x:INT", "id:INT"), [], [], id="reordered-is-no-change"),
        pytest.param(
            ("id:INT",),
            ("id:INT", "y:STRING", "z:DATE"),
            [],
            [add("y", "STRING"), add("z", "DATE")],
            id="adds-in-order",
        ),
        pytest.param(("id:INT", "x:INT"), ("id:INT",), [], [drop("x")], id="drop"),
        pytest.param(
            ("id:INT", "x:INT"),
            ("id:INT", "x:BIGINT"),
            [],
            [retype("x", "INT", "BIGINT")],
            id="retype",
        ),
        pytest.param(
            ("id:INT", "x:INT"),
            ("id:INT", "y:INT"),
            [("x", "y")],
            [rename("x", "y", "INT", "INT")],
            id="rename",
        ),
        pytest.param(
            ("id:INT", "x:INT"),
            ("id:INT", "y:BIGINT"),
            [("x", "y")],
            [rename("x", "y", "INT", "BIGINT"), retype("y", "INT", "BIGINT")],
            id="rename-and-retype",
        ),
        pytest.param(
            ("id:INT", "x:INT"),
            ("id:INT", "y:INT"),
            [],
            [add("y", "INT"), drop("x")],
            id="rename-unknown-is-add-and-drop",
        ),
        pytest.param(
            ("id:INT", "x:INT", "y:INT"),
            ("id:INT", "y:INT"),
            [("x", "y")],
            [drop("x")],
            id="rename-onto-existing-ignored",
        ),
        pytest.param(
            ("id:INT",),
            ("id:INT", "y:INT"),
            [("x", "y")],
            [add("y", "INT")],
            id="rename-of-missing-ignored",
        ),
        pytest.param(
            ("id:INT", "x:INT", "y:INT"),
            ("id:BIGINT", "z:STRING", "w:INT"),
            [("x", "w")],
            [
                rename("x", "w", "INT", "INT"),
                retype("id", "INT", "BIGINT"),
                add("z", "STRING"),
                drop("y"),
            ],
            id="renames-then-adds-and-types-then-drops",
        ),
    ],
)
def test_diff_frames(
    old: tuple[str, ...],
    new: tuple[str, ...],
    renames: list[tuple[str, str]],
    expected: list[SinkChange],
) -> None:
    assert diff_frames(table(*old), table(*new), renames) == expected


def test_diff_frames_ignores_nullability() -> None:
    old = SinkTable("t", (SinkColumn("x", "INT", True),), (), ())
    new = SinkTable("t", (SinkColumn("x", "INT", False),), (), ())
    assert diff_frames(old, new) == []


@pytest.mark.parametrize(
    ("change", "text"),
    [
        (add("y", "STRING"), "add column y STRING"),
        (drop("x"), "drop column x"),
        (rename("x", "y", "INT", "INT"), "rename column x to y"),
        (retype("x", "INT", "BIGINT"), "change column x from INT to BIGINT"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.kind.value,
)
def test_sink_change_describe(change: SinkChange, text: str) -> None:
    assert change.describe() == text


@pytest.mark.parametrize(
    ("spark_type", "suffix"),
    [
        ("BIGINT", "bigint"),
        ("STRING", "string"),
        ("TIMESTAMP_NTZ", "timestamp_ntz"),
        ("DECIMAL(12,2)", "decimal_12_2"),
        ("DECIMAL(20, 0)", "decimal_20_0"),
        ("ARRAY<STRING>", "array_string"),
        ("MAP<STRING,INT>", "map_string_int"),
    ],
    ids=lambda v: v,
)
def test_type_suffix(spark_type: str, suffix: str) -> None:
    assert type_suffix(spark_type) == suffix


def test_fresh_sink_state_maps_every_column_to_itself() -> None:
    state = SinkTableState.fresh(frame_of(T, [SCHEMA]))
    assert state.frame is state.table
    assert state.mapping == IDENTITY
    assert not state.dropped


# --------------------------------------------------------------------- documented bugs


@pytest.mark.parametrize(
    ("behavior", "refuse"),
    [
        pytest.param("lenient", (), id="lenient"),
        pytest.param("try_evolve", ("alter_column_type", "rename_column"), id="try_evolve"),
    ],
)
def test_lenient_rename_after_lenient_retype_keeps_the_new_type(
    behavior: str, refuse: tuple[str, ...]
) -> None:
    evolver, sink = make(behavior, refuse=refuse)
    plan = evolver.plan(start(), rows(RETYPE, "ALTER TABLE t RENAME COLUMN c TO d"))
    assert sink.calls == [("add_column", "c_bigint", "BIGINT"), ("add_column", "d", "BIGINT")]
    assert plan.state.sinks[T].mapping == {"id": "id", "b": "b", "d": "d"}


@pytest.mark.parametrize("behavior", ["evolve", "lenient"])
def test_dropping_a_key_column_drops_it_from_the_sink_key(behavior: str) -> None:
    composite = TableSchema(
        "db",
        "t",
        (
            Column.from_mysql("a", "int", "int", False),
            Column.from_mysql("b", "int", "int", False),
            Column.from_mysql("v", "text", "text", True),
        ),
        ("a", "b"),
    )
    evolver, sink = make(behavior, schema=composite)
    plan = evolver.plan(start(composite), rows("ALTER TABLE t DROP COLUMN b"))
    assert sink.calls == [("drop_column", "b")]
    assert plan.state.sinks[T].frame.primary_key == ("a",)
    assert plan.state.sinks[T].table.primary_key == ("a",)


# ---------------------------------------------------- added columns the source filled


def fills(plan: BatchPlan) -> list[tuple[str, str, str, bool]]:
    """(source column, sink column, how existing rows are filled, by constant?)"""
    return [(f.column.name, f.target.name, f.default.kind.value, f.constant) for f in plan.fills]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("ALTER TABLE t ADD COLUMN e INT", []),
        ("ALTER TABLE t ADD COLUMN e INT DEFAULT NULL", []),
        # a NOT NULL literal fills the sink column's NULLs ...
        (
            "ALTER TABLE t ADD COLUMN e VARCHAR(5) NOT NULL DEFAULT 'new'",
            [("e", "e", "literal", True)],
        ),
        # ... a nullable one is read back: a NULL may be a value set after the ALTER
        ("ALTER TABLE t ADD COLUMN e INT DEFAULT 7", [("e", "e", "literal", False)]),
        (
            "ALTER TABLE t ADD COLUMN e TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP",
            [("e", "e", "expression", False)],
        ),
        ("ALTER TABLE t ADD COLUMN e INT AS (c * 2) STORED", [("e", "e", "stored", False)]),
        ("ALTER TABLE t ADD COLUMN e INT AS (c * 2) VIRTUAL", [("e", "e", "virtual", False)]),
        ("ALTER TABLE t ADD COLUMN e INT NOT NULL", [("e", "e", "implicit", False)]),
    ],
)
def test_added_columns_with_values_in_existing_rows_are_filled(
    statement: str, expected: list[tuple[str, str, str, bool]]
) -> None:
    evolver, _ = make("evolve")
    assert fills(evolver.plan(start(), rows(statement))) == expected


def test_a_fill_follows_a_later_rename_and_a_drop_cancels_it() -> None:
    add = "ALTER TABLE t ADD COLUMN e INT NOT NULL DEFAULT 1"
    evolver, _ = make("evolve")
    renamed = evolver.plan(start(), rows(add, "ALTER TABLE t RENAME COLUMN e TO ee"))
    assert fills(renamed) == [("ee", "ee", "literal", True)]
    evolver, _ = make("evolve")
    assert fills(evolver.plan(start(), rows(add, "ALTER TABLE t DROP COLUMN e"))) == []


def test_a_column_dropped_again_that_lenient_keeps_is_read_back() -> None:
    """The read-back finds no such column and reports the divergence (not a literal fill:
    rows after the drop hold NULL rightly)."""
    evolver, _ = make("lenient")
    add = "ALTER TABLE t ADD COLUMN e INT NOT NULL DEFAULT 1"
    plan = evolver.plan(start(), rows(add, "ALTER TABLE t DROP COLUMN e"))
    assert fills(plan) == [("e", "e", "literal", False)]


@pytest.mark.parametrize(
    ("behavior", "options"),
    [("ignore", {}), ("evolve", {"exclude.schema.changes": ["add.column"]})],
)
def test_no_column_added_nothing_filled(behavior: str, options: dict[str, Any]) -> None:
    evolver, _ = make(behavior, options)
    plan = evolver.plan(start(), rows("ALTER TABLE t ADD COLUMN e INT NOT NULL DEFAULT 1"))
    assert fills(plan) == []


def test_a_column_kept_from_before_is_read_back_not_filled_by_its_nulls() -> None:
    """lenient keeps a dropped column; added again, its sink column holds old values."""
    evolver, _ = make("lenient")
    state = evolver.plan(start(), rows(DROP)).state
    add = SchemaChange("db", "t", "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5", 100)
    plan = evolver.plan(state, [add], batch_id=1)
    assert fills(plan) == [("c", "c", "literal", False)]


@pytest.mark.parametrize(("behavior", "calls"), [("evolve", [("drop_table", T)]), ("lenient", [])])
def test_a_drop_of_a_table_this_run_no_longer_captures_reaches_its_sink_table(
    behavior: str, calls: list[Call]
) -> None:
    """A table an earlier run wrote, dropped while the pipeline was stopped: this run's plan
    has neither it nor its sink table (the table no longer exists), but the state saved by
    the earlier run has both, and the DROP the stream brings is applied as if the pipeline
    had run (a lenient pipeline keeps the rows); a later one finds nothing left to do."""
    evolver, sink = make(behavior)
    evolver.members = {}  # this run captures other tables only
    plan = evolver.plan(start(), rows(DROP_TABLE))
    assert sink.calls == calls
    assert plan.state.sinks[T].dropped is (behavior == "evolve")
    assert plan.state.schema(T) is None
    again = evolver.plan(plan.state, [SchemaChange("db", "t", DROP_TABLE, 50)])
    assert sink.calls == calls and again.state.sinks[T] == plan.state.sinks[T]
