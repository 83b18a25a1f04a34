"""DDL statements of the binlog's QUERY events → schema change events (sqlglot, MySQL dialect).

>>> [c.event for c in parse_ddl("app", "ALTER TABLE t DROP COLUMN x, RENAME COLUMN a TO b")]
[DropColumn(name='x'), RenameColumn(old='a', new='b')]

What does not change a table's columns (indexes, engine, comments, partitions) yields no
event. A statement sqlglot cannot read yields no event only when every clause of it is one that
provably leaves the columns alone (an ALTER TABLE of index, option and partition clauses);
any other raises :class:`DdlParseError`. Only statements on captured tables are parsed, and a
stream must not guess what such a statement did to them.

>>> parse_ddl("app", "ALTER TABLE t ADD INDEX i (a), ALGORITHM=INPLACE, WAIT 5")
[]
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from sparkcdc.errors import DdlParseError
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.schema import (
    Column,
    TableSchema,
    create_table_sql,
    tinyint1_column,
    with_tinyint1,
)
from sparkcdc.model.schema_change import (
    AddColumn,
    AlterColumnType,
    ColumnDefault,
    CreateTable,
    DefaultKind,
    DropColumn,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChangeEvent,
    SchemaOf,
    SourceDdl,
    TableChange,
    TruncateTable,
)
from sparkcdc.model.text import split_top_level
from sparkcdc.mysql.ddl.table_names import (
    IDENT,
    RENAME_PAIR,
    RENAME_TABLE,
    qualified,
    statement_text,
    tool_table_of,
)

# Words MariaDB / MySQL allow that sqlglot's MySQL dialect does not know; they do not change
# what the statement does to the columns.
_NOISE = re.compile(r"^(\s*ALTER)\s+(?:ONLINE\s+|IGNORE\s+)+(TABLE)", re.IGNORECASE)
# ADD [COLUMN] (a INT, b INT): sqlglot reads only one column per ADD
_ADD_LIST = re.compile(r"\bADD\s+(?:COLUMN\s+)?\(((?:[^()]|\([^()]*\))*)\)", re.IGNORECASE)
# MariaDB's PERSISTENT is STORED (sqlglot knows only the latter)
_PERSISTENT = re.compile(r"(\))\s*PERSISTENT\b", re.IGNORECASE)
# An ALTER TABLE whose clauses all leave the columns as they are: index, key and constraint
# clauses, table options, partition and tablespace clauses (those that add or remove rows, as
# DROP PARTITION, are refused by the range reader unless ddl.row-changes is continue:
# ddl_names.row_changes)
_ALTER_TABLE = re.compile(
    rf"^ALTER\s+(?:(?:ONLINE|IGNORE)\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{IDENT}(?:\s*\.\s*{IDENT})?"
    r"(?P<clauses>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_NEUTRAL_CLAUSE = re.compile(
    r"(?:ADD\s+(?:(?:UNIQUE|FULLTEXT|SPATIAL)\b|(?:INDEX|KEY|CONSTRAINT|CHECK|PARTITION)\b"
    r"|(?:PRIMARY|FOREIGN)\s+KEY\b)"
    r"|DROP\s+(?:INDEX|KEY|CONSTRAINT|CHECK|(?:PRIMARY|FOREIGN)\s+KEY)\b"
    r"|(?:ALTER|RENAME)\s+(?:INDEX|KEY)\b"
    r"|(?:ENGINE|COMMENT|AUTO_INCREMENT|ROW_FORMAT|KEY_BLOCK_SIZE|ALGORITHM|LOCK|AVG_ROW_LENGTH"
    r"|MAX_ROWS|MIN_ROWS|PACK_KEYS|CHECKSUM|PAGE_CHECKSUM|DELAY_KEY_WRITE|TRANSACTIONAL"
    r"|STATS_PERSISTENT|STATS_AUTO_RECALC|STATS_SAMPLE_PAGES|PAGE_COMPRESSED"
    r"|PAGE_COMPRESSION_LEVEL|ENCRYPTED|ENCRYPTION|ENCRYPTION_KEY_ID|COMPRESSION"
    r"|INSERT_METHOD|TABLESPACE|UNION)\b"
    r"|(?:DATA|INDEX)\s+DIRECTORY\b|(?:DEFAULT\s+)?(?:CHARACTER\s+SET|CHARSET|COLLATE)\b"
    r"|FORCE\b|(?:ENABLE|DISABLE)\s+KEYS\b|ORDER\s+BY\b|NOWAIT\b|WAIT\s+\d+"
    r"|(?:DISCARD|IMPORT)\s+TABLESPACE\b|(?:REMOVE|UPGRADE)\s+PARTITIONING\b)",
    re.IGNORECASE,
)
# a partition clause stands alone in its statement, and its partition list has commas
_PARTITION_CLAUSE = re.compile(
    r"\s*(?:(?:REORGANIZE|COALESCE|ANALYZE|CHECK|OPTIMIZE|REBUILD|REPAIR|DROP|TRUNCATE"
    r"|EXCHANGE|CONVERT|DISCARD|IMPORT)\s+PARTITION\b|CONVERT\s+TABLE\b|PARTITION\s+BY\b)",
    re.IGNORECASE,
)
# sqlglot renders some types differently from information_schema's COLUMN_TYPE
_TYPE_ALIASES = {
    "boolean": ("tinyint", "tinyint(1)"),
    "bool": ("tinyint", "tinyint(1)"),
    "serial": ("bigint", "bigint unsigned"),
}


def parse_ddl(
    default_database: str,
    statement: str,
    *,
    tinyint1_as_boolean: bool = True,
    schema_of: SchemaOf | None = None,
) -> list[TableChange]:
    """The schema change events of one DDL statement, per table, in statement order.

    ``default_database`` is the QUERY event's current database (unqualified names);
    ``tinyint1_as_boolean`` the source's ``treat-tinyint1-as-boolean.enabled``;
    ``schema_of(database, table)`` a table's schema at the statement (None: not known), for
    ``CREATE TABLE t LIKE s``, whose columns are those of ``s``.
    """
    changes = _parse_ddl(default_database, statement, schema_of)
    if tinyint1_as_boolean:
        return changes
    return [replace(c, event=_numeric_tinyint1(c.event)) for c in changes]


def _numeric_tinyint1(event: SchemaChangeEvent) -> SchemaChangeEvent:
    """An event whose new columns keep TINYINT(1) a number."""
    if isinstance(event, AddColumn | AlterColumnType):
        return replace(event, column=tinyint1_column(event.column, as_boolean=False))
    if isinstance(event, CreateTable):
        return replace(event, schema=with_tinyint1(event.schema, as_boolean=False))
    return event


def _parse_ddl(
    default_database: str, statement: str, schema_of: SchemaOf | None
) -> list[TableChange]:
    text = statement_text(statement)
    text = _ADD_LIST.sub(_split_add_list, _NOISE.sub(r"\1 \2", text)).strip().rstrip(";")
    text = _PERSISTENT.sub(r"\1 STORED", text)
    renamed = RENAME_TABLE.match(text)
    if renamed:
        return _rename_tables(default_database, renamed.group(1), statement)
    try:
        tree = _parse_one(text)
    except ParseError as exc:
        if _leaves_columns_alone(text):
            return []
        raise DdlParseError(f"cannot parse DDL {statement!r}: {str(exc).splitlines()[0]}") from None
    if tree.args.get("temporary") or tree.find(exp.TemporaryProperty) is not None:
        return []  # a session's temporary table: never a captured one
    if isinstance(tree, exp.Command):
        if _leaves_columns_alone(text):
            return []
        raise DdlParseError(f"cannot parse DDL {statement!r}: syntax sqlglot does not support")
    if isinstance(tree, exp.Alter):
        database, table = _table_name(tree.this, default_database)
        return [TableChange(database, table, e) for e in _alter_events(tree, database, table)]
    if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
        return _create_table(tree, default_database, statement, schema_of)
    if isinstance(tree, exp.TruncateTable):
        return [
            TableChange(*_table_name(t, default_database), TruncateTable())
            for t in tree.expressions
        ]
    if isinstance(tree, exp.Drop) and str(tree.args.get("kind", "")).upper() == "TABLE":
        return [
            TableChange(*_table_name(t, default_database), DropTable())
            for t in tree.args.get("tables") or [tree.this]
            if t is not None
        ]
    return []


class _CommandFallback(logging.Filter):
    """sqlglot's warning that it read a statement as a bare Command: this module judges
    such statements itself (no change, or a DdlParseError naming the statement), so on the
    console the warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


