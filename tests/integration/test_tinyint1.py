"""TINYINT(1) through a pipeline into every sink: MySQL's rule, 0 is false and any other value
(2, -1, 127, -128) true, NULL stays NULL, for rows read by the snapshot and rows from the
binlog alike. (A value other than 0 and 1 used to stop every pipeline: CAST_INVALID_INPUT.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pipelines import fresh_database, iceberg_block, pipeline_env, sink_params, source_block
from psycopg import sql
from test_pipeline_kafka import consume

from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

DATABASE = "pipe_tinyint1"
SNAPSHOT = [(1, 0), (2, 1), (3, 2), (4, -1), (5, 127), (6, None)]
BINLOG = [
    "INSERT INTO flags VALUES (7, 2), (8, -1), (9, 0), (10, NULL), (11, 127), (12, 1)",
    "UPDATE flags SET f = -128 WHERE id = 1",
    "UPDATE flags SET f = 0 WHERE id = 3",
    "UPDATE flags SET f = NULL WHERE id = 5",
    "DELETE FROM flags WHERE id = 2",
    # a column added while the pipeline runs: existing rows take the default, typed alike
    "ALTER TABLE flags ADD COLUMN g TINYINT(1) NOT NULL DEFAULT 2",
    "INSERT INTO flags VALUES (13, 0, -1), (14, 5, 0)",
]
Rows = Callable[[], dict[int, Any]]
# Kafka is a log: rows the ALTER filled with the default are not sent again, so their
# last messages do not hold the default (their g is not compared)
ABSENT = "absent"
WRITTEN_AFTER_ALTER = {13, 14}


def delta(tmp_path: Path, spark: Any) -> tuple[str, Rows]:
    lake = tmp_path / "lake"
    return f"  type: delta\n  path: {lake}", lambda: spark_rows(
        spark.read.format("delta").load(str(lake / DATABASE / "flags"))
    )


def iceberg(tmp_path: Path, spark: Any) -> tuple[str, Rows]:
    block, catalog = iceberg_block(tmp_path)
    return block, lambda: spark_rows(spark.table(f"{catalog}.{DATABASE}.flags"))


def spark_rows(frame: Any) -> dict[int, Any]:
    return {r["id"]: (r["f"], r["g"]) for r in frame.select("id", "f", "g").collect()}


def jdbc(tmp_path: Path, spark: Any) -> tuple[str, Rows]:
    pg = DevPostgres.from_env()
    pg.start()
    with pg.connection() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(DATABASE)))
    block = (
        f"  type: jdbc\n  url: jdbc:postgresql://127.0.0.1:{pg.port}/sink_db\n"
        f"  username: cdc\n  password: ${{SPARKCDC_TEST_PG_PASSWORD}}\n  schema: {DATABASE}"
    )

    def rows() -> dict[int, Any]:
        with pg.connection() as conn:
            query = sql.SQL("SELECT id, f, g FROM {}.flags").format(sql.Identifier(DATABASE))
            return {i: (f, g) for i, f, g in conn.execute(query).fetchall()}

    return block, rows


def kafka(tmp_path: Path, spark: Any) -> tuple[str, Rows]:
    servers = DevKafka.from_env().start()
    topic = f"tinyint1_{uuid.uuid4().hex[:8]}"
    block = f"  type: kafka\n  properties.bootstrap.servers: {servers}\n  topic: {topic}"

    def rows() -> dict[int, Any]:
        state: dict[int, Any] = {}
        for message in consume(servers, topic):
            value = message.value
            if value["op"] == "d":
                del state[value["before"]["id"]]
            else:
                after = value["after"]
                state[after["id"]] = (after["f"], after.get("g"))
        return state

    return block, rows


SINKS = {"delta": delta, "iceberg": iceberg, "jdbc": jdbc, "kafka": kafka}


def run(
    spark: Any, server: DevServer, tmp_path: Path, sink: str, **source_options: object
) -> tuple[dict[int, Any], dict[int, Any]]:
    """The snapshot, then the binlog changes, through a pipeline into ``sink``: the source's
    final values and the sink's."""
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE flags (id INT PRIMARY KEY, f TINYINT(1))")
        cur.executemany("INSERT INTO flags VALUES (%s, %s)", SNAPSHOT)
    block, rows = SINKS[sink](tmp_path, spark)
    text = (
        source_block(server, f"{DATABASE}.flags", "5990-5999", **source_options)
        + f"sink:\n{block}\n"
        + f"pipeline:\n  name: tinyint1-{sink}\n  checkpoint: {tmp_path / 'checkpoint'}\n"
    )
    config = parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)
    run_pipeline(config, available_now=True, spark=spark)
    with conn.cursor() as cur:
        for statement in BINLOG:
            cur.execute(statement)
    run_pipeline(config, available_now=True, spark=spark)
    with conn.cursor() as cur:
        cur.execute("SELECT id, f, g FROM flags")
        source = {i: (f, g) for i, f, g in cur.fetchall()}
    conn.close()
    assert {f for f, _ in source.values()} >= {0, 2, -1, -128, None}  # the test could fail
    sink_rows = rows()
    if sink == "kafka":  # g only where a message was written after the ALTER
        source = {k: _before_alter(k, row) for k, row in source.items()}
        sink_rows = {k: _before_alter(k, row) for k, row in sink_rows.items()}
    return source, sink_rows


@pytest.mark.parametrize("sink", sink_params(SINKS))
def test_tinyint1_is_boolean_in_every_sink(
    spark: Any, server: DevServer, tmp_path: Path, sink: str
) -> None:
    source, sink_values = run(spark, server, tmp_path, sink)
    assert sink_values == {k: tuple(truth(v) for v in row) for k, row in source.items()}


def _before_alter(key: int, row: tuple[Any, Any]) -> tuple[Any, Any]:
    return row if key in WRITTEN_AFTER_ALTER else (row[0], ABSENT)


def truth(value: int | str | None) -> bool | str | None:
    """MySQL's rule: 0 is false, any other value true."""
    return value if value is None or value == ABSENT else value != 0


@pytest.mark.parametrize("sink", sink_params(SINKS))
def test_tinyint1_stays_a_number_when_asked(
    spark: Any, server: DevServer, tmp_path: Path, sink: str
) -> None:
    source, sink_values = run(
        spark, server, tmp_path, sink, **{"treat-tinyint1-as-boolean.enabled": "false"}
    )
    assert sink_values == source
