"""Schema change events (Flink CDC 3.x's SchemaChangeEvent family) and how they evolve a schema.

A DDL statement becomes one or more events per table (``mysql/ddl/schema_changes.py`` parses them);
:func:`evolve` applies one event to the table's schema. Events are pure values: they travel
in the schema history and are compared, logged and filtered by :attr:`kind`, the
``include.schema.changes`` / ``exclude.schema.changes`` tag Flink CDC uses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from sparkcdc.errors import did_you_mean
from sparkcdc.model.schema import Column, TableSchema


class SchemaChangeType(StrEnum):
    """Event type tags, as Flink CDC names them (plus ``rename.table``)."""

    ADD_COLUMN = "add.column"
    ALTER_COLUMN_TYPE = "alter.column.type"
    CREATE_TABLE = "create.table"
    DROP_COLUMN = "drop.column"
    DROP_TABLE = "drop.table"
    RENAME_COLUMN = "rename.column"
    RENAME_TABLE = "rename.table"
    TRUNCATE_TABLE = "truncate.table"


@dataclass(frozen=True)
class CreateTable:
    schema: TableSchema
    # CREATE TABLE IF NOT EXISTS: nothing happens where the table exists (MySQL logs the
    # statement even then)
    if_not_exists: bool = False
    kind = SchemaChangeType.CREATE_TABLE


class DefaultKind(StrEnum):
    """How the server fills an added column in the rows the table already has (a nullable
    column without DEFAULT, or with DEFAULT NULL, leaves them NULL: no ColumnDefault)."""

    LITERAL = "literal"  # a constant number or string: every existing row gets it
    EXPRESSION = "expression"  # CURRENT_TIMESTAMP, (a + 1), ...: evaluated by the server
    IMPLICIT = "implicit"  # NOT NULL without DEFAULT: the type's implicit default (0, '')
    AUTO_INCREMENT = "auto_increment"  # existing rows are numbered
    STORED = "stored"  # a generated column, STORED / PERSISTENT
    VIRTUAL = "virtual"  # a generated column, VIRTUAL (MariaDB logs it in FULL row images)


@dataclass(frozen=True)
class ColumnDefault:
    """What an added column holds in the rows that existed before the ALTER.

    ``text``: the DEFAULT or generation expression as written (MySQL dialect), ``literal``
    the value of a LITERAL default as text (a number as written, a string unquoted).

    >>> ColumnDefault(DefaultKind.LITERAL, "'new'", "new").constant
    True
    """

    kind: DefaultKind
    text: str = ""
    literal: str | None = None

    @property
    def constant(self) -> bool:
        """Every existing row holds the same value, known from the statement alone."""
        return self.kind is DefaultKind.LITERAL and self.literal is not None


@dataclass(frozen=True)
class AddColumn:
    column: Column
    first: bool = False
    after: str | None = None  # None and not first: appended last
    default: ColumnDefault | None = None  # None: existing rows hold NULL
    kind = SchemaChangeType.ADD_COLUMN


@dataclass(frozen=True)
class DropColumn:
    name: str
    kind = SchemaChangeType.DROP_COLUMN


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str
    kind = SchemaChangeType.RENAME_COLUMN


@dataclass(frozen=True)
class AlterColumnType:
    column: Column  # the column's new definition (same name)
    kind = SchemaChangeType.ALTER_COLUMN_TYPE


@dataclass(frozen=True)
class TruncateTable:
    kind = SchemaChangeType.TRUNCATE_TABLE


@dataclass(frozen=True)
class DropTable:
    kind = SchemaChangeType.DROP_TABLE


@dataclass(frozen=True)
class RenameTable:
    database: str
    table: str  # the new name
    kind = SchemaChangeType.RENAME_TABLE


SchemaChangeEvent = (
    CreateTable
    | AddColumn
    | DropColumn
    | RenameColumn
    | AlterColumnType
    | TruncateTable
    | DropTable
    | RenameTable
)


@dataclass(frozen=True)
class TableChange:
    """One event of a DDL statement and the table it acts on."""

    database: str
    table: str
    event: SchemaChangeEvent

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"


def _index(schema: TableSchema, name: str) -> int | None:
    # MySQL column names are case-insensitive
    folded = name.lower()
    for i, column in enumerate(schema.columns):
        if column.name.lower() == folded:
            return i
    return None


def evolve(schema: TableSchema | None, event: SchemaChangeEvent) -> TableSchema | None:
    """The schema after ``event``; the same object when the event changes nothing.

    Mirrors what the server did: an ADD of a column that exists, a DROP or RENAME of one
    that does not, a MODIFY to the same definition are no-ops (the statement was replayed,
    or carried IF [NOT] EXISTS). ``None`` is a table that does not exist.

    >>> s = TableSchema("db", "t", (Column.from_mysql("id", "int", "int", False),), ("id",))
    >>> evolve(s, AddColumn(Column.from_mysql("x", "int", "int", True))).column_names
    ('id', 'x')
    """
    if isinstance(event, CreateTable):
        return event.schema
    if isinstance(event, DropTable | RenameTable):
        return None
    if schema is None or isinstance(event, TruncateTable):
        return schema
    columns = list(schema.columns)
    if isinstance(event, AddColumn):
        if _index(schema, event.column.name) is not None:
            return schema
        at = len(columns)
        if event.first:
            at = 0
        elif event.after is not None:
            after = _index(schema, event.after)
            at = len(columns) if after is None else after + 1
        columns.insert(at, event.column)
        return replace(schema, columns=tuple(columns))
    if isinstance(event, DropColumn):
        index = _index(schema, event.name)
        if index is None:
            return schema
        dropped = columns.pop(index).name
        key = tuple(k for k in schema.primary_key if k != dropped)
        return replace(schema, columns=tuple(columns), primary_key=key)
    if isinstance(event, RenameColumn):
        index = _index(schema, event.old)
        if index is None or _index(schema, event.new) not in (None, index):
            return schema
        old = columns[index].name
        columns[index] = replace(columns[index], name=event.new)
        key = tuple(event.new if k == old else k for k in schema.primary_key)
        return replace(schema, columns=tuple(columns), primary_key=key)
    index = _index(schema, event.column.name)
    if index is None or columns[index] == replace(event.column, name=columns[index].name):
        return schema
    columns[index] = replace(event.column, name=columns[index].name)
    return replace(schema, columns=tuple(columns))


# Flink CDC 3.x's family tags (SchemaChangeEventTypeFamily): ``column`` and ``table`` group
# the events of a column or of a whole table, ``all`` is every event. ``rename.table``, which
# Flink CDC 3.x does not have, counts among the table events. The other families (``add``,
# ``drop``, ...) are the event tags' leading parts (below).
_FAMILIES: dict[str, frozenset[SchemaChangeType]] = {
    "all": frozenset(SchemaChangeType),
    "column": frozenset(
        {
            SchemaChangeType.ADD_COLUMN,
            SchemaChangeType.ALTER_COLUMN_TYPE,
            SchemaChangeType.DROP_COLUMN,
            SchemaChangeType.RENAME_COLUMN,
        }
    ),
    "table": frozenset(
        {
            SchemaChangeType.CREATE_TABLE,
            SchemaChangeType.DROP_TABLE,
            SchemaChangeType.TRUNCATE_TABLE,
            SchemaChangeType.RENAME_TABLE,
        }
    ),
}
# Flink CDC's docs write an event tag also with ".event" (create.table.event)
_EVENT_SUFFIX = ".event"


def _tag_vocabulary() -> dict[str, frozenset[SchemaChangeType]]:
    """Every tag a sink's include / exclude list may name → the kinds it names: the
    families, each event tag (also with ``.event``) and each leading part of one (``drop``
    names both drops, ``alter.column`` the type change)."""
    vocabulary = dict(_FAMILIES)
    for kind in SchemaChangeType:
        parts = kind.value.split(".")
        for n in range(1, len(parts) + 1):
            prefix = ".".join(parts[:n])
            vocabulary[prefix] = vocabulary.get(prefix, frozenset()) | {kind}
        vocabulary[kind.value + _EVENT_SUFFIX] = frozenset({kind})
    return vocabulary


SCHEMA_CHANGE_TAGS = _tag_vocabulary()


def kinds_of_tag(tag: str) -> frozenset[SchemaChangeType]:
    """The schema change kinds ``tag`` names, as Flink CDC reads ``include.schema.changes``
    and ``exclude.schema.changes``; ValueError (with the closest tag) for a tag it does not
    know.

    >>> sorted(kinds_of_tag("drop"))
    [<SchemaChangeType.DROP_COLUMN: 'drop.column'>, <SchemaChangeType.DROP_TABLE: 'drop.table'>]
    >>> kinds_of_tag("create.table.event") == {SchemaChangeType.CREATE_TABLE}
    True
    """
    kinds = SCHEMA_CHANGE_TAGS.get(tag.strip().lower().rstrip("."))
    if kinds is None:
        documented = [*_FAMILIES, *(k.value for k in SchemaChangeType)]
        raise ValueError(
            f"unknown schema change type {tag!r}.{did_you_mean(tag, SCHEMA_CHANGE_TAGS)} "
            f"Valid: {', '.join(documented)} (an event type also with '.event', or a leading "
            "part of one such as 'drop')"
        )
    return kinds


def matches_kinds(kind: SchemaChangeType, tags: Iterable[str]) -> bool:
    """Whether ``kind`` is named by one of ``tags`` (:func:`kinds_of_tag`).

    >>> matches_kinds(SchemaChangeType.DROP_TABLE, ["drop"]), matches_kinds(
    ...     SchemaChangeType.ADD_COLUMN, ["alter"]), matches_kinds(
    ...     SchemaChangeType.ADD_COLUMN, ["column"])
    (True, False, True)
    """
    return any(kind in kinds_of_tag(tag) for tag in tags)


SchemaOf = Callable[[str, str], TableSchema | None]
"""A table's schema at a statement, by (database, table); None where it is not known."""


class SourceDdl(ABC):
    """How a source's schema change statements read (``SourceDialect.ddl``): what the
    pipelines' schema evolution asks of the statements the change stream carries."""

    @abstractmethod
    def parse(
        self, database: str, statement: str, schema_of: SchemaOf | None = None
    ) -> list[TableChange]:
        """The schema change events of one statement, per table, in statement order, the
        new columns typed as the source's catalog types them; ``database``: the statement's
        default database; ``schema_of``: the tables' schemas at the statement (a table
        created like another). ``DdlParseError`` (sparkcdc.errors) when the statement may
        change columns in a way not known: it is never guessed."""

    @abstractmethod
    def default_value(self, column: Column, literal: str) -> Any:
        """A column's literal DEFAULT as the change stream's rows carry the column's
        values, or ValueError where the source's conversion of it is not known (then the
        rows that predate the column are read back from the source)."""

    def tool_table_of(self, table: str) -> tuple[str, bool] | None:
        """``(t, is_copy)`` when ``table`` is, by its name, a table an online schema change
        tool makes beside ``t`` (``is_copy``: the altered copy it swaps in), else None. A
        source whose tools make no such tables has none."""
        return None