_SQLGLOT_LOG = logging.getLogger("sqlglot")
_COMMAND_FALLBACK = _CommandFallback()


def _parse_one(text: str) -> exp.Expr:
    _SQLGLOT_LOG.addFilter(_COMMAND_FALLBACK)
    try:
        return sqlglot.parse_one(text, read="mysql")
    finally:
        _SQLGLOT_LOG.removeFilter(_COMMAND_FALLBACK)


def _leaves_columns_alone(text: str) -> bool:
    """Whether ``text`` is an ALTER TABLE whose every clause keeps the columns unchanged."""
    match = _ALTER_TABLE.match(text.strip())
    if match is None:
        return False
    if _PARTITION_CLAUSE.match(match["clauses"]):
        return True
    return all(
        _NEUTRAL_CLAUSE.match(clause.strip()) for clause in split_top_level(match["clauses"])
    )


def _split_add_list(match: re.Match[str]) -> str:
    return ", ".join(f"ADD COLUMN {part}" for part in split_top_level(match.group(1)))


def _rename_tables(default_database: str, pairs: str, statement: str) -> list[TableChange]:
    changes: list[TableChange] = []
    for part in split_top_level(pairs):
        match = RENAME_PAIR.fullmatch(part)
        if not match:
            raise DdlParseError(f"cannot parse DDL {statement!r}: expected 'a TO b' in {part!r}")
        old_db, old = qualified(match.group(1), default_database)
        new_db, new = qualified(match.group(2), default_database)
        changes.append(TableChange(old_db, old, RenameTable(new_db, new)))
    return changes


