"""``sparkcdc verify`` against real pipelines: equal tables pass on every sink kind; a
deleted, an added, a changed (in each column type) and a wrongly sharded sink row are each
found and named by key; a pipeline that keeps running under writes gives no false alarm;
columns are judged as the pipeline's schema evolution promises them; the command is quick,
quiet, and needs no cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pipelines import Writer, create_shop, fresh_database
from test_decoder_types import CASES

from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.verify.report import VerifyReport
from sparkcdc.pipeline.verify.run import verify_pipeline
from sparkcdc_dev.devpostgres import DEV_PASSWORD as PG_PASSWORD
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.{tables}
  server-id: 5900-5909
  scan.incremental.snapshot.chunk.size: 50
sink:
{sink}
{extra}
pipeline:
  name: {name}
  checkpoint: {checkpoint}
  trigger.interval: 200ms
{pipeline}"""
SHARDS = """
route:
  - source-table: {database}.orders_[0-9]+
    sink-table: {database}.all_orders
transform:
  - source-table: {database}.orders_[0-9]+
    projection: "*, __table_name__ AS shard"
    primary-keys: id, shard
"""
TYPE_CASES = [case for case in CASES if case.sql_mode is None]
RUN_S = 30  # each of the runs verify waits for


def config(
    tmp_path: Path,
    server: DevServer,
    database: str,
    sink: str,
    extra: str = "",
    tables: str = "\\.*",
    pipeline: str = "",
) -> PipelineConfig:
    return parse_pipeline(pipeline_text(tmp_path, server, database, sink, extra, tables, pipeline),
                          env=ENV, base_dir=tmp_path)  # fmt: skip


def pipeline_text(
    tmp_path: Path,
    server: DevServer,
    database: str,
    sink: str,
    extra: str = "",
    tables: str = "\\.*",
    pipeline: str = "",
) -> str:
    """The pipeline file's text (its passwords from ``ENV``'s variables)."""
    settings = server.start()
    return PIPELINE.format(
        host=settings.host,
        port=settings.port,
        database=database,
        tables=tables,
        sink=sink,
        extra=extra.format(database=database),
        name=f"verify-{database}",
        checkpoint=tmp_path / "checkpoint",
        pipeline=pipeline,
    )


ENV = {
    **os.environ,
    "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD,
    "SPARKCDC_TEST_PG_PASSWORD": PG_PASSWORD,
}


def delta_sink(tmp_path: Path) -> str:
    return f"  type: delta\n  path: {tmp_path / 'lake'}"


def shop_in_delta(
    spark: Any, server: DevServer, tmp_path: Path, database: str, tables: str = "\\.*"
) -> PipelineConfig:
    """The shop (shards merged by a route with a transform) copied to Delta by a pipeline;
    ``tables`` the pattern of the tables it captures."""
    create_shop(server, database).close()
    cfg = config(tmp_path, server, database, delta_sink(tmp_path), SHARDS, tables)
    run_pipeline(cfg, available_now=True, spark=spark)
    return cfg


def found(report: VerifyReport, table: str, kind: str) -> list[dict[str, Any]]:
    (result,) = [t for t in report.tables if t.sink_table == table]
    items: list[dict[str, Any]] = getattr(result, kind)
    return items


def keys(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i["key"] for i in items]


# -- every type ------------------------------------------------------------------------------


def create_types(server: DevServer, database: str) -> list[str]:
    """Table ``wide``: one row per type column, row ``i`` with a non-NULL value in ``c<i>``."""
    conn = fresh_database(server, database)
    columns = ", ".join(f"c{i} {case.ddl}" for i, case in enumerate(TYPE_CASES))
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE wide (id INT PRIMARY KEY, {columns})")
        for row in range(len(TYPE_CASES)):
            values = []
            for i, case in enumerate(TYPE_CASES):
                present = [v for v in case.values if v != "NULL"]
                pick = case.values[row % len(case.values)]
                values.append(present[row % len(present)] if i == row else pick)
            cur.execute(f"INSERT INTO wide VALUES ({row}, {', '.join(values)})")
    conn.close()
    return [f"c{i}" for i in range(len(TYPE_CASES))]


