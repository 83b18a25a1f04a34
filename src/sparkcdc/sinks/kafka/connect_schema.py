"""Kafka Connect JSON schemas of message keys and debezium-json values
(``debezium-json.include-schema.enabled``), with the types Debezium's MySQL connector declares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkcdc.model.schema import fraction_digits, spark_decimal
from sparkcdc.mysql.binlog.metadata_from_schema import labels as enum_labels
from sparkcdc.sinks.base import SinkColumn, SinkTable

# Kafka Connect schemas of the values as JsonEncoding(schemas=True) writes them; the types
# Debezium's MySQL connector declares (time.precision.mode=adaptive_time_microseconds,
# decimal.handling.mode=precise)
_CONNECT_TYPES = {
    "BOOLEAN": "boolean",
    "TINYINT": "int16",  # Debezium: TINYINT is INT16
    "SMALLINT": "int16",
    "INT": "int32",
    "BIGINT": "int64",
    "FLOAT": "float",
    "DOUBLE": "double",
    "BINARY": "bytes",
    "STRING": "string",
}


def connect_field(column: SinkColumn, optional: bool) -> dict[str, Any]:
    """The Kafka Connect schema of one column, as a struct field.

    >>> connect_field(SinkColumn("n", "DECIMAL(20,0)"), True)["parameters"]
    {'scale': '0', 'connect.decimal.precision': '20'}
    """
    field: dict[str, Any] = {"field": column.name}
    spark_type = column.spark_type
    decimal = spark_decimal(spark_type)
    logical = source_logical(column)
    if logical is not None:
        field |= logical
    elif decimal:
        precision, scale = decimal
        field |= {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
        }
    elif spark_type == "DATE":
        field |= {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
    elif spark_type == "TIMESTAMP_NTZ":  # DATETIME: microseconds since the epoch, no zone
        field |= {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}
    elif spark_type == "TIMESTAMP":  # an instant: ISO-8601 in UTC
        field |= {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
    else:
        field["type"] = _CONNECT_TYPES.get(spark_type, "string")
    field["optional"] = optional
    return field


def _struct(name: str, table: SinkTable, columns: Sequence[SinkColumn]) -> dict[str, Any]:
    return {
        "type": "struct",
        "name": name,
        "optional": True,
        "fields": [connect_field(c, _optional(c, table)) for c in columns],
    }


def _optional(column: SinkColumn, table: SinkTable) -> bool:
    """Whether a value of ``column`` may be null: not a key column, and not every row's
    value a NOT NULL source column's (see :func:`sparkcdc.pipeline.batch_writer.described`)."""
    required = column.source is not None and not column.source.nullable
    return column.nullable and column.name not in table.primary_key and not required


def source_logical(column: SinkColumn) -> dict[str, Any] | None:
    """Debezium's declaration of a column by its MySQL type where it differs from the one
    its Spark type gives (None: declared by Spark type, or the source is not known).

    >>> from sparkcdc.model.schema import Column
    >>> at = Column.from_mysql("at", "datetime", "datetime(3)", True)
    >>> source_logical(SinkColumn("at", "TIMESTAMP_NTZ", source=at))["name"]
    'io.debezium.time.Timestamp'
    >>> e = Column.from_mysql("e", "enum", "enum('a','b,c')", True)
    >>> source_logical(SinkColumn("e", "STRING", source=e))["parameters"]
    {'allowed': 'a,b,c'}
    """
    source = column.source
    if source is None:
        return None
    kind = source.data_type
    if kind == "datetime" and fraction_digits(source.column_type) <= 3:
        return {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}
    if kind == "time":
        return {"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1}
    if kind == "year":
        return {"type": "int32", "name": "io.debezium.time.Year", "version": 1}
    if kind in ("enum", "set"):
        return {
            "type": "string",
            "name": "io.debezium.data.Enum" if kind == "enum" else "io.debezium.data.EnumSet",
            "version": 1,
            "parameters": {"allowed": ",".join(enum_labels(source.column_type))},
        }
    if kind == "json":
        return {"type": "string", "name": "io.debezium.data.Json", "version": 1}
    return None


def key_schema(table: SinkTable) -> dict[str, Any]:
    """The Kafka Connect JSON schema of a message key (the primary-key columns)."""
    return {**_struct(f"{table.name}.Key", table, table.key_columns), "optional": False}


def debezium_schema(table: SinkTable) -> dict[str, Any]:
    """The Kafka Connect JSON schema of a debezium-json message of ``table``.

    >>> t = SinkTable("db.t", (SinkColumn("id", "INT", False),), ("id",), ())
    >>> debezium_schema(t)["fields"][0]["fields"]
    [{'field': 'id', 'type': 'int32', 'optional': False}]
    """

    def image(name: str) -> dict[str, Any]:
        return {"field": name, **_struct(f"{table.name}.Value", table, table.columns)}

    def plain(name: str, kind: str, optional: bool) -> dict[str, Any]:
        return {"field": name, "type": kind, "optional": optional}

    source = {
        "field": "source",
        "type": "struct",
        "name": "io.debezium.connector.mysql.Source",
        "optional": False,
        "fields": [
            plain("db", "string", True),
            plain("table", "string", False),
            plain("ts_ms", "int64", True),
        ],
    }
    return {
        "type": "struct",
        "name": f"{table.name}.Envelope",
        "optional": False,
        "fields": [
            image("before"),
            image("after"),
            plain("op", "string", False),
            source,
            plain("ts_ms", "int64", False),
        ],
    }