def _table_name(node: exp.Expression, default_database: str) -> tuple[str, str]:
    table = node.this if isinstance(node, exp.Schema) else node
    assert isinstance(table, exp.Table)
    return (table.db or default_database), table.name


def column_from_def(definition: exp.ColumnDef, table: str, *, key: bool = False) -> Column:
    """A :class:`Column` from a column definition (type as information_schema spells it)."""
    kind = definition.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise DdlParseError(f"column {table}.{definition.name} has no type in its definition")
    column_type = kind.sql(dialect="mysql").lower().replace(", ", ",")
    constraints = definition.args.get("constraints") or []
    if any(isinstance(c.args.get("kind"), exp.ZeroFillColumnConstraint) for c in constraints):
        column_type += " zerofill"
    data_type = re.split(r"[ (]", column_type, maxsplit=1)[0]
    if data_type in _TYPE_ALIASES:
        data_type, column_type = _TYPE_ALIASES[data_type]
    nullable = not key and not any(_not_null(c.args.get("kind")) for c in constraints)
    return Column.from_mysql(definition.name, data_type, column_type, nullable, table=table)


def _not_null(kind: object) -> bool:
    # sqlglot reads an explicit ``NULL`` as NotNullColumnConstraint(allow_null=True)
    if isinstance(kind, exp.NotNullColumnConstraint):
        return not kind.args.get("allow_null")
    return isinstance(kind, exp.PrimaryKeyColumnConstraint)


