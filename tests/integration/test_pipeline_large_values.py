"""Values of 20 MB go through a whole pipeline intact, into every sink that can hold them.

The old envelope path carried row images as JSON text, and Spark's JSON reader turned any value
over 20,000,000 characters into a NULL image; the tables shape (DESIGN.md §4.1) carries them typed.
A row with a 20,000,000-character LONGTEXT (non-ASCII characters in it) and a 20 MiB LONGBLOB
of random bytes exists before the pipeline starts (the snapshot reads it); then one UPDATE
changes both big values of that row and an INSERT adds a second big row (the binlog brings
them). Each sink's values are compared with the source's by length and SHA-256, computed where
the values are (MariaDB, Spark, PostgreSQL), so no 20 MB value passes through an assertion.

The dev server allows 32 MiB packets: a statement cannot carry both big values (41 MB), so
each big row is written by two statements in one transaction (text, then bytes).
"""

from __future__ import annotations

import base64
import hashlib
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pipelines import fresh_database, pipeline_env, sink_params, source_block, uncommitted_batch
from test_pipeline_kafka import consume, end_offset, replay_topic
from test_server_continuity import big_connection

from sparkcdc.errors import SinkError
from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

DATABASE = "pipe_large"
TEXT_CHARS = 20_000_000
BLOB_BYTES = 20 << 20
# Kafka: a changelog-json message of a big row is ~48 MB (the bytes in base64)
KAFKA_MESSAGE_BYTES = 128 << 20
PIPELINE = """{source}sink:
{sink}
pipeline:
  name: large-{kind}
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""
# (id, characters of txt, SHA-256 of txt as UTF-8, bytes of bin, SHA-256 of bin, small)
Fingerprint = tuple[int, int | None, str | None, int | None, str | None, int | None]


# -- the source ------------------------------------------------------------------------------


def big_text(seed: int) -> str:
    """20,000,000 characters, one in a hundred outside ASCII (2, 3 and 4 UTF-8 bytes), so
    that the statement carrying it (~20.3 MB) fits the server's 32 MiB packets."""
    rng = random.Random(seed)
    unit = "".join(
        rng.choice("é日🎉") if i % 100 == 0 else rng.choice("abcdefghij ") for i in range(10_000)
    )
    return unit * (TEXT_CHARS // len(unit))


def big_blob(seed: int) -> bytes:
    return random.Random(seed).randbytes(BLOB_BYTES)


def _blob_literal(blob: bytes) -> bytes:
    """``blob`` as a SQL string literal: pymysql would send it as hex (42 MB, over the
    packet limit); escaped, it stays ~21.5 MB."""
    escaped = blob.replace(b"\\", b"\\\\").replace(b"\0", b"\\0").replace(b"'", b"\\'")
    return b"_binary'" + escaped + b"'"


def write_big_row(conn: Any, key: int, seed: int, *, insert: bool) -> None:
    """Insert row ``key``, or change both its big values, in one transaction."""
    conn.begin()
    with conn.cursor() as cur:
        if insert:
            cur.execute("INSERT INTO docs VALUES (%s, %s, NULL, %s)", (key, big_text(seed), seed))
        else:
            cur.execute(
                "UPDATE docs SET txt = %s, small = %s WHERE id = %s", (big_text(seed), seed, key)
            )
    conn.query(b"UPDATE docs SET bin = " + _blob_literal(big_blob(seed)) + b" WHERE id = %d" % key)
    conn.commit()


def source_fingerprints(conn: Any) -> list[Fingerprint]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT id, CHAR_LENGTH(txt), SHA2(txt, 256), LENGTH(bin), SHA2(bin, 256), small "
            "FROM docs ORDER BY id"
        )
        return [tuple(row) for row in cur.fetchall()]  # type: ignore[misc]


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    """``docs`` with a big row (1) and a small one (2); a connection for big statements."""
    fresh_database(server, DATABASE).close()
    conn = big_connection(server, DATABASE)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE docs (id INT PRIMARY KEY, txt LONGTEXT, bin LONGBLOB, small INT)")
        cur.execute("INSERT INTO docs VALUES (2, 'ein kleiner Text', X'00ff', 2)")
    write_big_row(conn, 1, seed=1, insert=True)
    yield conn
    # the next tests' positions in a new binlog file: MariaDB's BINLOG_GTID_POS scans a file
    # from its start and cannot read past an event larger than max_allowed_packet (an UPDATE
    # of a big row is one), so it would answer NULL in this file for every later position
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    conn.close()


def change_big_rows(conn: Any) -> None:
    """After the snapshot: both big values of row 1 change, a second big row arrives."""
    write_big_row(conn, 1, seed=11, insert=False)
    write_big_row(conn, 3, seed=3, insert=True)


