"""Spark DDL types as MySQL / MariaDB and PostgreSQL column types, and values back."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sparkcdc.errors import SinkError
from sparkcdc.sinks.jdbc.options import Family

# Spark DDL type -> (MySQL / MariaDB, PostgreSQL). DECIMAL(p,s) maps to itself in both.
TYPE_MAP: dict[str, tuple[str, str]] = {
    "BOOLEAN": ("BOOLEAN", "boolean"),
    "TINYINT": ("TINYINT", "smallint"),  # PostgreSQL has no one-byte integer
    "SMALLINT": ("SMALLINT", "smallint"),
    "INT": ("INT", "integer"),
    "BIGINT": ("BIGINT", "bigint"),
    "FLOAT": ("FLOAT", "real"),
    "DOUBLE": ("DOUBLE", "double precision"),
    "STRING": ("LONGTEXT", "text"),
    "BINARY": ("LONGBLOB", "bytea"),
    "DATE": ("DATE", "date"),
    # MySQL's TIMESTAMP ends in 2038 and shifts by the session time zone: store the UTC
    # wall time in a DATETIME instead.
    "TIMESTAMP": ("DATETIME(6)", "timestamp(6) with time zone"),
    "TIMESTAMP_NTZ": ("DATETIME(6)", "timestamp(6) without time zone"),
}
# InnoDB cannot index TEXT / BLOB without a prefix length, and a key is at most 3072 bytes:
# key columns get a bounded type (255 utf8mb4 characters = 1020 bytes, so up to three string
# columns fit in one key). Binary collation: keys compare as Spark compares them ('a' != 'A').
MYSQL_KEY_TYPES = {
    "STRING": "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    "BINARY": "VARBINARY(255)",
}
# other spellings Spark's DDL parser accepts
_ALIASES = {
    "BYTE": "TINYINT",
    "SHORT": "SMALLINT",
    "INTEGER": "INT",
    "LONG": "BIGINT",
    "REAL": "FLOAT",
    "TIMESTAMP_LTZ": "TIMESTAMP",
}
_DECIMAL_RE = re.compile(r"^(?:DECIMAL|DEC|NUMERIC)(?:\((\d+)(?:,(\d+))?\))?$")


def target_type(spark_type: str, family: Family, *, key: bool = False, where: str = "") -> str:
    """The target column type of a Spark DDL type.

    >>> target_type("DECIMAL(10,2)", "postgresql")
    'numeric(10,2)'
    >>> target_type("STRING", "mysql", key=True)
    'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin'
    """
    name = re.sub(r"\s+", "", spark_type).upper()
    name = _ALIASES.get(name, name)
    decimal = _DECIMAL_RE.match(name)
    if decimal:
        precision, scale = int(decimal.group(1) or 10), int(decimal.group(2) or 0)
        return f"{'DECIMAL' if family == 'mysql' else 'numeric'}({precision},{scale})"
    if family == "mysql" and key and name in MYSQL_KEY_TYPES:
        return MYSQL_KEY_TYPES[name]
    if name not in TYPE_MAP:
        raise SinkError(
            f"jdbc sink: column {where or '?'} has Spark type {spark_type}, which has no "
            f"{family} column type here; supported: {', '.join([*TYPE_MAP, 'DECIMAL(p,s)'])}. "
            "Cast it in a transform (e.g. to STRING)"
        )
    return TYPE_MAP[name][0 if family == "mysql" else 1]


def utc_wall_time(value: Any) -> Any:
    """An aware datetime as naive UTC (MySQL DATETIME has no zone); None stays None."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def spark_value(spark_type: str) -> Callable[[Any], Any]:
    """How a value a target driver returns becomes the Spark value of ``spark_type``."""
    if spark_type == "BOOLEAN":
        return bool
    if spark_type == "BINARY":
        return bytes
    if spark_type == "TIMESTAMP":
        return lambda v: v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    return lambda v: v