def column_default(definition: exp.ColumnDef, column: Column) -> ColumnDefault | None:
    """What the server puts in an added column of the rows the table already has (None:
    NULL).

    >>> d = sqlglot.parse_one("ALTER TABLE t ADD c INT NOT NULL DEFAULT -3", read="mysql")
    >>> column_default(d.args["actions"][0], Column.from_mysql("c", "int", "int", False))
    ColumnDefault(kind=<DefaultKind.LITERAL: 'literal'>, text='-3', literal='-3')
    """
    default: exp.Expression | None = None
    for constraint in definition.args.get("constraints") or []:
        kind = constraint.args.get("kind")
        if isinstance(kind, exp.ComputedColumnConstraint):
            text = kind.this.sql(dialect="mysql")
            stored = bool(kind.args.get("persisted"))
            return ColumnDefault(DefaultKind.STORED if stored else DefaultKind.VIRTUAL, text)
        if isinstance(kind, exp.AutoIncrementColumnConstraint):
            return ColumnDefault(DefaultKind.AUTO_INCREMENT, "AUTO_INCREMENT")
        if isinstance(kind, exp.DefaultColumnConstraint):
            default = kind.this
    if default is None or isinstance(default, exp.Null):
        if column.nullable:
            return None
        return ColumnDefault(DefaultKind.IMPLICIT)
    text = default.sql(dialect="mysql")
    literal = _literal(default)
    if literal is None:
        return ColumnDefault(DefaultKind.EXPRESSION, text)
    return ColumnDefault(DefaultKind.LITERAL, text, literal)


def _literal(node: exp.Expression) -> str | None:
    """The value of a plain constant as text; None for anything the server computes (and
    strings with backslashes, whose meaning depends on the session's sql_mode)."""
    if isinstance(node, exp.Paren):
        return _literal(node.this)
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        inner = _literal(node.this)
        return None if inner is None or node.this.is_string else "-" + inner
    if isinstance(node, exp.Literal):
        value = str(node.this)
        return None if "\\" in value else value
    return None


_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_CHARACTER_TYPES = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})


def default_value(column: Column, literal: str) -> Any:
    """A literal DEFAULT in the decoder's value form (what the binlog row images carry),
    or ValueError where sparkcdc does not know how the server converts it (then the
    column is read back from the source instead).

    >>> default_value(Column.from_mysql("c", "decimal", "decimal(5,2)", True), "1.5")
    Decimal('1.50')
    >>> default_value(Column.from_mysql("c", "datetime", "datetime", True), "2024-01-02 03:04:05")
    datetime.datetime(2024, 1, 2, 3, 4, 5)
    """
    t = column.data_type
    if t in _INTEGER_TYPES:
        number = _number(literal)
        if number != number.to_integral_value():
            raise ValueError(f"{literal!r} is not an integer")  # the server rounds it
        return int(number)
    if t in ("decimal", "numeric"):
        scale = _decimal_scale(column.column_type)
        return _number(literal).quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP)
    if t in _CHARACTER_TYPES:
        return literal
    if t == "date":
        return dt.date.fromisoformat(literal)
    if t == "datetime" and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", literal):
        return dt.datetime.fromisoformat(literal)
    raise ValueError(f"no known conversion of {literal!r} to {column.column_type}")


def _number(literal: str) -> Decimal:
    try:
        return Decimal(literal.strip())
    except InvalidOperation:
        raise ValueError(f"{literal!r} is not a number") from None


def _decimal_scale(column_type: str) -> int:
    match = re.search(r"\(\s*\d+\s*,\s*(\d+)\s*\)", column_type)
    return int(match.group(1)) if match else 0


def _position(definition: exp.Expression) -> tuple[bool, str | None]:
    position = definition.args.get("position")
    if not isinstance(position, exp.ColumnPosition):
        return False, None
    if str(position.args.get("position", "")).upper() == "FIRST":
        return True, None
    return False, position.this.name if position.this is not None else None


