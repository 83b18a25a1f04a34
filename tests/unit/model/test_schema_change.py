"""Schema change events: evolve() per event kind, matches_kinds(), and the schema JSON form."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.model.schema import Column, TableSchema, schema_from_json, schema_to_json
from sparkcdc.model.schema_change import (
    AddColumn,
    AlterColumnType,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChangeEvent,
    SchemaChangeType,
    TruncateTable,
    evolve,
    kinds_of_tag,
    matches_kinds,
)

ID = Column.from_mysql("id", "int", "int", False)
B = Column.from_mysql("b", "varchar", "varchar(20)", True)
C = Column.from_mysql("c", "int", "int", True)
X = Column.from_mysql("x", "bigint", "bigint", True)
SCHEMA = TableSchema("db", "t", (ID, B, C), ("id",))


def names(schema: TableSchema | None) -> list[str]:
    assert schema is not None
    return list(schema.column_names)


# ---------------------------------------------------------------------------- evolve()


@pytest.mark.parametrize(
    ("event", "columns"),
    [
        pytest.param(AddColumn(X), ["id", "b", "c", "x"], id="add-last"),
        pytest.param(AddColumn(X, first=True), ["x", "id", "b", "c"], id="add-first"),
        pytest.param(AddColumn(X, after="id"), ["id", "x", "b", "c"], id="add-after-first"),
        pytest.param(AddColumn(X, after="c"), ["id", "b", "c", "x"], id="add-after-last"),
        pytest.param(AddColumn(X, after="B"), ["id", "b", "x", "c"], id="add-after-other-case"),
        pytest.param(AddColumn(X, after="nope"), ["id", "b", "c", "x"], id="add-after-unknown"),
        pytest.param(DropColumn("b"), ["id", "c"], id="drop"),
        pytest.param(DropColumn("C"), ["id", "b"], id="drop-other-case"),
        pytest.param(RenameColumn("b", "bb"), ["id", "bb", "c"], id="rename"),
        pytest.param(RenameColumn("B", "bb"), ["id", "bb", "c"], id="rename-other-case"),
        pytest.param(RenameColumn("b", "B"), ["id", "B", "c"], id="rename-case-only"),
    ],
)
def test_evolve_columns(event: SchemaChangeEvent, columns: list[str]) -> None:
    evolved = evolve(SCHEMA, event)
    assert names(evolved) == columns
    assert evolved is not None and (evolved.database, evolved.table) == ("db", "t")


def test_add_keeps_the_column_definition() -> None:
    evolved = evolve(SCHEMA, AddColumn(X, after="id"))
    assert evolved == replace(SCHEMA, columns=(ID, X, B, C))


def test_alter_column_type_replaces_the_definition_in_place() -> None:
    wide = Column.from_mysql("c", "bigint", "bigint unsigned", False)
    assert evolve(SCHEMA, AlterColumnType(wide)) == replace(SCHEMA, columns=(ID, B, wide))


def test_alter_column_type_keeps_the_name_as_the_table_spells_it() -> None:
    wide = Column.from_mysql("C", "bigint", "bigint", True)
    evolved = evolve(SCHEMA, AlterColumnType(wide))
    assert evolved == replace(SCHEMA, columns=(ID, B, replace(wide, name="c")))


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(AddColumn(C), id="add-existing"),
        pytest.param(AddColumn(replace(X, name="B"), first=True), id="add-existing-other-case"),
        pytest.param(DropColumn("nope"), id="drop-missing"),
        pytest.param(RenameColumn("nope", "z"), id="rename-missing"),
        pytest.param(RenameColumn("b", "c"), id="rename-onto-other"),
        pytest.param(RenameColumn("b", "C"), id="rename-onto-other-case"),
        pytest.param(AlterColumnType(C), id="alter-identical"),
        pytest.param(AlterColumnType(replace(C, name="C")), id="alter-identical-other-case"),
        pytest.param(AlterColumnType(X), id="alter-missing"),
        pytest.param(TruncateTable(), id="truncate"),
    ],
)
def test_no_op_returns_the_same_object(event: SchemaChangeEvent) -> None:
    assert evolve(SCHEMA, event) is SCHEMA


@pytest.mark.parametrize(
    ("event", "key"),
    [
        pytest.param(RenameColumn("a", "aa"), ("aa", "b"), id="rename-first-key"),
        pytest.param(RenameColumn("b", "bb"), ("a", "bb"), id="rename-second-key"),
        pytest.param(RenameColumn("A", "aa"), ("aa", "b"), id="rename-key-other-case"),
        pytest.param(RenameColumn("v", "w"), ("a", "b"), id="rename-non-key"),
        pytest.param(DropColumn("a"), ("b",), id="drop-key"),
        pytest.param(DropColumn("B"), ("a",), id="drop-key-other-case"),
        pytest.param(DropColumn("v"), ("a", "b"), id="drop-non-key"),
    ],
)
def test_primary_key_follows_renames_and_drops(
    event: SchemaChangeEvent, key: tuple[str, ...]
) -> None:
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
    evolved = evolve(composite, event)
    assert evolved is not None and evolved.primary_key == key


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(DropTable(), id="drop-table"),
        pytest.param(RenameTable("db", "t2"), id="rename-table"),
        pytest.param(RenameTable("other", "t"), id="move-table"),
    ],
)
def test_table_gone(event: SchemaChangeEvent) -> None:
    assert evolve(SCHEMA, event) is None


def test_create_table_replaces_the_schema() -> None:
    created = TableSchema("db", "t", (X,), ())
    assert evolve(SCHEMA, CreateTable(created)) is created
    assert evolve(None, CreateTable(created)) is created


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(AddColumn(X), id="add"),
        pytest.param(DropColumn("b"), id="drop"),
        pytest.param(RenameColumn("b", "bb"), id="rename"),
        pytest.param(AlterColumnType(X), id="alter"),
        pytest.param(TruncateTable(), id="truncate"),
        pytest.param(DropTable(), id="drop-table"),
        pytest.param(RenameTable("db", "u"), id="rename-table"),
    ],
)
def test_a_missing_table_stays_missing(event: SchemaChangeEvent) -> None:
    assert evolve(None, event) is None


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (CreateTable(SCHEMA), "create.table"),
        (AddColumn(X), "add.column"),
        (DropColumn("b"), "drop.column"),
        (RenameColumn("b", "c"), "rename.column"),
        (AlterColumnType(X), "alter.column.type"),
        (TruncateTable(), "truncate.table"),
        (DropTable(), "drop.table"),
        (RenameTable("db", "u"), "rename.table"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_event_kinds(event: SchemaChangeEvent, kind: str) -> None:
    assert event.kind == kind


# ---------------------------------------------------------------------- matches_kinds()

ALL_KINDS = list(SchemaChangeType)


@pytest.mark.parametrize(
    ("patterns", "matched"),
    [
        pytest.param([], [], id="nothing"),
        pytest.param(["add.column"], ["add.column"], id="whole-tag"),
        pytest.param(["drop"], ["drop.column", "drop.table"], id="prefix"),
        pytest.param(["drop."], ["drop.column", "drop.table"], id="prefix-with-dot"),
        pytest.param(["alter"], ["alter.column.type"], id="alter-not-add"),
        pytest.param(["alter.column"], ["alter.column.type"], id="two-part-prefix"),
        pytest.param(
            ["column"],
            ["add.column", "alter.column.type", "drop.column", "rename.column"],
            id="family-column",
        ),
        pytest.param(
            ["table"],
            ["create.table", "drop.table", "rename.table", "truncate.table"],
            id="family-table",
        ),
        pytest.param(["all"], [k.value for k in SchemaChangeType], id="family-all"),
        pytest.param(["create.table.event"], ["create.table"], id="event-suffix"),
        pytest.param(["alter.column.type.event"], ["alter.column.type"], id="long-event-suffix"),
        pytest.param(
            ["create.table", "rename"],
            ["create.table", "rename.column", "rename.table"],
            id="several",
        ),
    ],
)
def test_matches_kinds(patterns: list[str], matched: list[str]) -> None:
    assert [k.value for k in ALL_KINDS if matches_kinds(k, patterns)] == sorted(matched)


@pytest.mark.parametrize(
    ("tag", "suggestion"),
    [
        ("drop.colum", "drop.column"),
        ("columns", "column"),
        ("create.table.evnt", "create.table.event"),
        ("add.col", "add.column"),
        ("dr", "drop"),  # a leading part is a whole part, never a partial word
        ("column.event", "add.column.event"),  # a family has no '.event' form
        ("schema", None),
    ],
)
def test_an_unknown_tag_is_refused_with_the_closest(tag: str, suggestion: str | None) -> None:
    with pytest.raises(ValueError, match="unknown schema change type") as caught:
        kinds_of_tag(tag)
    message = str(caught.value)
    if suggestion is None:
        assert "Did you mean" not in message
    else:
        assert f"Did you mean '{suggestion}'?" in message
    assert "add.column" in message and "column" in message  # the valid tags are listed


def test_matches_kinds_takes_any_iterable() -> None:
    assert matches_kinds(SchemaChangeType.TRUNCATE_TABLE, iter(("truncate",)))
    assert matches_kinds(SchemaChangeType.DROP_TABLE, ("drop.table",))


# ---------------------------------------------------------------------- schema JSON form

MYSQL_TYPES = [
    ("tinyint", "tinyint(1)"),
    ("tinyint", "tinyint(4) unsigned"),
    ("smallint", "smallint(6)"),
    ("mediumint", "mediumint(8) unsigned"),
    ("int", "int(11)"),
    ("int", "int(10) unsigned"),
    ("bigint", "bigint(20)"),
    ("bigint", "bigint(20) unsigned"),
    ("decimal", "decimal(10,2)"),
    ("decimal", "decimal(65,30)"),
    ("float", "float"),
    ("double", "double"),
    ("bit", "bit(1)"),
    ("bit", "bit(12)"),
    ("year", "year(4)"),
    ("date", "date"),
    ("datetime", "datetime(6)"),
    ("timestamp", "timestamp(3)"),
    ("time", "time"),
    ("char", "char(3)"),
    ("varchar", "varchar(255)"),
    ("text", "text"),
    ("longtext", "longtext"),
    ("binary", "binary(16)"),
    ("varbinary", "varbinary(64)"),
    ("blob", "blob"),
    ("enum", "enum('a','b')"),
    ("set", "set('x','y')"),
    ("json", "json"),
    ("geometry", "geometry"),
    ("point", "point"),
]

identifiers = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)


@st.composite
def schemas(draw: st.DrawFn) -> TableSchema:
    column_names = draw(st.lists(identifiers, min_size=1, max_size=8, unique_by=str.lower))
    columns = tuple(
        Column.from_mysql(name, *draw(st.sampled_from(MYSQL_TYPES)), draw(st.booleans()))
        for name in column_names
    )
    key = draw(st.lists(st.sampled_from(column_names), unique=True, max_size=3))
    return TableSchema(draw(identifiers), draw(identifiers), columns, tuple(key))


@given(schemas())
def test_schema_json_round_trip(schema: TableSchema) -> None:
    assert schema_from_json(schema_to_json(schema)) == schema
    # as the schema history and staged chunks keep it: through JSON text
    assert schema_from_json(json.loads(json.dumps(schema_to_json(schema)))) == schema


def test_schema_json_form() -> None:
    assert schema_to_json(TableSchema("db", "t", (ID, B), ("id",))) == {
        "database": "db",
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            ["id", "int", "int", False, "INT"],
            ["b", "varchar", "varchar(20)", True, "STRING"],
        ],
    }
