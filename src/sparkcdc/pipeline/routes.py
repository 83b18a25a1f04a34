"""Which sink table each captured table goes to, transformed how, and the sink tables
that routes merge source tables into (their columns widened to hold every member's
values): decided once before the stream starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcdc.errors import ConfigError
from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.model.schema import TableSchema, spark_decimal
from sparkcdc.pipeline.change_frames import source_changes, text_rows
from sparkcdc.pipeline.config import PipelineConfig, TransformRule
from sparkcdc.pipeline.transforms import apply_transform, is_spark_sql
from sparkcdc.sinks.base import SinkColumn, SinkTable, spark_error_text, spark_type_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SourceTablePlan:
    """One captured source table: its schema, where it goes, how it is transformed."""

    schema: TableSchema
    sink_table: str
    transform: TransformRule | None


@dataclass(frozen=True)
class PipelinePlan:
    """Every captured table and every sink table, decided once before the stream starts."""

    sources: tuple[SourceTablePlan, ...]
    sink_tables: tuple[SinkTable, ...]
    # the source's scan.parse.online.schema.changes.enabled
    online_schema_changes: bool = False

    def sources_of(self, sink_table: SinkTable) -> tuple[SourceTablePlan, ...]:
        return tuple(s for s in self.sources if s.sink_table == sink_table.name)


_INTEGRAL = ["TINYINT", "SMALLINT", "INT", "BIGINT"]

_INTEGRAL_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}


def widest_type(a: str, b: str) -> str:
    """The type that holds values of both (Flink CDC merges sharded tables this way).

    >>> widest_type("INT", "BIGINT"), widest_type("DECIMAL(10,2)", "INT"), widest_type("DATE", "X")
    ('BIGINT', 'DECIMAL(12,2)', 'STRING')
    """
    if a == b:
        return a
    if a in _INTEGRAL and b in _INTEGRAL:
        return max(a, b, key=_INTEGRAL.index)

    def decimal(t: str) -> tuple[int, int] | None:
        if t in _INTEGRAL_DIGITS:
            return _INTEGRAL_DIGITS[t], 0
        return spark_decimal(t)

    da, db = decimal(a), decimal(b)
    if da and db:
        scale = max(da[1], db[1])
        digits = max(da[0] - da[1], db[0] - db[1])
        return f"DECIMAL({min(38, digits + scale)},{scale})"
    numeric = {"FLOAT", "DOUBLE"}
    if (a in numeric or da) and (b in numeric or db):
        return "DOUBLE"
    if {a, b} == {"TIMESTAMP", "TIMESTAMP_NTZ"}:
        return "TIMESTAMP"
    return "STRING"


def needs_session(config: PipelineConfig, schemas: Sequence[TableSchema]) -> bool:
    """Whether :func:`plan_pipeline` needs a SparkSession for ``schemas``: some captured
    table's transform is Spark SQL (``sparkcdc validate`` starts Spark only then)."""
    return any(is_spark_sql(config.transform_for(s.database, s.table)) for s in schemas)


def plan_pipeline(
    config: PipelineConfig, schemas: Sequence[TableSchema], spark: SparkSession | None
) -> PipelinePlan:
    """Route and transform every captured table; merge routed tables into sink tables.

    Spark analyses each transform on an empty frame, so a bad expression fails here, before
    the stream starts, with the table and the rule named. A table without Spark SQL in its
    transform keeps its source columns and types, known without Spark: ``spark`` may be
    None when :func:`needs_session` says so.
    """
    sources = [
        SourceTablePlan(
            schema,
            config.route_for(schema.database, schema.table),
            config.transform_for(schema.database, schema.table),
        )
        for schema in schemas
    ]
    names = dict.fromkeys(s.sink_table for s in sources)
    # one frame to analyse every Spark SQL transform on; none where no transform is Spark
    # SQL (a run's common case): made, it costs a run's start 0.6-1.6 s of JVM work
    empty = text_rows(spark, []) if spark is not None and needs_session(config, schemas) else None
    sink_tables = tuple(
        sink_frame(
            spark,
            name,
            [(s.schema, s.transform) for s in sources if s.sink_table == name],
            empty,
        )
        for name in names
    )
    return PipelinePlan(
        tuple(sources),
        sink_tables,
        config.source.online_schema_changes,
    )


