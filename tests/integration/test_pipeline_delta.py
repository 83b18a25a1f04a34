"""A whole pipeline into Delta Lake: snapshot plus live changes, a route merging two shard
tables, a transform with projection and filter, a stop in the middle and a restart.
The Delta tables must equal what the source says they should hold, read with Spark and,
independently, with delta-rs."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pipelines import Writer, create_shop, write_pipeline

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.checkpoint import has_planned_batches
from sparkcdc.pipeline.config import load_pipeline, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.status import committed_offset
from sparkcdc.sinks.delta import DeltaSink
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

DATABASE = "pipe_delta"
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5800-5809
  scan.incremental.snapshot.chunk.size: 25
  scan.incremental.snapshot.chunks-per-batch: 4
sink:
  type: delta
  path: {lake}
route:
  - source-table: {database}.orders_[0-9]+
    sink-table: {database}.all_orders
transform:
  - source-table: {database}.items
    projection: "*, UPPER(name) AS name_uc, __table_name__ AS src"
    filter: qty >= 0
pipeline:
  name: delta-e2e
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""


def plain(value: Any) -> Any:
    """One value as both readers and pymysql can agree on."""
    if hasattr(value, "item") and not isinstance(value, bytes | str):  # numpy scalars
        value = value.item()
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        value = value.to_pydatetime()
    if isinstance(value, float) and value != value:  # NaN from pandas for a NULL
        return None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral() else str(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return value


def source_rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return sorted(tuple(plain(v) for v in row) for row in cur.fetchall())


def expected(conn: Any) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    item_cols = ["id", "name", "qty", "price", "big", "at", "tag", "flag", "name_uc", "src"]
    return {
        "all_orders": (
            ["id", "customer", "amount", "placed"],
            source_rows(
                conn,
                "SELECT * FROM orders_1 UNION ALL SELECT * FROM orders_2",
            ),
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


def delta_rows_spark(spark: Any, path: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(str(path)).select(*columns)
    return sorted(tuple(plain(v) for v in row) for row in frame.collect())


def delta_rows_rs(path: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    import deltalake
    import pyarrow as pa

    # DataFusion's reader: DeltaTable.to_pyarrow_table refuses deletion vectors
    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
    names = ", ".join(f'"{c}"' for c in columns)
    frame = pa.table(reader.execute(f"SELECT {names} FROM t").read_all())
    return sorted(tuple(plain(v) for v in row.values()) for row in frame.to_pylist())


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = create_shop(server, DATABASE)
    yield conn
    conn.close()


def pipeline_file(tmp_path: Path, server: DevServer) -> Path:
    return write_pipeline(PIPELINE, tmp_path, server, DATABASE)


def test_pipeline_into_delta_equals_the_source_across_a_restart(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    config = load_pipeline(pipeline_file(tmp_path, server), env=env)
    with Writer(server, DATABASE, seed=23, max_operations=20_000, pause_s=0.005):
        # stopped after a few seconds, in the middle of the snapshot or just after it
        first = run_pipeline(config, available_now=True, spark=spark, max_seconds=15)
        second = run_pipeline(config, available_now=True, spark=spark)
    last = run_pipeline(config, available_now=True, spark=spark)
    assert first.batches + second.batches + last.batches >= 2
    assert set(last.sink_tables) == {
        f"{DATABASE}.{t}" for t in ("all_orders", "items", "skus", "order_lines")
    }

    lake = tmp_path / "lake" / DATABASE
    for table, (columns, rows) in expected(source).items():
        assert rows, f"the workload left {table} empty: the test would prove nothing"
        assert delta_rows_spark(spark, lake / table, columns) == rows, table
        assert delta_rows_rs(lake / table, columns) == rows, table


def test_route_merging_tables_with_different_keys_is_refused(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    with source.cursor() as cur:
        cur.execute(
            "CREATE TABLE orders_9 (id INT NOT NULL, code INT NOT NULL, PRIMARY KEY (code))"
        )
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    config = load_pipeline(pipeline_file(tmp_path, server), env=env)
    with pytest.raises(ConfigError, match=r"all_orders merges .* need the same key columns"):
        run_pipeline(config, available_now=True, spark=spark)


def test_a_transform_spark_cannot_parse_stops_with_sparks_reason(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    text = pipeline_file(tmp_path, server).read_text().replace("filter: qty >= 0", "filter: qty >")
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    config = parse_pipeline(text, env=env, base_dir=tmp_path)
    with pytest.raises(ConfigError) as failure:
        run_pipeline(config, available_now=True, spark=spark)
    message = str(failure.value)
    assert f"transform for {DATABASE}.items" in message, message
    assert "Spark cannot apply it: [PARSE_SYNTAX_ERROR] Syntax error at or near end of input" in (
        message
    )
    assert not (tmp_path / "lake").exists()  # stopped before the sink was opened


def test_typo_in_the_sink_block_names_the_path_and_the_closest_key(tmp_path: Path) -> None:
    text = (
        "source: {type: mysql, hostname: h, username: u, tables: a.b}\nsink: {type: delta, pth: /x}"
    )
    with pytest.raises(ConfigError, match=r"sink\.pth: unknown key\. Did you mean 'path'\?"):
        parse_pipeline(text)


def test_a_sink_path_that_cannot_be_written_stops_before_reading(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    from sparkcdc.errors import ConfigError

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the lake should be")
    text = (
        pipeline_file(tmp_path, server)
        .read_text()
        .replace(str(tmp_path / "lake"), str(blocker / "lake"))
    )
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    config = parse_pipeline(text, env=env, base_dir=tmp_path)
    # the run probes its locations as it will write them, before it reads anything
    with pytest.raises(ConfigError, match="not-a-directory is a file, not a directory"):
        run_pipeline(config, available_now=True, spark=spark)
    # nothing was read or committed: no batch planned (the new stream's run id is all there is)
    assert not has_planned_batches(str(tmp_path / "checkpoint"))


def test_a_table_delta_refuses_to_create_stops_the_run_and_the_fixed_file_copies_it_all(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    """New tables are created while the first batch reads (``Sink.begin_open``): a table
    Delta refuses stops the run with the sink's own message, from the batch, and commits
    nothing; the next run, with the setting fixed, creates it and copies every row."""
    from sparkcdc.errors import SinkError

    good = pipeline_file(tmp_path, server).read_text()
    bad = good.replace(
        "  type: delta\n", "  type: delta\n  table.properties.delta.appendOnly: maybe\n"
    )
    assert bad != good
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    with pytest.raises(
        SinkError, match=r"delta sink: cannot create or open table pipe_delta\.\w+ at "
    ):
        run_pipeline(
            parse_pipeline(bad, env=env, base_dir=tmp_path), available_now=True, spark=spark
        )
    assert committed_offset(str(tmp_path / "checkpoint")) is None
    run_pipeline(parse_pipeline(good, env=env, base_dir=tmp_path), available_now=True, spark=spark)
    lake = tmp_path / "lake" / DATABASE
    for table, (columns, rows) in expected(source).items():
        assert rows, f"the workload left {table} empty: the test would prove nothing"
        assert delta_rows_spark(spark, lake / table, columns) == rows, table


class CrashAfterAppend(DeltaSink):
    """The Delta sink, except that the batch dies right after its second snapshot append
    committed: before the batch's MERGE and before Spark commits the batch (a kill there)."""

    # (batch, sink table, written) per append call
    appends_seen: ClassVar[list[tuple[int, str, bool]]] = []
    crash = True

    def append(self, table: Any, rows: Any, batch_id: int) -> bool:
        written = super().append(table, rows, batch_id)
        CrashAfterAppend.appends_seen.append((batch_id, table.name, written))
        if CrashAfterAppend.crash and written and len(CrashAfterAppend.appends_seen) >= 2:
            CrashAfterAppend.crash = False
            raise RuntimeError(f"killed after the append of batch {batch_id}")
        return written


