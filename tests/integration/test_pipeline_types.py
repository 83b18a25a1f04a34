"""Every column type through the pipeline path: the tables shape → typed change frame
(``change_frames.source_changes``) must give exactly the values the typed changelog gives for the
same rows, for snapshot rows and for binlog rows, both when the values travel typed in their
table's struct and when they travel as text (a table without a struct: here the envelope's
JSON images as a map of texts, which the tables shape spells the same way)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from test_decoder_types import CASES

from sparkcdc.mysql.admin import catalog
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.pipeline.change_frames import source_changes
from sparkcdc_dev.devserver import DEV_PASSWORD, DEV_USER, DevServer

pytestmark = pytest.mark.integration

DATABASE = "pipe_types"
TYPE_CASES = [case for case in CASES if case.sql_mode is None]
SNAPSHOT_ROWS = 3  # rows 0..2 are read by the snapshot, the rest come from the binlog
SHAPES = ("tables", "envelope", "typed")


def _row_values(index: int) -> list[str]:
    return [c.values[index] if index < len(c.values) else "NULL" for c in TYPE_CASES]


def _read(spark: Any, settings: Any, shape: str, state: Path) -> Any:
    query = (
        spark.readStream.format("mysql-cdc")
        .option("hostname", settings.host)
        .option("port", str(settings.port))
        .option("username", DEV_USER)
        .option("password", DEV_PASSWORD)
        .option("tables", f"{DATABASE}.wide")
        .option("server-id", "5880-5889")
        .option("changelog.shape", shape)
        .option("state.location", str(state / "source"))
        .option("scan.incremental.snapshot.chunks-per-batch", "0")
        .load()
        .writeStream.format("parquet")
        .option("path", str(state / "rows"))
        .option("checkpointLocation", str(state / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def test_tables_shape_gives_the_typed_changelog_values(spark: Any, tmp_path: Path) -> None:
    server = DevServer.from_env()
    settings = server.start()
    columns = ", ".join(f"c{i} {case.ddl}" for i, case in enumerate(TYPE_CASES))
    rows = max(len(c.values) for c in TYPE_CASES)
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"CREATE TABLE {DATABASE}.wide (id INT PRIMARY KEY, {columns})")
        for index in range(SNAPSHOT_ROWS):
            cur.execute(
                f"INSERT INTO {DATABASE}.wide VALUES ({index}, {', '.join(_row_values(index))})"
            )
    for shape in SHAPES:
        _read(spark, settings, shape, tmp_path / shape)
    with server.root_connection() as conn, conn.cursor() as cur:
        for index in range(SNAPSHOT_ROWS, rows):
            cur.execute(
                f"INSERT INTO {DATABASE}.wide VALUES ({index}, {', '.join(_row_values(index))})"
            )
    for shape in SHAPES:  # the same queries again: now the binlog rows
        _read(spark, settings, shape, tmp_path / shape)

    with sql_connection(
        ConnectionSettings(settings.host, settings.port, DEV_USER, DEV_PASSWORD)
    ) as conn:
        schema = catalog.load_schema(conn, DATABASE, "wide")
    names = ["_op", *schema.column_names]
    typed = {
        row["id"]: row
        for row in spark.read.parquet(str(tmp_path / "typed" / "rows")).select(*names).collect()
    }
    assert sorted(typed) == list(range(rows)), "every row, snapshot and binlog, in the changelog"
    tables = spark.read.parquet(str(tmp_path / "tables" / "rows"))
    assert tables.where(F.col("_text").isNotNull()).count() == 0, "all typed in the struct"
    envelope = spark.read.parquet(str(tmp_path / "envelope" / "rows"))
    as_text = envelope.select(
        F.lit("+I").alias("_op"),
        F.col("op_ts").alias("_op_ts"),
        F.col("seq").alias("_seq"),
        F.col("database").alias("_database"),
        F.col("table").alias("_table"),
        F.lit(None).cast("string").alias("_ddl"),
        F.from_json("after", "MAP<STRING, STRING>").alias("_text"),
    )
    for path, frame in (("typed struct", tables), ("text", as_text)):
        got_rows = {r["id"]: r for r in source_changes(frame, schema).select(*names).collect()}
        assert sorted(got_rows) == sorted(typed), path
        for key, expected in typed.items():
            got = got_rows[key]
            for name, case in zip(schema.column_names[1:], TYPE_CASES, strict=True):
                assert got[name] == expected[name], (
                    f"row {key} ({'snapshot' if key < SNAPSHOT_ROWS else 'binlog'}), "
                    f"{case.ddl}: the {path} path gave {got[name]!r}, typed {expected[name]!r}"
                )
