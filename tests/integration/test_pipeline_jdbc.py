"""A whole pipeline into PostgreSQL through the jdbc sink: snapshot plus live changes, a route
merging two shard tables, a transform with projection and filter, a stop in the middle and a
restart. Every target table must equal what the source says it should hold, read back with
psycopg (not through the sink).

Then a target that goes away while the pipeline runs, and one that is down from the start.
Those stop and start a PostgreSQL of their own (port 25442), so that other tests using the
shared development server (port 25432) never see it disappear.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pipelines import Writer, burst, create_shop, uncommitted_batch
from psycopg import sql

from sparkcdc.errors import SinkError
from sparkcdc.pipeline.checkpoint import has_planned_batches, run_id
from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.status import committed_offset
from sparkcdc.sinks.base import SinkContext
from sparkcdc_dev.devpostgres import DEFAULT_DIR, DevPostgres
from sparkcdc_dev.devpostgres import DEV_PASSWORD as PG_PASSWORD
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

DATABASE = "pipe_jdbc"
SCHEMA = "pipe_jdbc"  # the PostgreSQL schema the sink tables land in
PRIVATE_PG_PORT = 25442  # the PostgreSQL this file stops and starts
COMMIT_TABLE = "sparkcdc_commits"
SINK_TABLES = ("all_orders", "items", "skus", "order_lines")
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5840-5849
  scan.incremental.snapshot.chunk.size: 25
  scan.incremental.snapshot.chunks-per-batch: 4
sink:
  type: jdbc
  url: jdbc:postgresql://127.0.0.1:{pg_port}/sink_db
  username: cdc
  password: ${{SPARKCDC_TEST_PG_PASSWORD}}
  schema: {schema}
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
    """One value as psycopg and pymysql can agree on."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral() else str(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return value


def source_rows(conn: Any, query: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query)
        return sorted(tuple(plain(v) for v in row) for row in cur.fetchall())


def expected(conn: Any) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Per sink table: its columns and the rows the source says it holds (transform in SQL)."""
    item_cols = ["id", "name", "qty", "price", "big", "at", "tag", "flag", "name_uc", "src"]
    return {
        "all_orders": (
            ["id", "customer", "amount", "placed"],
            source_rows(conn, "SELECT * FROM orders_1 UNION ALL SELECT * FROM orders_2"),
        ),
        "items": (
            item_cols,
            [
                (*row[:7], None if row[7] is None else bool(row[7]), *row[8:])
                for row in source_rows(
                    conn,
                    "SELECT id, name, qty, price, big, at, tag, flag, UPPER(name), 'items' "
                    "FROM items WHERE qty >= 0",
                )
            ],
        ),
        "skus": (["sku", "qty", "note"], source_rows(conn, "SELECT * FROM skus")),
        "order_lines": (
            ["order_id", "line", "amount"],
            source_rows(conn, "SELECT * FROM order_lines"),
        ),
    }


# -- the target ------------------------------------------------------------------------------


def target_rows(pg: DevPostgres, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT {} FROM {}.{}").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.Identifier(SCHEMA),
        sql.Identifier(table),
    )
    with pg.connection() as conn:
        return sorted(tuple(plain(v) for v in row) for row in conn.execute(query).fetchall())


def commit_rows(pg: DevPostgres, config: PipelineConfig) -> dict[str, int]:
    """The commit table: sink table → the last batch id applied by the pipeline's stream, by
    its writes or by its appends of snapshot rows (kept under ``<writer>/append``)."""
    pipeline = SinkContext(config.pipeline.name, config.checkpoint, run_id(config.checkpoint))
    query = sql.SQL(
        "SELECT sink_table, MAX(batch_id) FROM {}.{} WHERE pipeline IN (%s, %s) GROUP BY sink_table"
    ).format(sql.Identifier(SCHEMA), sql.Identifier(COMMIT_TABLE))
    writer = pipeline.writer_id
    with pg.connection() as conn:
        rows = conn.execute(query, (writer, f"{writer}/append")).fetchall()
        return {str(t): int(b) for t, b in rows}


def drop_schema(pg: DevPostgres) -> None:
    with pg.connection() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))


def assert_target_equals_source(pg: DevPostgres, source: Any) -> None:
    for table, (columns, rows) in expected(source).items():
        assert rows, f"the workload left {table} empty: the test would prove nothing"
        assert target_rows(pg, table, columns) == rows, table


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = create_shop(server, DATABASE)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def shared_pg() -> DevPostgres:
    """The shared development PostgreSQL (never stopped here)."""
    pg = DevPostgres.from_env()
    pg.start()
    return pg


@pytest.fixture
def target(shared_pg: DevPostgres) -> Iterator[DevPostgres]:
    drop_schema(shared_pg)
    yield shared_pg
    drop_schema(shared_pg)


@pytest.fixture(scope="module")
def private_pg() -> Iterator[DevPostgres]:
    """A PostgreSQL of this file's own, which its tests stop and start."""
    pg = DevPostgres(DEFAULT_DIR, PRIVATE_PG_PORT)
    pg.start()
    yield pg
    pg.stop()
    shutil.rmtree(pg.datadir, ignore_errors=True)


