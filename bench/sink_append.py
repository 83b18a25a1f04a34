"""Delta sink: snapshot rows by append vs by MERGE; MERGEs with vs without deletion vectors, and
bounded to the batch's key range vs over the whole table.

Runnable with no arguments after scripts/test.sh's set-up (no database needed):

    python bench/sink_append.py [--rows 200000] [--batches 10] [--changes 2000]
                                [--span-rows 5000000] [--span-files 50]

In the same run, on local disk, the ways taking turns per batch (so that a change of the
machine's load hits them alike):
  - a snapshot of ``--rows`` rows in ``--batches`` batches into an empty table, by
    ``DeltaSink.append`` (what the pipeline does with snapshot inserts now) and by
    ``DeltaSink.write`` (a MERGE per batch, as before appends);
  - ``--changes`` updates and deletes at adjacent keys in 5 batches, MERGEd into equal tables
    (loaded by append) with deletion vectors (as the sink creates tables) and without;
  - the same changes MERGEd into two equal tables of ``--span-rows`` rows appended in
    ``--span-files`` batches (a table grown over time: files of disjoint key ranges), by
    ``DeltaSink.write`` (its MERGE bounded to the batch's key range, ``key_span``: Delta
    skips the files outside it) and by the same MERGE without the bound (as before).
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

from sparkcdc.sinks.base import SinkColumn, SinkContext, SinkTable
from sparkcdc.sinks.delta import DeltaOptions, DeltaSink
from sparkcdc.spark.session import spark_session

COLUMNS = (
    SinkColumn("id", "BIGINT", nullable=False),
    SinkColumn("customer", "STRING"),
    SinkColumn("amount", "DECIMAL(12,2)"),
    SinkColumn("status", "STRING"),
)


def change_frame(spark: Any, start: int, end: int, op: str, seq: int) -> Any:
    """Rows of keys [start, end) in the change-frame shape."""
    from pyspark.sql import functions as F

    return spark.range(start, end).select(
        F.lit(op).alias("_op"),
        (F.lit(None) if op == "+I" else F.current_timestamp()).cast("timestamp").alias("_op_ts"),
        F.lit(seq).cast("bigint").alias("_seq"),
        F.lit("shop").alias("_database"),
        F.lit("orders").alias("_table"),
        F.col("id"),
        F.concat(F.lit("customer-"), (F.col("id") % 997).cast("string")).alias("customer"),
        (F.col("id") % 100000 / 100).cast("decimal(12,2)").alias("amount"),
        F.lit("new").alias("status"),
    )


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def snapshot_batches(
    spark: Any, sink: DeltaSink, tables: dict[str, SinkTable], rows: int, batches: int
) -> dict[str, float]:
    """Seconds per way of loading a snapshot into its table, the ways taking turns per
    batch (so that a change of the machine's load hits them alike)."""
    step = -(-rows // batches)
    ways: dict[str, Callable[[SinkTable, Any, int], Any]] = {
        "append": sink.append,
        "merge": sink.write,
    }
    total = dict.fromkeys(tables, 0.0)
    for batch, start in enumerate(range(0, rows, step)):
        frame = change_frame(spark, start, min(start + step, rows), "+I", 1).persist()
        frame.count()
        for name, table in tables.items():
            total[name] += timed(lambda: ways[name](table, frame, batch))  # noqa: B023
        frame.unpersist()
    return total


def change_batches(
    spark: Any,
    sink: DeltaSink,
    tables: dict[str, SinkTable],
    rows: int,
    count: int,
    unbounded: frozenset[str] = frozenset(),
) -> dict[str, float]:
    """Seconds per way of merging ``count`` changes at the top of the key range in 5
    batches (updates, deletes, ...), the ways taking turns per batch. The tables named in
    ``unbounded`` get the MERGE without its key-range bound."""
    per = max(count // 5, 1)
    total = dict.fromkeys(tables, 0.0)
    for i in range(5):
        start = rows - (i + 1) * per
        op = "+U" if i % 2 == 0 else "-D"
        frame = change_frame(spark, start, start + per, op, 10 + i).persist()
        frame.count()
        for name, table in tables.items():
            with (
                mock.patch("sparkcdc.sinks.delta.key_span", _no_span)
                if name in unbounded
                else nullcontext()
            ):
                total[name] += timed(lambda: sink.write(table, frame, 100 + i))  # noqa: B023
        frame.unpersist()
    return total


def _no_span(changes: Any, table: SinkTable) -> tuple[bool, None]:
    """``key_span`` as the MERGE was before it: whether there are rows, no bound."""
    return not changes.isEmpty(), None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--changes", type=int, default=2000)
    parser.add_argument("--span-rows", type=int, default=5_000_000)
    parser.add_argument("--span-files", type=int, default=50)
    args = parser.parse_args()
    spark = spark_session("sparkcdc-bench-sink-append", "local[2]", connectors=True)
    spark.sparkContext.setLogLevel("ERROR")
    lake = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-append-"))
    sink = DeltaSink(
        DeltaOptions.model_validate({"type": "delta", "path": str(lake)}),
        spark,
        SinkContext("bench", str(lake / "checkpoint"), "run"),
    )

    def table(name: str) -> SinkTable:
        t = SinkTable(f"shop.{name}", COLUMNS, ("id",), ("shop.orders",))
        sink.open([t])
        return t

    # warm the JVM up (first MERGE and first append pay for class loading)
    snapshot_batches(spark, sink, {"append": table("w1"), "merge": table("w2")}, 1000, 1)

    loaded = {w: table(w) for w in ("append", "merge")}
    load_s = snapshot_batches(spark, sink, loaded, args.rows, args.batches)

    merged = {w: table(f"changes_{w}") for w in ("dv", "no_dv")}
    spark.sql(
        f"ALTER TABLE {sink.identifier(merged['no_dv'])} "
        "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    for t in merged.values():  # equal tables: one append of every row each
        snapshot_batches(spark, sink, {"append": t}, args.rows, 1)
    change_s = change_batches(spark, sink, merged, args.rows, args.changes)
    spanned = {w: table(f"span_{w}") for w in ("bounded", "whole")}
    for t in spanned.values():  # equal tables grown by --span-files appends
        snapshot_batches(spark, sink, {"append": t}, args.span_rows, args.span_files)
    span_s = change_batches(
        spark, sink, spanned, args.span_rows, args.changes, unbounded=frozenset({"whole"})
    )
    counts = {
        t.short_name: sink.read_table(t).count()
        for t in (*loaded.values(), *merged.values(), *spanned.values())
    }
    result = {
        "bench": "delta_sink_append",
        "rows": args.rows,
        "batches": args.batches,
        "snapshot_append_s": round(load_s["append"], 2),
        "snapshot_merge_s": round(load_s["merge"], 2),
        "append_rows_per_s": round(args.rows / load_s["append"]),
        "merge_rows_per_s": round(args.rows / load_s["merge"]),
        "append_speedup": round(load_s["merge"] / load_s["append"], 2),
        "changes": args.changes,
        "changes_merge_dv_s": round(change_s["dv"], 2),
        "changes_merge_no_dv_s": round(change_s["no_dv"], 2),
        "span_rows": args.span_rows,
        "span_files": args.span_files,
        "changes_merge_bounded_s": round(span_s["bounded"], 2),
        "changes_merge_whole_table_s": round(span_s["whole"], 2),
        "bounded_speedup": round(span_s["whole"] / span_s["bounded"], 2),
        "final_rows": counts,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
