"""Spark's types as Arrow types, and decoder-form Arrow values cast to them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.model.schema import Column, spark_decimal, value_converter

BATCH_ROWS = 8192

_SIMPLE_ARROW = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"),
}


def arrow_type(spark_ddl_type: str) -> pa.DataType:
    """The Arrow type Spark reads as the given Spark DDL type.

    >>> arrow_type("DECIMAL(20,0)")
    Decimal128Type(decimal128(20, 0))
    """
    decimal = spark_decimal(spark_ddl_type)
    if decimal:
        return pa.decimal128(*decimal)
    return _SIMPLE_ARROW[spark_ddl_type]


def record_batch(rows: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Transpose rows into one Arrow record batch of ``schema``."""
    columns = list(zip(*rows, strict=True))
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def spark_column(values: pa.Array, column: Column, target: pa.DataType) -> pa.Array:
    """Decoder-form Arrow values of ``column`` as the Arrow type Spark reads."""
    if values.type == target and column.spark_type == "STRING":
        return values  # text already (ENUM, SET, JSON read as text need no Python pass)
    if column.spark_type == "BOOLEAN" and pa.types.is_integer(values.type):
        return pc.not_equal(values, 0)
    convert = value_converter(column)
    if convert is None or column.spark_type.startswith("DECIMAL"):
        try:
            return values.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if convert is None:
        return pa.array(values.to_pylist(), type=target)
    return pa.array([None if v is None else convert(v) for v in values.to_pylist()], type=target)
