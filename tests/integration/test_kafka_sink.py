"""The kafka sink against the private broker, read back with an independent client.

Spark (with the pinned spark-sql-kafka connector) writes; confluent-kafka (librdkafka)
reads every message of the topic up to its high watermark, so a missing, extra or
misordered message fails the test.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pydantic import ValidationError

from sparkcdc.errors import SinkError
from sparkcdc.sinks.base import SinkColumn, SinkContext, SinkTable, sink_class
from sparkcdc.sinks.kafka.messages import kafka_messages
from sparkcdc.sinks.kafka.options import KafkaOptions
from sparkcdc.sinks.kafka.sink import KafkaSink
from sparkcdc_dev.devkafka import DevKafka

pytestmark = pytest.mark.integration

SCHEMA = (
    "_op STRING, _op_ts TIMESTAMP, _seq BIGINT, _database STRING, _table STRING, "
    "id BIGINT, name STRING, amount DECIMAL(10,2)"
)
T1 = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
T1_MS = 1714564800123
D = Decimal

# One batch of app_db.orders covering every case: two snapshot rows of one chunk (shared
# seq), an insert, an update whose halves are at seq and seq+1 (as the binlog reader numbers
# them), one whose halves share a seq (as the sink interface allows), a key-changing update,
# a lone '-U' (a transform filter let the row out), a lone '+U' (let in) and a delete.
CHANGES: list[tuple[Any, ...]] = [
    ("+I", None, 100, "app_db", "orders", 1, "a", D("1.00")),
    ("+I", None, 100, "app_db", "orders", 2, "b", D("2.00")),
    ("+I", T1, 200, "app_db", "orders", 3, "c", D("3.00")),
    ("-U", T1, 300, "app_db", "orders", 3, "c", D("3.00")),
    ("+U", T1, 301, "app_db", "orders", 3, "c2", D("3.50")),
    ("-U", T1, 400, "app_db", "orders", 1, "a", D("1.00")),
    ("+U", T1, 400, "app_db", "orders", 1, "a", D("1.10")),
    ("-U", T1, 500, "app_db", "orders", 2, "b", D("2.00")),
    ("+U", T1, 501, "app_db", "orders", 20, "b", D("2.00")),
    ("-U", T1, 600, "app_db", "orders", 3, "c2", D("3.50")),
    ("+U", T1, 700, "app_db", "orders", 4, None, D("4.00")),
    ("-D", T1, 800, "app_db", "orders", 20, "b", D("2.00")),
]


def row(id_: int, name: str | None, amount: str) -> dict[str, Any]:
    return {"id": id_, "name": name, "amount": D(amount)}


@dataclass(frozen=True)
class Message:
    partition: int
    offset: int
    key: Any
    value: Any
    headers: dict[str, bytes]

    @property
    def seq(self) -> int:
        return int(self.headers["sparkcdc.seq"])


@pytest.fixture(scope="module")
def servers() -> Iterator[str]:
    kafka = DevKafka.from_env()
    started_here = not kafka.is_running()
    yield kafka.start()
    if started_here:
        kafka.stop()


def orders_table() -> SinkTable:
    """app_db.orders_<unique>: its default topic is unique per test."""
    return SinkTable(
        name=f"app_db.orders_{uuid.uuid4().hex[:10]}",
        columns=(
            SinkColumn("id", "BIGINT", nullable=False),
            SinkColumn("name", "STRING"),
            SinkColumn("amount", "DECIMAL(10,2)"),
        ),
        primary_key=("id",),
        sources=("app_db.orders",),
    )


def kafka_options(**options: Any) -> KafkaOptions:
    """The sink's options; a bootstrap server that is never reached unless given."""
    defaults = {"type": "kafka", "properties.bootstrap.servers": "127.0.0.1:1"}
    return KafkaOptions.model_validate({**defaults, **options})


def make_sink(spark: Any, tmp_path: Any, **options: Any) -> KafkaSink:
    return KafkaSink(kafka_options(**options), spark, SinkContext("test", str(tmp_path)))


def change_frame(spark: Any, rows: Sequence[tuple[Any, ...]]) -> Any:
    # reversed and scattered over partitions: the sink itself must restore the order
    return spark.createDataFrame(list(reversed(rows)), SCHEMA).repartition(3)


