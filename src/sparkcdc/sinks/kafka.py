"""``type: kafka``: every change as a JSON message, keyed by the row's primary key.

Options are Flink CDC 3.x's Kafka pipeline-sink names::

    sink:
      type: kafka
      properties.bootstrap.servers: 127.0.0.1:29092
      value.format: debezium-json          # or canal-json, changelog-json
      # topic: all_changes                 # one topic for every table
      # sink.tableId-to-topic.mapping: app_db.orders:orders;app_db.items:items
      # properties.compression.type: zstd  # any producer property

A table's topic is ``topic`` if set, else its entry in ``sink.tableId-to-topic.mapping``,
else the sink table's name (``app_db.orders``). The key is the JSON object of the primary-key
columns; the value one of the formats below, with column values as Flink's JSON formats
write them, so that Flink SQL's ``debezium-json`` / ``canal-json`` read them with their
defaults: decimals as plain numbers with the column's scale (``0.0000000000``,
``18446744073709551615``), binary as base64, DATE ``2024-05-01``, DATETIME (TIMESTAMP_NTZ)
``2024-05-01 12:00:00.5`` and TIMESTAMP (an instant) ``2024-05-01 12:00:00.5Z`` in UTC,
whatever Spark's session time zone; with ``<format>.timestamp-format.standard: ISO-8601``
a ``T`` instead of the space. ``db`` / ``table`` / ``database`` name the sink table (after
route), as in Flink CDC. Flink CDC's other sink options: ``partition.strategy``
(``all-to-zero``, the default, or ``hash-by-key``), ``sink.custom-header``
(``k1:v1,k2:v2``), ``sink.delivery-guarantee`` (``at-least-once``; ``none`` is met by it;
``exactly-once`` refused), ``<format>.encode.ignore-null-fields``.

``debezium-json``::

    {"before": {...} | null, "after": {...} | null, "op": "r|c|u|d",
     "source": {"db": "app_db", "table": "orders", "ts_ms": <binlog time | null>},
     "ts_ms": <write time>}

``canal-json``::

    {"data": [{...}], "old": [{...}] | null, "type": "INSERT|UPDATE|DELETE",
     "database": "app_db", "table": "orders", "pkNames": ["id"],
     "ts": <write time>, "es": <binlog time | null>}

With ``debezium-json.include-schema.enabled: true`` (Flink CDC's option) each value and
each key is ``{"schema": {...}, "payload": ...}``, the schema in Kafka Connect's JSON form,
and the payload's values as that schema declares them, so that Kafka Connect's
``JsonConverter`` (``schemas.enable=true``) gives exact values::

    {"type": "struct", "name": "app_db.orders.Envelope", "optional": false, "fields": [
      {"field": "before", "type": "struct", "name": "app_db.orders.Value", "optional": true,
       "fields": [{"field": "id", "type": "int64", "optional": false}, ...]},
      {"field": "after", ...same...}, {"field": "op", "type": "string", ...},
      {"field": "source", ...}, {"field": "ts_ms", "type": "int64", ...}]}

Connect types (Debezium's MySQL connector's, ``decimal.handling.mode=precise``,
``time.precision.mode=adaptive_time_microseconds``): BOOLEAN boolean, TINYINT / SMALLINT
int16, INT int32, BIGINT int64, FLOAT float, DOUBLE double, DECIMAL(p,s) and BIGINT UNSIGNED
``org.apache.kafka.connect.data.Decimal`` (bytes: base64 of the unscaled value), DATE
``io.debezium.time.Date`` (int32 days), DATETIME(0..3) ``io.debezium.time.Timestamp`` (int64
milliseconds), DATETIME(4..6) ``io.debezium.time.MicroTimestamp`` (int64 microseconds),
TIMESTAMP ``io.debezium.time.ZonedTimestamp`` (ISO-8601 text in UTC), TIME
``io.debezium.time.MicroTime`` (int64 microseconds, signed), YEAR ``io.debezium.time.Year``
(int32), ENUM / SET ``io.debezium.data.Enum`` / ``EnumSet`` (string, with the ``allowed``
labels), JSON ``io.debezium.data.Json`` (string), other text string, BINARY bytes (base64).
A column is ``"optional": false`` when it is a key column, or when every row of the batch
holds a NOT NULL source column's values unchanged. The declarations by MySQL type
(Timestamp, MicroTime, Year, Enum, Json, NOT NULL) need that too: a column a transform
computes, that merged source tables define differently, or that a schema change in the
batch leaves unfed for some rows, is declared by its Spark type (DATETIME as MicroTimestamp,
TIME as string), optional.

``changelog-json`` (one message per change row, an update as ``-U`` then ``+U``)::

    {"data": {...}, "op": "+I|-U|+U|-D"}

In the first two, an update's ``-U`` and ``+U`` halves become one update message. Exceptions,
each of which leaves every key's messages telling its whole story: an update that changes the
primary key becomes a delete of the old key and an insert of the new one (as Debezium does); a
lone ``-U`` (a transform filter let the row out) becomes a delete, a lone ``+U`` (let in) an
insert. A snapshot row (``+I`` without a binlog time) is a read (``r``) in debezium-json.
Deletes are not followed by tombstones: set ``cleanup.policy=compact`` on a topic only if its
consumers can live with deleted keys staying until a tombstone-writing job compacts them.

Every message has the header ``sparkcdc.seq``: the change's ``_seq`` in decimal (of the
``+U`` half for an update), which orders the changes. ``sink.message-order: commit`` (the
default) sends a batch's changes of a topic in commit order, by ``sparkcdc.seq``, so that
every partition's messages follow the binlog across keys, as Debezium's and Flink CDC's do;
``per-key`` keeps the order only within each key (see :func:`message_steps`). With
``sink.add-tableId-to-header-enabled: true`` the headers ``namespace`` (three-part names only),
``schemaName`` and ``tableName`` name the sink table, as in Flink CDC.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from itertools import groupby
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from py4j.protocol import Py4JError, Py4JJavaError  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sparkcdc.errors import SinkError
from sparkcdc.model.changelog import DATABASE, OP, OP_TS, SEQ, TABLE, EnvelopeOp, RowKind
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import fraction_digits, spark_decimal
from sparkcdc.mysql.binlog.metadata_from_schema import labels as enum_labels
from sparkcdc.sinks.base import (
    SchemalessSink,
    SinkColumn,
    SinkContext,
    SinkOptions,
    SinkTable,
    gather_prefixed,
    kind_rank_column,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

ValueFormat = Literal["debezium-json", "canal-json", "changelog-json"]
# commit: a topic's messages of a batch in _seq order (one task sends them); per-key: each
# key's in _seq order, keys spread over tasks (DESIGN.md, "Kafka: commit order")
MessageOrder = Literal["commit", "per-key"]
FORMATS: tuple[str, ...] = ("debezium-json", "canal-json", "changelog-json")
# Flink's JsonFormatOptions 'timestamp-format.standard'
TimestampStandard = Literal["SQL", "ISO-8601"]
# how JsonEncoding._writable gives a value to Spark's JSON writer
WrittenAs = Literal["value", "text", "number", "raw"]

SEQ_HEADER = "sparkcdc.seq"
PROPERTIES_PREFIX = "properties."
BOOTSTRAP_SERVERS = "properties.bootstrap.servers"
REACHABLE_TIMEOUT_S = 10.0
# snapshot inserts in one Spark partition are spread over the cores above this many rows
ROWS_PER_TASK = 100_000
# A batch's changes of a table up to this many are sent by one task: spreading them over the
# cores by key is a shuffle (two Spark jobs), ~0.06 s of a 0.75 s batch at 1,000 changes/s
# here, more than a second core saves on so few. Batches of 40,000 changes and more (a
# second of writes at 40,000/s) sent by one task made the pipeline fall behind here.
ONE_TASK_CHANGES = 10_000

# Kafka's own rule for topic names (org.apache.kafka.common.internals.Topic)
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MICROS_PER_DAY = 86_400_000_000
_HEADERS_TYPE = "array<struct<key:string,value:binary>>"  # what Spark's Kafka writer takes
# a row's message over 1 MB (Kafka's default) is refused by the producer or by the broker
_TOO_LARGE = (
    "A message is larger than Kafka accepts: raise the producer's properties.max.request.size "
    "(and properties.buffer.memory, if the message is larger than it) and the topic's "
    "max.message.bytes (a topic created without it has the broker's message.max.bytes)"
)


class JsonFormatOptions(BaseModel):
    """Flink's JSON format options of the chosen ``value.format``, given in the sink block
    with the format's name as prefix (``debezium-json.timestamp-format.standard: ISO-8601``),
    as Flink CDC's Kafka sink takes them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timestamp_format: TimestampStandard = Field("SQL", alias="timestamp-format.standard")
    ignore_null_fields: bool = Field(False, alias="encode.ignore-null-fields")
    decimal_as_plain_number: bool = Field(True, alias="encode.decimal-as-plain-number")
    include_schema: bool = Field(False, alias="include-schema.enabled")
    map_null_key_mode: str | None = Field(None, alias="map-null-key.mode")
    map_null_key_literal: str | None = Field(None, alias="map-null-key.literal")

    @field_validator("decimal_as_plain_number")
    @classmethod
    def _plain_decimals(cls, value: bool) -> bool:
        if not value:
            raise ValueError(
                "sparkcdc always writes decimals as plain JSON numbers (18446744073709551615, "
                "0.0000000000: the source's digits, never 0E-10); remove the option"
            )
        return value

    @field_validator("map_null_key_mode", "map_null_key_literal")
    @classmethod
    def _no_maps(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                "no column from MySQL or MariaDB is a MAP, so there are no map keys to "
                "write; remove the option"
            )
        return value


