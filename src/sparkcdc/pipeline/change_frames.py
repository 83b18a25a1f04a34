"""A tables-shape batch's rows as one source table's typed change frame, and a transformed
frame cast to its sink table's shape.

The source reads the typed many-table shape (``changelog.shape=tables``, DESIGN.md §4): one
struct column per captured table, values typed, and the few values that travel as text (a
column in another shape than the struct's) in ``_text``. Per source table and schema
segment, each column comes from its struct field or its text, by the segment's schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparkcdc.model.changelog import DATABASE, METADATA_COLUMNS, OP, TABLE
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import Column as SchemaColumn
from sparkcdc.model.schema import TableSchema, bit_width, fraction_digits
from sparkcdc.sinks.base import SinkColumn, SinkTable, spark_type_name
from sparkcdc.spark.changelog.tables import DDL_OP, TABLES_METADATA_DDL, carrier_type

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession


def _from_text(raw: SparkColumn, column: SchemaColumn) -> SparkColumn:
    """The typed value of one column from its text (``changelog.value_text``: bytes as
    base64, BIT(n) as its number, the rest as the envelope's JSON spells them); BIT(n > 1)
    maps to BINARY: big-endian, ceil(n/8) bytes, as the typed changelog has it."""
    from pyspark.sql import functions as F

    if column.data_type == "time":
        return _time_digits(raw, fraction_digits(column.column_type))
    if column.spark_type == "STRING":
        return raw
    if column.spark_type == "BINARY" and column.data_type == "bit":
        width = 2 * ((bit_width(column.column_type) + 7) // 8)  # hex digits
        return F.unhex(F.lpad(F.conv(raw, 10, 16), width, "0"))
    if column.spark_type == "BINARY":
        return F.unbase64(raw)
    if column.spark_type == "BOOLEAN":  # TINYINT(1): any value but 0 is true (MySQL's rule)
        return raw.cast("SMALLINT") != 0
    return raw.cast(column.spark_type)


def _time_digits(raw: SparkColumn, digits: int) -> SparkColumn:
    """A TIME's text with ``digits`` fraction digits, as the server (and the typed path)
    spells it: the text path's ``value_text`` knows no column precision."""
    from pyspark.sql import functions as F

    whole = F.substring_index(raw, ".", 1)
    if not digits:
        return whole
    fraction = F.when(F.instr(raw, ".") > 0, F.substring_index(raw, ".", -1)).otherwise("")
    return F.concat(whole, F.lit("."), F.rpad(fraction, digits, "0"))


def _struct_of(frame: DataFrame, schema: TableSchema) -> tuple[str, dict[str, str]] | None:
    """The struct column of ``schema``'s table in a tables-shape frame, and its fields'
    types (None: the table joined the query after it started; all its values are text)."""
    from pyspark.sql.types import StructType

    wanted = f"{schema.database}.{schema.table}"
    for field in frame.schema.fields:
        if isinstance(field.dataType, StructType) and field.name.partition(":")[2] == wanted:
            types = {f.name: spark_type_name(f.dataType) for f in field.dataType.fields}
            return field.name, types
    return None


def _column_value(
    column: SchemaColumn, struct: tuple[str, dict[str, str]] | None, where: str
) -> SparkColumn:
    """One column of a row in the shape its segment's schema gives it: from the row's
    struct field when the value travelled typed, else from its text.

    A value typed in a field of another type than the segment's column is a row the
    reader took for another shape of the column than the one the schema history has for
    it: stop, rather than guess its value.
    """
    from pyspark.sql import functions as F

    text = _from_text(F.col("_text").getItem(column.name), column)
    if struct is None or column.name not in struct[1]:
        return text
    field = F.col(quote_spark(struct[0])).getField(column.name)
    if struct[1][column.name] != carrier_type(column):
        message = (
            f"{where}: column {column.name} arrived as {struct[1][column.name]} where the "
            f"schema history has it as {column.column_type}; the stream does not know which "
            "shape these rows were written with. Restart the pipeline; if this repeats, "
            "report it with the DDL history of the table"
        )
        return F.when(field.isNull(), text).otherwise(F.raise_error(F.lit(message)))
    typed = field != 0 if column.spark_type == "BOOLEAN" else field
    return F.coalesce(text, typed)


ChangeColumns = tuple["SparkColumn", list["SparkColumn"]]  # source_changes' filter, columns


def source_changes(
    frame: DataFrame,
    schema: TableSchema,
    built: dict[tuple[Any, ...], ChangeColumns] | None = None,
) -> DataFrame:
    """One source table's rows of a tables-shape batch as a typed change frame, in the
    columns and types of ``schema`` (the table's schema for these rows' segment); an update's
    ``-U`` and ``+U`` halves share their ``_seq``. Schema-change rows are left out.

    ``built``: the filter and columns made for earlier batches, by schema and the shape of
    the table's struct; they are taken from there, and put there when new (making them is
    dozens of calls into the JVM, per table and batch)."""
    from pyspark.sql import functions as F

    struct = _struct_of(frame, schema)
    key = (schema, None if struct is None else (struct[0], tuple(struct[1].items())))
    columns = None if built is None else built.get(key)
    if columns is None:
        columns = (
            (F.col(DATABASE) == schema.database)
            & (F.col(TABLE) == schema.table)
            & (F.col(OP) != DDL_OP),
            [_column_value(c, struct, schema.qualified_name).alias(c.name) for c in schema.columns],
        )
        if built is not None:
            built[key] = columns
    rows, values = columns
    return frame.where(rows).select(*METADATA_COLUMNS, *values)


def text_rows(spark: SparkSession, rows: Sequence[tuple[Any, ...]]) -> DataFrame:
    """A tables-shape frame with no struct columns: every value travels as text."""
    return spark.createDataFrame(rows, TABLES_METADATA_DDL)


def to_sink(changes: DataFrame, mapping: dict[str, str], table: SinkTable) -> DataFrame:
    """A transformed frame in the sink table's shape: each column renamed to the sink column
    ``mapping`` names (unmapped ones left out); sink columns nothing feeds are NULL.

    A column whose type differs from the sink's is cast; where the value does not fit (a type
    change the sink did not follow: ``ignore``, or an excluded change) it is written as NULL
    rather than failing every batch from then on.
    """
    from pyspark.sql import functions as F

    types = {f.name: spark_type_name(f.dataType) for f in changes.schema.fields}
    fed = {mapping[c]: c for c in changes.columns if c in mapping}

    def value(column: SinkColumn) -> SparkColumn:
        if column.name not in fed:
            return F.lit(None).cast(column.spark_type)
        source = F.col(quote_spark(fed[column.name]))
        if types[fed[column.name]] == column.spark_type:
            return source
        return source.try_cast(column.spark_type)

    return changes.select(*METADATA_COLUMNS, *[value(c).alias(c.name) for c in table.columns])