def consume(servers: str, topic: str, timeout_s: float = 30.0) -> list[Message]:
    """Every message of ``topic`` up to its current high watermark, in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"test-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        remaining: dict[int, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                remaining[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in remaining])
        messages: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            p, offset = msg.partition(), msg.offset()
            assert p is not None and offset is not None
            key, value = msg.key(), msg.value()
            messages.append(
                Message(
                    p,
                    offset,
                    None if key is None else json.loads(key, parse_float=Decimal),
                    None if value is None else json.loads(value, parse_float=Decimal),
                    {k: bytes(v or b"") for k, v in (msg.headers() or [])},
                )
            )
            if p in remaining and offset + 1 >= remaining[p]:
                del remaining[p]
        assert not remaining, f"timed out reading {topic}: partitions {remaining} not read up"
        return sorted(messages, key=lambda m: (m.partition, m.offset))
    finally:
        consumer.close()


def by_key(messages: Sequence[Message]) -> dict[int, list[tuple[int, Any]]]:
    """``{id: [(seq, value), ...]}`` in topic order (a key's messages share a partition)."""
    partitions: dict[int, set[int]] = defaultdict(set)
    out: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for m in messages:
        partitions[m.key["id"]].add(m.partition)
        out[m.key["id"]].append((m.seq, m.value))
    assert all(len(p) == 1 for p in partitions.values()), partitions
    return dict(out)


def test_open_creates_missing_topics(spark: Any, servers: str, tmp_path: Any) -> None:
    table = orders_table()
    admin = AdminClient({"bootstrap.servers": servers})
    assert table.name not in admin.list_topics(timeout=10).topics

    make_sink(spark, tmp_path, **{"properties.bootstrap.servers": servers}).open([table])

    topics = admin.list_topics(timeout=10).topics
    assert table.name in topics
    assert len(topics[table.name].partitions) == 1


def test_begin_open_creates_missing_topics_in_the_background_and_ready_waits(
    spark: Any, servers: str, tmp_path: Any
) -> None:
    table = orders_table()
    sink = make_sink(spark, tmp_path, **{"properties.bootstrap.servers": servers})
    sink.begin_open([table])
    sink.ready()
    admin = AdminClient({"bootstrap.servers": servers})
    assert table.name in admin.list_topics(timeout=10).topics
    # brokers out of reach fail at once; a topic the broker refuses (its name collides with
    # another's: '.' and '_' clash in metric names) fails at ready(), in this thread, once
    with pytest.raises(SinkError, match=r"127\.0\.0\.1:1"):
        make_sink(spark, tmp_path).begin_open([table])
    taken = f"taken_{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(taken, 1, 1)])[taken].result(timeout=30)
    clashing = make_sink(
        spark,
        tmp_path,
        **{"properties.bootstrap.servers": servers, "topic": taken.replace("_", ".")},
    )
    clashing.begin_open([table])
    with pytest.raises(SinkError, match="collides"):
        clashing.ready()
    clashing.ready()


def test_debezium_json(spark: Any, servers: str, tmp_path: Any) -> None:
    table = orders_table()  # default topic: the sink table's name
    sink = make_sink(spark, tmp_path, **{"properties.bootstrap.servers": servers})
    sink.open([table])
    sink.write(table, change_frame(spark, CHANGES), 7)

    messages = consume(servers, table.name)
    short = table.short_name
    for m in messages:
        assert isinstance(m.value.pop("ts_ms"), int)  # the write time

    def envelope(before: Any, after: Any, op: str, ts_ms: int | None) -> dict[str, Any]:
        source = {"db": "app_db", "table": short, "ts_ms": ts_ms}
        return {"before": before, "after": after, "op": op, "source": source}

    assert by_key(messages) == {
        1: [
            (100, envelope(None, row(1, "a", "1.00"), "r", None)),
            (400, envelope(row(1, "a", "1.00"), row(1, "a", "1.10"), "u", T1_MS)),
        ],
        2: [
            (100, envelope(None, row(2, "b", "2.00"), "r", None)),
            (500, envelope(row(2, "b", "2.00"), None, "d", T1_MS)),  # key changed to 20
        ],
        3: [
            (200, envelope(None, row(3, "c", "3.00"), "c", T1_MS)),
            (301, envelope(row(3, "c", "3.00"), row(3, "c2", "3.50"), "u", T1_MS)),
            (600, envelope(row(3, "c2", "3.50"), None, "d", T1_MS)),  # lone -U
        ],
        20: [
            (501, envelope(None, row(20, "b", "2.00"), "c", T1_MS)),
            (800, envelope(row(20, "b", "2.00"), None, "d", T1_MS)),
        ],
        4: [(700, envelope(None, row(4, None, "4.00"), "c", T1_MS))],  # lone +U
    }
    assert all(set(m.headers) == {"sparkcdc.seq"} for m in messages)


def test_canal_json_with_topic_mapping_and_table_headers(
    spark: Any, servers: str, tmp_path: Any
) -> None:
    table = orders_table()
    topic = f"canal_{uuid.uuid4().hex[:10]}"
    sink = make_sink(
        spark,
        tmp_path,
        **{
            "properties.bootstrap.servers": servers,
            "value.format": "canal-json",
            "sink.tableId-to-topic.mapping": f"app_db.elsewhere:x;{table.name}:{topic}",
            "sink.add-tableId-to-header-enabled": "true",
        },
    )
    sink.open([table])
    sink.write(table, change_frame(spark, CHANGES), 1)

    messages = consume(servers, topic)
    for m in messages:
        assert isinstance(m.value.pop("ts"), int)
        assert m.value.pop("database") == "app_db"
        assert m.value.pop("table") == table.short_name
        assert m.value.pop("pkNames") == ["id"]
        assert m.headers["schemaName"] == b"app_db"
        assert m.headers["tableName"] == table.short_name.encode()

    def canal(kind: str, data: Any, old: Any, es: int | None) -> dict[str, Any]:
        return {"data": [data], "old": None if old is None else [old], "type": kind, "es": es}

    assert by_key(messages) == {
        1: [
            (100, canal("INSERT", row(1, "a", "1.00"), None, None)),
            (400, canal("UPDATE", row(1, "a", "1.10"), row(1, "a", "1.00"), T1_MS)),
        ],
        2: [
            (100, canal("INSERT", row(2, "b", "2.00"), None, None)),
            (500, canal("DELETE", row(2, "b", "2.00"), None, T1_MS)),
        ],
        3: [
            (200, canal("INSERT", row(3, "c", "3.00"), None, T1_MS)),
            (301, canal("UPDATE", row(3, "c2", "3.50"), row(3, "c", "3.00"), T1_MS)),
            (600, canal("DELETE", row(3, "c2", "3.50"), None, T1_MS)),
        ],
        20: [
            (501, canal("INSERT", row(20, "b", "2.00"), None, T1_MS)),
            (800, canal("DELETE", row(20, "b", "2.00"), None, T1_MS)),
        ],
        4: [(700, canal("INSERT", row(4, None, "4.00"), None, T1_MS))],
    }


def write_changelog(spark: Any, servers: str, tmp_path: Any) -> list[Message]:
    table = orders_table()
    topic = f"changelog_{uuid.uuid4().hex[:10]}"
    sink = make_sink(
        spark,
        tmp_path,
        **{
            "properties.bootstrap.servers": servers,
            "value.format": "changelog-json",
            "topic": topic,
            "properties.linger.ms": 5,
        },
    )
    sink.open([table])
    sink.write(table, change_frame(spark, CHANGES), 3)
    return consume(servers, topic)


def test_changelog_json(spark: Any, servers: str, tmp_path: Any) -> None:
    messages = write_changelog(spark, servers, tmp_path)

    def change(op: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"data": data, "op": op}

    assert by_key(messages) == {
        1: [
            (100, change("+I", row(1, "a", "1.00"))),
            (400, change("-U", row(1, "a", "1.00"))),  # '-U' before '+U' of one seq
            (400, change("+U", row(1, "a", "1.10"))),
        ],
        2: [(100, change("+I", row(2, "b", "2.00"))), (500, change("-U", row(2, "b", "2.00")))],
        3: [
            (200, change("+I", row(3, "c", "3.00"))),
            (300, change("-U", row(3, "c", "3.00"))),
            (301, change("+U", row(3, "c2", "3.50"))),
            (600, change("-U", row(3, "c2", "3.50"))),
        ],
        20: [
            (501, change("+U", row(20, "b", "2.00"))),
            (800, change("-D", row(20, "b", "2.00"))),
        ],
        4: [(700, change("+U", row(4, None, "4.00")))],
    }


def test_replaying_changelog_json_gives_the_final_table(
    spark: Any, servers: str, tmp_path: Any
) -> None:
    state: dict[int, dict[str, Any]] = {}
    for m in write_changelog(spark, servers, tmp_path):
        if m.value["op"] in ("+I", "+U"):
            state[m.key["id"]] = m.value["data"]
        else:
            assert state.pop(m.key["id"]) == m.value["data"]

    assert state == {1: row(1, "a", "1.10"), 4: row(4, None, "4.00")}


def test_table_without_primary_key_has_no_message_key(spark: Any) -> None:
    table = SinkTable("app_db.log", orders_table().columns, (), ("app_db.log",))
    rows = [c for c in CHANGES if c[2] in (200, 300, 301)]
    messages = kafka_messages(
        change_frame(spark, rows), table, kafka_options(**{"value.format": "canal-json"})
    ).collect()

    assert [m["key"] for m in messages] == [None, None]
    values = [json.loads(m["value"], parse_float=Decimal) for m in messages]
    assert [(v["type"], v["pkNames"], v["old"]) for v in values] == [
        ("INSERT", [], None),
        ("UPDATE", [], [row(3, "c", "3.00")]),
    ]


@pytest.mark.parametrize("schemas", [False, True], ids=["plain", "schema-mode"])
def test_the_key_follows_the_primary_keys_order_not_the_columns(spark: Any, schemas: bool) -> None:
    """As Debezium and Flink CDC write keys: a topic's key bytes must not depend on where
    the key columns stand in the table (log compaction compares them)."""
    orders = orders_table()
    table = SinkTable("app_db.orders", orders.columns, ("name", "id"), ("app_db.orders",))
    rows = [c for c in CHANGES if c[2] == 200]
    options = kafka_options(**{"debezium-json.include-schema.enabled": schemas})
    (message,) = kafka_messages(change_frame(spark, rows), table, options).collect()
    key = json.loads(message["key"])
    if schemas:
        assert [f["field"] for f in key["schema"]["fields"]] == ["name", "id"]
        key = key["payload"]
    assert list(key) == ["name", "id"]


def test_unreachable_kafka_fails_fast(spark: Any, tmp_path: Any) -> None:
    sink = make_sink(spark, tmp_path, **{"properties.bootstrap.servers": "127.0.0.1:1"})
    started = time.monotonic()
    with pytest.raises(SinkError, match=r"Kafka at 127\.0\.0\.1:1 is not reachable") as info:
        sink.open([orders_table()])
    assert time.monotonic() - started < 10
    assert "properties.bootstrap.servers" in str(info.value)


def test_options_follow_flink_cdc_names() -> None:
    assert sink_class("kafka").options_model is KafkaOptions
    options = KafkaOptions.model_validate(
        {
            "type": "kafka",
            "properties.bootstrap.servers": "k1:9092,k2:9092",
            "properties.linger.ms": 5,
            "properties.enable.idempotence": True,
            "sink.tableId-to-topic.mapping": "app_db.orders:orders_topic; app_db.items:items",
        }
    )
    assert options.value_format == "debezium-json"
    assert options.message_order == "commit"  # a partition's messages follow the binlog
    assert options.properties == {"linger.ms": "5", "enable.idempotence": "true"}
    # the user's properties over the sink's throughput defaults
    assert options.client_properties() == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "linger.ms": "5",
        "enable.idempotence": "true",
        "batch.size": "262144",
        "compression.type": "lz4",
    }
    table = orders_table()
    assert options.topic_for(table) == table.name
    assert options.topic_for(SinkTable("app_db.orders", (), (), ())) == "orders_topic"
    single = options.model_copy(update={"topic": "all"})
    assert single.topic_for(SinkTable("app_db.orders", (), (), ())) == "all"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"value.format": "avro"}, "value.format"),
        ({"key.format": "csv"}, "key.format"),
        ({"topik": "x"}, "topik"),
        ({"sink.tableId-to-topic.mapping": "app_db.orders"}, "sink.tableId-to-topic.mapping"),
        ({"topic": "no spaces"}, "topic"),
        ({"sink.message-order": "by-key"}, "sink.message-order"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError) as info:
        KafkaOptions.model_validate(
            {"type": "kafka", "properties.bootstrap.servers": "k:9092", **options}
        )
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ValidationError, match=r"properties\.bootstrap\.servers"):
        KafkaOptions.model_validate({"type": "kafka", "topic": "t"})


