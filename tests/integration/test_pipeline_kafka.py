"""A whole pipeline into Kafka: snapshot plus live changes, a route merging two shard tables, a
transform with projection and filter, a stop in the middle and a restart.

Every topic is read back completely with an independent client (confluent-kafka) and replayed
per key (``changelog-json``: ``+I``/``+U`` put the row, ``-U``/``-D`` remove it); the result
must equal what the source says each sink table holds. The sink is at-least-once, so the test
also checks what duplicates there are: per key, the ``sparkcdc.seq`` header never goes back
within one run; across a restart it may go back only to repeat, message for message, what the
previous run sent of a batch it had not committed (Spark replays that batch).

Then one ``debezium-json`` run (op codes r/c/u/d), a broker that is down at start, and a broker
that stops while the pipeline runs. The last one stops and starts a Kafka of its own (port
29192), so that other tests using the shared development broker never see it disappear.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import random
import re
import shutil
import socket
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from pipelines import Writer, burst, create_shop, fresh_database, uncommitted_batch

from sparkcdc.errors import SinkError
from sparkcdc.pipeline.checkpoint import has_planned_batches
from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.status import committed_offset
from sparkcdc.sinks.kafka.messages import SEQ_HEADER
from sparkcdc.sinks.kafka.producer_pool import cached_producers, discard_unsent
from sparkcdc_dev.devkafka import DEFAULT_DIR, DevKafka
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

DATABASE = "pipe_kafka"
PRIVATE_KAFKA_PORT = 29192  # the broker this file stops and starts (its controller: 29193)
SINK_TABLES = {  # sink table → its primary key and columns
    "all_orders": (("id",), ("id", "customer", "amount", "placed")),
    "items": (
        ("id",),
        ("id", "name", "qty", "price", "big", "at", "tag", "flag", "name_uc", "src"),
    ),
    "skus": (("sku",), ("sku", "qty", "note")),
    "order_lines": (("order_id", "line"), ("order_id", "line", "amount")),
}
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5820-5829
  scan.incremental.snapshot.chunk.size: 25
  scan.incremental.snapshot.chunks-per-batch: 4
sink:
  type: kafka
  properties.bootstrap.servers: {servers}
  value.format: {value_format}
  sink.tableId-to-topic.mapping: "{mapping}"
{sink_extra}
route:
  - source-table: {database}.orders_[0-9]+
    sink-table: {database}.all_orders
transform:
  - source-table: {database}.items
    projection: "*, UPPER(name) AS name_uc, __table_name__ AS src"
    filter: qty >= 0
pipeline:
  name: {name}
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""


# -- the source (the shop of pipelines.py) ---------------------------------------------


def plain(value: Any) -> Any:
    """One value as pymysql and the JSON messages can agree on.

    Decimals compare by value (JSON ``1.50`` or ``1.5``); DATETIME as the sink writes a
    TIMESTAMP_NTZ (Flink's SQL spelling: a space, the fraction without trailing zeros).
    """
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral() else str(value.normalize())
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return f"{text}.{value.microsecond:06d}".rstrip("0") if value.microsecond else text
    return value


def source_rows(conn: Any, query: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query)
        return sorted(tuple(plain(v) for v in row) for row in cur.fetchall())


def expected(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Per sink table, the rows the source says it holds (the transform done in SQL)."""
    return {
        "all_orders": source_rows(conn, "SELECT * FROM orders_1 UNION ALL SELECT * FROM orders_2"),
        "items": [
            (*row[:7], None if row[7] is None else bool(row[7]), *row[8:])
            for row in source_rows(
                conn,
                "SELECT id, name, qty, price, big, at, tag, flag, UPPER(name), 'items' "
                "FROM items WHERE qty >= 0",
            )
        ],
        "skus": source_rows(conn, "SELECT * FROM skus"),
        "order_lines": source_rows(conn, "SELECT * FROM order_lines"),
    }


# -- reading topics back -------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    offset: int
    key: str  # the primary key as JSON text, as the sink wrote it
    value: dict[str, Any]
    seq: int  # the sparkcdc.seq header

    def change(self) -> tuple[int, Any, Any]:
        """What a replayed message must repeat exactly (changelog-json: op and data)."""
        return self.seq, self.value.get("op"), self.value.get("data")


def consume(servers: str, topic: str, timeout_s: float = 60.0) -> list[Message]:
    """Every message of the (one-partition) topic, in offset order, up to its end."""
    messages: list[Message] = []
    for msg in consume_raw(servers, topic, timeout_s):
        headers = dict(msg.headers() or [])
        key, value, offset = msg.key(), msg.value(), msg.offset()
        assert key is not None and value is not None and offset is not None
        messages.append(
            Message(
                offset,
                key.decode(),
                json.loads(value, parse_float=Decimal),
                int(headers[SEQ_HEADER]),
            )
        )
    return messages


def consume_raw(servers: str, topic: str, timeout_s: float = 60.0) -> list[Any]:
    """Every record of the (one-partition) topic as confluent-kafka gives it, in offset
    order, up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"pipe-kafka-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        assert sorted(partitions) == [0], f"{topic}: the sink creates one partition"
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while True:
            assert time.monotonic() < deadline, f"{topic}: not read to its end in {timeout_s}s"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return records
            assert error is None, error
            records.append(msg)
    finally:
        consumer.close()


def end_offset(servers: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"pipe-kafka-{uuid.uuid4()}"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


# -- the changelog check ------------------------------------------------------------------


@dataclass
class TopicReplay:
    """A topic replayed per key, what it leaves and what is wrong with it."""

    state: dict[str, dict[str, Any]] = field(default_factory=dict)  # key → row
    naive: dict[str, dict[str, Any]] = field(default_factory=dict)  # every message applied
    problems: list[str] = field(default_factory=list)


def replay_topic(
    messages: Sequence[Message],
    run_ends: Sequence[int],
    uncommitted: Sequence[bool],
    key_columns: Sequence[str],
) -> TopicReplay:
    """Replay ``messages`` (changelog-json) per key; check the duplicates and the changelog.

    ``run_ends[r]``: the topic's end offset when run ``r`` returned; ``uncommitted[r]``:
    whether run ``r`` left a batch planned but not committed (Spark replays it next run).

    Per key: within a run the seq never goes back. At the start of run r+1 it may go back
    only if run r left a batch uncommitted, and then the messages of run r at or above that
    seq must come again, identical, as the first messages of run r+1 (the replayed batch).
    After dropping those repeats, the key's changelog must tell a consistent story: ``+I`` /
    ``+U`` only of an absent key, ``-U`` / ``-D`` only of the present row, with its image.
    """
    out = TopicReplay()
    by_key: dict[str, list[list[Message]]] = defaultdict(lambda: [[] for _ in run_ends])
    for m in messages:
        run = next((r for r, end in enumerate(run_ends) if m.offset < end), None)
        if run is None:
            out.problems.append(f"offset {m.offset} written after the last run returned")
            continue
        by_key[m.key][run].append(m)
        if m.value["op"] in ("+I", "+U"):  # the naive replay: every message, in topic order
            out.naive[m.key] = m.value["data"]
        else:
            out.naive.pop(m.key, None)
    for key, runs in by_key.items():
        stream: list[tuple[int, Message]] = []
        for run, sent in enumerate(runs):
            seqs = [m.seq for m in sent]
            if seqs != sorted(seqs):
                out.problems.append(f"{key}: seq goes back within run {run + 1}: {seqs}")
            repeated = [(r, m) for r, m in stream if sent and m.seq >= sent[0].seq]
            if repeated:
                if not uncommitted[run - 1] or any(r != run - 1 for r, _ in repeated):
                    out.problems.append(
                        f"{key}: run {run + 1} went back to seq {sent[0].seq}, but that is not "
                        f"a replay of an uncommitted batch of run {run}: "
                        f"{[(r + 1, m.seq) for r, m in repeated]}"
                    )
                again = [m.change() for m in sent[: len(repeated)]]
                if again != [m.change() for _, m in repeated]:
                    out.problems.append(
                        f"{key}: run {run + 1} does not repeat what run {run} sent: "
                        f"{again} != {[m.change() for _, m in repeated]}"
                    )
                sent = sent[len(repeated) :]
            stream.extend((run, m) for m in sent)
        present: dict[str, Any] | None = None
        for _, m in stream:
            op, data = m.value["op"], m.value["data"]
            if json.loads(key) != {c: data[c] for c in key_columns}:
                out.problems.append(f"{key}: message at offset {m.offset} holds row {data}")
            if op in ("+I", "+U"):
                if present is not None:
                    out.problems.append(f"{key}: {op} at seq {m.seq} of a key already present")
                present = data
            elif op in ("-U", "-D"):
                if present != data:
                    what = "an absent key" if present is None else f"{present}, not {data}"
                    out.problems.append(f"{key}: {op} at seq {m.seq} of {what}")
                present = None
            else:
                out.problems.append(f"{key}: unknown op {op!r} at offset {m.offset}")
        if present is not None:
            out.state[key] = present
    return out


def rows_of(state: dict[str, dict[str, Any]], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(plain(row[c]) for c in columns) for row in state.values())


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = create_shop(server, DATABASE)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def shared_kafka() -> str:
    """The shared development broker (never stopped here)."""
    return DevKafka.from_env().start()


@pytest.fixture(scope="module")
def private_kafka() -> Iterator[DevKafka]:
    """A broker of this file's own, which its tests stop and start."""
    kafka = DevKafka(DEFAULT_DIR, PRIVATE_KAFKA_PORT)
    kafka.start()
    yield kafka
    kafka.stop()
    shutil.rmtree(kafka.base_dir, ignore_errors=True)


def topics_for(tables: Sequence[str]) -> dict[str, str]:
    """Sink table → a topic unique to this test run."""
    prefix = f"pipe-kafka-{uuid.uuid4().hex[:10]}"
    return {table: f"{prefix}.{table}" for table in tables}


def pipeline_config(
    tmp_path: Path,
    server: DevServer,
    servers: str,
    topics: dict[str, str],
    *,
    name: str,
    value_format: str = "changelog-json",
    properties: dict[str, str] | None = None,
) -> PipelineConfig:
    settings = server.start()
    text = PIPELINE.format(
        host=settings.host,
        port=settings.port,
        database=DATABASE,
        servers=servers,
        value_format=value_format,
        mapping=";".join(f"{DATABASE}.{t}:{topic}" for t, topic in topics.items()),
        sink_extra="".join(f"  properties.{k}: {v}\n" for k, v in (properties or {}).items()),
        name=name,
        checkpoint=tmp_path / "checkpoint",
    )
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    return parse_pipeline(text, env=env, base_dir=tmp_path)


# -- tests -----------------------------------------------------------------------------------


def test_pipeline_into_kafka_replays_to_the_source_across_a_restart(
    spark: Any, server: DevServer, source: Any, shared_kafka: str, tmp_path: Path
) -> None:
    topics = topics_for(list(SINK_TABLES))
    config = pipeline_config(tmp_path, server, shared_kafka, topics, name="kafka-e2e")
    checkpoint = tmp_path / "checkpoint"
    run_ends: list[dict[str, int]] = []
    uncommitted: list[bool] = []

    def run(**kwargs: Any) -> Any:
        summary = run_pipeline(config, available_now=True, spark=spark, **kwargs)
        run_ends.append({t: end_offset(shared_kafka, topic) for t, topic in topics.items()})
        uncommitted.append(uncommitted_batch(checkpoint) is not None)
        return summary

    with Writer(server, DATABASE, seed=23):
        first = run(max_seconds=15)  # stopped in the middle of the snapshot or just after it
        second = run()
    chunks = (second.last_offset or {}).get("snapshot") or {}
    assert len(chunks) == 5 and all(p["next"] == p["total"] for p in chunks.values()), chunks
    burst(source, seed=31)  # the snapshot is complete: only the binlog can bring these
    last = run()
    assert first.batches >= 1, "the first run wrote nothing: there was no restart to survive"
    assert last.total_rows > 0, "the final catch-up found none of the last changes"
    assert committed_offset(config.checkpoint) is not None

    want = expected(source)
    for table, (key_columns, columns) in SINK_TABLES.items():
        assert want[table], f"the workload left {table} empty: the test would prove nothing"
        messages = consume(shared_kafka, topics[table])
        assert len(messages) == run_ends[-1][table], "the topic was not read completely"
        result = replay_topic(
            messages, [ends[table] for ends in run_ends], uncommitted, key_columns
        )
        assert not result.problems, f"{table}: {result.problems[:10]}"
        assert rows_of(result.state, columns) == want[table], table
        # at-least-once duplicates are harmless to a plain replay in topic order
        assert rows_of(result.naive, columns) == want[table], table


def test_debezium_json_has_read_create_update_and_delete(
    spark: Any, server: DevServer, shared_kafka: str, tmp_path: Path
) -> None:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(20), n INT)")
        cur.execute("INSERT INTO accounts VALUES (1, 'ada', 10), (2, 'grace', 20), (3, 'ken', 30)")
    topics = topics_for(["accounts"])
    config = pipeline_config(
        tmp_path, server, shared_kafka, topics, name="kafka-dbz", value_format="debezium-json"
    )
    snapshot = run_pipeline(config, available_now=True, spark=spark)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO accounts VALUES (4, 'linus', 40)")
        cur.execute("UPDATE accounts SET n = 11 WHERE id = 1")
        cur.execute("DELETE FROM accounts WHERE id = 2")
        cur.execute("UPDATE accounts SET id = 30 WHERE id = 3")  # a key change
    changes = run_pipeline(config, available_now=True, spark=spark)
    conn.close()
    assert snapshot.total_rows == 3 and changes.total_rows == 4

    def row(id_: int, owner: str, n: int) -> dict[str, Any]:
        return {"id": id_, "owner": owner, "n": n}

    seen: dict[Any, list[tuple[Any, ...]]] = defaultdict(list)
    for m in consume(shared_kafka, topics["accounts"]):
        value = m.value
        assert isinstance(value.pop("ts_ms"), int)  # when the sink wrote it
        source = value.pop("source")
        assert (source["db"], source["table"]) == (DATABASE, "accounts")
        from_binlog = isinstance(source["ts_ms"], int)
        assert from_binlog == (value["op"] != "r"), value  # snapshot rows have no binlog time
        seen[json.loads(m.key)["id"]].append((value["op"], value["before"], value["after"]))
    assert dict(seen) == {
        1: [("r", None, row(1, "ada", 10)), ("u", row(1, "ada", 10), row(1, "ada", 11))],
        2: [("r", None, row(2, "grace", 20)), ("d", row(2, "grace", 20), None)],
        # a key-changing update: delete of the old key, create of the new one (as Debezium)
        3: [("r", None, row(3, "ken", 30)), ("d", row(3, "ken", 30), None)],
        30: [("c", None, row(30, "ken", 30))],
        4: [("c", None, row(4, "linus", 40))],
    }


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_broker_that_is_down_at_start_fails_before_reading(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    servers = f"127.0.0.1:{closed_port()}"
    config = pipeline_config(tmp_path, server, servers, topics_for(["items"]), name="kafka-down")
    started = time.monotonic()
    with pytest.raises(SinkError) as failure:
        run_pipeline(config, available_now=True, spark=spark)
    elapsed = time.monotonic() - started
    message = str(failure.value)
    assert message.startswith(f"Kafka at {servers} is not reachable: "), message
    assert "python -m sparkcdc_dev.devkafka start" in message  # what to do
    # a guard against hanging on the dead broker, not a performance figure
    assert elapsed < 60, f"took {elapsed:.0f}s to notice that the broker is down"
    assert not (tmp_path / "checkpoint" / "spark" / "commits" / "0").exists()
    assert not has_planned_batches(str(tmp_path / "checkpoint"))  # nothing was read


class StopAfterFirstBatch:
    """An ``on_batch`` listener that stops the broker once a batch with rows is written.

    The listener runs after the sink wrote the batch and before Spark commits it, so the
    broker goes away between two batches while the pipeline runs.
    """

    def __init__(self, kafka: DevKafka) -> None:
        self.kafka = kafka
        self.written: int | None = None

    def __call__(self, batch_id: int, rows: dict[str, int]) -> None:
        if rows and self.written is None:
            self.written = batch_id
            self.kafka.stop()


# With the producer's defaults a write to a stopped broker fails only when its records expire,
# delivery.timeout.ms (120 s) after they were queued; until then the pipeline just stalls.
FAIL_FAST = {"delivery.timeout.ms": "10000", "request.timeout.ms": "5000", "max.block.ms": "10000"}


def test_a_broker_that_stops_mid_stream_fails_the_run_and_a_rerun_catches_up(
    spark: Any, server: DevServer, source: Any, private_kafka: DevKafka, tmp_path: Path
) -> None:
    kafka = private_kafka
    servers = kafka.start()
    topics = topics_for(list(SINK_TABLES))
    config = pipeline_config(
        tmp_path, server, servers, topics, name="kafka-gone", properties=FAIL_FAST
    )
    checkpoint = tmp_path / "checkpoint"
    stopper = StopAfterFirstBatch(kafka)
    with Writer(server, DATABASE, seed=29):
        try:
            # bounded: a run that neither fails nor finishes would return at max_seconds
            run_pipeline(config, available_now=True, spark=spark, on_batch=stopper, max_seconds=90)
        except SinkError as exc:
            message = str(exc)
        else:
            pytest.fail("the run went on without an error while the broker was down")
    assert stopper.written is not None, "the broker was never stopped: no batch was written"
    failed = uncommitted_batch(checkpoint)
    assert failed is not None and failed > stopper.written, (failed, stopper.written)
    said = re.search(
        rf"writing batch (\d+) of {DATABASE}\.(\w+) to Kafka topic '([^']+)' at "
        rf"{re.escape(servers)} failed: TimeoutException: (.*?)\. The batch is written again "
        r"when the pipeline restarts \(at-least-once\)",
        message,
    )
    assert said is not None, message[:3000]
    assert int(said.group(1)) == failed and topics[said.group(2)] == said.group(3), said.groups()

    kafka.start()
    run_ends = [{t: end_offset(servers, topic) for t, topic in topics.items()}]
    run_pipeline(config, available_now=True, spark=spark)
    run_ends.append({t: end_offset(servers, topic) for t, topic in topics.items()})
    assert (checkpoint / "spark" / "commits" / str(failed)).exists()  # replayed, committed

    want = expected(source)
    for table, (key_columns, columns) in SINK_TABLES.items():
        assert want[table], f"the workload left {table} empty: the test would prove nothing"
        messages = consume(servers, topics[table])
        # run 1 failed with its last batch uncommitted; nothing is looked at after run 2
        result = replay_topic(
            messages, [ends[table] for ends in run_ends], [True, False], key_columns
        )
        assert not result.problems, f"{table}: {result.problems[:10]}"
        assert rows_of(result.state, columns) == want[table], table
        assert rows_of(result.naive, columns) == want[table], table


def test_records_a_failed_write_left_queued_never_arrive(
    spark: Any, private_kafka: DevKafka
) -> None:
    """What a failed write leaves queued in Spark's cached producer (tasks of the failed job
    still flushing to a broker that went away) is dropped with the failure: the broker, back
    within the records' delivery timeout (2 minutes by default), does not take them after
    the pipeline reported the failure, beside the replay that sends them again."""
    kafka = private_kafka
    servers = kafka.start()
    topic = f"pipe-kafka-{uuid.uuid4().hex[:10]}.queued"
    others = {p.hashCode() for p in cached_producers(spark)}  # earlier tests' (identity hash)
    sent = spark.createDataFrame([("k0", "before the broker stopped")], "key string, value string")
    sent.write.format("kafka").option("kafka.bootstrap.servers", servers).option(
        "topic", topic
    ).mode("append").save()
    # the write's producer, its topic's partitions known
    (producer,) = [p for p in cached_producers(spark) if p.hashCode() not in others]
    kafka.stop()
    jvm = spark.sparkContext._jvm
    record = jvm.org.apache.kafka.clients.producer.ProducerRecord
    queued = [producer.send(record(topic, b"k1", f"queued {i}".encode())) for i in range(5)]
    assert not any(f.isDone() for f in queued)  # held for the broker: nothing sent, no error

    discard_unsent(spark)

    assert cached_producers(spark) == []
    for future in queued:
        assert future.isDone()
        with pytest.raises(Exception, match="closed forcefully"):
            future.get()
    kafka.start()
    time.sleep(5)  # a producer that kept them would have reconnected and sent them by now
    assert [m.value() for m in consume_raw(servers, topic)] == [b"before the broker stopped"]


def test_a_broker_that_stops_mid_stream_is_reported_as_a_sink_error(
    spark: Any, server: DevServer, source: Any, private_kafka: DevKafka, tmp_path: Path
) -> None:
    servers = private_kafka.start()  # the last test here: the module's teardown stops it
    config = pipeline_config(
        tmp_path,
        server,
        servers,
        topics_for(list(SINK_TABLES)),
        name="kafka-gone-error",
        properties=FAIL_FAST,
    )
    stopper = StopAfterFirstBatch(private_kafka)
    with pytest.raises(SinkError) as failure:
        run_pipeline(config, available_now=True, spark=spark, on_batch=stopper, max_seconds=90)
    message = str(failure.value)
    assert message.startswith("writing batch "), message
    assert f"at {servers} failed: TimeoutException: " in message, message
    assert message.endswith("The batch is written again when the pipeline restarts (at-least-once)")


def test_a_plain_consumer_sees_the_binlog_order_across_keys(
    spark: Any, server: DevServer, shared_kafka: str, tmp_path: Path
) -> None:
    """Two tables' changes (orders and their lines, a foreign key's two ends), with updates
    that change keys, in multi-row statements and transactions: a consumer of the one
    partition sees ``sparkcdc.seq`` never go back, across keys, and a key-changing update's
    delete of the old key before the insert of the new one (as Debezium's order is)."""
    conn = fresh_database(server, DATABASE)
    rng = random.Random(57)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(20), n INT)")
        cur.executemany(
            "INSERT INTO accounts VALUES (%s, %s, 0)", [(i, f"o{i}") for i in range(1, 201)]
        )
    topics = topics_for(["accounts"])
    config = pipeline_config(
        tmp_path, server, shared_kafka, topics, name="kafka-order", value_format="debezium-json"
    )
    run_pipeline(config, available_now=True, spark=spark)  # the snapshot: reads, no order
    snapshot_end = end_offset(shared_kafka, topics["accounts"])
    moved = 0
    with conn.cursor() as cur:
        for _ in range(60):
            ids = [r[0] for r in source_rows(conn, "SELECT id FROM accounts")]
            a, b = rng.sample(ids, 2)
            cur.execute("UPDATE accounts SET n = n + 1 WHERE id IN (%s, %s)", (a, b))
            new = max(ids) + rng.randint(1, 50)
            cur.execute("UPDATE accounts SET id = %s WHERE id = %s", (new, rng.choice(ids)))
            moved += 1
            cur.execute("INSERT INTO accounts VALUES (%s, 'fresh', 0)", (new + 1000,))
            cur.execute("DELETE FROM accounts WHERE id = %s", (rng.choice(ids),))
            cur.execute("UPDATE accounts SET n = n + 1 WHERE id < 40")  # many keys, one event
    run_pipeline(config, available_now=True, spark=spark)
    final = {r[0]: r for r in source_rows(conn, "SELECT id, owner, n FROM accounts")}
    conn.close()

    messages = [m for m in consume(shared_kafka, topics["accounts"]) if m.offset >= snapshot_end]
    assert len(messages) > 1_500, len(messages)
    back = [(a.seq, b.seq) for a, b in itertools.pairwise(messages) if b.seq < a.seq]
    assert not back, f"{len(back)} of {len(messages) - 1} pairs go back in seq: {back[:5]}"
    # each key-changing update: the old key's delete, then (the next message) the new key's
    # create, at the update's seq (its halves may share it, or the '+U' is one more)
    deletes = {m.seq: m for m in messages if m.value["op"] == "d"}
    moves = [(deletes.get(m.seq) or deletes.get(m.seq - 1), m) for m in messages]
    moves = [(d, c) for d, c in moves if d is not None and c.value["op"] == "c"]
    assert len(moves) == moved, (len(moves), moved)
    for delete, create in moves:
        assert delete.offset == create.offset - 1, (delete, create)
        assert delete.value["before"]["owner"] == create.value["after"]["owner"]
    # and the messages, applied in order, leave what the source holds
    state: dict[int, tuple[Any, ...]] = {}
    for m in consume(shared_kafka, topics["accounts"]):
        key = json.loads(m.key)["id"]
        after = m.value["after"]
        if after is None:
            state.pop(key, None)
        else:
            state[key] = (after["id"], after["owner"], after["n"])
    assert state == final
