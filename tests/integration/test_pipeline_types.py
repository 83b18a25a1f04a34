"""Every column type through the pipeline path: envelope JSON images → typed change frame
(``composer.source_changes``) must give exactly the values the typed changelog gives for the
same rows, for snapshot rows and for binlog rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_decoder_types import CASES

from sparkcdc.devserver import DEV_PASSWORD, DEV_USER, DevServer
from sparkcdc.mysql import catalog
from sparkcdc.mysql.connection import ConnectionSettings, sql_connection
from sparkcdc.pipeline.composer import source_changes

pytestmark = pytest.mark.integration

DATABASE = "pipe_types"
TYPE_CASES = [case for case in CASES if case.sql_mode is None]
SNAPSHOT_ROWS = 3  # rows 0..2 are read by the snapshot, the rest come from the binlog


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


def test_envelope_images_become_the_typed_changelog_values(spark: Any, tmp_path: Path) -> None:
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
    for shape in ("envelope", "typed"):
        _read(spark, settings, shape, tmp_path / shape)
    with server.root_connection() as conn, conn.cursor() as cur:
        for index in range(SNAPSHOT_ROWS, rows):
            cur.execute(
                f"INSERT INTO {DATABASE}.wide VALUES ({index}, {', '.join(_row_values(index))})"
            )
    for shape in ("envelope", "typed"):  # the same queries again: now the binlog rows
        _read(spark, settings, shape, tmp_path / shape)

    with sql_connection(
        ConnectionSettings(settings.host, settings.port, DEV_USER, DEV_PASSWORD)
    ) as conn:
        schema = catalog.load_schema(conn, DATABASE, "wide")
    names = ["_op", *schema.column_names]
    from_envelope = {
        row["id"]: row
        for row in source_changes(spark.read.parquet(str(tmp_path / "envelope" / "rows")), schema)
        .select(*names)
        .collect()
    }
    typed = {
        row["id"]: row
        for row in spark.read.parquet(str(tmp_path / "typed" / "rows")).select(*names).collect()
    }
    assert sorted(typed) == list(range(rows)), "every row, snapshot and binlog, in the changelog"
    assert sorted(from_envelope) == sorted(typed)
    for key, expected in typed.items():
        got = from_envelope[key]
        for name, case in zip(schema.column_names[1:], TYPE_CASES, strict=True):
            assert got[name] == expected[name], (
                f"row {key} ({'snapshot' if key < SNAPSHOT_ROWS else 'binlog'}), "
                f"{case.ddl}: envelope path gave {got[name]!r}, typed {expected[name]!r}"
            )