@pytest.fixture
def private_target(private_pg: DevPostgres) -> Iterator[DevPostgres]:
    private_pg.start()
    drop_schema(private_pg)
    yield private_pg
    private_pg.start()  # a test may leave it stopped


def pipeline_config(
    tmp_path: Path, server: DevServer, pg: DevPostgres, name: str = "jdbc-e2e"
) -> PipelineConfig:
    settings = server.start()
    text = PIPELINE.format(
        host=settings.host,
        port=settings.port,
        database=DATABASE,
        pg_port=pg.port,
        schema=SCHEMA,
        name=name,
        checkpoint=tmp_path / "checkpoint",
    )
    env = {
        **os.environ,
        "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD,
        "SPARKCDC_TEST_PG_PASSWORD": PG_PASSWORD,
    }
    return parse_pipeline(text, env=env, base_dir=tmp_path)


# -- tests -----------------------------------------------------------------------------------


def test_pipeline_into_postgresql_equals_the_source_across_a_restart(
    spark: Any, server: DevServer, source: Any, target: DevPostgres, tmp_path: Path
) -> None:
    config = pipeline_config(tmp_path, server, target)
    last_rows: dict[str, int] = {}  # sink table → the last batch that had changes for it

    def note(batch_id: int, rows: dict[str, int]) -> None:
        for qualified, count in rows.items():
            sink_table = config.route_for(*qualified.split(".", 1))
            if count:
                last_rows[sink_table] = max(batch_id, last_rows.get(sink_table, -1))

    with Writer(server, DATABASE, seed=23):
        # stopped after a few seconds, in the middle of the snapshot or just after it
        first = run_pipeline(config, available_now=True, spark=spark, max_seconds=15, on_batch=note)
        second = run_pipeline(config, available_now=True, spark=spark, on_batch=note)
    chunks = (second.last_offset or {}).get("snapshot") or {}
    assert len(chunks) == 5 and all(p["next"] == p["total"] for p in chunks.values()), chunks
    # the snapshot is complete: these changes can only come from the binlog
    burst(source, seed=31)
    last = run_pipeline(config, available_now=True, spark=spark, on_batch=note)
    assert first.batches >= 1, "the first run wrote nothing: there was no restart to survive"
    assert last.total_rows > 0, "the final catch-up found none of the last changes"
    assert set(last.sink_tables) == {f"{DATABASE}.{t}" for t in SINK_TABLES}

    assert_target_equals_source(target, source)
    # one commit-table row per sink table, none beyond what Spark committed
    commits = commit_rows(target, config)
    assert set(commits) == {f"{DATABASE}.{t}" for t in SINK_TABLES}
    spark_commit = committed_offset(config.checkpoint)
    assert spark_commit is not None
    assert max(commits.values()) <= spark_commit[0]
    # Every batch with changes for a table is recorded for it; a batch whose changes the
    # transform's filter let out entirely writes nothing, so items may be recorded earlier.
    for name, batch in commits.items():
        if name == f"{DATABASE}.items":
            assert batch <= last_rows[name], (name, commits, last_rows)
        else:
            assert batch == last_rows[name], (name, commits, last_rows)


