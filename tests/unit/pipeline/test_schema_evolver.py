"""The schema evolver's decisions, per behaviour, against a sink that keeps its tables in
memory (the real sinks' appliers are tested against real targets in
tests/integration/test_schema_evolution.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import SinkError
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.pipeline.evolution import (
    DdlRow,
    SchemaEvolver,
    SchemaHistory,
    SchemaState,
    SinkTableState,
    diff_frames,
    type_suffix,
)
from sparkcdc.sinks.base import Sink, SinkColumn, SinkContext, SinkOptions, SinkTable

SOURCE = "db.t"


class MemorySink(Sink):
    """Keeps each table's columns; records every applier call; may refuse type changes."""

    def __init__(self, options: SinkOptions, refuse_types: bool = False) -> None:
        super().__init__(options, spark=None, context=SinkContext("p", "/nowhere"))  # type: ignore[arg-type]
        self.calls: list[tuple[str, ...]] = []
        self.refuse_types = refuse_types

    def open(self, tables: Sequence[SinkTable]) -> None:
        self.calls.extend(("create", t.name) for t in tables)

    def write(self, table: SinkTable, changes: Any, batch_id: int) -> None:
        raise AssertionError("the evolver never writes rows")

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        self.calls.append(("add", column.name, column.spark_type))

    def drop_column(self, table: SinkTable, name: str) -> None:
        self.calls.append(("drop", name))

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        self.calls.append(("rename", old, new))

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        if self.refuse_types:
            raise SinkError("memory sink: no type changes")
        self.calls.append(("type", name, spark_type))

    def truncate_table(self, table: SinkTable) -> None:
        self.calls.append(("truncate", table.name))

    def drop_table(self, table: SinkTable) -> None:
        self.calls.append(("drop_table", table.name))


def frame_of(name: str, schemas: Sequence[TableSchema]) -> SinkTable:
    (schema,) = schemas
    columns = tuple(
        SinkColumn(c.name, c.spark_type, c.name not in schema.primary_key) for c in schema.columns
    )
    return SinkTable(name, columns, schema.primary_key, (schema.qualified_name,))


def start() -> SchemaState:
    schema = TableSchema(
        "db",
        "t",
        (
            Column.from_mysql("id", "int", "int", False),
            Column.from_mysql("b", "varchar", "varchar(20)", True),
            Column.from_mysql("c", "int", "int", True),
        ),
        ("id",),
    )
    return SchemaState.start([schema], [frame_of(SOURCE, [schema])])


def evolver(behavior: str, refuse_types: bool = False, **options: Any) -> SchemaEvolver:
    sink = MemorySink(SinkOptions(type="memory", **options), refuse_types)
    return SchemaEvolver(sink, behavior, frame_of, {SOURCE: (SOURCE,)})


def rows(*statements: str) -> list[DdlRow]:
    return [DdlRow("db", "t", 100 * (i + 1), s) for i, s in enumerate(statements)]


def calls(e: SchemaEvolver) -> list[tuple[str, ...]]:
    assert isinstance(e.sink, MemorySink)
    return e.sink.calls


ADD = "ALTER TABLE t ADD COLUMN e BIGINT"
DROP = "ALTER TABLE t DROP COLUMN c"
RENAME = "ALTER TABLE t RENAME COLUMN b TO bb"
RETYPE = "ALTER TABLE t MODIFY c BIGINT"

# behaviour → (applier calls, final sink columns, final mapping) for ADD, RENAME, RETYPE, DROP
BEHAVIOURS: dict[str, tuple[list[tuple[str, ...]], list[str], dict[str, str]]] = {
    "evolve": (
        [("add", "e", "BIGINT"), ("rename", "b", "bb"), ("type", "c", "BIGINT"), ("drop", "c")],
        ["id", "bb", "e"],
        {"id": "id", "e": "e", "bb": "bb"},
    ),
    "lenient": (
        [("add", "e", "BIGINT"), ("add", "bb", "STRING"), ("add", "c_bigint", "BIGINT")],
        ["id", "b", "c", "e", "bb", "c_bigint"],
        {"id": "id", "e": "e", "bb": "bb"},
    ),
    "ignore": ([], ["id", "b", "c"], {"id": "id"}),
}


@pytest.mark.parametrize("behavior", sorted(BEHAVIOURS))
def test_column_changes_by_behavior(behavior: str) -> None:
    e = evolver(behavior)
    plan = e.plan(start(), rows(ADD, RENAME, RETYPE, DROP))
    expected_calls, columns, mapping = BEHAVIOURS[behavior]
    assert calls(e) == expected_calls
    assert list(plan.state.sinks[SOURCE].table.column_names) == columns
    assert plan.state.sinks[SOURCE].mapping == mapping
    assert plan.changed


def test_exception_stops_before_any_change() -> None:
    e = evolver("exception")
    with pytest.raises(SinkError, match=r"db\.t at seq 100 .*add column e BIGINT.*'exception'"):
        e.plan(start(), rows(ADD))
    assert calls(e) == []


def test_evolve_names_a_refused_change_and_what_to_do() -> None:
    e = evolver("evolve", refuse_types=True)
    with pytest.raises(SinkError, match=r"cannot change column c from INT to BIGINT.*try_evolve"):
        e.plan(start(), rows(RETYPE))


def test_try_evolve_falls_back_to_lenient_where_the_sink_refuses() -> None:
    e = evolver("try_evolve", refuse_types=True)
    plan = e.plan(start(), rows(RETYPE))
    assert calls(e) == [("add", "c_bigint", "BIGINT")]
    assert plan.state.sinks[SOURCE].mapping["c"] == "c_bigint"