# -- the sinks -------------------------------------------------------------------------------


def spark_fingerprints(frame: Any) -> list[Fingerprint]:
    """Lengths and hashes computed by Spark next to the values."""
    from pyspark.sql import functions as F

    rows = frame.select(
        "id",
        F.length("txt"),
        F.sha2(F.col("txt").cast("binary"), 256),
        F.length("bin"),
        F.sha2("bin", 256),
        "small",
    ).orderBy("id")
    return [tuple(r) for r in rows.collect()]  # type: ignore[misc]


def python_fingerprint(row: dict[str, Any]) -> Fingerprint:
    """A row as the Kafka sink's JSON has it (binary as base64)."""
    text = row["txt"]
    blob = None if row["bin"] is None else base64.b64decode(row["bin"])
    return (
        row["id"],
        None if text is None else len(text),
        None if text is None else hashlib.sha256(text.encode()).hexdigest(),
        None if blob is None else len(blob),
        None if blob is None else hashlib.sha256(blob).hexdigest(),
        row["small"],
    )


class Target:
    """One sink kind: its YAML block, and its rows' fingerprints read back.

    Kafka refuses messages over 1 MB twice: the producer (``max.request.size``) and the
    topic (``max.message.bytes``); ``raised`` names the limits raised for ~48 MB messages.
    """

    def __init__(
        self,
        kind: str,
        tmp_path: Path,
        spark: Any,
        raised: frozenset[str] = frozenset({"producer", "topic"}),
    ) -> None:
        self.kind, self.tmp_path, self.spark, self.raised = kind, tmp_path, spark, raised
        self.catalog = f"ice_large_{uuid.uuid4().hex[:8]}"
        self.topic = f"pipe-large-{uuid.uuid4().hex[:10]}"
        self.run_ends: list[int] = []

    def sink_block(self) -> str:
        if self.kind == "delta":
            return f"  type: delta\n  path: {self.tmp_path / 'lake'}"
        if self.kind == "iceberg":
            return (
                "  type: iceberg\n  catalog.properties.type: hadoop\n"
                f"  catalog.properties.warehouse: {self.tmp_path / 'warehouse'}\n"
                f"  catalog.name: {self.catalog}"
            )
        if self.kind == "jdbc":
            return (
                f"  type: jdbc\n  url: jdbc:postgresql://127.0.0.1:{self.pg.port}/sink_db\n"
                f"  username: cdc\n  password: ${{SPARKCDC_TEST_PG_PASSWORD}}\n  schema: {DATABASE}"
            )
        if self.kind == "kafka":
            block = (
                f"  type: kafka\n  properties.bootstrap.servers: {self.kafka}\n"
                f"  value.format: changelog-json\n  topic: {self.topic}"
            )
            if "producer" in self.raised:  # 1 MB a request, 32 MB of buffer by default
                block += (
                    f"\n  properties.max.request.size: {KAFKA_MESSAGE_BYTES}"
                    f"\n  properties.buffer.memory: {2 * KAFKA_MESSAGE_BYTES}"
                )
            return block
        return "  type: console\n  rows: 20"

    def prepare(self) -> None:
        """What the sink needs before the pipeline starts."""
        if self.kind == "jdbc":
            with self.pg.connection() as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {DATABASE} CASCADE")
        if self.kind == "kafka" and "topic" in self.raised:
            # else the sink creates the topic, with the broker's limit (1 MB by default)
            admin = AdminClient({"bootstrap.servers": self.kafka})
            topic = NewTopic(
                self.topic, 1, 1, config={"max.message.bytes": str(KAFKA_MESSAGE_BYTES)}
            )
            admin.create_topics([topic])[self.topic].result(timeout=30)

    @property
    def pg(self) -> DevPostgres:
        pg = DevPostgres.from_env()
        pg.start()
        return pg

    @property
    def kafka(self) -> str:
        return DevKafka.from_env().start()

    def after_run(self) -> None:
        if self.kind == "kafka":
            self.run_ends.append(end_offset(self.kafka, self.topic))

    def fingerprints(self) -> list[Fingerprint]:
        if self.kind == "delta":
            lake = self.tmp_path / "lake" / DATABASE / "docs"
            return spark_fingerprints(self.spark.read.format("delta").load(str(lake)))
        if self.kind == "iceberg":
            return spark_fingerprints(self.spark.table(f"{self.catalog}.{DATABASE}.docs"))
        if self.kind == "jdbc":
            return self._postgresql_fingerprints()
        return self._kafka_fingerprints()

    def _postgresql_fingerprints(self) -> list[Fingerprint]:
        query = (
            "SELECT id, char_length(txt), encode(sha256(convert_to(txt, 'UTF8')), 'hex'), "
            f"octet_length(bin), encode(sha256(bin), 'hex'), small FROM {DATABASE}.docs "
            "ORDER BY id"
        )
        with self.pg.connection() as conn:
            return [tuple(row) for row in conn.execute(query).fetchall()]  # type: ignore[misc]

    def _kafka_fingerprints(self) -> list[Fingerprint]:
        messages = consume(self.kafka, self.topic)
        assert len(messages) == self.run_ends[-1], "the topic was not read completely"
        replay = replay_topic(messages, self.run_ends, [False] * len(self.run_ends), ["id"])
        assert not replay.problems, replay.problems[:5]
        return sorted(python_fingerprint(row) for row in replay.state.values())


