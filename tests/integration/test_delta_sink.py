"""The delta sink on its own, against tables in a temporary directory.

Change frames are built by hand; what the sink wrote is read back with Spark and,
independently, with delta-rs (``deltalake``), which reads the Delta log without Spark.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from sparkcdc.sinks.base import SinkColumn, SinkContext, SinkTable
from sparkcdc.sinks.delta import DeltaOptions, DeltaSink

pytestmark = pytest.mark.integration

META = "_op STRING, _op_ts TIMESTAMP, _seq BIGINT, _database STRING, _table STRING"
COLUMNS = (SinkColumn("id", "BIGINT", nullable=False), SinkColumn("name", "STRING"))


def make_sink(spark: Any, lake: Path, pipeline: str = "delta_pipeline", **extra: Any) -> DeltaSink:
    options = DeltaOptions.model_validate({"type": "delta", "path": str(lake), **extra})
    return DeltaSink(options, spark, SinkContext(pipeline, "/nonexistent/checkpoint", "run1"))


def new_table() -> SinkTable:
    return SinkTable(f"app_db.t_{uuid.uuid4().hex[:8]}", COLUMNS, ("id",), ("app_db.src",))


def frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """A change frame; each row is (op, seq, id, name). Snapshot rows have no _op_ts."""
    return spark.createDataFrame(
        [(op, None, seq, "app_db", "src", k, name) for op, seq, k, name in rows],
        f"{META}, id BIGINT, name STRING",
    )


def snapshot(spark: Any, keys: range, seq: int = 1) -> Any:
    return frame(spark, [("+I", seq, k, f"n{k}") for k in keys])


def rows(spark: Any, sink: DeltaSink, table: SinkTable) -> list[tuple[Any, ...]]:
    """The table's rows read with Spark; delta-rs must read the same (its DataFusion reader:
    ``to_pyarrow_table`` refuses tables with deletion vectors)."""
    by_spark = sorted(tuple(r) for r in sink.read_table(table).collect())
    location = sink.location(table)
    assert location is not None
    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(location))
    by_delta_rs = pa.table(reader.execute("SELECT * FROM t").read_all()).to_pylist()
    assert sorted((r["id"], r["name"]) for r in by_delta_rs) == by_spark
    return by_spark


def changes_of_batch_one(spark: Any) -> Any:
    """Binlog changes after the snapshot rows 1..5: touch appended keys and add one."""
    return frame(
        spark,
        [
            ("-U", 10, 2, "n2"),
            ("+U", 10, 2, "two"),
            ("-D", 11, 3, "n3"),
            ("+I", 12, 6, "six"),
        ],
    )


AFTER_BATCH_ONE = [(1, "n1"), (2, "two"), (4, "n4"), (5, "n5"), (6, "six")]


def test_append_then_write_in_one_batch(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    assert DeltaSink.appends
    assert sink.append(table, snapshot(spark, range(1, 6)), 1)
    assert sink.write(table, changes_of_batch_one(spark), 1)
    assert rows(spark, sink, table) == AFTER_BATCH_ONE


def test_replayed_append_and_write_are_skipped(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    sink.append(table, snapshot(spark, range(1, 6)), 1)
    sink.write(table, changes_of_batch_one(spark), 1)
    # the replay (other content under the same batch id proves a skip, not a re-apply)
    restarted = make_sink(spark, tmp_path)
    assert not restarted.append(table, snapshot(spark, range(1, 9), seq=2), 1)
    assert not restarted.write(table, frame(spark, [("-D", 20, 1, "n1")]), 1)
    assert rows(spark, sink, table) == AFTER_BATCH_ONE
    # the next batch goes in, append and MERGE alike
    assert restarted.append(table, snapshot(spark, range(7, 9)), 2)
    assert restarted.write(table, frame(spark, [("-D", 20, 1, "n1")]), 2)
    assert rows(spark, sink, table) == [*AFTER_BATCH_ONE[1:], (7, "n7"), (8, "n8")]


def test_crash_between_append_and_write(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    assert sink.created == {table.name}  # new: the pipeline need not look for rows in it
    sink.append(table, snapshot(spark, range(1, 6)), 1)  # ... and the process dies
    replay = make_sink(spark, tmp_path)
    replay.open([table])
    assert replay.created == set()  # it was there: has_rows must be asked
    assert replay.has_rows(table)
    assert not replay.append(table, snapshot(spark, range(1, 6)), 1)
    assert replay.write(table, changes_of_batch_one(spark), 1)
    assert rows(spark, sink, table) == AFTER_BATCH_ONE


@pytest.mark.parametrize("vectors", [None, False], ids=["default", "table.properties-off"])
def test_deletion_vectors_on_new_tables_unless_the_file_says_otherwise(
    spark: Any, tmp_path: Path, vectors: bool | None
) -> None:
    extra = {} if vectors is None else {"table.properties.delta.enableDeletionVectors": vectors}
    sink, table = make_sink(spark, tmp_path, **extra), new_table()
    sink.open([table])
    properties = dict(
        (r.key, r.value)
        for r in spark.sql(f"SHOW TBLPROPERTIES {sink.identifier(table)}").collect()
    )
    on = vectors is None
    assert properties.get("delta.enableDeletionVectors") == ("true" if on else "false")
    sink.append(table, snapshot(spark, range(1, 6)), 1)
    sink.write(table, frame(spark, [("-D", 10, 3, "n3")]), 1)
    # with vectors, the MERGE marked the row deleted instead of rewriting the file
    metrics = spark.sql(f"DESCRIBE HISTORY {sink.identifier(table)} LIMIT 1").first()
    assert metrics is not None
    assert metrics.operation == "MERGE"
    added = int(metrics.operationMetrics["numTargetDeletionVectorsAdded"])
    removed = int(metrics.operationMetrics["numTargetFilesRemoved"])
    assert (added, removed > 0) == ((1, False) if on else (0, True))
    assert rows(spark, sink, table) == [(1, "n1"), (2, "n2"), (4, "n4"), (5, "n5")]
