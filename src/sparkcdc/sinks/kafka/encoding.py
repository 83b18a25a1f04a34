"""How column values are spelled as JSON text in the messages.

The JSON text is not one to_json of the row: that writes a DECIMAL(30,10) zero as 0E-10
and timestamps in the session's time zone; Flink's JSON formats write TIMESTAMP as local
date-time text and TIMESTAMP_LTZ in UTC with a 'Z'. Runs of columns to_json writes as
Flink does are one to_json each; the other columns are spelled one by one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Literal

from sparkcdc.model.schema import spark_decimal
from sparkcdc.sinks.base import SinkColumn
from sparkcdc.sinks.kafka.connect_schema import source_logical
from sparkcdc.sinks.kafka.options import KafkaOptions, TimestampStandard

if TYPE_CHECKING:
    from pyspark.sql import Column

# how JsonEncoding._writable gives a value to Spark's JSON writer
WrittenAs = Literal["value", "text", "number", "raw"]
MICROS_PER_DAY = 86_400_000_000


def unwrapped(text: Column) -> Column:
    """``text`` without its first and last character, both ASCII (JSON's braces or
    brackets), cut as bytes: a cut by characters counts the text's characters twice, a
    large part of the sink's CPU (docs/benchmarks.md)."""
    from pyspark.sql import functions as F

    raw = text.cast("binary")
    return raw.substr(F.lit(2), F.length(raw) - 2).cast("string")


def json_string(text: Column) -> Column:
    """A JSON string of a text column whose values need no escaping (op codes, kinds)."""
    from pyspark.sql import functions as F

    return F.concat(F.lit('"'), text, F.lit('"'))


def json_array(element: Column) -> Column:
    from pyspark.sql import functions as F

    return F.concat(F.lit("["), element, F.lit("]"))