def changed(column: str, spark_type: str) -> str:
    """Spark SQL: a value of ``column`` that differs from it (never NULL for a value)."""
    c = f"`{column}`"
    if spark_type == "boolean":
        return f"NOT {c}"
    if spark_type in ("float", "double"):
        return f"CAST(CASE WHEN {c} = 0 THEN 1 ELSE {c} * 0.5 END AS {spark_type})"
    if spark_type in ("tinyint", "smallint", "int", "bigint") or spark_type.startswith("decimal"):
        return f"CAST(CASE WHEN {c} > 0 THEN {c} - 1 ELSE {c} + 1 END AS {spark_type})"
    if spark_type == "date":
        return f"CASE WHEN {c} > DATE'5000-01-01' THEN DATE_SUB({c}, 1) ELSE DATE_ADD({c}, 1) END"
    if spark_type.startswith("timestamp"):
        return f"{c} + INTERVAL 1 MICROSECOND"
    if spark_type == "binary":
        return f"CONCAT({c}, X'00')"
    return f"CONCAT({c}, ' ')"  # strings: a trailing space


def test_every_type_is_equal_then_each_changed_column_is_named(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    database = "verify_types"
    columns = create_types(server, database)
    cfg = config(tmp_path, server, database, delta_sink(tmp_path))
    run_pipeline(cfg, available_now=True, spark=spark)
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert report.equal, report.text(50)
    (table,) = report.tables
    assert table.mode == "pushdown" and table.source_rows == len(columns)
    assert "no Spark" in table.sink_reader  # every type hashed from delta-rs's Arrow

    lake = tmp_path / "lake" / database / "wide"
    types = {f.name: f.dataType.simpleString() for f in spark.table(f"delta.`{lake}`").schema}
    # one UPDATE: in row i, column c<i> moves by the smallest step its type shows
    changes = ", ".join(
        f"{c} = CASE WHEN id = {row} THEN {changed(c, types[c])} ELSE {c} END"
        for row, c in enumerate(columns)
    )
    spark.sql(f"UPDATE delta.`{lake}` SET {changes}")
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    different = found(report, f"{database}.wide", "different")
    assert [(d["key"], d["columns"]) for d in different] == sorted(
        [({"id": str(row)}, [column]) for row, column in enumerate(columns)],
        key=lambda d: str(d[0]),
    ), report.text(50)
    assert not found(report, f"{database}.wide", "missing")


# -- missing, extra, wrong shard --------------------------------------------------------------


def test_missing_extra_and_wrong_shard_rows_are_found_by_key(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    database = "verify_shop"
    cfg = shop_in_delta(spark, server, tmp_path, database)
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert report.equal, report.text()
    modes = {t.sink_table: t.mode for t in report.tables}
    assert modes[f"{database}.all_orders"] == "spark" and modes[f"{database}.items"] == "pushdown"

    lake = tmp_path / "lake" / database
    items = spark.sql(f"SELECT id FROM delta.`{lake / 'items'}` ORDER BY id").collect()
    gone, moved = items[0]["id"], items[1]["id"]
    spark.sql(f"DELETE FROM delta.`{lake / 'items'}` WHERE id = {gone}")
    spark.sql(
        f"INSERT INTO delta.`{lake / 'items'}` SELECT 99999 AS id, name, qty, price, big, at, "
        f"tag, flag FROM delta.`{lake / 'items'}` WHERE id = {moved}"
    )
    order = spark.sql(
        f"SELECT id FROM delta.`{lake / 'all_orders'}` WHERE shard = 'orders_1' LIMIT 1"
    ).collect()[0]["id"]
    spark.sql(
        f"UPDATE delta.`{lake / 'all_orders'}` SET shard = 'orders_2' WHERE id = {order} "
        "AND shard = 'orders_1'"
    )
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert not report.equal
    assert keys(found(report, f"{database}.items", "missing")) == [{"id": str(gone)}]
    assert keys(found(report, f"{database}.items", "extra")) == [{"id": "99999"}]
    orders = f"{database}.all_orders"
    assert keys(found(report, orders, "missing")) == [{"id": str(order), "shard": "orders_1"}]
    assert keys(found(report, orders, "extra")) == [{"id": str(order), "shard": "orders_2"}]
    assert not found(report, orders, "different")


# -- other sinks -----------------------------------------------------------------------------


def _equal_after_run(spark: Any, cfg: PipelineConfig) -> VerifyReport:
    run_pipeline(cfg, available_now=True, spark=spark)
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert report.equal, report.text()
    assert {t.sink_table.rpartition(".")[2] for t in report.tables} >= {"items", "all_orders"}
    return report


@pytest.mark.iceberg
def test_iceberg_sink_equal(spark: Any, server: DevServer, tmp_path: Path) -> None:
    database = "verify_ice"
    create_shop(server, database).close()
    sink = (
        "  type: iceberg\n  catalog.properties.type: hadoop\n"
        f"  catalog.properties.warehouse: {tmp_path / 'warehouse'}"
    )
    _equal_after_run(spark, config(tmp_path, server, database, sink, SHARDS))


def test_postgresql_sink_equal(spark: Any, server: DevServer, tmp_path: Path) -> None:
    database = "verify_pg"
    create_shop(server, database).close()
    pg = DevPostgres.from_env()
    pg.start()
    with pg.connection() as conn:
        conn.execute("DROP SCHEMA IF EXISTS verify_pg CASCADE")
    sink = (
        f"  type: jdbc\n  url: jdbc:postgresql://127.0.0.1:{pg.port}/sink_db\n"
        "  username: cdc\n  password: ${SPARKCDC_TEST_PG_PASSWORD}\n  schema: verify_pg"
    )
    _equal_after_run(spark, config(tmp_path, server, database, sink, SHARDS))


def test_mariadb_jdbc_sink_equal(spark: Any, server: DevServer, tmp_path: Path) -> None:
    database = "verify_my"
    create_shop(server, database).close()
    fresh_database(server, "verify_my_sink").close()
    settings = server.start()
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"GRANT ALL PRIVILEGES ON verify_my_sink.* TO 'cdc'@'{settings.host}'")
    sink = (
        f"  type: jdbc\n  url: jdbc:mariadb://{settings.host}:{settings.port}/verify_my_sink\n"
        "  username: cdc\n  password: ${SPARKCDC_TEST_PASSWORD}"
    )
    _equal_after_run(spark, config(tmp_path, server, database, sink, SHARDS))


# -- changes in flight -----------------------------------------------------------------------


def test_no_false_alarm_while_the_source_is_written_and_the_pipeline_runs(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    database = "verify_live"
    # the shards alone, merged into one sink table by the route: a batch of the shop's four
    # sink tables took ~20 s here, and verify waits for several
    cfg = shop_in_delta(spark, server, tmp_path, database, "orders_[0-9]+")
    errors: list[BaseException] = []
    stop = threading.Event()

    def keep_running() -> None:  # scheduled runs, one after the other
        try:
            while not stop.is_set():
                run_pipeline(cfg, spark=spark, max_seconds=RUN_S)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    runner = threading.Thread(target=keep_running, daemon=True)
    status = tmp_path / "checkpoint" / "status.json"
    with Writer(server, database, seed=5, max_operations=100_000, pause_s=0.5) as writer:
        runner.start()
        deadline = time.monotonic() + 60
        while not (status.exists() and json.loads(status.read_text())["running"]):
            assert time.monotonic() < deadline and not errors, errors
            time.sleep(0.2)
        # verify again until one saw the sink behind the source at its first look: the
        # writer's orders are sparse (a transaction each 0.5 s over the shop's tables), so a
        # look may fall just after a batch caught up. Every verify must say equal
        reports = []
        for _ in range(5):
            reports.append(verify_pipeline(cfg, spark=spark, timeout_s=120))
            if any(t.differing_buckets for t in reports[-1].tables):
                break
        writes = writer.thread.is_alive()
    stop.set()
    runner.join()
    assert not errors, errors
    assert writes  # the writer was still writing when the last verify ended
    for report in reports:
        assert report.equal, report.text()
    # not vacuous: a verify did see the sink behind the source, and settled it
    assert any(t.differing_buckets for t in reports[-1].tables), reports[-1].text()
    # and its summary says so without contradicting its verdict: what the first look's
    # differing buckets came to once re-checked key by key
    text = reports[-1].text()
    assert "were read again on both sides after the pipeline caught up: 0 of the" in text, text
    assert "read once the pipeline had passed that position" in text, text


# -- what the schema evolution promises --------------------------------------------------------

# Flink CDC's documented sink options (its "Schema Evolution" page), verbatim
FLINK_TAGS = """
  include.schema.changes: [create.table.event, column]
  exclude.schema.changes: [drop.column]"""


def delta_values(path: Path, columns: str) -> list[tuple[Any, ...]]:
    """The rows of the Delta table at ``path`` read by delta-rs (not by Spark), by key."""
    import deltalake
    import pyarrow as pa

    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
    rows = pa.table(reader.execute(f"SELECT {columns} FROM t ORDER BY id").read_all())
    return [tuple(r.values()) for r in rows.to_pylist()]


@pytest.mark.parametrize(
    ("sink_options", "why"),
    [
        ("", "schema.change.behavior lenient keeps it"),
        (FLINK_TAGS, "drop.column is in the sink's exclude.schema.changes"),
    ],
    ids=["lenient", "flink-tags"],
)
def test_a_dropped_column_the_sink_keeps_is_not_compared_and_real_differences_are_found(
    spark: Any, server: DevServer, tmp_path: Path, sink_options: str, why: str
) -> None:
    database = "verify_drop"
    with fresh_database(server, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20), b INT)")
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s)", [(i, f"a{i}", i * 10) for i in range(1, 6)]
        )
        sink = delta_sink(tmp_path) + sink_options
        cfg = config(
            tmp_path, server, database, sink, pipeline="  schema.change.behavior: lenient\n"
        )
        run_pipeline(cfg, available_now=True, spark=spark)
        cur.execute("ALTER TABLE t DROP COLUMN b")
        cur.execute("INSERT INTO t VALUES (10, 'a10')")
        cur.execute("UPDATE t SET a = 'changed' WHERE id = 1")
    run_pipeline(cfg, available_now=True, spark=spark)
    lake = tmp_path / "lake" / database / "t"
    # the sink is what lenient promises: b kept, its old values, NULL in rows written since
    assert delta_values(lake, "id, a, b") == [
        (1, "changed", None), (2, "a2", 20), (3, "a3", 30), (4, "a4", 40), (5, "a5", 50),
        (10, "a10", None),
    ]  # fmt: skip

    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert report.equal, report.text()
    (table,) = report.tables
    assert table.columns == 2
    assert [(n["column"], n["side"]) for n in table.not_compared] == [("b", "sink")]
    assert why in table.not_compared[0]["why"], table.not_compared
    assert "not compared: sink column b" in report.text()

    # a real difference in a column the source has is still found
    spark.sql(f"UPDATE delta.`{lake}` SET a = 'wrong' WHERE id = 3")
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    different = found(report, f"{database}.t", "different")
    assert [(d["key"], d["columns"]) for d in different] == [({"id": "3"}, ["a"])], report.text()


