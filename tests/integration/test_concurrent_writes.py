"""One batch's sink tables written at once (``spark/concurrent.py``): each write in a session
of its own, reading the cached batch (not the source again); the results in order; a failure
raised only when every write of the batch has ended; the streaming query's job group carried
into the writes' threads. With the Delta sink: two tables written at once commit each with
its own idempotency id and mark, so a replay of the batch skips every one of them."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_delta_sink import frame, make_sink, new_table, rows

from sparkcdc.sinks.delta import DeltaSink
from sparkcdc.spark.concurrent import ConcurrentWrites

pytestmark = pytest.mark.integration

SETTING = "spark.sparkcdc.test.write"


def cached_batch(spark: Any) -> Any:
    """A cached frame whose values a second computation would not repeat (``rand``)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    batch = spark.range(200).select("id", F.rand().alias("r")).persist(StorageLevel.MEMORY_ONLY)
    batch.count()
    return batch


def test_each_write_runs_in_its_own_session_on_the_cached_batch(spark: Any) -> None:
    batch = cached_batch(spark)
    expected = sorted(tuple(r) for r in batch.collect())
    spark.sparkContext.setJobGroup("sparkcdc-test-group", "the query's batch")
    writes = ConcurrentWrites(3)
    started = threading.Barrier(3, timeout=60)

    def write(n: int) -> Any:
        def run(frame: Any) -> Any:
            session = frame.sparkSession
            session.conf.set(SETTING, str(n))
            started.wait()  # all three at once, each with its setting set
            seen = session.conf.get(SETTING)
            group = session.sparkContext.getLocalProperty("spark.jobGroup.id")
            return n, seen, group, sorted(tuple(r) for r in frame.collect()), session

        return run

    try:
        results = writes.run(batch, [write(n) for n in range(3)])
    finally:
        writes.close()
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        batch.unpersist()
    assert [r[0] for r in results] == [0, 1, 2]  # in the order given
    assert [r[1] for r in results] == ["0", "1", "2"]  # no write saw another's setting
    assert spark.conf.get(SETTING, None) is None  # nor the batch's session
    assert [r[2] for r in results] == ["sparkcdc-test-group"] * 3
    assert all(r[3] == expected for r in results)  # the cached rows, not computed again
    assert len({id(r[4]) for r in results} | {id(spark)}) == 4


def test_a_failed_write_is_raised_when_the_others_have_ended(spark: Any) -> None:
    batch = cached_batch(spark)
    ended: list[str] = []

    def fails(frame: Any) -> None:
        raise RuntimeError("this table's write failed")

    def slow(frame: Any) -> str:
        time.sleep(2)
        frame.count()
        ended.append("slow")
        return "slow"

    writes = ConcurrentWrites(2)
    try:
        with pytest.raises(RuntimeError, match="this table's write failed"):
            writes.run(batch, [fails, slow])
        assert ended == ["slow"]  # raised only after the other write ended
        assert writes.run(batch, [slow]) == ["slow"]  # one write: in the caller's thread
    finally:
        writes.close()
        batch.unpersist()


def test_delta_tables_written_at_once_keep_their_own_idempotency(
    spark: Any, tmp_path: Path
) -> None:
    sink = make_sink(spark, tmp_path / "lake")
    tables = [new_table() for _ in range(2)]
    sink.open(tables)
    changes = frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b"), ("-D", 3, 1, "a")])

    def write(sink: DeltaSink, table: Any) -> Any:
        return lambda batch: sink.write(table, batch, 7)

    writes = ConcurrentWrites(2)
    try:
        assert writes.run(changes, [write(sink, t) for t in tables]) == [True] * 2
        # the batch again (a replay after a crash), by a new sink of the same writer
        again = make_sink(spark, tmp_path / "lake")
        assert writes.run(changes, [write(again, t) for t in tables]) == [False] * 2
    finally:
        writes.close()
    for table in tables:
        assert rows(spark, sink, table) == [(2, "b")]
        (commit,) = [
            r
            for r in spark.sql(f"DESCRIBE HISTORY {sink.identifier(table)}").collect()
            if r["operation"] == "MERGE"
        ]
        mark = json.loads(commit["userMetadata"])
        assert mark == {"sparkcdc": sink.app_id(table), "write": "merge", "batch": 7}
