"""DDL statements → schema change events, table-driven (sqlglot's validate_all style)."""

from __future__ import annotations

import pytest

from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.schema_change import (
    AddColumn,
    AlterColumnType,
    CreateTable,
    DropColumn,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChangeEvent,
    TableChange,
    TruncateTable,
)
from sparkcdc.mysql.ddl import DdlParseError, parse_ddl


def col(name: str, data_type: str, column_type: str, nullable: bool = True) -> Column:
    return Column.from_mysql(name, data_type, column_type, nullable)


def on(table: str, *events: SchemaChangeEvent, db: str = "app") -> list[TableChange]:
    return [TableChange(db, table, e) for e in events]


CASES: list[tuple[str, list[TableChange]]] = [
    (
        "ALTER TABLE t ADD COLUMN c INT UNSIGNED NOT NULL DEFAULT 0 AFTER b",
        on("t", AddColumn(col("c", "int", "int unsigned", False), after="b")),
    ),
    (
        "ALTER TABLE `db`.`t` ADD c TINYINT(1) FIRST, ADD COLUMN d DECIMAL(10, 2)",
        on(
            "t",
            AddColumn(col("c", "tinyint", "tinyint(1)"), first=True),
            AddColumn(col("d", "decimal", "decimal(10,2)")),
            db="db",
        ),
    ),
    (
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS x BOOL",
        on("t", AddColumn(col("x", "tinyint", "tinyint(1)"))),
    ),
    ("ALTER TABLE t DROP COLUMN c, DROP d", on("t", DropColumn("c"), DropColumn("d"))),
    ("ALTER TABLE t DROP COLUMN IF EXISTS x", on("t", DropColumn("x"))),
    ("ALTER TABLE t RENAME COLUMN a TO b", on("t", RenameColumn("a", "b"))),
    (
        "ALTER TABLE t CHANGE a b BIGINT NOT NULL",
        on("t", RenameColumn("a", "b"), AlterColumnType(col("b", "bigint", "bigint", False))),
    ),
    (
        "ALTER TABLE t CHANGE COLUMN a a DATETIME(3)",
        on("t", AlterColumnType(col("a", "datetime", "datetime(3)"))),
    ),
    (
        "ALTER TABLE t MODIFY a BIGINT UNSIGNED",
        on("t", AlterColumnType(col("a", "bigint", "bigint unsigned"))),
    ),
    ("ALTER ONLINE TABLE t ADD COLUMN x JSON", on("t", AddColumn(col("x", "json", "json")))),
    ("/* by a tool */ ALTER TABLE t DROP COLUMN x", on("t", DropColumn("x"))),
    ("TRUNCATE TABLE t", on("t", TruncateTable())),
    ("TRUNCATE t", on("t", TruncateTable())),
    ("DROP TABLE IF EXISTS t, other.u", on("t", DropTable()) + on("u", DropTable(), db="other")),
    (
        "RENAME TABLE a TO b, db.c TO `d`",
        on("a", RenameTable("app", "b")) + on("c", RenameTable("app", "d"), db="db"),
    ),
    ("ALTER TABLE a RENAME TO b", on("a", RenameTable("app", "b"))),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, b BIT(3), c TIMESTAMP, KEY k (c)) ENGINE=InnoDB",
        on(
            "t",
            CreateTable(
                TableSchema(
                    "app",
                    "t",
                    (
                        col("id", "int", "int", False),
                        col("b", "bit", "bit(3)"),
                        col("c", "timestamp", "timestamp"),
                    ),
                    ("id",),
                )
            ),
        ),
    ),
    (
        "CREATE TABLE IF NOT EXISTS t2 (a INT, b VARCHAR(5), PRIMARY KEY (a, b))",
        on(
            "t2",
            CreateTable(
                TableSchema(
                    "app",
                    "t2",
                    (col("a", "int", "int", False), col("b", "varchar", "varchar(5)", False)),
                    ("a", "b"),
                )
            ),
        ),
    ),
    ("ALTER TABLE t ADD INDEX i (a)", []),
    ("ALTER TABLE t ENGINE=InnoDB", []),
    ("ALTER TABLE t COMMENT 'x'", []),
    ("CREATE TABLE t3 LIKE t", []),
]


@pytest.mark.parametrize(("statement", "expected"), CASES, ids=[c[0][:50] for c in CASES])
def test_statement_events(statement: str, expected: list[TableChange]) -> None:
    assert parse_ddl("app", statement) == expected


def test_spark_types_of_added_columns() -> None:
    changes = parse_ddl(
        "app", "ALTER TABLE t ADD a INT UNSIGNED, ADD b BIT(3), ADD c ENUM('x','y')"
    )
    assert [c.event.column.spark_type for c in changes if isinstance(c.event, AddColumn)] == [
        "BIGINT",
        "BINARY",
        "STRING",
    ]


def test_a_statement_sqlglot_cannot_read_names_itself() -> None:
    statement = "ALTER TABLE t ADD COLUMN g POINT"
    with pytest.raises(DdlParseError, match=r"cannot parse DDL .*ADD COLUMN g POINT"):
        parse_ddl("app", statement)