@dataclass(frozen=True)
class JsonEncoding:
    """How column values are spelled in the messages.

    Without schemas, as Flink's JSON formats write them (what Flink SQL and Spark's
    ``from_json`` read back): TIMESTAMP_NTZ (DATETIME) as ``2024-05-01 12:00:00.5`` (SQL) or
    ``2024-05-01T12:00:00.5`` (ISO-8601), TIMESTAMP as the same in UTC with a ``Z``, the
    fraction without trailing zeros; decimals as plain numbers with the column's scale.
    With schemas (debezium-json), as the declared Kafka Connect / Debezium types say
    (:func:`connect_field`).
    """

    timestamp_format: TimestampStandard = "SQL"
    ignore_null_fields: bool = False
    schemas: bool = False

    @classmethod
    def from_options(cls, options: KafkaOptions) -> JsonEncoding:
        fmt = options.json_format
        return cls(fmt.timestamp_format, fmt.ignore_null_fields, fmt.include_schema)

    def obj(self, fields: Sequence[tuple[str, Column]]) -> Column:
        """A JSON object of (name, JSON text) pairs; a NULL text is ``null``, or the field
        is left out with ``encode.ignore-null-fields``."""
        return self._object([self._member(name, text) for name, text in fields])

    def image(self, row: Column, columns: Sequence[SinkColumn], *, nullable: bool = True) -> Column:
        """A row image (a struct column) as a JSON object; NULL when the struct is.
        ``nullable=False`` (a struct that is never NULL) leaves out that condition, so
        that Spark shares the parts of the values' texts (see :func:`kafka_messages`).

        Each run of neighbouring columns that can be fields of a struct ``to_json`` writes
        as this format does (:meth:`_in_struct`) is one ``to_json``: one generator per run
        rather than one per value, and no text per field. An image of one run (the usual
        case) is that text; runs are joined with their braces cut off."""
        from pyspark.sql import functions as F

        values = [(c, *self._writable(row.getField(c.name), c)) for c in columns]
        runs = [(s, list(run)) for s, run in groupby(values, key=self._in_struct)]
        members: list[Column] = []
        for in_struct, run in runs:
            if not in_struct:
                members += [self._member(c.name, self._spelled(c, v, kind)) for c, v, kind in run]
                continue
            fields = F.struct(*[v.alias(c.name) for c, v, _ in run])
            written = F.to_json(fields, {"ignoreNullFields": str(self.ignore_null_fields).lower()})
            if len(runs) == 1:  # the whole object, braces and all
                return F.when(row.isNotNull(), written) if nullable else written
            inner = unwrapped(written)
            # every field of the run left out (all NULL): no member, as for one field
            members.append(F.when(inner != "", inner) if self.ignore_null_fields else inner)
        text = self._object(members)
        return F.when(row.isNotNull(), text) if nullable else text

    def _member(self, name: str, text: Column) -> Column:
        """``"name":text``; NULL (left out) for a NULL text under ignore-null-fields."""
        from pyspark.sql import functions as F

        label = F.lit(json.dumps(name, ensure_ascii=False) + ":")
        if self.ignore_null_fields:
            return F.concat(label, text)  # NULL when text is: concat_ws skips it
        return F.concat(label, F.coalesce(text, F.lit("null")))

    @staticmethod
    def _object(members: Sequence[Column]) -> Column:
        from pyspark.sql import functions as F

        return F.concat(F.lit("{"), F.concat_ws(",", *members), F.lit("}"))

    @staticmethod
    def _in_struct(value: tuple[SinkColumn, Column, WrittenAs]) -> bool:
        """Whether ``to_json`` of a struct writes this column (with its value as
        :meth:`_writable` gives it), name and value, as :meth:`value` does: a name without
        characters to escape (Python's and Jackson's escapes need not agree) and a value
        that is not raw JSON text."""
        column, _, kind = value
        plain_name = json.dumps(column.name, ensure_ascii=False) == f'"{column.name}"'
        return plain_name and kind != "raw"

    def _by_writer(self, column: SinkColumn) -> bool:
        """Whether this format spells the column's values as Spark's JSON writer does: all
        but timestamps, Debezium's time types and dates in schema mode, and decimals in
        schema mode or past scale 6 (where the writer spells a zero ``0E-7``)."""
        logical = source_logical(column) if self.schemas else None
        if logical is not None and logical["name"] in _EPOCH_LOGICAL:
            return False
        spark_type = column.spark_type
        decimal = spark_decimal(spark_type)
        if decimal is not None:
            return not self.schemas and decimal[1] <= 6
        if spark_type in ("TIMESTAMP", "TIMESTAMP_NTZ"):
            return False
        return spark_type != "DATE" or not self.schemas

    def _writable(self, value: Column, column: SinkColumn) -> tuple[Column, WrittenAs]:
        """The value as a Spark value Spark's JSON writer spells as this format does, and
        what it is: ``value`` (the value itself), ``text`` (a JSON string's characters,
        none of which need escaping), ``number`` (a JSON number), or ``raw`` (the JSON text
        itself, which no Spark value is written as: decimals past scale 6)."""
        from pyspark.sql import functions as F

        if self._by_writer(column):
            return value, "value"
        spark_type = column.spark_type
        logical = source_logical(column) if self.schemas else None
        if logical is not None and logical["name"] == "io.debezium.time.Timestamp":
            return _ntz_epoch(value, 3), "number"  # DATETIME(0..3): whole milliseconds
        if logical is not None and logical["name"] == "io.debezium.time.MicroTime":
            return _time_micros(value), "number"
        if spark_type.startswith("DECIMAL"):
            if self.schemas:
                return _decimal_base64(value), "text"
            return value.cast("string"), "raw"  # plain, the column's scale: what MySQL prints
        if spark_type == "DATE":  # schema mode: io.debezium.time.Date, epoch days
            return F.unix_date(value), "number"
        if self.schemas and spark_type == "TIMESTAMP_NTZ":  # MicroTimestamp
            return _ntz_epoch(value, 6), "number"
        iso = self.schemas or self.timestamp_format == "ISO-8601"
        if spark_type == "TIMESTAMP_NTZ":
            # Spark's own text of a zone-less value is Flink's: the fraction as few digits
            # as it needs, at a fraction of what timestamp_text costs
            text = value.cast("string")
            return (F.translate(text, " ", "T") if iso else text), "text"
        return timestamp_text(value, zoned=True, iso=iso), "text"

    def value(self, value: Column, column: SinkColumn) -> Column:
        """One value's JSON text (NULL for SQL NULL)."""
        return self._spelled(column, *self._writable(value, column))

    @staticmethod
    def _spelled(column: SinkColumn, written: Column, kind: WrittenAs) -> Column:
        """The JSON text of a value as :meth:`_writable` gives it (NULL for SQL NULL)."""
        from pyspark.sql import functions as F

        if kind == "text":
            return json_string(written)
        if kind in ("number", "raw"):
            return written.cast("string")
        if column.spark_type in _PLAIN_TEXT_TYPES or column.spark_type.startswith("DECIMAL"):
            return written.cast("string")  # as to_json writes them, without its cost
        # strings escaped, binary as base64: "[v]" unwrapped
        return F.when(written.isNotNull(), unwrapped(F.to_json(F.array(written))))