def test_a_kill_between_a_snapshot_append_and_the_batch_commit_loses_and_doubles_nothing(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from pipelines import uncommitted_batch

    from sparkcdc.errors import SparkCdcError
    from sparkcdc.sinks.base import SINK_TYPES

    monkeypatch.setitem(SINK_TYPES, "delta", f"{__name__}:CrashAfterAppend")
    monkeypatch.setattr(CrashAfterAppend, "appends_seen", [])
    monkeypatch.setattr(CrashAfterAppend, "crash", True)
    env = {**os.environ, "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD}
    config = load_pipeline(pipeline_file(tmp_path, server), env=env)
    with Writer(server, DATABASE, seed=29, max_operations=5_000, pause_s=0.005):
        with pytest.raises(SparkCdcError):
            run_pipeline(config, available_now=True, spark=spark)
        assert not CrashAfterAppend.crash, "the run stopped at the kill"
        seen = list(CrashAfterAppend.appends_seen)
        crashed = seen[-1][0]
        assert seen[-1][2], "the append of the killed batch was committed"
        assert uncommitted_batch(tmp_path / "checkpoint") == crashed
        run_pipeline(config, available_now=True, spark=spark)  # replays the killed batch
    run_pipeline(config, available_now=True, spark=spark)

    done = {t for b, t, w in seen if b == crashed and w}  # appended before the kill
    again = {t: w for b, t, w in CrashAfterAppend.appends_seen[len(seen) :] if b == crashed}
    assert done and done <= set(again), "the replay appends the killed batch's tables again"
    assert not any(again[t] for t in done), "and finds the appends done before committed"
    lake = tmp_path / "lake" / DATABASE
    for table, (columns, rows) in expected(source).items():
        assert delta_rows_spark(spark, lake / table, columns) == rows, table
        assert delta_rows_rs(lake / table, columns) == rows, table


def test_a_kill_after_a_one_pass_snapshot_append_loses_and_doubles_nothing(
    spark: Any, server: DevServer, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """A batch of one table's snapshot chunks alone is appended in one pass; killed after
    that append committed and before Spark committed the batch, the next run replays the
    batch, finds the append in the table's history and skips it, and goes on in one pass."""
    import logging

    from pipelines import fresh_database, pipeline_env, source_block, uncommitted_batch

    from sparkcdc.errors import SparkCdcError
    from sparkcdc.sinks.base import SINK_TYPES

    caplog.set_level(logging.DEBUG, logger="sparkcdc.pipeline.batch_writer")
    monkeypatch.setitem(SINK_TYPES, "delta", f"{__name__}:CrashAfterAppend")
    monkeypatch.setattr(CrashAfterAppend, "appends_seen", [])
    monkeypatch.setattr(CrashAfterAppend, "crash", True)
    database = "pipe_delta_onepass"
    conn = fresh_database(server, database)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"v{i}") for i in range(1, 201)])
    lake = tmp_path / "lake"
    text = (
        source_block(
            server,
            f"{database}.t",
            "5800-5809",
            **{
                "scan.incremental.snapshot.chunk.size": 20,
                "scan.incremental.snapshot.chunks-per-batch": 3,
            },
        )
        + f"sink:\n  type: delta\n  path: {lake}\n"
        + f"pipeline:\n  name: delta-onepass\n  checkpoint: {tmp_path / 'checkpoint'}\n"
    )
    config = parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)
    with pytest.raises(SparkCdcError):
        run_pipeline(config, available_now=True, spark=spark)
    crashed, _, written = CrashAfterAppend.appends_seen[-1]
    assert written and uncommitted_batch(tmp_path / "checkpoint") == crashed == 1
    killed_run = [r.getMessage() for r in caplog.records if "one pass" in r.getMessage()]
    assert [m.split(":")[0] for m in killed_run] == ["batch 0"], "the kill came in batch 1"
    caplog.clear()
    summary = run_pipeline(config, available_now=True, spark=spark)

    replayed = [w for b, _, w in CrashAfterAppend.appends_seen if b == crashed]
    assert replayed == [True, False], "the replay found the append committed"
    assert any("one pass" in r.getMessage() for r in caplog.records), "and went on in one pass"
    assert sum(summary.rows.values()) == 200 - 3 * 20 * 2  # what the kill left to do
    rows = delta_rows_spark(spark, lake / database / "t", ["id", "v"])
    assert rows == [(i, f"v{i}") for i in range(1, 201)]