def test_a_lenient_type_change_is_judged_with_the_column_it_replaced(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    """lenient gives a changed type a new column b_bigint: rows written since hold the
    value there, older rows still in b (b_bigint NULL). Each row is judged where lenient
    put its value; a wrong value in the old column is still found."""
    database = "verify_retype"
    with fresh_database(server, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, b INT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i * 10) for i in range(1, 5)])
        cfg = config(tmp_path, server, database, delta_sink(tmp_path))
        run_pipeline(cfg, available_now=True, spark=spark)
        cur.execute("ALTER TABLE t MODIFY b BIGINT")
        cur.execute("INSERT INTO t VALUES (5, 5000000000)")
        cur.execute("UPDATE t SET b = 11 WHERE id = 1")
    run_pipeline(cfg, available_now=True, spark=spark)
    lake = tmp_path / "lake" / database / "t"
    assert delta_values(lake, "id, b, b_bigint") == [
        (1, None, 11), (2, 20, None), (3, 30, None), (4, 40, None), (5, None, 5000000000),
    ]  # fmt: skip

    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert report.equal, report.text()
    assert report.tables[0].not_compared == []  # b holds older rows' values: it is used

    spark.sql(f"UPDATE delta.`{lake}` SET b = 31 WHERE id = 3")
    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    different = found(report, f"{database}.t", "different")
    assert [(d["key"], d["columns"]) for d in different] == [({"id": "3"}, ["b_bigint"])]


