"""A change frame into Kafka messages: the order they are sent in, their key, their value in
the chosen format, and their headers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sparkcdc.model.changelog import DATABASE, OP, OP_TS, SEQ, TABLE
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.sinks.base import SinkTable, kind_rank_column
from sparkcdc.sinks.kafka.canal_json import canal_value
from sparkcdc.sinks.kafka.changelog_json import changelog_value
from sparkcdc.sinks.kafka.connect_schema import key_schema
from sparkcdc.sinks.kafka.debezium_json import debezium_value
from sparkcdc.sinks.kafka.encoding import JsonEncoding
from sparkcdc.sinks.kafka.options import KafkaOptions
from sparkcdc.sinks.kafka.pairing import paired
from sparkcdc.sinks.kafka.steps import FrameStep, applied, selected

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SEQ_HEADER = "sparkcdc.seq"
_HEADERS_TYPE = "array<struct<key:string,value:binary>>"  # what Spark's Kafka writer takes


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
    building them is hundreds of calls into the JVM (a large part of a small batch's time),
    so the sink builds them once per sink table and reuses them.
    """
    from pyspark.sql import functions as F

    encoding = JsonEncoding.from_options(options)
    pk = (
        F.struct(*[F.col(quote_spark(c)) for c in table.primary_key]) if table.primary_key else None
    )
    # The row image's JSON text is made here, once per row and outside any condition, and
    # only chosen by conditions later: Spark evaluates an expression under a condition
    # without sharing its parts (a value's text twice, the image's once per branch), which
    # made the messages several times as costly (docs/benchmarks.md).
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
        selected(
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
        value = changelog_value(encoding)
    else:
        pairing, change = paired(table, inserts)
        steps += pairing
        format_value = debezium_value if options.value_format == "debezium-json" else canal_value
        value = format_value(table, change, encoding)
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
        steps.append(selected(*columns, "seq", "rank"))
        if not one_task and pk is not None:
            steps.append(lambda frame: frame.repartition(1))
        steps.append(lambda frame: frame.sortWithinPartitions("seq", "rank"))
        steps.append(selected(*names))
        return tuple(steps)
    # per-key order: a sink key's messages in commit order, whichever source table they
    # come from. With one source, db and tbl are the same in every row: the order the
    # pairing window of the debezium and canal formats sorts in already, so the rows are
    # sorted once. The key's hash goes first: Spark compares sorted rows by a 64-bit prefix
    # of their first column and reads the whole row only where prefixes tie, and a table's
    # name (the same in every row) or a struct key (no prefix) made every comparison read
    # the rows; with the hash first, building the messages takes less time
    order = ["key_hash", "db", "tbl"] if len(table.sources) == 1 else ["key_hash"]
    order += ["pk", "seq", "rank"]
    if not inserts:
        steps.append(lambda frame: frame.sortWithinPartitions(*order))
    # the message's columns in one last step, over the sorted rows (a projection keeps their
    # order): Spark's driver analyses each frame operation, and with the value, key and
    # headers made by separate steps the message frame took nearly twice as long to build
    steps.append(selected(*columns))
    return tuple(steps)


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