def sink_frame(
    spark: SparkSession | None,
    name: str,
    members: Sequence[tuple[TableSchema, TransformRule | None]],
    empty: DataFrame | None = None,
) -> SinkTable:
    """The sink table that ``members`` (source schemas and their transforms) route into;
    ``empty``: an empty tables-shape frame to analyse them on (made here if not given).
    ``spark`` may be None when no member's transform is Spark SQL (:func:`is_spark_sql`)."""
    shapes = []
    for schema, rule in members:
        if not is_spark_sql(rule):  # the source columns as they are (source_changes' types)
            fields = [(c.name, c.spark_type) for c in schema.columns]
            shapes.append((schema, fields, _sink_keys(schema, rule, fields)))
            continue
        if spark is None:
            raise ValueError(f"the transform of {schema.qualified_name} needs a SparkSession")
        if empty is None:
            empty = text_rows(spark, [])
        try:
            frame = apply_transform(source_changes(empty, schema), rule, schema.column_names)
            fields = [
                (f.name, spark_type_name(f.dataType))
                for f in frame.schema.fields
                if f.name not in METADATA_COLUMNS
            ]
        except Exception as exc:  # Spark's AnalysisException and friends
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(
                f"transform for {schema.qualified_name} (source-table "
                f"{rule.source_table if rule else '?'}): Spark cannot apply it: "
                f"{spark_error_text(exc)}"
            ) from None
        shapes.append((schema, fields, _sink_keys(schema, rule, fields)))
    return _merge(name, shapes)


def _sink_keys(
    schema: TableSchema, rule: TransformRule | None, fields: Sequence[tuple[str, str]]
) -> tuple[str, ...]:
    """The key columns of ``schema``'s rows in the sink: the rule's primary-keys, else
    the source's primary key; ConfigError when there is none, or it is not among
    ``fields`` (the transformed columns)."""
    keys = (rule.key_columns() if rule else None) or schema.primary_key
    missing = [k for k in keys if k not in {n for n, _ in fields}]
    if not keys:
        raise ConfigError(
            f"table {schema.qualified_name} has no primary key, and sinks write by key: "
            f"add a transform with primary-keys for source-table {schema.qualified_name}"
        )
    if missing:
        raise ConfigError(
            f"primary key {list(keys)} of {schema.qualified_name} is not in its transformed "
            f"columns {[n for n, _ in fields]} (missing {missing}): keep the key columns "
            "in the projection, or set primary-keys"
        )
    return tuple(keys)


def _merge(
    name: str, members: list[tuple[TableSchema, list[tuple[str, str]], tuple[str, ...]]]
) -> SinkTable:
    first_schema, _, keys = members[0]
    for schema, _, other_keys in members[1:]:
        if other_keys != keys:
            raise ConfigError(
                f"route: sink table {name} merges {first_schema.qualified_name} (primary key "
                f"{list(keys)}) and {schema.qualified_name} (primary key {list(other_keys)}); "
                "merged tables need the same key columns. Route them to different sink tables, "
                "or give both the same primary-keys in a transform"
            )
    types: dict[str, str] = {}
    for _, fields, _ in members:
        for column, spark_type in fields:
            types[column] = (
                widest_type(types[column], spark_type) if column in types else spark_type
            )
    columns = tuple(SinkColumn(c, t, nullable=c not in keys) for c, t in types.items())
    return SinkTable(name, columns, keys, tuple(s.qualified_name for s, _, _ in members))