def test_segments_before_a_rename_follow_it_under_evolve() -> None:
    e = evolver("evolve")
    plan = e.plan(start(), rows(RENAME))
    first, second = plan.segments[SOURCE]
    assert (first.lo, first.hi, second.lo, second.hi) == (None, 100, 100, None)
    assert first.schema.column_names == ("id", "b", "c")
    assert first.mapping["b"] == "bb"  # rows before the rename land in the renamed column
    assert second.schema.column_names == ("id", "bb", "c")


def test_segments_before_a_rename_keep_the_old_column_under_lenient() -> None:
    plan = evolver("lenient").plan(start(), rows(RENAME))
    first, second = plan.segments[SOURCE]
    assert first.mapping["b"] == "b" and "b" not in second.mapping


@pytest.mark.parametrize(
    ("behavior", "options", "forwarded"),
    [
        ("evolve", {}, True),
        ("lenient", {}, False),
        ("lenient", {"exclude.schema.changes": ["drop.table"]}, True),
        ("evolve", {"exclude.schema.changes": ["truncate"]}, False),
        ("evolve", {"include.schema.changes": ["add.column"]}, False),
        ("ignore", {}, False),
    ],
)
def test_truncate_by_behavior_and_lists(
    behavior: str, options: dict[str, Any], forwarded: bool
) -> None:
    e = evolver(behavior, **options)
    plan = e.plan(start(), rows("TRUNCATE TABLE t"))
    assert calls(e) == ([("truncate", SOURCE)] if forwarded else [])
    # a forwarded truncate discards the rows before it
    assert [(s.lo, s.hi) for s in plan.segments[SOURCE]] == (
        [(100, None)] if forwarded else [(None, 100), (100, None)]
    )


def test_exclude_drop_keeps_the_column_under_evolve() -> None:
    e = evolver("evolve", **{"exclude.schema.changes": ["drop"]})
    plan = e.plan(start(), rows(DROP))
    assert calls(e) == []
    assert plan.state.sinks[SOURCE].table.column_names == ("id", "b", "c")
    assert "c" not in plan.state.sinks[SOURCE].mapping


def test_a_replayed_batch_does_not_truncate_again() -> None:
    e = evolver("evolve")
    e.plan(start(), rows("TRUNCATE TABLE t"), replay=True)
    assert calls(e) == []


def test_a_statement_is_applied_once_however_often_it_comes() -> None:
    e = evolver("evolve")
    first = e.plan(start(), rows(ADD), batch_id=1)
    # the binlog brings again what a snapshot chunk carried a batch early
    again = e.plan(first.state, rows(ADD), batch_id=2)
    assert calls(e) == [("add", "e", "BIGINT")]
    assert not again.changed
    # rows of the batch after the change may still be older than it: both versions are cut
    assert [(s.lo, s.hi) for s in again.segments[SOURCE]] == [(None, 100), (100, None)]
    later = e.plan(again.state, [], batch_id=4)
    assert [(s.lo, s.hi) for s in later.segments[SOURCE]] == [(None, None)]


def test_unparseable_and_uncaptured_statements_change_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    e = evolver("evolve")
    statements = [
        DdlRow("db", "t", 100, "ALTER TABLE t ADD COLUMN g POINT"),
        DdlRow("db", "other", 200, "ALTER TABLE other ADD COLUMN x INT"),
    ]
    plan = e.plan(start(), statements)
    assert calls(e) == [] and not plan.changed
    assert "ADD COLUMN g POINT" in caplog.text and "seq 100" in caplog.text


def test_history_keeps_the_state_of_each_batch(tmp_path: Path) -> None:
    history = SchemaHistory(str(tmp_path))
    initial = start()
    history.save(-1, initial)
    changed = evolver("lenient").plan(initial, rows(RENAME), batch_id=3).state
    history.save(3, changed)
    assert history.has(3) and not history.has(2)
    assert history.before(3) == initial  # what batch 3 starts from, also when replayed
    assert history.before(4) == changed == history.latest()


@pytest.mark.parametrize(
    ("old", "new", "renames", "expected"),
    [
        (["id:INT", "x:INT"], ["id:INT", "x:INT", "y:STRING"], [], ["add column y STRING"]),
        (["id:INT", "x:INT"], ["id:INT"], [], ["drop column x"]),
        (["id:INT", "x:INT"], ["id:INT", "y:INT"], [("x", "y")], ["rename column x to y"]),
        (["id:INT", "x:INT"], ["id:INT", "y:INT"], [], ["add column y INT", "drop column x"]),
        (
            ["id:INT", "x:INT"],
            ["id:INT", "y:BIGINT"],
            [("x", "y")],
            ["rename column x to y", "change column y from INT to BIGINT"],
        ),
    ],
)
def test_diff_frames(
    old: list[str], new: list[str], renames: list[tuple[str, str]], expected: list[str]
) -> None:
    def table(columns: list[str]) -> SinkTable:
        parsed = [SinkColumn(*c.split(":")) for c in columns]
        return SinkTable("t", tuple(parsed), ("id",), ())

    assert [c.describe() for c in diff_frames(table(old), table(new), renames)] == expected


@pytest.mark.parametrize(
    ("spark_type", "suffix"),
    [("BIGINT", "bigint"), ("DECIMAL(12,2)", "decimal_12_2"), ("TIMESTAMP_NTZ", "timestamp_ntz")],
)
def test_type_suffix(spark_type: str, suffix: str) -> None:
    assert type_suffix(spark_type) == suffix


def test_fresh_sink_state_maps_every_column_to_itself() -> None:
    table = frame_of(SOURCE, [start().sources[SOURCE][0].schema])  # type: ignore[list-item]
    assert SinkTableState.fresh(table).mapping == {"id": "id", "b": "b", "c": "c"}
