"""The kafka sink: each batch's changes of a sink table sent as messages to its topic."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

from sparkcdc.errors import SinkError
from sparkcdc.sinks.base import SchemalessSink, SinkContext, SinkOptions, SinkTable
from sparkcdc.sinks.kafka.messages import message_steps
from sparkcdc.sinks.kafka.options import KafkaOptions, check_topic_name
from sparkcdc.sinks.kafka.producer_pool import discard_unsent
from sparkcdc.sinks.kafka.steps import FrameStep, applied
from sparkcdc.sinks.kafka.topics import check_reachable, ensure_topics, java_cause

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# snapshot inserts in one Spark partition are spread over the cores above this many rows
ROWS_PER_TASK = 100_000
# A batch's changes of a table up to this many are sent by one task: spreading them over the
# cores by key is a shuffle (two Spark jobs), more than a second core saves on so few; larger
# batches sent by one task made the pipeline fall behind (docs/benchmarks.md)
ONE_TASK_CHANGES = 10_000
# a row's message over 1 MB (Kafka's default) is refused by the producer or by the broker
_TOO_LARGE = (
    "A message is larger than Kafka accepts: raise the producer's properties.max.request.size "
    "(and properties.buffer.memory, if the message is larger than it) and the topic's "
    "max.message.bytes (a topic created without it has the broker's message.max.bytes)"
)


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
        ensure_topics(self.spark, self.kafka_options, self._checked_topics(tables))

    def begin_open(self, tables: Sequence[SinkTable]) -> None:
        """The topics' names and the brokers are checked now; the absent topics are created
        in a thread (an admin client's start, ~0.4 s of a run's) while the stream starts."""
        topics = self._checked_topics(tables)
        self._create_in_background(
            [functools.partial(ensure_topics, self.spark, self.kafka_options, topics)]
        )

    def _checked_topics(self, tables: Sequence[SinkTable]) -> list[str]:
        """The topics of ``tables``, their names checked, the brokers reachable."""
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
        check_reachable(options.bootstrap_servers)
        return topics

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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, Py4JJavaError):  # its first line only names the py4j call
        return java_cause(exc)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
