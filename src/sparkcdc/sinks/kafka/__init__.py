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

from sparkcdc.sinks.kafka.options import KafkaOptions
from sparkcdc.sinks.kafka.sink import KafkaSink

__all__ = ["KafkaOptions", "KafkaSink"]