def test_binlog_inserts_are_appended_until_a_kept_truncate_leaves_old_keys_behind(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    """A batch whose binlog rows of a table are all inserts is one Delta append (each key
    new: the source had none of them just before, so neither had the sink table). Once a
    TRUNCATE is not forwarded (lenient), the sink table keeps keys the source re-inserts:
    from then on, in this run and the next, inserts are merged and no key is doubled."""
    from pipelines import fresh_database, pipeline_env, source_block

    database = "pipe_delta_inserts"
    conn = fresh_database(server, database)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    lake = tmp_path / "lake"
    text = (
        source_block(server, f"{database}.t", "5800-5809")
        + f"sink:\n  type: delta\n  path: {lake}\n"
        + f"pipeline:\n  name: delta-inserts\n  checkpoint: {tmp_path / 'checkpoint'}\n"
    )
    config = parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)
    table = lake / database / "t"

    def run(*statements: str) -> tuple[list[tuple[Any, ...]], list[str]]:
        """Run the statements, then the pipeline: the rows and its new commits' operations."""
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        before = _delta_version(spark, table) if (table / "_delta_log").exists() else -1
        run_pipeline(config, available_now=True, spark=spark)
        history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").where(f"version > {before}")
        return delta_rows_spark(spark, table, ["id", "v"]), [
            r["operation"] for r in history.orderBy("version").collect()
        ]

    rows, _ = run()
    assert rows == [(1, "a"), (2, "b"), (3, "c")]
    rows, operations = run("INSERT INTO t VALUES (4, 'd')", "INSERT INTO t VALUES (5, 'e')")
    assert rows == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]
    assert operations == ["WRITE"], "the inserts were one append"
    rows, operations = run("TRUNCATE TABLE t", "INSERT INTO t VALUES (1, 'again'), (4, 'again')")
    assert rows == [(1, "again"), (2, "b"), (3, "c"), (4, "again"), (5, "e")]
    assert "WRITE" not in operations
    # the next run starts from the saved state: the sink table still holds 2, 3, 5
    rows, operations = run("INSERT INTO t VALUES (2, 'new'), (6, 'f')")
    assert rows == [(1, "again"), (2, "new"), (3, "c"), (4, "again"), (5, "e"), (6, "f")]
    assert operations == ["MERGE"]
    conn.close()


def _delta_version(spark: Any, table: Path) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").first()["version"])
