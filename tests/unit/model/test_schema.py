from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from sparkcdc.model.schema import (
    Column,
    TableSchema,
    spark_type_for,
    value_converter,
    with_tinyint1,
)

# (DATA_TYPE, COLUMN_TYPE, Spark type) — Flink CDC's MySQL type mapping
TYPE_MAP = [
    ("tinyint", "tinyint(1)", "BOOLEAN"),
    ("tinyint", "tinyint(4)", "TINYINT"),
    ("tinyint", "tinyint(3) unsigned", "SMALLINT"),
    ("smallint", "smallint(6)", "SMALLINT"),
    ("smallint", "smallint(5) unsigned", "INT"),
    ("mediumint", "mediumint(9)", "INT"),
    ("mediumint", "mediumint(8) unsigned", "INT"),
    ("int", "int(11)", "INT"),
    ("int", "int(10) unsigned", "BIGINT"),
    ("bigint", "bigint(20)", "BIGINT"),
    ("bigint", "bigint(20) unsigned", "DECIMAL(20,0)"),
    ("float", "float", "FLOAT"),
    ("double", "double", "DOUBLE"),
    ("decimal", "decimal(10,2)", "DECIMAL(10,2)"),
    ("decimal", "decimal(38,10)", "DECIMAL(38,10)"),
    ("decimal", "decimal(65,30)", "STRING"),
    ("bit", "bit(1)", "BOOLEAN"),
    ("bit", "bit(64)", "BINARY"),
    ("year", "year(4)", "INT"),
    ("date", "date", "DATE"),
    ("datetime", "datetime(6)", "TIMESTAMP_NTZ"),
    ("timestamp", "timestamp(3)", "TIMESTAMP"),
    ("time", "time(2)", "STRING"),
    ("varchar", "varchar(10)", "STRING"),
    ("longtext", "longtext", "STRING"),
    ("varbinary", "varbinary(5)", "BINARY"),
    ("blob", "blob", "BINARY"),
    ("enum", "enum('a','b')", "STRING"),
    ("set", "set('a','b')", "STRING"),
    ("json", "json", "STRING"),
    ("point", "point", "BINARY"),
    ("geometry", "geometry", "BINARY"),
]


@pytest.mark.parametrize(("data_type", "column_type", "expected"), TYPE_MAP)
def test_type_mapping(data_type: str, column_type: str, expected: str) -> None:
    assert spark_type_for(data_type, column_type) == expected


def test_an_unknown_type_is_binary_and_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # a column type added mid-stream must never stop the stream for good (issue 11)
    assert spark_type_for("vector", "vector(3)", where="app.t.v") == "BINARY"
    assert "app.t.v" in caplog.text and "vector(3)" in caplog.text


@pytest.mark.parametrize("data_type", ["uuid", "inet4", "inet6"])
def test_mariadb_plugin_types_are_text(data_type: str) -> None:
    assert spark_type_for(data_type, data_type) == "STRING"


CONVERSIONS = [
    ("tinyint", "tinyint(1)", 2, True),
    ("bit", "bit(1)", 1, True),
    ("bit", "bit(12)", 0xABC, b"\x0a\xbc"),
    ("bigint", "bigint(20) unsigned", 2**64 - 1, Decimal(2**64 - 1)),
    ("decimal", "decimal(65,30)", Decimal("-1.5"), "-1.5"),
    ("time", "time(6)", dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59.000000"),
    ("time", "time(6)", -dt.timedelta(hours=1, microseconds=5), "-01:00:00.000005"),
    ("time", "time(3)", dt.timedelta(seconds=45296, microseconds=500000), "12:34:56.500"),
    ("time", "time", -dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59"),
    ("enum", "enum('a')", "a", "a"),
]


@pytest.mark.parametrize(("data_type", "column_type", "raw", "expected"), CONVERSIONS)
def test_value_conversion(data_type: str, column_type: str, raw: object, expected: object) -> None:
    convert = value_converter(Column.from_mysql("c", data_type, column_type, True))
    assert convert is not None
    assert convert(raw) == expected


def test_plain_values_are_not_converted() -> None:
    assert value_converter(Column.from_mysql("c", "int", "int(11)", True)) is None


@pytest.mark.parametrize(
    ("column_type", "as_boolean", "expected"),
    [
        ("tinyint(1)", True, "BOOLEAN"),
        ("tinyint(1)", False, "TINYINT"),
        ("tinyint(1) unsigned", False, "SMALLINT"),
        ("tinyint(4)", True, "TINYINT"),
    ],
)
def test_treat_tinyint1_as_boolean(column_type: str, as_boolean: bool, expected: str) -> None:
    schema = TableSchema("db", "t", (Column.from_mysql("f", "tinyint", column_type, True),), ())
    typed = with_tinyint1(schema, as_boolean=as_boolean)
    assert typed.columns[0].spark_type == expected
    assert spark_type_for("tinyint", column_type, tinyint1_as_boolean=as_boolean) == expected