class KafkaOptions(SinkOptions):
    """The kafka sink block; any ``properties.<name>`` is a Kafka producer property, any
    ``<value.format>.<name>`` an option of that JSON format (Flink's names)."""

    # pipeline/config.py accepts any key with one of these prefixes
    passthrough_prefixes: ClassVar[frozenset[str]] = frozenset(
        {PROPERTIES_PREFIX, *(f"{f}." for f in FORMATS)}
    )

    bootstrap_servers: str = Field(alias="properties.bootstrap.servers", min_length=1)
    topic: str | None = None
    table_id_to_topic: dict[str, str] = Field(
        default_factory=dict, alias="sink.tableId-to-topic.mapping"
    )
    value_format: ValueFormat = Field("debezium-json", alias="value.format")
    key_format: str = Field("json", alias="key.format")
    partition_strategy: Literal["all-to-zero", "hash-by-key"] = Field(
        "all-to-zero", alias="partition.strategy"
    )
    delivery_guarantee: Literal["at-least-once", "none", "exactly-once"] = Field(
        "at-least-once", alias="sink.delivery-guarantee"
    )
    message_order: MessageOrder = Field("commit", alias="sink.message-order")
    add_table_id_to_header: bool = Field(False, alias="sink.add-tableId-to-header-enabled")
    custom_headers: tuple[tuple[str, str], ...] = Field((), alias="sink.custom-header")
    json_format: JsonFormatOptions = Field(JsonFormatOptions.model_validate({}), alias="format")
    # 'properties.linger.ms: 5' arrives here as {'linger.ms': '5'}
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_properties(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return _gather_format(gather_prefixed(data, PROPERTIES_PREFIX, ("bootstrap.servers",)))

    @field_validator("topic")
    @classmethod
    def _check_topic(cls, value: str | None) -> str | None:
        if value is not None:
            check_topic_name(value)
        return value

    @field_validator("table_id_to_topic", mode="before")
    @classmethod
    def _parse_mapping(cls, value: Any) -> Any:
        return parse_topic_mapping(value) if isinstance(value, str) else value

    @field_validator("table_id_to_topic")
    @classmethod
    def _check_mapping(cls, value: dict[str, str]) -> dict[str, str]:
        for topic in value.values():
            check_topic_name(topic)
        return value

    @field_validator("custom_headers", mode="before")
    @classmethod
    def _parse_headers(cls, value: Any) -> Any:
        return parse_custom_headers(value) if isinstance(value, str) else value

    @field_validator("key_format")
    @classmethod
    def _check_key_format(cls, value: str) -> str:
        if value != "json":
            raise ValueError(
                f"key.format {value!r} is not supported; only 'json' (the primary-key columns "
                "as a JSON object) is"
            )
        return value

    @field_validator("delivery_guarantee")
    @classmethod
    def _check_guarantee(cls, value: str) -> str:
        if value == "exactly-once":
            raise ValueError(
                "exactly-once needs Kafka transactions, which Spark's Kafka writer does not "
                "use; the sink is at-least-once, and the sparkcdc.seq header lets a consumer "
                "skip repeats. Use 'at-least-once'"
            )
        return value

    @model_validator(mode="after")
    def _schema_only_for_debezium(self) -> KafkaOptions:
        if self.json_format.include_schema and self.value_format != "debezium-json":
            raise ValueError(
                f"include-schema.enabled is a debezium-json option; value.format is "
                f"{self.value_format}: write debezium-json.include-schema.enabled with "
                "value.format debezium-json"
            )
        return self

    def topic_for(self, table: SinkTable) -> str:
        """``topic``, else the table's mapping entry, else the sink table's name."""
        if self.topic:
            return self.topic
        return self.table_id_to_topic.get(table.name, table.name)

    def client_properties(self) -> dict[str, str]:
        """The Kafka client properties (Java names), bootstrap servers included: the
        user's ``properties.*`` over ``PRODUCER_DEFAULTS``."""
        return {**PRODUCER_DEFAULTS, **self.properties, "bootstrap.servers": self.bootstrap_servers}


# The producer tuned for throughput as Kafka's documentation advises (batches of up to
# 256 KiB, waiting up to 20 ms to fill them, compressed with lz4): a sink batch sends its
# messages at once. Measured on 546,000 debezium-json updates (bench table, local broker):
# producing cost ~1.0 s with the client's defaults, ~0.6 s with these. Any of them can be
# set with properties.* (properties.compression.type: none)
PRODUCER_DEFAULTS = {"linger.ms": "20", "batch.size": "262144", "compression.type": "lz4"}


def _gather_format(data: dict[str, Any]) -> dict[str, Any]:
    """The ``<value.format>.*`` keys gathered under ``format``; another format's keys are
    refused, as Flink CDC refuses them (they would silently do nothing)."""
    chosen = str(data.get("value.format", data.get("value_format", "debezium-json")))
    out: dict[str, Any] = {}
    gathered: dict[str, Any] = {}
    for key, value in data.items():
        fmt = next((f for f in FORMATS if isinstance(key, str) and key.startswith(f"{f}.")), None)
        if fmt is None:
            out[key] = value
        elif fmt == chosen:
            gathered[key.removeprefix(f"{fmt}.")] = value
        else:
            raise ValueError(
                f"{key!r} is an option of value.format {fmt}, but value.format is {chosen}: "
                f"write it as {chosen}.{key.removeprefix(f'{fmt}.')} or remove it"
            )
    if gathered:
        out["format"] = gathered
    return out


class KafkaSink(SchemalessSink):
    """Writes each change as a JSON message to the table's Kafka topic.

    Guarantee: at-least-once. Kafka cannot take a batch back, so a batch that Spark replays
    after a crash (its messages were sent, its commit was not) is sent again. Every message
    carries its change's ``_seq`` in the ``sparkcdc.seq`` header: a consumer that keeps, per
    key, the highest seq it applied, and skips messages at or below it, sees every change once.
    Within a batch the messages of one topic (``sink.message-order: commit``), or of one key
    (``per-key``), are sent in ``_seq`` order by one producer, so with Kafka's default
    idempotent producer they land in each partition in that order.

    Snapshot rows of keys no earlier batch wrote (``append``) are sent the same way, before
    the batch's other changes, straight from the frame's partitions: one message per key,
    so there is no order to keep and no shuffle. A replay sends them again, as any batch.
    """

    options_model = KafkaOptions
    guarantee = "at-least-once"
    # an append is not all-or-nothing (a topic cannot take messages back): knows_appends
    # stays False, so the pipeline never starts one it might stop midway (no one-pass)
    appends = True

    def __init__(self, options: SinkOptions, spark: SparkSession, context: SinkContext) -> None:
        super().__init__(options, spark, context)
        # message_steps per (sink table, inserts, one task): a table's shape changes with its
        # schema, and a new shape is a new key
        self._steps: dict[tuple[SinkTable, bool, bool], tuple[FrameStep, ...]] = {}

    @property
    def kafka_options(self) -> KafkaOptions:
        assert isinstance(self.options, KafkaOptions)
        return self.options

    def open(self, tables: Sequence[SinkTable]) -> None:
        options = self.kafka_options
        topics = sorted({options.topic_for(t) for t in tables})
        for topic in topics:
            try:
                check_topic_name(topic)
            except ValueError as exc:
                raise SinkError(
                    f"{exc}; map the table to a valid topic with 'topic' or "
                    "'sink.tableId-to-topic.mapping'"
                ) from None
        _check_reachable(options.bootstrap_servers)
        _ensure_topics(self.spark, options, topics)

    def write(
        self, table: SinkTable, changes: DataFrame, batch_id: int, *, size: int | None = None
    ) -> bool:
        one_task = size is not None and size <= ONE_TASK_CHANGES
        return self._send(table, changes, batch_id, inserts=False, one_task=one_task)

    def append(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        if rows.rdd.getNumPartitions() == 1 and rows.count() > ROWS_PER_TASK:
            rows = rows.repartition(rows.sparkSession.sparkContext.defaultParallelism)
        return self._send(table, rows, batch_id, inserts=True)

    def _send(
        self,
        table: SinkTable,
        changes: DataFrame,
        batch_id: int,
        *,
        inserts: bool,
        one_task: bool = False,
    ) -> bool:
        """Produce the messages of ``changes`` (see :func:`message_steps` for the tasks)."""
        from pyspark.errors import PySparkException

        options = self.kafka_options
        topic = options.topic_for(table)
        shape = (table, inserts, one_task)
        steps = self._steps.get(shape)
        if steps is None:
            steps = self._steps[shape] = message_steps(table, options, inserts, one_task=one_task)
        messages = applied(steps, changes)
        writer = messages.write.format("kafka").mode("append").option("topic", topic)
        for key, value in options.client_properties().items():
            writer = writer.option(f"kafka.{key}", value)
        try:
            writer.save()
        except (PySparkException, Py4JJavaError) as exc:
            discard_unsent(self.spark)
            reason = _reason(exc).rstrip(".")
            hint = f" {_TOO_LARGE}." if "RecordTooLargeException" in reason else ""
            raise SinkError(
                f"writing batch {batch_id} of {table.name} to Kafka topic {topic!r} at "
                f"{options.bootstrap_servers} failed: {reason}.{hint} The batch is "
                "written again when the pipeline restarts (at-least-once)"
            ) from exc
        return True


# -- messages ----------------------------------------------------------------------------
#
# The JSON text is not one to_json of the row: that writes a DECIMAL(30,10) zero as 0E-10
# and timestamps in the session's time zone; Flink's JSON formats write TIMESTAMP as local
# date-time text and TIMESTAMP_LTZ in UTC with a 'Z'. Runs of columns to_json writes as
# Flink does are one to_json each; the other columns are spelled one by one.


def kafka_messages(
    changes: DataFrame,
    table: SinkTable,
    options: KafkaOptions,
    *,
    inserts: bool = False,
    one_task: bool = False,
) -> DataFrame:
    """``key``, ``value``, ``headers`` (and ``partition`` for ``all-to-zero``) of a change
    frame's messages, in send order: :func:`message_steps` applied to ``changes``."""
    return applied(message_steps(table, options, inserts, one_task=one_task), changes)


FrameStep = Callable[["DataFrame"], "DataFrame"]


def applied(steps: Sequence[FrameStep], frame: DataFrame) -> DataFrame:
    return reduce(lambda done, step: step(done), steps, frame)


def message_steps(
    table: SinkTable, options: KafkaOptions, inserts: bool = False, *, one_task: bool = False
) -> tuple[FrameStep, ...]:
    """The frame operations that turn a change frame of ``table`` into its messages (see
    :func:`kafka_messages`), with their column expressions built now.

    The frame is partitioned by key and sorted by key, then ``_seq`` (``-U`` first), within
    partitions, where a window pairs an update's halves and the messages are made. In commit
    order (``sink.message-order: commit``) the messages then go to one partition, sorted by
    ``_seq`` (``-U`` first), and one Spark task sends them all: a Kafka partition's messages
    follow the binlog across keys, whichever tasks made them (several tasks writing to one
    Kafka partition interleave their messages as they come). In ``per-key`` order the tasks
    of the key partitions send their messages, each key's by one task in order (a table
    without a key: all in one task, by ``_seq``). With ``one_task`` the frame's partitions
    are joined into one, without a shuffle, and that task makes and sends every message in
    the same order. With ``inserts`` (every row a ``+I`` of its own key: snapshot rows) the
    messages stay in the frame's partitions: one message per key, of one snapshot point.

    The expressions depend on the table's shape and the options alone, never on a batch:
    building them is hundreds of calls into the JVM (a third of a small batch's time, measured
    at 20,000 changes/s), so the sink builds them once per sink table and reuses them.
    """
    from pyspark.sql import functions as F

    encoding = JsonEncoding.from_options(options)
    pk = (
        F.struct(*[F.col(quote_spark(c)) for c in table.primary_key]) if table.primary_key else None
    )
    # The row image's JSON text is made here, once per row and outside any condition, and
    # only chosen by conditions later: Spark evaluates an expression under a condition
    # without sharing its parts (a value's text twice, the image's once per branch), which
    # made the messages 4.5 times as costly (measured on 546,000 changes).
    image = F.struct(*[F.col(quote_spark(c)) for c in table.column_names])
    steps: list[FrameStep] = []
    one_task = one_task and not inserts
    if one_task:
        # one partition (Spark's SinglePartition): the window and the sort need no shuffle
        steps.append(lambda frame: frame.coalesce(1))
    elif not inserts and pk is not None:
        # one task pairs and makes (per-key order: sends) every message of a key (its key
        # text is its pk's). Shuffled before the JSON is made, so that the text of a batch
        # read in one partition (a binlog range) is made by every task after the shuffle,
        # not by that one
        steps.append(lambda frame: frame.repartition(pk))
    steps.append(
        _selected(
            F.col(OP).alias("op"),
            F.col(OP_TS).alias("op_ts"),
            F.col(SEQ).alias("seq"),
            F.col(DATABASE).alias("db"),
            F.col(TABLE).alias("tbl"),
            encoding.image(image, table.columns, nullable=False).alias("image"),
            (pk if pk is not None else F.lit(None)).alias("pk"),
            (F.xxhash64(pk) if pk is not None else F.lit(0)).alias("key_hash"),
            kind_rank_column().alias("rank"),
        )
    )
    if not inserts and pk is None and not one_task:  # no key: all in one task, in order
        steps.append(lambda frame: frame.repartition(1))
    if options.value_format == "changelog-json":
        value = encoding.obj([("data", F.col("image")), ("op", _json_string(F.col("op")))])
    else:
        pairing, value = _paired(table, options.value_format, encoding, inserts)
        steps += pairing
    headers = [F.struct(F.lit(SEQ_HEADER), F.col("seq").cast("string").cast("binary"))]
    extra = list(options.custom_headers)
    if options.add_table_id_to_header:
        extra += table_id_header_values(table.name)
    headers += [F.struct(F.lit(name), F.lit(text).cast("binary")) for name, text in extra]
    key = _key_text(table, encoding) if pk is not None else F.lit(None)
    columns = [
        key.cast("string").alias("key"),
        value.alias("value"),
        F.array(*headers).cast(_HEADERS_TYPE).alias("headers"),
    ]
    names = ["key", "value", "headers"]
    if options.partition_strategy == "all-to-zero":  # Flink CDC's default
        columns.append(F.lit(0).alias("partition"))
        names.append("partition")
    if not inserts and options.message_order == "commit":
        # made by the tasks of the key partitions, sent by one in commit order ('-U' before
        # its '+U': a key-changing update deletes the old key, then inserts the new one)
        steps.append(_selected(*columns, "seq", "rank"))
        if not one_task and pk is not None:
            steps.append(lambda frame: frame.repartition(1))
        steps.append(lambda frame: frame.sortWithinPartitions("seq", "rank"))
        steps.append(_selected(*names))
        return tuple(steps)
    # per-key order: a sink key's messages in commit order, whichever source table they
    # come from. With one source, db and tbl are the same in every row: the order the
    # pairing window of the debezium and canal formats sorts in already, so the rows are
    # sorted once. The key's hash goes first: Spark compares sorted rows by a 64-bit prefix
    # of their first column and reads the whole row only where prefixes tie, and a table's
    # name (the same in every row) or a struct key (no prefix) made every comparison read
    # the rows; with the hash first, building the messages took a fifth less time (600,000
    # updates, warm session)
    order = ["key_hash", "db", "tbl"] if len(table.sources) == 1 else ["key_hash"]
    order += ["pk", "seq", "rank"]
    if not inserts:
        steps.append(lambda frame: frame.sortWithinPartitions(*order))
    # the message's columns in one last step, over the sorted rows (a projection keeps their
    # order): Spark's driver analyses each frame operation, and with the value, key and
    # headers made by separate steps the message frame took ~80 ms to build, not ~45 ms
    # (a warm session here; a batch at 1,000 changes/s takes ~0.75 s in all)
    steps.append(_selected(*columns))
    return tuple(steps)


def _selected(*columns: Column | str) -> FrameStep:
    """The step that selects ``columns`` (built once, selected from each frame)."""
    return lambda frame: frame.select(*columns)


def _key_text(table: SinkTable, encoding: JsonEncoding) -> Column:
    """The key: the primary-key columns as a JSON object, in the key's order (as Debezium
    and Flink CDC write it; with its schema in schema mode, so that a key converter with
    schemas enabled reads it)."""
    from pyspark.sql import functions as F

    payload = encoding.image(F.col("pk"), table.key_columns)
    if not encoding.schemas:
        return payload
    schema = json.dumps(key_schema(table), separators=(",", ":"), ensure_ascii=False)
    return F.concat(F.lit(f'{{"schema":{schema},"payload":'), payload, F.lit("}"))


def _paired(
    table: SinkTable,
    value_format: ValueFormat,
    encoding: JsonEncoding,
    inserts: bool = False,
) -> tuple[list[FrameStep], Column]:
    """The steps that leave one row per message, an update's two halves as one (debezium /
    canal), and the message's value over such a row."""
    from pyspark.sql import functions as F

    op = F.col("op")
    steps: list[FrameStep] = []
    if inserts:  # every row a '+I': no halves to pair
        after_half, prev_image = F.lit(False), F.lit(None)
    else:
        pairing, after_half = _pair_halves()
        steps += pairing
        prev_image = F.col("prev_image")
    read, create, update = EnvelopeOp.READ.value, EnvelopeOp.CREATE.value, EnvelopeOp.UPDATE.value
    kind = (
        F.when(op == RowKind.INSERT.value, F.when(F.col("op_ts").isNull(), read).otherwise(create))
        .when(op == RowKind.UPDATE_AFTER.value, F.when(after_half, update).otherwise(create))
        .otherwise(EnvelopeOp.DELETE.value)  # '-D' and a lone '-U'
    )
    image = F.col("image")  # JSON text (message_steps)
    # expressions in the value, not columns of a step of their own: each only picks a text
    # the first step made, so naming one twice costs nothing (see message_steps' last step)
    before = F.when(after_half, prev_image).when(
        op.isin(RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value), image
    )
    after = F.when(op.isin(RowKind.INSERT.value, RowKind.UPDATE_AFTER.value), image)
    namespace = F.lit(json.dumps(table.namespace or None, ensure_ascii=False))
    short_name = F.lit(json.dumps(table.short_name, ensure_ascii=False))
    binlog_ms = F.unix_millis(F.col("op_ts")).cast("string")
    write_ms = F.unix_millis(F.current_timestamp()).cast("string")
    if value_format == "debezium-json":
        source = encoding.obj([("db", namespace), ("table", short_name), ("ts_ms", binlog_ms)])
        text = encoding.obj(
            [
                ("before", before),
                ("after", after),
                ("op", _json_string(kind)),
                ("source", source),
                ("ts_ms", write_ms),
            ]
        )
        if encoding.schemas:
            schema = json.dumps(debezium_schema(table), separators=(",", ":"), ensure_ascii=False)
            text = F.concat(F.lit(f'{{"schema":{schema},"payload":'), text, F.lit("}"))
    else:  # canal-json
        kind_name = F.when(kind == "u", "UPDATE").when(kind == "d", "DELETE").otherwise("INSERT")
        text = encoding.obj(
            [
                ("data", _array(F.coalesce(after, before))),
                ("old", F.when(kind == "u", _array(before))),
                ("type", _json_string(kind_name)),
                ("database", namespace),
                ("table", short_name),
                ("pkNames", F.lit(json.dumps(list(table.primary_key), ensure_ascii=False))),
                ("ts", write_ms),
                ("es", binlog_ms),
            ]
        )
    return steps, text


def _unwrapped(text: Column) -> Column:
    """``text`` without its first and last character, both ASCII (JSON's braces or
    brackets), cut as bytes: a cut by characters counts the text's characters twice,
    which was a quarter of the Kafka sink's CPU (measured at 100,000 changes/s)."""
    from pyspark.sql import functions as F

    raw = text.cast("binary")
    return raw.substr(F.lit(2), F.length(raw) - 2).cast("string")


def _json_string(text: Column) -> Column:
    """A JSON string of a text column whose values need no escaping (op codes, kinds)."""
    from pyspark.sql import functions as F

    return F.concat(F.lit('"'), text, F.lit('"'))


def _array(element: Column) -> Column:
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
            inner = _unwrapped(written)
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
            # as it needs. A quarter of what timestamp_text costs (measured)
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
            return _json_string(written)
        if kind in ("number", "raw"):
            return written.cast("string")
        if column.spark_type in _PLAIN_TEXT_TYPES or column.spark_type.startswith("DECIMAL"):
            return written.cast("string")  # as to_json writes them, without its cost
        # strings escaped, binary as base64: "[v]" unwrapped
        return F.when(written.isNotNull(), _unwrapped(F.to_json(F.array(written))))


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


def _pair_halves() -> tuple[list[FrameStep], Column]:
    """The steps that leave out the ``-U`` halves that pair with a ``+U`` (which gains their
    image as ``prev_image``), and the condition that tells such a ``+U``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # The halves are neighbours among the changes of their key: they share _seq (the sink
    # interface) or the '+U' follows at _seq + 1 (the binlog reader numbers each row image);
    # any other change of that key is at least one event (many positions) away. A window
    # per key, not per table, spreads the work over Spark's tasks; and as its neighbours
    # are of the same key, a key-changing update (its halves under two keys) stays two
    # messages (delete the old key, insert the new one). The key's hash leads the window's
    # keys so that its sort is the messages' (message_steps says why it goes first).
    order = Window.partitionBy("key_hash", "db", "tbl", "pk").orderBy("seq", "rank")
    op, seq = F.col("op"), F.col("seq")
    neighbours = _selected(
        "*",
        F.lag("op").over(order).alias("prev_op"),
        F.lag("seq").over(order).alias("prev_seq"),
        F.lag("image").over(order).alias("prev_image"),
        F.lead("op").over(order).alias("next_op"),
        F.lead("seq").over(order).alias("next_seq"),
    )
    before_op, after_op = RowKind.UPDATE_BEFORE.value, RowKind.UPDATE_AFTER.value
    after_half = (op == after_op) & (F.col("prev_op") == before_op) & (seq - F.col("prev_seq") <= 1)
    before_half = (
        (op == before_op) & (F.col("next_op") == after_op) & (F.col("next_seq") - seq <= 1)
    )
    kept = ~F.coalesce(before_half, F.lit(False))
    return [neighbours, lambda frame: frame.where(kept)], after_half


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
    value a NOT NULL source column's (see :func:`sparkcdc.pipeline.composer.described`)."""
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


def table_id_header_values(name: str) -> list[tuple[str, str]]:
    """Flink CDC's table-id headers for a sink table name.

    >>> table_id_header_values("app_db.orders")
    [('schemaName', 'app_db'), ('tableName', 'orders')]
    """
    parts = name.split(".")
    labels = ("namespace", "schemaName", "tableName")[-len(parts) :] if len(parts) <= 3 else ()
    if not labels:  # more than three parts: all but the last two are the namespace
        parts = [".".join(parts[:-2]), *parts[-2:]]
        labels = ("namespace", "schemaName", "tableName")
    return list(zip(labels, parts, strict=True))


# -- options -----------------------------------------------------------------------------


def parse_topic_mapping(text: str) -> dict[str, str]:
    """Flink CDC's ``sink.tableId-to-topic.mapping``: ``db.t1:topicA;db.t2:topicB``.

    >>> parse_topic_mapping("app_db.orders:orders; app_db.items:items")
    {'app_db.orders': 'orders', 'app_db.items': 'items'}
    """
    mapping: dict[str, str] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        table_id, sep, topic = entry.partition(":")
        table_id, topic = table_id.strip(), topic.strip()
        if not sep or not table_id or not topic:
            raise ValueError(
                f"entry {entry.strip()!r} is not 'table-id:topic'; write the mapping as "
                "'db.t1:topicA;db.t2:topicB'"
            )
        if table_id in mapping:
            raise ValueError(f"table {table_id!r} is mapped twice")
        mapping[table_id] = topic
    return mapping


def parse_custom_headers(text: str) -> tuple[tuple[str, str], ...]:
    """Flink CDC's ``sink.custom-header``: ``key1:value1,key2:value2``, sent with every message.

    >>> parse_custom_headers("team:data, env:prod")
    (('team', 'data'), ('env', 'prod'))
    """
    headers = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, sep, value = entry.partition(":")
        if not sep or not name.strip():
            raise ValueError(
                f"entry {entry.strip()!r} is not 'key:value'; write the headers as "
                "'key1:value1,key2:value2'"
            )
        headers.append((name.strip(), value.strip()))
    return tuple(headers)


def check_topic_name(topic: str) -> None:
    """Raise ValueError unless Kafka accepts ``topic`` as a topic name."""
    if topic in (".", "..") or not _TOPIC_RE.match(topic):
        raise ValueError(
            f"{topic!r} is not a valid Kafka topic name (1-249 characters of a-z, A-Z, 0-9, "
            "'.', '_', '-'; not '.' or '..')"
        )


# -- reachability and topics (through the JVM's kafka-clients, as Spark's writer) -------


def _check_reachable(servers: str) -> None:
    """Fail fast when no bootstrap server accepts a TCP connection."""
    addresses = [_host_port(s) for s in servers.split(",") if s.strip()]
    problems = []
    for address in addresses:
        if address is None:
            return  # a form we do not parse: let the Kafka client judge it
        try:
            with socket.create_connection(address, timeout=3.0):
                return
        except OSError as exc:
            problems.append(f"{address[0]}:{address[1]}: {exc.strerror or exc}")
    raise SinkError(_unreachable(servers, "; ".join(problems) or "no address given"))


def _host_port(server: str) -> tuple[str, int] | None:
    text = server.strip().rpartition("://")[2]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _unreachable(servers: str, reason: str) -> str:
    return (
        f"Kafka at {servers} is not reachable: {reason}. Start it (for the private "
        "development broker: python -m sparkcdc_dev.devkafka start) or fix "
        "properties.bootstrap.servers"
    )


def _ensure_topics(spark: Any, options: KafkaOptions, topics: Sequence[str]) -> None:
    """Create the topics that do not exist yet (1 partition, the broker's replication)."""
    jvm = spark._jvm
    admin_pkg = jvm.org.apache.kafka.clients.admin
    known = set(admin_pkg.AdminClientConfig.configNames())
    props = jvm.java.util.Properties()
    for key, value in options.client_properties().items():
        if key in known:  # producer-only properties would be logged as unknown
            props.setProperty(key, value)
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    timeout_ms = int(REACHABLE_TIMEOUT_S * 1000)
    admin = admin_pkg.AdminClient.create(props)
    try:
        try:
            listing = admin_pkg.ListTopicsOptions().timeoutMs(timeout_ms)
            existing = set(admin.listTopics(listing).names().get(timeout_ms + 2000, seconds))
        except Py4JJavaError as exc:
            raise SinkError(_unreachable(options.bootstrap_servers, _java_cause(exc))) from None
        missing = [t for t in topics if t not in existing]
        if not missing:
            return
        optional = jvm.java.util.Optional
        new_topics = jvm.java.util.ArrayList()
        for topic in missing:
            new_topics.add(admin_pkg.NewTopic(topic, optional.of(1), optional.empty()))
        futures = admin.createTopics(new_topics).values()
        for topic in missing:
            try:
                futures.get(topic).get(timeout_ms, seconds)
            except Py4JJavaError as exc:
                cause = _java_cause(exc)
                if "TopicExistsException" in cause:  # created meanwhile: fine
                    continue
                raise SinkError(
                    f"creating Kafka topic {topic!r} at {options.bootstrap_servers} failed: "
                    f"{cause}. Create it yourself, or grant this client the right to"
                ) from None
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(2))


def discard_unsent(spark: SparkSession) -> None:
    """Close the Kafka producers Spark's Kafka writer keeps in this JVM at once, dropping the
    records they hold unsent.

    The writer shares one cached producer per setting among a JVM's tasks. When one task of
    a write fails (its records expired on a broker that went away), the job ends and the
    others may still be flushing: their records stay queued in that producer, which outlives
    the failed batch, and a broker back within their delivery timeout takes them after the
    pipeline reported the failure, beside the replay of the same batch (seen here: a rerun
    in the same session sent snapshot rows twice). Dropped, they are sent by the replay
    alone. The executors of a cluster are other JVMs: their producers end with the
    application.
    """
    try:
        pool, producers = _producer_pool(spark)
        for producer in producers:
            producer.close(spark.sparkContext._jvm.java.time.Duration.ZERO)  # type: ignore[union-attr]
        pool.reset()  # forgets them (closing a closed producer does nothing)
    except Py4JError as exc:  # a Spark whose Kafka writer keeps its producers otherwise
        log.warning("could not drop the Kafka producers' unsent records: %s", exc)


def cached_producers(spark: SparkSession) -> list[Any]:
    """The KafkaProducer objects (py4j) Spark's Kafka writer keeps in this JVM."""
    return _producer_pool(spark)[1]


def _producer_pool(spark: SparkSession) -> tuple[Any, list[Any]]:
    """Spark's InternalKafkaProducerPool object and the producers in its cache (its pool is
    private to Spark's Kafka package: read by reflection)."""
    sc = spark.sparkContext
    jvm, gateway = sc._jvm, sc._gateway
    assert jvm is not None and gateway is not None
    owner = getattr(jvm.org.apache.spark.sql.kafka010.producer, "InternalKafkaProducerPool$")
    module = getattr(owner, "MODULE$")
    getter = module.getClass().getDeclaredMethod("pool", gateway.new_array(jvm.Class, 0))
    getter.setAccessible(True)
    cache = getter.invoke(module, gateway.new_array(jvm.Object, 0)).getAsMap()
    entries = jvm.scala.jdk.javaapi.CollectionConverters.asJava(cache).values()
    return module, [entry.producer().producer() for entry in entries]


def _java_cause(exc: Any) -> str:
    """``Class: message`` of the innermost cause of a Py4JJavaError."""
    throwable = exc.java_exception
    while throwable.getCause() is not None:
        throwable = throwable.getCause()
    return f"{throwable.getClass().getSimpleName()}: {throwable.getMessage()}"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, Py4JJavaError):  # its first line only names the py4j call
        return _java_cause(exc)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
