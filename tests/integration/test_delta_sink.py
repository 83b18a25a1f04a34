"""The delta sink on its own, against tables in a temporary directory.

Change frames are built by hand; what the sink wrote is read back with Spark and,
independently, with delta-rs (``deltalake``), which reads the Delta log without Spark.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from tests.harness.moved_files import files_moved_away

from sparkcdc.errors import SinkError
from sparkcdc.sinks.base import SinkColumn, SinkContext, SinkTable, key_span
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


def test_a_replayed_append_is_found_past_other_commits_and_an_older_batch_is_not(
    spark: Any, tmp_path: Path
) -> None:
    """The look back reads past more commits than its first page (16) holds, passes over
    unmarked commits and other writers' marks, and stops at this writer's older batch."""
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    sink.append(table, snapshot(spark, range(1, 6)), 3)
    other = make_sink(spark, tmp_path, pipeline="another_pipeline")
    other.write(table, frame(spark, [("+I", 30, 40, "theirs")]), 9)  # marked, not ours
    for n in range(20):  # unmarked commits (a user's table settings)
        spark.sql(f"ALTER TABLE {sink.identifier(table)} SET TBLPROPERTIES ('team.note' = 'n{n}')")
    restarted = make_sink(spark, tmp_path)
    # rows of keys the table lacks: the marks decide, not a look at the keys
    unseen = snapshot(spark, range(50, 52))
    assert restarted.appended(table, unseen, 3)
    assert restarted.appended(table, unseen, 2)  # an older batch
    assert not restarted.append(table, snapshot(spark, range(6, 9)), 3)
    assert not restarted.appended(table, snapshot(spark, range(6, 9)), 4)
    assert restarted.append(table, snapshot(spark, range(6, 9)), 4)
    expected = [(k, f"n{k}") for k in range(1, 9)] + [(40, "theirs")]
    assert rows(spark, sink, table) == expected
    # a MERGE of batch 5 marks the table: an append of batch 4 is decided at it ...
    restarted.write(table, frame(spark, [("-D", 50, 8, "n8")]), 5)
    assert restarted.appended(table, unseen, 4)
    # ... and so is one of batch 6: not appended, without reading further back
    assert not restarted.appended(table, snapshot(spark, range(9, 10)), 6)


def cut_history(spark: Any, sink: DeltaSink, table: SinkTable) -> None:
    """Leave the table's history as Delta's log clean-up does: a checkpoint, the commit
    files before it removed."""
    for n in range(2):  # a checkpoint at every commit from the first one that says so
        spark.sql(
            f"ALTER TABLE {sink.identifier(table)} SET TBLPROPERTIES "
            f"('delta.checkpointInterval' = '1', 'team.note' = 'n{n}')"
        )
    log = Path(str(sink.location(table)).removeprefix("file:")) / "_delta_log"
    checkpoint = max(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))
    for commit in log.glob("*.json"):
        if commit.name[:20].isdigit() and int(commit.name[:20]) < checkpoint:
            commit.unlink()
    history = spark.sql(f"DESCRIBE HISTORY {sink.identifier(table)}").collect()
    assert min(int(c["version"]) for c in history) > 0


def test_an_append_a_history_cannot_decide_is_decided_by_its_keys(
    spark: Any, tmp_path: Path
) -> None:
    """Where the history is cut short (Delta removed its older commit files) before any
    mark of this writer, the rows' keys decide."""
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    snapshot(spark, range(1, 6)).select("id", "name").write.format("delta").mode("append").save(
        sink.location(table)
    )
    cut_history(spark, sink, table)
    upgraded = make_sink(spark, tmp_path)  # a new run reads the history
    assert not upgraded.append(table, snapshot(spark, range(1, 6)), 1)  # its keys are there
    assert upgraded.append(table, snapshot(spark, range(6, 8)), 2)  # none of these are
    assert rows(spark, sink, table) == [(k, f"n{k}") for k in range(1, 8)]
    # from now on the new marks decide: the keys are not looked up again
    assert upgraded.appended(table, snapshot(spark, range(100, 101)), 2)
    assert not upgraded.appended(table, snapshot(spark, range(100, 101)), 3)