# -- appends (snapshot rows of keys no earlier batch wrote) ----------------------------

SNAPSHOT = [("+I", None, 100, "app_db", "orders", k, f"n{k}", D(f"{k}.00")) for k in (1, 2, 3)]
AFTER_SNAPSHOT = [
    ("-U", T1, 300, "app_db", "orders", 2, "n2", D("2.00")),
    ("+U", T1, 301, "app_db", "orders", 2, "two", D("2.00")),
    ("-D", T1, 400, "app_db", "orders", 3, "n3", D("3.00")),
]


def test_append_then_write_in_one_batch(spark: Any, servers: str, tmp_path: Any) -> None:
    table = orders_table()
    sink = make_sink(spark, tmp_path, **{"properties.bootstrap.servers": servers})
    sink.open([table])
    # the pipeline does not call append yet (KafkaSink.appends): the method itself is tested
    assert sink.append(table, change_frame(spark, SNAPSHOT), 3)
    assert sink.write(table, change_frame(spark, AFTER_SNAPSHOT), 3)

    def kinds(messages: Sequence[Message]) -> dict[int, list[tuple[int, str]]]:
        return {k: [(s, v["op"]) for s, v in m] for k, m in by_key(messages).items()}

    assert kinds(consume(servers, table.name)) == {
        1: [(100, "r")],
        2: [(100, "r"), (301, "u")],
        3: [(100, "r"), (400, "d")],
    }
    # a replay sends both again (at-least-once): a consumer that skips seqs it has applied
    # per key sees every change once
    assert sink.append(table, change_frame(spark, SNAPSHOT), 3)
    assert sink.write(table, change_frame(spark, AFTER_SNAPSHOT), 3)
    replayed = consume(servers, table.name)
    assert len(replayed) == 10
    applied: dict[int, int] = {}
    state: dict[int, Any] = {}
    for m in replayed:
        key = m.key["id"]
        if m.seq > applied.get(key, -1):
            applied[key] = m.seq
            state[key] = m.value["after"]
    assert state == {1: row(1, "n1", "1.00"), 2: row(2, "two", "2.00"), 3: None}