def _alter_events(tree: exp.Alter, database: str, table: str) -> list[SchemaChangeEvent]:
    events: list[SchemaChangeEvent] = []
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            first, after = _position(action)
            column = column_from_def(action, table)
            events.append(AddColumn(column, first, after, column_default(action, column)))
        elif isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMN":
            events.extend(DropColumn(c.name) for c in action.args.get("tables") or [])
        elif isinstance(action, exp.RenameColumn):
            events.append(RenameColumn(action.this.name, action.args["to"].name))
        elif isinstance(action, exp.ModifyColumn):  # MODIFY, or CHANGE old new ...
            definition = action.this
            old = action.args.get("rename_from")
            if old is not None and old.name != definition.name:
                events.append(RenameColumn(old.name, definition.name))
            events.append(AlterColumnType(column_from_def(definition, table)))
        elif isinstance(action, exp.AlterRename):
            events.append(RenameTable(*_table_name(action.this, database)))
        elif isinstance(action, exp.Schema):  # ADD COLUMN (a INT, b INT)
            for definition in action.expressions:
                if isinstance(definition, exp.ColumnDef):
                    column = column_from_def(definition, table)
                    events.append(AddColumn(column, default=column_default(definition, column)))
    return events


def _create_table(
    tree: exp.Create, default_database: str, statement: str, schema_of: SchemaOf | None
) -> list[TableChange]:
    schema_node = tree.this
    if_not_exists = bool(tree.args.get("exists"))
    like = tree.find(exp.LikeProperty)
    if like is not None:
        database, table = _table_name(schema_node, default_database)
        like_database, like_table = _table_name(like.this, default_database)
        model = schema_of(like_database, like_table) if schema_of is not None else None
        if model is None:
            raise DdlParseError(
                f"cannot read DDL {statement!r}: the new table takes the columns of "
                f"{like_database}.{like_table}, whose schema the stream does not know (it is "
                "not a captured table)"
            )
        schema = replace(model, database=database, table=table)
        return [TableChange(database, table, CreateTable(schema, if_not_exists))]
    if not isinstance(schema_node, exp.Schema):
        # AS SELECT without a column list: in ROW format the server logs the columns instead
        raise DdlParseError(f"cannot read DDL {statement!r}: it does not list the table's columns")
    database, table = _table_name(schema_node, default_database)
    key: list[str] = []
    definitions: list[exp.ColumnDef] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            definitions.append(item)
            constraints = item.args.get("constraints") or []
            if any(
                isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint) for c in constraints
            ):
                key.append(item.name)
        elif isinstance(item, exp.PrimaryKey):
            key.extend(e.name for e in item.expressions)
    columns = tuple(column_from_def(d, table, key=d.name in key) for d in definitions)
    schema = TableSchema(database, table, columns, tuple(key))
    return [TableChange(database, table, CreateTable(schema, if_not_exists))]


def create_table_statement(schema: TableSchema) -> str:
    """A ``CREATE TABLE`` that :func:`parse_ddl` reads back as ``schema``.

    >>> from sparkcdc.model.schema import Column
    >>> s = TableSchema("db", "t", (Column.from_mysql("id", "int", "int(11)", False),), ("id",))
    >>> create_table_statement(s)
    'CREATE TABLE `db`.`t` (`id` int(11) NOT NULL, PRIMARY KEY (`id`))'
    """
    return create_table_sql(schema, quote_mysql, quote_mysql_table)


class MySqlDdl(SourceDdl):
    """The binlog's DDL statements as the MySQL source reads them (``MySqlDialect.ddl``):
    :func:`parse_ddl` with the source's ``treat-tinyint1-as-boolean.enabled``, literal
    defaults by :func:`default_value`, gh-ost and pt-osc tables by their names.

    >>> [c.event for c in MySqlDdl().parse("app", "ALTER TABLE t DROP COLUMN x")]
    [DropColumn(name='x')]
    >>> MySqlDdl().tool_table_of("_orders_gho")
    ('orders', True)
    """

    def __init__(self, *, tinyint1_as_boolean: bool = True) -> None:
        self.tinyint1_as_boolean = tinyint1_as_boolean

    def parse(
        self, database: str, statement: str, schema_of: SchemaOf | None = None
    ) -> list[TableChange]:
        return parse_ddl(
            database, statement, tinyint1_as_boolean=self.tinyint1_as_boolean, schema_of=schema_of
        )

    def default_value(self, column: Column, literal: str) -> Any:
        return default_value(column, literal)

    def tool_table_of(self, table: str) -> tuple[str, bool] | None:
        return tool_table_of(table)