def test_a_source_column_that_never_reached_the_sink_is_listed_with_why(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    database = "verify_excluded"
    with fresh_database(server, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20))")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"a{i}") for i in range(1, 4)])
        sink = delta_sink(tmp_path) + "\n  exclude.schema.changes: [add.column]"
        cfg = config(tmp_path, server, database, sink)
        run_pipeline(cfg, available_now=True, spark=spark)
        cur.execute("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7")
        cur.execute("INSERT INTO t VALUES (4, 'a4', 8)")
    run_pipeline(cfg, available_now=True, spark=spark)
    assert delta_values(tmp_path / "lake" / database / "t", "*")[-1] == (4, "a4")  # no c

    report = verify_pipeline(cfg, spark=spark, timeout_s=5)
    assert report.equal, report.text()
    (table,) = report.tables
    assert table.not_compared == [
        {
            "column": "c",
            "side": "source",
            "why": "not in the sink: add.column is in the sink's exclude.schema.changes",
        }
    ]
    assert "not compared: source column c: not in the sink" in report.text()


# -- the command: quick, quiet, its own local Spark -------------------------------------------

SPARK_LINES = ("log4j", "NativeCodeLoader", "WARN Utils", "Setting default log level", "WARN ")


def sparkcdc_verify(file: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``sparkcdc verify`` in a process of its own, and its wall time."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "verify", str(file), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    return done, time.monotonic() - began


def test_cli_verify_of_a_small_table_takes_seconds_and_prints_no_spark_lines(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    database = "verify_quick"
    with fresh_database(server, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20), d DOUBLE, at DATETIME(6))")
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s, %s, NOW(6))", [(i, f"a{i}", i / 3) for i in range(7)]
        )
    file = tmp_path / "pipeline.yaml"
    file.write_text(pipeline_text(tmp_path, server, database, delta_sink(tmp_path)))
    cfg = parse_pipeline(file.read_text(), env=ENV, base_dir=tmp_path)
    run_pipeline(cfg, available_now=True, spark=spark)

    done, took = sparkcdc_verify(file)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify: EQUAL" in done.stdout
    console = done.stdout + done.stderr
    assert not [line for line in console.splitlines() if any(s in line for s in SPARK_LINES)]
    assert "Spark used" not in done.stdout  # a Delta table on a local disk: no Spark at all
    assert took < 30, f"verify of a 7-row table took {took:.0f}s (a guard, not a benchmark)"