def _plan(frame: Any) -> str:
    return str(frame._jdf.queryExecution().executedPlan().toString())


def test_messages_are_built_per_partition(spark: Any) -> None:
    """Snapshot inserts go out from their own partitions (no shuffle, no window); changes
    are paired by a window per key, not one task per table, after the one shuffle that
    also gives every key's messages to one task (by key, not by table)."""
    table = orders_table()
    inserts = change_frame(spark, SNAPSHOT)
    messages = kafka_messages(inserts, table, kafka_options(), inserts=True)
    plan = _plan(messages)
    assert plan.count("Exchange") == 1, plan  # change_frame's own repartition(3)
    assert "Window" not in plan
    assert messages.rdd.getNumPartitions() == inserts.rdd.getNumPartitions() == 3

    per_key = kafka_options(**{"sink.message-order": "per-key"})
    paired = _plan(kafka_messages(change_frame(spark, CHANGES), table, per_key))
    # one shuffle, by key (it takes the place of change_frame's own repartition(3)), below
    # the JSON: the text is made by the tasks after it, whatever the batch's partitions
    assert paired.count("Exchange") == 1, paired
    assert "Exchange hashpartitioning(struct(id, id#" in paired, paired
    assert paired.index(" AS image#") < paired.index("Exchange"), paired
    assert "Window" in paired

    # commit order: the same, then the messages made go to one task, which sends them
    ordered = _plan(kafka_messages(change_frame(spark, CHANGES), table, kafka_options()))
    assert ordered.count("Exchange") == 2, ordered
    single = ordered.index("Exchange SinglePartition")
    assert ordered.index("Exchange hashpartitioning(struct(id, id#") > single, ordered
    assert ordered.index(" AS value#") > single, ordered  # made below it, by every task


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "no-key"])
def test_a_batch_sent_by_one_task_has_the_messages_the_shuffle_by_key_gives(
    spark: Any, keyed: bool
) -> None:
    """``one_task`` (a batch of a few changes): the frame's partitions are joined without
    a shuffle, and that one task sends the messages the shuffle by key gives (the tasks
    after it), each key's (or, with no key, the table's) in the same order."""
    orders = orders_table()
    table = orders if keyed else SinkTable("app_db.log", orders.columns, (), ("app_db.log",))
    frame = change_frame(spark, CHANGES)
    spread = kafka_messages(frame, table, kafka_options())
    one = kafka_messages(frame, table, kafka_options(), one_task=True)

    plan = _plan(one)
    assert plan.count("Exchange") == 1, plan  # change_frame's own repartition(3)
    assert "Coalesce 1" in plan, plan
    assert "Window" in plan, plan
    assert one.rdd.getNumPartitions() == 1

    def by_key(messages: list[Any]) -> dict[Any, list[tuple[Any, ...]]]:
        out: dict[Any, list[tuple[Any, ...]]] = {}
        for m in messages:
            value = json.loads(m["value"])
            value.pop("ts_ms")  # the time of writing
            out.setdefault(m["key"], []).append((value, sorted(m["headers"])))
        return out

    sent = by_key(one.collect())
    assert sent == by_key(spread.collect())
    assert len(sent) == (5 if keyed else 1), sent  # ids 1, 2, 3, 4, 20