def test_a_table_the_sink_created_is_answered_from_its_own_appends(
    spark: Any, tmp_path: Path
) -> None:
    """Every commit this writer made to a table its sink created is that sink's: it answers
    appended() from its own record, with no look at the history. An outside append carrying
    this writer's mark proves which one answered."""
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    assert not sink.appended(table, snapshot(spark, range(1, 2)), 0)
    assert sink.append(table, snapshot(spark, range(1, 3)), 1)
    assert sink.appended(table, snapshot(spark, range(1, 3)), 1)
    assert sink.appended(table, snapshot(spark, range(1, 3)), 0)  # an older batch
    snapshot(spark, range(5, 7)).select("id", "name").write.format("delta").mode("append").option(
        "userMetadata", sink.mark(table, "append", 2)
    ).save(sink.location(table))
    assert not sink.appended(table, snapshot(spark, range(5, 7)), 2)  # its record
    assert make_sink(spark, tmp_path).appended(table, snapshot(spark, range(5, 7)), 2)  # history
    # an append that fails leaves the table to the history from then on
    with pytest.raises(SinkError, match="appending the inserts of batch 2"):
        sink.append(table, frame(spark, [("+I", 1, None, "no key")]), 2)  # id is NOT NULL
    assert sink.appended(table, snapshot(spark, range(5, 7)), 2)


def test_a_table_whose_history_the_sink_read_once_is_answered_from_its_record_after(
    spark: Any, tmp_path: Path
) -> None:
    """A new run's sink reads an existing table's history for its first append only: from
    then on this writer's commits to it are its own. An outside append carrying this
    writer's mark proves which one answered."""
    table = new_table()
    first = make_sink(spark, tmp_path)
    first.open([table])
    assert first.append(table, snapshot(spark, range(1, 3)), 0)
    sink = make_sink(spark, tmp_path)  # a new run: the table exists, not created by it
    assert sink.appended(table, snapshot(spark, range(1, 3)), 0)  # the history says so
    assert not sink.appended(table, snapshot(spark, range(3, 5)), 1)
    assert sink.append(table, snapshot(spark, range(3, 5)), 1)
    snapshot(spark, range(5, 7)).select("id", "name").write.format("delta").mode("append").option(
        "userMetadata", sink.mark(table, "append", 2)
    ).save(sink.location(table))
    assert not sink.appended(table, snapshot(spark, range(5, 7)), 2)  # its record
    assert make_sink(spark, tmp_path).appended(table, snapshot(spark, range(5, 7)), 2)  # history


def test_begin_open_creates_absent_tables_in_the_background_and_ready_waits(
    spark: Any, tmp_path: Path
) -> None:
    sink, table, other = make_sink(spark, tmp_path), new_table(), new_table()
    sink.open([other])
    sink.begin_open([table, other])
    assert sink.created == {table.name, other.name}  # both new to this sink
    sink.ready()
    assert sink.append(table, snapshot(spark, range(1, 3)), 0)
    assert rows(spark, sink, table) == [(1, "n1"), (2, "n2")]
    # a table Delta cannot create fails at ready(), in the caller's thread, once
    broken = SinkTable(
        "app_db.broken", (SinkColumn("id", "NOT_A_TYPE", nullable=False),), ("id",), ("app_db.src",)
    )
    sink.begin_open([broken])
    with pytest.raises(SinkError, match=r"cannot create or open table app_db\.broken"):
        sink.ready()
    sink.ready()


def test_a_merge_is_marked_and_leaves_the_users_commit_metadata_as_it_was(
    spark: Any, tmp_path: Path
) -> None:
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    key = "spark.databricks.delta.commitInfo.userMetadata"
    spark.conf.set(key, "nightly audit")
    try:
        sink.write(table, snapshot(spark, range(1, 3)), 4)
        assert spark.conf.get(key) == "nightly audit"
    finally:
        spark.conf.unset(key)
    newest = spark.sql(f"DESCRIBE HISTORY {sink.identifier(table)} LIMIT 1").first()
    assert newest is not None
    assert json.loads(newest.userMetadata) == {
        "sparkcdc": sink.app_id(table),
        "write": "merge",
        "batch": 4,
    }
    assert make_sink(spark, tmp_path).appended(table, snapshot(spark, range(9, 10)), 4) is False


def test_keys_are_looked_up_by_their_names_as_they_are(spark: Any, tmp_path: Path) -> None:
    """A key named with a dot is a column of that name, not a field of a struct."""
    sink = make_sink(spark, tmp_path)
    columns = (SinkColumn("order.id", "BIGINT", nullable=False), SinkColumn("name", "STRING"))
    table = SinkTable(f"app_db.t_{uuid.uuid4().hex[:8]}", columns, ("order.id",), ("app_db.src",))
    sink.open([table])

    def rows_of(keys: range) -> Any:
        return spark.createDataFrame(
            [("+I", None, 1, "app_db", "src", k, f"n{k}") for k in keys],
            f"{META}, `order.id` BIGINT, name STRING",
        )

    rows_of(range(1, 4)).select("`order.id`", "name").write.format("delta").mode("append").save(
        sink.location(table)
    )
    cut_history(spark, sink, table)  # the keys decide
    upgraded = make_sink(spark, tmp_path)  # a new run reads the history
    assert not upgraded.append(table, rows_of(range(1, 4)), 1)
    assert upgraded.append(table, rows_of(range(4, 6)), 2)
    assert sorted(tuple(r) for r in sink.read_table(table).collect()) == [
        (k, f"n{k}") for k in range(1, 6)
    ]