# Debezium's logical types JsonEncoding writes as numbers from the column's text or time
_EPOCH_LOGICAL = frozenset({"io.debezium.time.Timestamp", "io.debezium.time.MicroTime"})
# Spark types whose text (CAST AS STRING) is their JSON text
_PLAIN_TEXT_TYPES = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT"})


def timestamp_text(value: Column, *, zoned: bool, iso: bool) -> Column:
    """Flink's JSON spelling of a TIMESTAMP_NTZ (``zoned=False``) or TIMESTAMP value:
    ``yyyy-MM-dd HH:mm:ss[.f]`` (``T`` for ISO-8601), the fraction as few digits as it
    needs (Java's ``appendFraction(NANO_OF_SECOND, 0, 9, true)``), a TIMESTAMP in UTC with
    ``Z``; computed from epoch microseconds, so that no session time zone takes part."""
    from pyspark.sql import functions as F

    micros = F.unix_micros(value) if zoned else _ntz_epoch(value, 6)
    of_day = F.pmod(micros, F.lit(MICROS_PER_DAY))
    day = ((micros - of_day) / MICROS_PER_DAY).cast("long")
    fraction = F.pmod(of_day, F.lit(1_000_000))
    seconds = ((of_day - fraction) / 1_000_000).cast("long")
    clock = F.format_string(
        "%02d:%02d:%02d",
        (seconds / 3600).cast("int"),
        F.pmod((seconds / 60).cast("int"), F.lit(60)),
        F.pmod(seconds, F.lit(60)).cast("int"),
    )
    digits = F.regexp_replace(F.lpad(fraction.cast("string"), 6, "0"), "0+$", "")
    return F.concat(
        F.date_from_unix_date(day).cast("string"),
        F.lit("T" if iso else " "),
        clock,
        F.when(fraction == 0, F.lit("")).otherwise(F.concat(F.lit("."), digits)),
        F.lit("Z" if zoned else ""),
    )


def _ntz_epoch(value: Column, digits: int) -> Column:
    """Units of 10^-``digits`` s (3: milliseconds, 6: microseconds) since 1970-01-01T00:00
    of a TIMESTAMP_NTZ's wall-clock value (no zone), the fraction cut to ``digits``. Long
    arithmetic only: dividing epoch microseconds goes through a double, which past 2^53
    (year 2255) rounds, and 125 of the 1,000 milliseconds of 9999-12-31 23:59:59 would come
    out one less."""
    from pyspark.sql import functions as F

    per_second: int = 10**digits
    seconds = F.hour(value) * 3600 + F.minute(value) * 60 + F.second(value)
    return (
        F.unix_date(F.to_date(value)).cast("long") * (86_400 * per_second)
        + seconds.cast("long") * per_second
        + F.date_format(value, "S" * digits).cast("long")
    )


_TIME_TEXT = r"^(-?)([0-9]+):([0-9]{2}):([0-9]{2})(?:[.]([0-9]{1,6}))?$"


def _time_micros(text: Column) -> Column:
    """Signed microseconds of a MySQL TIME's text (``-838:59:59.000000``: the source's
    spelling); a text of another shape stops the batch rather than becoming NULL."""
    from pyspark.sql import functions as F

    def part(group: int) -> Column:
        return F.regexp_extract(text, _TIME_TEXT, group)

    seconds = part(2).cast("long") * 3600 + part(3).cast("long") * 60 + part(4).cast("long")
    micros = seconds * 1_000_000 + F.rpad(part(5), 6, "0").cast("long")
    signed = F.when(part(1) == "-", -micros).otherwise(micros)
    unreadable = F.raise_error(F.concat(F.lit("kafka sink: not a MySQL TIME text: "), text))
    return F.when(text.isNull(), None).when(text.rlike(_TIME_TEXT), signed).otherwise(unreadable)


def unscaled_base64(text: str | None) -> str | None:
    """Kafka Connect's ``Decimal`` value of a decimal's plain text: base64 of the unscaled
    value's big-endian two's complement in the fewest bytes (Java's
    ``BigInteger.toByteArray``), as Debezium writes it with ``decimal.handling.mode=precise``.

    >>> unscaled_base64("-1.28"), unscaled_base64("18446744073709551615")
    ('gA==', 'AP//////////')
    """
    if text is None:
        return None
    unscaled = int(text.replace(".", ""))
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    raw = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
    return base64.b64encode(raw).decode("ascii")


def _decimal_base64(value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.udf(lambda text: unscaled_base64(text), "string")(value.cast("string"))