# -- Flink CDC's option names and Flink's JSON spellings ---------------------------------

# the sink block of Flink CDC's Kafka pipeline connector page, and every option its table lists
FLINK_CDC_EXAMPLE = {
    "type": "kafka",
    "name": "Kafka Sink",
    "properties.bootstrap.servers": "PLAINTEXT://localhost:62510",
}
FLINK_CDC_OPTIONS = {
    "partition.strategy": "hash-by-key",
    "key.format": "json",
    "value.format": "debezium-json",
    "topic": "all_changes",
    "sink.add-tableId-to-header-enabled": "true",
    "properties.acks": "all",
    "sink.custom-header": "key1:value1,key2:value2",
    "sink.tableId-to-topic.mapping": "mydb.mytable1:topic1;mydb.mytable2:topic2",
    "debezium-json.include-schema.enabled": "true",
    "sink.delivery-guarantee": "at-least-once",
    "debezium-json.timestamp-format.standard": "ISO-8601",
    "debezium-json.encode.ignore-null-fields": "true",
}


def test_flink_cdc_documented_options_load() -> None:
    example = KafkaOptions.model_validate(FLINK_CDC_EXAMPLE)
    assert example.partition_strategy == "all-to-zero"  # Flink CDC's default
    assert example.json_format.timestamp_format == "SQL"
    options = KafkaOptions.model_validate({**FLINK_CDC_EXAMPLE, **FLINK_CDC_OPTIONS})
    assert options.table_id_to_topic == {"mydb.mytable1": "topic1", "mydb.mytable2": "topic2"}
    assert options.custom_headers == (("key1", "value1"), ("key2", "value2"))
    assert options.json_format.include_schema and options.json_format.ignore_null_fields
    assert options.json_format.timestamp_format == "ISO-8601"
    assert options.properties == {"acks": "all"}


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"sink.delivery-guarantee": "exactly-once"}, "Kafka transactions"),
        ({"debezium-json.encode.decimal-as-plain-number": "false"}, "plain JSON numbers"),
        ({"debezium-json.map-null-key.mode": "DROP"}, "no column from MySQL"),
        ({"canal-json.timestamp-format.standard": "ISO-8601"}, "value.format is debezium-json"),
        (
            {"value.format": "canal-json", "canal-json.include-schema.enabled": "true"},
            "debezium-json option",
        ),
    ],
)
def test_options_without_meaning_here_are_refused_with_why(
    options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        kafka_options(**options)


def test_values_are_spelled_as_flink_writes_them_whatever_the_session_zone(spark: Any) -> None:
    schema = (
        "_op STRING, _op_ts TIMESTAMP, _seq BIGINT, _database STRING, _table STRING, "
        "id DECIMAL(20,0), d DECIMAL(30,10), ts TIMESTAMP, at TIMESTAMP_NTZ, day DATE"
    )
    instant = dt.datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=dt.UTC)
    rows = [
        ("+I", None, 1, "db", "t", D("18446744073709551615"), D("0E-10"), instant,
         dt.datetime(1000, 1, 1, 0, 0, 0, 120000), dt.date(2024, 2, 29)),
        ("+I", None, 2, "db", "t", D("1"), D("-12345678901234567890.1234567890"),
         dt.datetime(1970, 1, 1, tzinfo=dt.UTC), dt.datetime(2038, 1, 19, 3, 14, 7), None),
    ]  # fmt: skip
    columns = tuple(
        SinkColumn(n, t, n != "id")
        for n, t in [
            ("id", "DECIMAL(20,0)"),
            ("d", "DECIMAL(30,10)"),
            ("ts", "TIMESTAMP"),
            ("at", "TIMESTAMP_NTZ"),
            ("day", "DATE"),
        ]
    )
    table = SinkTable("db.t", columns, ("id",), ())
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        frame = spark.createDataFrame(rows, schema)

        def texts(**options: Any) -> list[str]:
            messages = kafka_messages(frame, table, kafka_options(**options), inserts=True)
            return sorted(m["value"] for m in messages.collect())

        sql = "".join(texts())
        iso = "".join(texts(**{"debezium-json.timestamp-format.standard": "ISO-8601"}))
        canal = "".join(
            texts(**{"value.format": "canal-json", "canal-json.encode.ignore-null-fields": True})
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    for expected in (
        '"id":18446744073709551615,"d":0.0000000000,"ts":"2024-05-01 12:00:00.5Z",'
        '"at":"1000-01-01 00:00:00.12","day":"2024-02-29"',
        '"d":-12345678901234567890.1234567890,"ts":"1970-01-01 00:00:00Z",'
        '"at":"2038-01-19 03:14:07","day":null',
    ):
        assert expected in sql
    assert '"ts":"2024-05-01T12:00:00.5Z","at":"1000-01-01T00:00:00.12"' in iso
    assert '"at":"2038-01-19 03:14:07"}]' in canal and '"old"' not in canal  # nulls left out


def test_integers_and_booleans_are_spelled_as_json_writes_them(spark: Any) -> None:
    """Integers and booleans are written by their text (no JSON generator per value): the
    image is the JSON Spark's own to_json writes, extremes and NULLs included, and a NULL
    is left out under ignore-null-fields."""
    types = [("b", "BOOLEAN"), ("t", "TINYINT"), ("s", "SMALLINT"), ("i", "INT"), ("l", "BIGINT")]
    schema = "_op STRING, _op_ts TIMESTAMP, _seq BIGINT, _database STRING, _table STRING, " + (
        ", ".join(f"{n} {t}" for n, t in types)
    )
    rows = [
        ("+I", None, 1, "db", "t", True, -128, -32768, -(2**31), -(2**63)),
        ("+I", None, 2, "db", "t", False, 127, 32767, 2**31 - 1, 2**63 - 1),
        ("+I", None, 3, "db", "t", None, None, None, None, 0),
    ]
    table = SinkTable("db.t", tuple(SinkColumn(n, t, True) for n, t in types), ("l",), ())
    frame = spark.createDataFrame(rows, schema)
    expected = {
        r["l"]: json.loads(r["j"])
        for r in frame.selectExpr(
            "l", f"to_json(struct({', '.join(n for n, _ in types)})) AS j"
        ).collect()
    }

    def images(**options: Any) -> dict[int, dict[str, Any]]:
        messages = kafka_messages(frame, table, kafka_options(**options), inserts=True)
        after = [json.loads(m["value"])["after"] for m in messages.collect()]
        return {a["l"]: a for a in after}

    assert images(**{"value.format": "debezium-json"}) == {
        key: {n: image.get(n) for n, _ in types} for key, image in expected.items()
    }
    assert images(**{"debezium-json.encode.ignore-null-fields": True}) == expected


def test_images_spell_every_value_as_one_by_one(spark: Any) -> None:
    """A row image is written in runs (one ``to_json`` for neighbouring columns Spark's JSON
    writer can spell as the format does, their values made first where Spark's are not) and
    DATETIME as Spark's own text: both must give, byte for byte, the text of writing each
    value on its own, and ``timestamp_text`` for DATETIME (NULLs, escapes, an odd column
    name, fractions of every length and the year range included), in every spelling, for
    an image of several runs and for one of a single run."""
    from pyspark.sql import functions as F

    from sparkcdc.sinks.kafka.encoding import JsonEncoding, timestamp_text

    types = [
        ("b", "BOOLEAN"), ("i", "INT"), ("l", "BIGINT"), ("small", "DECIMAL(12,2)"),
        ("wide", "DECIMAL(30,10)"), ("f", "FLOAT"), ("d", "DOUBLE"), ("s", "STRING"),
        ('odd "name"', "STRING"), ("raw", "BINARY"), ("day", "DATE"), ("at", "TIMESTAMP_NTZ"),
        ("ts", "TIMESTAMP"), ("six", "DECIMAL(20,6)"), ("tail", "STRING"),
    ]  # fmt: skip
    rng = random.Random(13)
    low = dt.datetime(1, 1, 1)  # MySQL DATETIME holds years 0001-0999 too
    span_us = int((dt.datetime(9999, 12, 31, 23, 59, 59, 999999) - low).total_seconds() * 1e6)

    def at(n: int) -> dt.datetime:
        stamp = low + dt.timedelta(microseconds=rng.randrange(span_us))
        unit = 10 ** (6 - n % 7)  # 0..6 fraction digits
        return stamp.replace(microsecond=stamp.microsecond // unit * unit)

    rows = [
        (n % 2 == 0, n - 100, -(2**62) + n, D(f"{n}.{n % 100:02d}"), D(n) / D(7),
         n / 3.0, n * 1e300 / 7, f'text "{n}"\n\\é\x01', f"odd {n}", bytes([n % 256, 0]),
         dt.date(1000 + n, 1, 1) + dt.timedelta(days=n), at(n),
         dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=n * 7919, microseconds=n),
         D(n) / D(1000000), "end")
        for n in range(200)
    ]  # fmt: skip
    rows += [tuple([None] * len(types)), (None,) * 11 + (dt.datetime(9999, 12, 31, 23, 59, 59),)
             + (None,) * 3, (None,) * 11 + (dt.datetime(1000, 1, 1),) + (None,) * 3]  # fmt: skip
    columns = tuple(SinkColumn(n, t, True) for n, t in types)
    frame = spark.createDataFrame(rows, ", ".join(f"`{n}` {t}" for n, t in types))
    row_col = F.struct(*[F.col(f"`{n}`") for n, _ in types])
    spellings = [
        JsonEncoding(),
        JsonEncoding("ISO-8601"),
        JsonEncoding(ignore_null_fields=True),
        JsonEncoding("ISO-8601", ignore_null_fields=True),
        JsonEncoding(schemas=True),
    ]
    # all the columns (runs cut by the odd name and the wide decimal, joined), and all
    # but those two (one run: the image is one to_json, braces and all)
    one_run = tuple(c for c in columns if c.name not in ('odd "name"', "wide"))
    for encoding, chosen in itertools.product(spellings, (columns, one_run)):

        def one(column: SinkColumn, enc: JsonEncoding = encoding) -> Any:
            value = row_col.getField(column.name)
            if column.spark_type == "TIMESTAMP_NTZ" and not enc.schemas:
                iso = enc.timestamp_format == "ISO-8601"
                return F.concat(F.lit('"'), timestamp_text(value, zoned=False, iso=iso), F.lit('"'))
            return enc.value(value, column)

        by_value = encoding.obj([(c.name, one(c)) for c in chosen])
        written = frame.select(
            encoding.image(row_col, chosen).alias("image"), by_value.alias("by_value")
        ).collect()
        assert len(written) == len(rows)
        for image, expected in written:
            assert image == expected, (encoding, len(chosen))
            assert isinstance(json.loads(image), dict)


@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no-key"])
def test_shards_merged_into_one_table_keep_commit_order(spark: Any, keyed: bool) -> None:
    """Two source tables routed into one sink table: the messages of a sink key (or, with no
    key, of the table) are in commit order across the sources, not grouped by source."""
    orders = orders_table()
    key = ("id",) if keyed else ()
    table = SinkTable("app_db.orders", orders.columns, key, ("a.orders", "b.orders"))
    rows = [
        ("+I", T1, 100, "a", "orders", 1, "a1", D("1.00")),
        ("-U", T1, 200, "b", "orders", 1, "a1", D("1.00")),
        ("+U", T1, 201, "b", "orders", 1, "b1", D("2.00")),
        ("-D", T1, 300, "a", "orders", 1, "b1", D("2.00")),
        ("+I", T1, 400, "b", "orders", 1, "b2", D("3.00")),
    ]
    messages = kafka_messages(change_frame(spark, rows), table, kafka_options()).collect()
    seqs = [int(dict(m["headers"])["sparkcdc.seq"]) for m in messages]
    kinds = [json.loads(m["value"])["op"] for m in messages]
    assert (seqs, kinds) == ([100, 201, 300, 400], ["c", "u", "d", "c"])


# -- commit order across keys ------------------------------------------------------------


def key_changing_workload(keys: int, seed: int) -> tuple[list[tuple[Any, ...]], dict[int, Any]]:
    """A batch of changes over ``keys`` keys as the binlog reader numbers them (a row image's
    seq is its event's plus its index: an update's '+U' at its '-U' + 1), a third of the
    updates moving a row to a new key, and the rows the batch leaves."""
    rng = random.Random(seed)
    rows: list[tuple[Any, ...]] = []
    state: dict[int, Any] = {}
    seq = itertools.count(1000, 10)
    fresh = itertools.count(1)
    for _ in range(keys):
        k = next(fresh)
        state[k] = (f"n{k}", D("1.00"))
        rows.append(("+I", T1, next(seq), "app_db", "orders", k, f"n{k}", D("1.00")))
    for _ in range(keys * 4):
        k = rng.choice(sorted(state))
        name, amount = state[k]
        s = next(seq)
        choice = rng.random()
        if choice < 0.3:  # the key changes: delete the old key, insert the new one
            new = next(fresh) + keys
            rows.append(("-U", T1, s, "app_db", "orders", k, name, amount))
            rows.append(("+U", T1, s + 1, "app_db", "orders", new, name, amount))
            state[new] = state.pop(k)
        elif choice < 0.85:
            now = amount + 1
            rows.append(("-U", T1, s, "app_db", "orders", k, name, amount))
            rows.append(("+U", T1, s + 1, "app_db", "orders", k, name, now))
            state[k] = (name, now)
        elif len(state) > keys // 2:
            rows.append(("-D", T1, s, "app_db", "orders", k, name, amount))
            del state[k]
    return rows, state


def going_back(messages: Sequence[Message]) -> list[tuple[int, int, int]]:
    """(partition, seq, next seq) of every neighbour pair of a partition whose seq decreases."""
    out = []
    for first, second in itertools.pairwise(messages):
        if first.partition == second.partition and second.seq < first.seq:
            out.append((first.partition, first.seq, second.seq))
    return out


@pytest.mark.parametrize(
    ("value_format", "strategy", "size"),
    [
        ("debezium-json", "all-to-zero", None),  # spread over tasks by key, then one sends
        ("changelog-json", "hash-by-key", None),  # three partitions
        ("canal-json", "all-to-zero", 100),  # a small batch: one task from the start
    ],
)
def test_a_partition_holds_the_changes_in_commit_order_across_keys(
    spark: Any, servers: str, tmp_path: Any, value_format: str, strategy: str, size: int | None
) -> None:
    """A plain consumer of one partition sees ``sparkcdc.seq`` never go back, across keys:
    a key-changing update's delete of the old key comes before the insert of the new one,
    and every key's story is whole."""
    table = orders_table()
    partitions = 3 if strategy == "hash-by-key" else 1
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(table.name, partitions, 1)])[table.name].result(30)
    options = {
        "properties.bootstrap.servers": servers,
        "value.format": value_format,
        "partition.strategy": strategy,
    }
    sink = make_sink(spark, tmp_path, **options)
    sink.open([table])
    rows, state = key_changing_workload(300, seed=57)
    sink.write(table, change_frame(spark, rows), 1, size=size)

    messages = consume(servers, table.name)
    assert {m.partition for m in messages} == set(range(partitions))
    assert not going_back(messages), going_back(messages)[:10]
    # and nothing is lost: replayed in topic order, the messages leave the batch's rows
    final: dict[int, Any] = {}
    for m in messages:
        if value_format == "changelog-json":
            after = m.value["data"] if m.value["op"] in ("+I", "+U") else None
        elif value_format == "canal-json":
            after = None if m.value["type"] == "DELETE" else m.value["data"][0]
        else:
            after = m.value["after"]
        if after is None:
            del final[m.key["id"]]
        else:
            final[m.key["id"]] = (after["name"], D(str(after["amount"])))
    assert final == state


def test_per_key_order_is_the_option_that_keeps_order_within_keys(
    spark: Any, servers: str, tmp_path: Any
) -> None:
    """``sink.message-order: per-key``: the tasks of the key partitions send their keys'
    messages, each key's in order (a partition's seq goes back between keys)."""
    table = orders_table()
    options = {"properties.bootstrap.servers": servers, "sink.message-order": "per-key"}
    sink = make_sink(spark, tmp_path, **options)
    sink.open([table])
    rows, _ = key_changing_workload(300, seed=58)
    sink.write(table, change_frame(spark, rows), 1)

    messages = consume(servers, table.name)
    assert going_back(messages), "per-key order sent the batch in commit order"
    for key, sent in by_key(messages).items():
        assert [s for s, _ in sent] == sorted(s for s, _ in sent), key
