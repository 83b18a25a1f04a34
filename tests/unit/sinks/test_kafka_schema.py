"""The Kafka sink's Kafka Connect declarations, by Spark type and, where the column's
source is known, by MySQL type as Debezium's MySQL connector declares them."""

from __future__ import annotations

from typing import Any

import pytest

from sparkcdc.model.schema import Column
from sparkcdc.sinks.base import SinkColumn, SinkTable
from sparkcdc.sinks.kafka.connect_schema import debezium_schema, key_schema


def _source(data_type: str, column_type: str, nullable: bool = True) -> Column:
    return Column.from_mysql("c", data_type, column_type, nullable)


def _declared(column: SinkColumn) -> dict[str, Any]:
    table = SinkTable("db.t", (SinkColumn("id", "INT", False), column), ("id",), ("db.t",))
    after = debezium_schema(table)["fields"][1]
    assert after["field"] == "after"
    field: dict[str, Any] = after["fields"][1]
    assert field.pop("field") == "c"
    return field


def _of(data_type: str, column_type: str, nullable: bool = True) -> SinkColumn:
    source = _source(data_type, column_type, nullable)
    return SinkColumn("c", source.spark_type, source=source)


DEBEZIUM = {"version": 1}


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        # by MySQL type (the source known)
        (
            _of("datetime", "datetime"),
            {"type": "int64", "name": "io.debezium.time.Timestamp", **DEBEZIUM},
        ),
        (
            _of("datetime", "datetime(3)"),
            {"type": "int64", "name": "io.debezium.time.Timestamp", **DEBEZIUM},
        ),
        (
            _of("datetime", "datetime(4)"),
            {"type": "int64", "name": "io.debezium.time.MicroTimestamp", **DEBEZIUM},
        ),
        (
            _of("time", "time"),
            {"type": "int64", "name": "io.debezium.time.MicroTime", **DEBEZIUM},
        ),
        (_of("year", "year(4)"), {"type": "int32", "name": "io.debezium.time.Year", **DEBEZIUM}),
        (
            _of("enum", "enum('a','it''s','x,y')"),
            {
                "type": "string",
                "name": "io.debezium.data.Enum",
                **DEBEZIUM,
                "parameters": {"allowed": "a,it's,x,y"},
            },
        ),
        (
            _of("set", "set('r','w')"),
            {
                "type": "string",
                "name": "io.debezium.data.EnumSet",
                **DEBEZIUM,
                "parameters": {"allowed": "r,w"},
            },
        ),
        (_of("json", "json"), {"type": "string", "name": "io.debezium.data.Json", **DEBEZIUM}),
        (
            _of("timestamp", "timestamp(6)"),
            {"type": "string", "name": "io.debezium.time.ZonedTimestamp", **DEBEZIUM},
        ),
        (_of("varchar", "varchar(5)"), {"type": "string"}),
        (_of("bigint", "bigint(20)"), {"type": "int64"}),
        # by Spark type (a computed column, or merged sources that differ)
        (
            SinkColumn("c", "TIMESTAMP_NTZ"),
            {"type": "int64", "name": "io.debezium.time.MicroTimestamp", **DEBEZIUM},
        ),
        (SinkColumn("c", "STRING"), {"type": "string"}),
        (SinkColumn("c", "INT"), {"type": "int32"}),
    ],
)
def test_declared_type(column: SinkColumn, expected: dict[str, Any]) -> None:
    declared = _declared(column)
    assert declared.pop("optional") is True
    assert declared == expected


@pytest.mark.parametrize(
    ("column", "optional"),
    [
        (_of("int", "int(11)", nullable=False), False),  # NOT NULL, every row holds it
        (_of("int", "int(11)", nullable=True), True),
        (SinkColumn("c", "INT"), True),  # not known to hold a NOT NULL column's values
    ],
)
def test_not_null_source_columns_are_required(column: SinkColumn, optional: bool) -> None:
    assert _declared(column)["optional"] is optional


def test_key_columns_are_required_in_value_and_key_schemas() -> None:
    table = SinkTable(
        "db.t",
        (
            SinkColumn("id", "INT"),
            SinkColumn("at", "TIMESTAMP_NTZ", source=_source("datetime", "datetime(3)")),
        ),
        ("at", "id"),
        ("db.t",),
    )
    value = {f["field"]: f for f in debezium_schema(table)["fields"][1]["fields"]}
    assert not value["id"]["optional"] and not value["at"]["optional"]
    key = key_schema(table)
    assert [f["field"] for f in key["fields"]] == ["at", "id"]  # the key's order
    assert key["fields"][0]["name"] == "io.debezium.time.Timestamp"
    assert key["optional"] is False