def test_cli_verify_of_a_transform_uses_its_own_local_session_not_the_files_master(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    """A running pipeline holds its cluster's cores: verify takes none of them. The file
    names a master nobody answers at; verify's Spark (for the transform) runs locally under
    an application name of its own, its start-up lines in its log file."""
    database = "verify_local"
    with fresh_database(server, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20))")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"a{i}") for i in range(5)])
    transform = 'transform:\n  - source-table: {database}.t\n    projection: "*, UPPER(a) AS up"'
    file = tmp_path / "pipeline.yaml"
    text = pipeline_text(tmp_path, server, database, delta_sink(tmp_path), transform)
    cfg = parse_pipeline(text, env=ENV, base_dir=tmp_path)
    run_pipeline(cfg, available_now=True, spark=spark)
    file.write_text(text + "  spark.master: spark://127.0.0.1:9\n")  # discard: nobody there

    done, _ = sparkcdc_verify(file)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify: EQUAL" in done.stdout
    assert "Spark used: master local[" in done.stdout
    assert f"application verify-{database}-verify" in done.stdout
    console = done.stdout + done.stderr
    assert not [line for line in console.splitlines() if any(s in line for s in SPARK_LINES)]


def test_a_delta_table_on_an_object_store_is_read_without_spark(minio: Any, bucket: str) -> None:
    """The Delta sink's reader for verify on S3 (the private MinIO, with the S3A settings a
    pipeline file gives Spark): it reads what delta-rs, set up by hand, wrote there."""
    import deltalake
    import pyarrow as pa

    from sparkcdc.sinks.base import SinkColumn, SinkTable
    from sparkcdc.sinks.delta import DeltaOptions, DeltaSink

    conf = minio.spark_conf()
    written = pa.table({"id": [1, 2, 3], "v": ["a", None, "c"]})
    deltalake.write_deltalake(
        f"s3://{bucket}/lake/db/t",
        written,
        storage_options={
            "AWS_ENDPOINT_URL": conf["spark.hadoop.fs.s3a.endpoint"],
            "AWS_ACCESS_KEY_ID": conf["spark.hadoop.fs.s3a.access.key"],
            "AWS_SECRET_ACCESS_KEY": conf["spark.hadoop.fs.s3a.secret.key"],
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        },
    )
    options = DeltaOptions(type="delta", path=f"s3a://{bucket}/lake")
    table = SinkTable("db.t", (SinkColumn("id", "BIGINT", False), SinkColumn("v", "STRING", True)),
                      ("id",), ("db.t",))  # fmt: skip
    read = DeltaSink.arrow_reader(options, table, conf)
    assert read is not None
    got = pa.Table.from_batches(list(read(["id", "v"])))
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == written.to_pylist()


def test_a_delta_table_the_store_refuses_is_a_sink_error_that_says_where(
    minio: Any, bucket: str
) -> None:
    from sparkcdc.errors import SinkError
    from sparkcdc.sinks.base import SinkColumn, SinkTable
    from sparkcdc.sinks.delta import DeltaOptions, DeltaSink

    conf = {**minio.spark_conf(), "spark.hadoop.fs.s3a.secret.key": "not-the-secret"}
    options = DeltaOptions(type="delta", path=f"s3a://{bucket}/lake")
    table = SinkTable("db.t", (SinkColumn("id", "BIGINT", False),), ("id",), ("db.t",))
    read = DeltaSink.arrow_reader(options, table, conf)
    assert read is not None
    with pytest.raises(SinkError, match=f"delta sink: db.t: .*s3a://{bucket}/lake/db/t") as got:
        list(read(["id"]))
    assert "not-the-secret" not in str(got.value) and "spark.conf" in str(got.value)