class StopAfterFirstBatch:
    """An ``on_batch`` listener that stops PostgreSQL once a batch with rows is applied.

    The listener runs after the sink applied the batch and before Spark commits it, so the
    target goes away between two batches while the pipeline runs.
    """

    def __init__(self, pg: DevPostgres) -> None:
        self.pg = pg
        self.applied: int | None = None

    def __call__(self, batch_id: int, rows: dict[str, int]) -> None:
        if rows and self.applied is None:
            self.applied = batch_id
            self.pg.stop()


UNREACHABLE = (
    f"jdbc sink: the target jdbc:postgresql://127.0.0.1:{PRIVATE_PG_PORT}/sink_db is not "
    "reachable as user cdc"
)


def test_a_target_that_goes_away_mid_stream_fails_the_run_and_a_rerun_catches_up(
    spark: Any, server: DevServer, source: Any, private_target: DevPostgres, tmp_path: Path
) -> None:
    pg = private_target
    config = pipeline_config(tmp_path, server, pg, name="jdbc-gone")
    checkpoint = tmp_path / "checkpoint"
    stopper = StopAfterFirstBatch(pg)
    with Writer(server, DATABASE, seed=29), pytest.raises(SinkError) as failure:
        run_pipeline(config, available_now=True, spark=spark, on_batch=stopper)
    applied = stopper.applied
    assert applied is not None, "PostgreSQL was never stopped: no batch with rows was applied"
    message = str(failure.value)
    assert UNREACHABLE in message, message
    assert PG_PASSWORD not in message
    # the batch that failed is planned but not committed; the one applied before it is
    failed = uncommitted_batch(checkpoint)
    assert failed is not None and failed > applied, (failed, applied)
    spark_commit = committed_offset(str(checkpoint))
    assert spark_commit is not None and spark_commit[0] >= applied
    named = re.search(r"Nothing was committed for batch (\d+) of sink table (\S+)", message)
    assert named is not None, message
    assert int(named.group(1)) == failed

    pg.start()
    rerun = run_pipeline(config, available_now=True, spark=spark)
    assert rerun.batches >= 1
    assert (checkpoint / "spark" / "commits" / str(failed)).exists()  # replayed and committed
    assert_target_equals_source(pg, source)
    # The replayed batch is recorded for the table it failed on, once (the commit table's key
    # is pipeline and sink table), and nothing is recorded beyond what Spark committed.
    commits = commit_rows(pg, config)
    final_commit = committed_offset(str(checkpoint))
    assert final_commit is not None
    assert set(commits) == {f"{DATABASE}.{t}" for t in SINK_TABLES}
    assert commits[named.group(2)] >= failed, (commits, failed)
    assert max(commits.values()) <= final_commit[0], (commits, final_commit)


def test_a_target_that_goes_away_mid_stream_is_reported_as_a_sink_error(
    spark: Any, server: DevServer, source: Any, private_target: DevPostgres, tmp_path: Path
) -> None:
    config = pipeline_config(tmp_path, server, private_target, name="jdbc-gone-error")
    stopper = StopAfterFirstBatch(private_target)
    with pytest.raises(SinkError) as failure:
        run_pipeline(config, available_now=True, spark=spark, on_batch=stopper)
    message = str(failure.value)
    # what failed, where, what was (not) committed, what to do
    assert message.startswith(UNREACHABLE), message
    assert re.search(r"Nothing was committed for batch \d+ of sink table pipe_jdbc\.", message)
    assert "a restart of the pipeline replays it" in message, message


def test_a_target_that_is_down_at_start_fails_before_reading(
    spark: Any, server: DevServer, source: Any, private_target: DevPostgres, tmp_path: Path
) -> None:
    private_target.stop()
    config = pipeline_config(tmp_path, server, private_target, name="jdbc-down")
    started = time.monotonic()
    with pytest.raises(SinkError) as failure:
        run_pipeline(config, available_now=True, spark=spark)
    elapsed = time.monotonic() - started
    assert str(failure.value).startswith(UNREACHABLE), str(failure.value)
    assert PG_PASSWORD not in str(failure.value)
    # a guard against hanging on the dead target, not a performance figure
    assert elapsed < 60, f"took {elapsed:.0f}s to notice that the target is down"
    assert not (tmp_path / "checkpoint" / "spark" / "commits" / "0").exists()
    assert not has_planned_batches(str(tmp_path / "checkpoint"))  # nothing was read
