"""A table without Spark SQL in its transform is planned without Spark (``sparkcdc validate``
starts no JVM for it): its sink columns must be the very types Spark gives its change rows."""

from __future__ import annotations

from typing import Any

import pytest

from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.pipeline.change_frames import source_changes, text_rows
from sparkcdc.pipeline.config import TransformRule
from sparkcdc.pipeline.routes import sink_frame
from sparkcdc.pipeline.transforms import apply_transform
from sparkcdc.sinks.base import spark_type_name

pytestmark = pytest.mark.integration

# one column of each way a MySQL type maps to Spark (model/schema.py's spark_type_for)
COLUMNS = [
    ("tinyint", "tinyint(4)"),
    ("tinyint", "tinyint(3) unsigned"),
    ("tinyint", "tinyint(1)"),
    ("smallint", "smallint(6)"),
    ("mediumint", "mediumint(9) unsigned"),
    ("int", "int(11)"),
    ("int", "int(10) unsigned"),
    ("bigint", "bigint(20)"),
    ("bigint", "bigint(20) unsigned"),
    ("decimal", "decimal(10,2)"),
    ("decimal", "decimal(65,30)"),
    ("float", "float"),
    ("double", "double"),
    ("bit", "bit(1)"),
    ("bit", "bit(12)"),
    ("year", "year(4)"),
    ("date", "date"),
    ("datetime", "datetime(6)"),
    ("timestamp", "timestamp(3)"),
    ("time", "time(2)"),
    ("varchar", "varchar(10)"),
    ("text", "text"),
    ("json", "longtext"),
    ("enum", "enum('a','b')"),
    ("set", "set('a','b')"),
    ("varbinary", "varbinary(8)"),
    ("blob", "blob"),
    ("uuid", "uuid"),
]


def test_source_columns_are_typed_without_spark_as_spark_types_them(spark: Any) -> None:
    columns = tuple(
        Column.from_mysql(f"c{i}_{t}", t, ct, i > 0) for i, (t, ct) in enumerate(COLUMNS)
    )
    schema = TableSchema("db", "t", columns, (columns[0].name,))
    keys_only = TransformRule(**{"source-table": "db.t", "primary-keys": columns[1].name})
    analysed = apply_transform(
        source_changes(text_rows(spark, []), schema), None, schema.column_names
    )
    by_spark = [
        (f.name, spark_type_name(f.dataType))
        for f in analysed.schema.fields
        if f.name not in METADATA_COLUMNS
    ]
    for rule in (None, keys_only):
        planned = sink_frame(None, "db.t", [(schema, rule)])
        assert [(c.name, c.spark_type) for c in planned.columns] == by_spark
