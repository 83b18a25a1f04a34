"""The Arrow form of row values: what the snapshot's chunks and the stream's rows hold.

Every source gives row values in one form (the MySQL binlog decoder's: ints for integer,
YEAR and BIT columns; ``Decimal`` for DECIMAL; the float32 value for FLOAT; ``date`` /
naive ``datetime`` for DATE / DATETIME; aware UTC ``datetime`` for TIMESTAMP; ``timedelta``
for TIME; ``str`` for character, ENUM, SET and JSON columns; ``bytes`` for the rest), so a
chunk is an Arrow table whose ``to_pylist`` values equal the stream's.
"""

from __future__ import annotations

import re

import pyarrow as pa

from sparkcdc.model.schema import TEXT_TYPES, Column

_MAX_DECIMAL128 = 38
_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_TEXT_TYPES = TEXT_TYPES
# PostgreSQL's integer type names (pg_type.typname, a PostgreSQL column's data_type)
_POSTGRES_INTEGER_TYPES = {"int2", "int4", "int8"}


def is_integer(column: Column) -> bool:
    """Whether the column holds integers (MySQL's or PostgreSQL's type names): a chunk key
    of them is split evenly where its values are dense, and adjacent chunks read as one.

    >>> is_integer(Column("id", "int4", "integer", False, "INT"))
    True
    """
    return column.data_type in _INTEGER_TYPES or column.data_type in _POSTGRES_INTEGER_TYPES


def _decimal_precision(column: Column) -> tuple[int, int]:
    match = re.search(r"\((\d+)(?:\s*,\s*(\d+))?\)", column.column_type)
    if not match:
        return 10, 0
    return int(match.group(1)), int(match.group(2) or 0)


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type of a column's decoder-form values.

    >>> arrow_type(Column.from_mysql("c", "bigint", "bigint(20) unsigned", True))
    DataType(uint64)
    """
    t = column.data_type
    if t in _INTEGER_TYPES:
        if t == "bigint" and "unsigned" in column.column_type:
            return pa.uint64()
        return pa.int64()
    if t == "bit":
        return pa.uint64()
    if t == "float":
        return pa.float32()
    if t in ("double", "real"):
        return pa.float64()
    if t in ("decimal", "numeric"):
        precision, scale = _decimal_precision(column)
        if precision > _MAX_DECIMAL128:
            return pa.decimal256(precision, scale)
        return pa.decimal128(precision, scale)
    if t == "date":
        return pa.date32()
    if t == "datetime":
        return pa.timestamp("us")
    if t == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if t == "time":
        return pa.duration("us")
    if t in _TEXT_TYPES:
        return pa.string()
    return pa.binary()


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(c)) for c in columns])