# -- the test --------------------------------------------------------------------------------


def pipeline_config(tmp_path: Path, server: DevServer, target: Target) -> PipelineConfig:
    text = PIPELINE.format(
        source=source_block(server, f"{DATABASE}.docs", "5960-5969"),
        sink=target.sink_block(),
        kind=target.kind,
        checkpoint=tmp_path / "checkpoint",
    )
    return parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)


@pytest.mark.parametrize("kind", sink_params(["delta", "iceberg", "jdbc", "kafka"]))
def test_20_mb_values_arrive_intact_by_snapshot_and_by_binlog(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, kind: str
) -> None:
    target = Target(kind, tmp_path, spark)
    target.prepare()
    config = pipeline_config(tmp_path, server, target)

    first = run_pipeline(config, available_now=True, spark=spark)
    target.after_run()
    snapshot = source_fingerprints(source)
    assert snapshot[0][1] == TEXT_CHARS and snapshot[0][3] == BLOB_BYTES, snapshot
    assert first.total_rows == 2
    assert target.fingerprints() == snapshot

    change_big_rows(source)
    second = run_pipeline(config, available_now=True, spark=spark)
    target.after_run()
    changed = source_fingerprints(source)
    assert [row[0] for row in changed] == [1, 2, 3] and changed[0] != snapshot[0], changed
    assert second.total_rows > 0
    assert target.fingerprints() == changed


@pytest.mark.parametrize(
    ("raised", "kafka_says"),
    [
        (frozenset(), "which is the value of the max.request.size configuration"),
        (frozenset({"producer"}), "larger than the max message size the server will accept"),
    ],
    ids=["producer-limit", "topic-limit"],
)
def test_a_kafka_limit_that_refuses_a_big_message_stops_the_run_naming_what_to_raise(
    spark: Any,
    server: DevServer,
    source: Any,
    tmp_path: Path,
    raised: frozenset[str],
    kafka_says: str,
) -> None:
    target = Target("kafka", tmp_path, spark, raised)
    target.prepare()
    config = pipeline_config(tmp_path, server, target)
    with pytest.raises(SinkError) as failure:
        run_pipeline(config, available_now=True, spark=spark)
    message = str(failure.value)
    assert kafka_says in message, message[:3000]
    assert "raise the producer's properties.max.request.size" in message, message[:3000]
    assert "the topic's max.message.bytes" in message, message[:3000]
    assert uncommitted_batch(tmp_path / "checkpoint") == 0  # written again on the next run


def printed_rows(output: str) -> list[dict[str, str]]:
    """The rows of the tables ``DataFrame.show`` printed, as column → cell text."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in output.splitlines():
        if not line.startswith("|"):
            if line.startswith("+"):
                continue
            header = None  # a table ended
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if header is None:
            header = cells
        else:
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def test_the_console_sink_prints_big_rows_with_their_values(
    spark: Any,
    server: DevServer,
    source: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = pipeline_config(tmp_path, server, Target("console", tmp_path, spark))
    run_pipeline(config, available_now=True, spark=spark)
    change_big_rows(source)
    run_pipeline(config, available_now=True, spark=spark)
    printed = [r for r in printed_rows(capsys.readouterr().out) if r.get("id") in ("1", "3")]
    # row 1 by the snapshot, and both halves of each of its two updates (text, then bytes);
    # row 3 inserted (its bytes NULL until the second statement) and both halves of its update
    assert len(printed) == 1 + 4 + 3, printed
    assert all(row["txt"] != "NULL" for row in printed), printed
    assert all(row["bin"] != "NULL" for row in printed if row["id"] == "1"), printed
    for key, op, seed in (("1", "+I", 1), ("1", "+U", 11), ("3", "+U", 3)):
        (shown, *_) = [r["txt"] for r in printed if (r["id"], r["_op"]) == (key, op)]
        assert shown.endswith("...") and big_text(seed).startswith(shown[:-3]), (key, op, shown)