@pytest.mark.parametrize("vectors", [None, True], ids=["default", "table.properties-on"])
def test_deletion_vectors_off_on_new_tables_unless_the_file_asks_for_them(
    spark: Any, tmp_path: Path, vectors: bool | None
) -> None:
    """Off by default, so delta-rs's Arrow reader and polars read every table the sink makes;
    ``table.properties.delta.enableDeletionVectors: true`` turns them on."""
    extra = {} if vectors is None else {"table.properties.delta.enableDeletionVectors": vectors}
    sink, table = make_sink(spark, tmp_path, **extra), new_table()
    sink.open([table])
    properties = dict(
        (r.key, r.value)
        for r in spark.sql(f"SHOW TBLPROPERTIES {sink.identifier(table)}").collect()
    )
    on = vectors is True
    assert properties.get("delta.enableDeletionVectors") == ("true" if on else "false")
    assert properties.get("delta.checkpointInterval") == "100"  # kept when vectors are set
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


def test_a_merge_reads_only_the_files_its_keys_can_be_in(spark: Any, tmp_path: Path) -> None:
    """The MERGE's condition bounds the target to the batch's key range, so Delta skips the
    files outside it: with the files of keys 1..100 moved away, a batch of keys 150..250
    still merges (a MERGE that scanned the whole key column would fail to read them)."""
    sink, table = make_sink(spark, tmp_path), new_table()
    sink.open([table])
    sink.append(table, snapshot(spark, range(1, 101)), 1)
    sink.append(table, snapshot(spark, range(101, 201)), 2)
    location = Path(str(sink.location(table)))
    low = [
        location / add["path"]
        for log_file in sorted((location / "_delta_log").glob("*.json"))
        for line in log_file.read_text().splitlines()
        if (add := json.loads(line).get("add"))
        and json.loads(add["stats"])["maxValues"]["id"] <= 100
    ]
    changes = frame(spark, [("-U", 10, 150, "n150"), ("+U", 10, 150, "x"), ("+I", 11, 250, "y")])
    table_read = spark.read.format("delta").load(str(location)).select("name").collect
    with files_moved_away(low, tmp_path / "away", table_read):
        sink.write(table, changes, 3)
    expected = {k: f"n{k}" for k in range(1, 201)} | {150: "x", 250: "y"}
    assert rows(spark, sink, table) == sorted(expected.items())


@pytest.mark.parametrize(
    ("spark_type", "least", "greatest"),
    [
        ("TINYINT", -128, 127),
        ("SMALLINT", -32768, 32767),
        ("INT", -2147483648, 2147483647),
        ("BIGINT", -9223372036854775808, 9223372036854775807),
    ],
)
def test_a_key_span_is_written_in_the_key_columns_own_type(
    spark: Any, spark_type: str, least: int, greatest: int
) -> None:
    """Bounds at the type's extremes parse as literals of the column's type: no cast wraps
    the column (file skipping reads a bare column), and both extremes are inside."""
    table = SinkTable("app_db.t", (SinkColumn("k", spark_type, nullable=False),), ("k",), ())
    keys = spark.createDataFrame([(least,), (greatest,), (0,)], f"k {spark_type}")
    any_rows, span = key_span(keys, table)
    assert (any_rows, span) == (
        True,
        f"t.`k` BETWEEN {least}{_suffix(spark_type)} AND {greatest}{_suffix(spark_type)}",
    )
    keys.createOrReplaceTempView("span_keys")
    selected = spark.sql(f"SELECT k FROM span_keys t WHERE {span}")
    assert "cast" not in selected._jdf.queryExecution().analyzed().toString().lower()
    assert selected.count() == 3


def _suffix(spark_type: str) -> str:
    return {"TINYINT": "Y", "SMALLINT": "S", "INT": "", "BIGINT": "L"}[spark_type]


def test_no_key_span_for_a_null_key_or_a_key_that_is_not_a_whole_number(spark: Any) -> None:
    """``<=>`` matches a NULL key, which no range holds; text and decimals get no bound
    (their literals would need escaping or a cast): the MERGE then reads every file."""
    numbers = SinkTable("app_db.t", (SinkColumn("k", "BIGINT"),), ("k",), ())
    with_null = spark.createDataFrame([(1,), (None,)], "k BIGINT")
    assert key_span(with_null, numbers) == (True, None)
    assert key_span(with_null.where("false"), numbers) == (False, None)
    texts = SinkTable("app_db.t", (SinkColumn("k", "STRING"),), ("k",), ())
    assert key_span(spark.createDataFrame([("a",)], "k STRING"), texts) == (True, None)
    assert key_span(spark.createDataFrame([], "k STRING"), texts) == (False, None)
