"""The source interface's registry and the MySQL dialect's parts that need no server."""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.model.dialect import RangeRead, SourceDialect, dialect_class, dialect_for
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column
from sparkcdc.model.schema_change import CreateTable, SchemaOf, SourceDdl, TableChange
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.dialect import MySqlDialect

OPTIONS = {
    "hostname": "db",
    "port": "3307",
    "username": "u",
    "password": "p",
    "database-name": "a",
    "scan.startup.mode": "latest-offset",
}


def test_the_registry_finds_the_mysql_source_by_its_type_name() -> None:
    cls = dialect_class("mysql-cdc")
    assert cls is MySqlDialect
    assert issubclass(cls, SourceDialect)
    assert cls.type_name == "mysql-cdc"


def test_an_unknown_source_type_names_the_closest_valid_one() -> None:
    with pytest.raises(
        ConfigError, match=r"source.type: unknown source type 'mysql-cd'.*mysql-cdc"
    ):
        dialect_class("mysql-cd")


def test_a_dialect_travels_to_executors_without_a_connection() -> None:
    dialect = dialect_for(SourceOptions.from_options(OPTIONS))
    copy = pickle.loads(pickle.dumps(dialect))
    assert isinstance(copy, MySqlDialect)
    assert copy.settings == dialect.settings
    assert copy.settings.endpoint == "db:3307"


def test_positions_round_trip_through_the_dialect() -> None:
    dialect = dialect_for(SourceOptions.from_options(OPTIONS))
    position = BinlogPosition("mysql-bin.000002", 1234)
    assert dialect.position_from_offset(position.to_offset()) == position


def test_a_range_read_is_a_picklable_spec_of_its_tables() -> None:
    spec = RangeRead(
        BinlogPosition("b.000001", 4),
        BinlogPosition("b.000001", 900),
        6401,
        frozenset({("app", "t")}),
        gone=frozenset({("app", "old")}),
        share=1,
        shares=2,
    )
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert spec.captures("app", "t")
    assert not spec.captures("app", "old")  # its DDL is read, its rows are not


def test_whether_rows_decode_compiled_is_the_sources_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source without a compiled decoder keeps the interface's default; the MySQL source
    says whether its kernel is built here (a parallel read's share depends on it)."""
    dialect = dialect_for(SourceOptions.from_options(OPTIONS))
    assert SourceDialect.compiled_rows(dialect) is False
    for built in (True, False):
        monkeypatch.setattr(arrowrows, "COMPILED", built)
        monkeypatch.setattr(arrowrows, "_announced", True)
        assert dialect.compiled_rows() is built


def test_the_dialect_reads_ddl_as_its_options_type_tinyint1_columns() -> None:
    statement = "CREATE TABLE t (id INT PRIMARY KEY, flag TINYINT(1))"

    def flag_type(options: dict[str, str]) -> str:
        (change,) = dialect_for(SourceOptions.from_options(options)).ddl().parse("a", statement)
        assert isinstance(change.event, CreateTable)
        return change.event.schema.columns[1].spark_type

    assert flag_type(OPTIONS) == "BOOLEAN"
    assert flag_type({**OPTIONS, "treat-tinyint1-as-boolean.enabled": "false"}) == "TINYINT"


def test_online_schema_change_tables_are_the_mysql_sources_own() -> None:
    class NoTools(SourceDdl):
        def parse(
            self, database: str, statement: str, schema_of: SchemaOf | None = None
        ) -> list[TableChange]:
            return []

        def default_value(self, column: Column, literal: str) -> Any:
            raise ValueError(literal)

    assert NoTools().tool_table_of("_t_gho") is None  # a source whose tools make none
    ddl = dialect_for(SourceOptions.from_options(OPTIONS)).ddl()
    assert ddl.tool_table_of("_t_gho") == ("t", True)
    assert ddl.tool_table_of("t") is None


def test_a_literal_default_is_read_as_the_streams_rows_carry_it() -> None:
    ddl = dialect_for(SourceOptions.from_options(OPTIONS)).ddl()
    assert ddl.default_value(Column.from_mysql("d", "decimal", "decimal(5,2)", True), "1.5") == (
        Decimal("1.50")
    )
    with pytest.raises(ValueError):
        ddl.default_value(Column.from_mysql("n", "int", "int(11)", True), "1.5")


def test_verify_pushes_down_only_where_the_source_has_canonical_forms() -> None:
    dialect = dialect_for(SourceOptions.from_options(OPTIONS))
    column = Column.from_mysql("n", "bigint", "bigint(20)", False)
    assert dialect.canonical_value(column, "BIGINT") == "CAST(`n` AS CHAR)"
    # the interface's default: no forms, so verify reads the rows into Spark
    assert SourceDialect.canonical_value(dialect, column, "BIGINT") is None


def test_a_mysql_server_keeps_nothing_for_the_reader_alone() -> None:
    """``sparkcdc status`` shows what a source's server keeps for the pipeline (PostgreSQL:
    its slot, tests/integration/test_postgres_dialect.py); the binlog expires by the
    server's own settings: nothing to show, and no connection made (host ``db`` is none)."""
    assert dialect_for(SourceOptions.from_options(OPTIONS)).stream_hold() is None


def test_a_mysql_source_has_nothing_to_clean_up() -> None:
    """``sparkcdc cleanup`` drops a PostgreSQL slot (tests/integration/test_postgres_ops.py);
    a MySQL server keeps nothing for a reader: nothing dropped, no connection made."""
    assert dialect_for(SourceOptions.from_options(OPTIONS)).release_stream() == [
        "the mysql-cdc source's server keeps nothing for a reader: nothing to drop"
    ]
