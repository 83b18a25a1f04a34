"""A table's transform, as Flink CDC 3.x has it: filter on the source row, then projection,
both Spark SQL, with Flink CDC's metadata columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkcdc.model.changelog import DATABASE, METADATA_COLUMNS, OP, OP_TS, TABLE
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.text import split_top_level
from sparkcdc.pipeline.config import TransformRule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# Flink CDC 3.x transform metadata columns (op_ts as epoch milliseconds, as Flink has it)
TRANSFORM_METADATA = (
    "__namespace_name__",
    "__schema_name__",
    "__table_name__",
    "__data_event_type__",
    "op_ts",
)


def apply_transform(
    changes: DataFrame, rule: TransformRule | None, data_columns: Sequence[str]
) -> DataFrame:
    """The rule's filter then projection (``*`` = the source columns), as Flink CDC 3.x:

    - an item that names a column ``*`` also gives (``*, UPPER(name) AS name``) replaces
      that column: ``*`` stands for the source columns no other item defines;
    - the filter sees the source row and the columns the projection computes under new
      names (``projection: id, UPPER(city) AS city_uc`` / ``filter: city_uc = 'OSLO'``);
      a name that is both (a redefined source column) means the source column there.

    Both are Spark SQL and may use the metadata columns ``__namespace_name__`` (NULL for
    MySQL), ``__schema_name__`` (the database), ``__table_name__``, ``__data_event_type__``
    (``+I``/``-U``/``+U``/``-D``) and ``op_ts`` (epoch milliseconds; NULL for snapshot rows).
    """
    from pyspark.sql import functions as F

    if rule is None or (rule.filter is None and rule.projection is None):
        return changes
    with_meta = changes.select(
        "*",
        F.lit(None).cast("string").alias("__namespace_name__"),
        F.col(DATABASE).alias("__schema_name__"),
        F.col(TABLE).alias("__table_name__"),
        F.col(OP).alias("__data_event_type__"),
        F.unix_millis(F.col(OP_TS)).alias("op_ts"),
    )
    if not rule.projection:
        if rule.filter:
            with_meta = with_meta.where(F.expr(rule.filter))
        return with_meta.select(*METADATA_COLUMNS, *[quote_spark(c) for c in data_columns])
    items = [item.strip() for item in split_top_level(rule.projection)]
    named = {i: with_meta.selectExpr(i).columns[0] for i in items if i != "*"}
    existing = {c.lower() for c in with_meta.columns}
    computed = {i: n for i, n in named.items() if n.lower() not in existing}
    if computed:  # evaluated once, visible to the filter
        with_meta = with_meta.selectExpr("*", *computed)
    if rule.filter:
        with_meta = with_meta.where(F.expr(rule.filter))
    defined = {n.lower() for n in named.values()}
    columns: list[str] = []
    for item in items:
        if item == "*":
            columns.extend(quote_spark(c) for c in data_columns if c.lower() not in defined)
        elif item in computed:
            columns.append(quote_spark(computed[item]))
        else:
            columns.append(item)
    return with_meta.selectExpr(*METADATA_COLUMNS, *columns)


def passes_through(rule: TransformRule | None, columns: Sequence[str]) -> bool:
    """Whether ``rule``'s projection gives each of ``columns`` the source column of that
    name unchanged: no projection, or the column listed by name or in ``*`` and not
    redefined by another item.

    >>> from sparkcdc.pipeline.config import TransformRule
    >>> rule = TransformRule(**{"source-table": "a.t", "projection": "*, id + 1 AS n"})
    >>> passes_through(rule, ["id"]), passes_through(rule, ["n"])
    (True, False)
    """
    if rule is None or not rule.projection:
        return True
    items = [item.strip() for item in split_top_level(rule.projection)]
    for column in columns:
        plain = {column.lower(), f"`{column.lower()}`"}
        named = any(i.lower() in plain for i in items) or "*" in items
        redefined = any(
            re.search(rf"\bAS\s+`?{re.escape(column)}`?\s*$", i, re.IGNORECASE) for i in items
        )
        if not named or redefined:
            return False
    return True


def is_spark_sql(rule: TransformRule | None) -> bool:
    """Whether ``rule`` holds Spark SQL (a projection or a filter): only Spark can tell
    the columns and types it gives. Routing and ``primary-keys`` alone need no Spark.

    >>> is_spark_sql(TransformRule(**{"source-table": "a.t", "primary-keys": "id"}))
    False
    """
    return rule is not None and bool(rule.projection or rule.filter)
