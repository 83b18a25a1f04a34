"""The Kafka producers Spark's Kafka writer caches in the driver's JVM, reached by reflection.

Why this exists: when a write fails, records other tasks still hold in the writer's cached
producer would be sent after the pipeline reported the failure, beside the batch's replay
(:func:`discard_unsent` says how). Spark offers no way to drop them: its producer pool is
private to its Kafka package, so this module reads it by reflection. A Spark whose Kafka
writer keeps its producers otherwise makes :func:`discard_unsent` log a warning and do
nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


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
