"""Trigger.AvailableNow keeps Spark's contract: one run reads everything available when it
starts (the whole snapshot and the binlog), in bounded batches, then stops by itself; other
triggers still get at most ``chunks-per-batch`` chunks a batch (issue 16).

PySpark 4.1 gives Python sources neither admission control nor AvailableNow: there a run is
one batch of ``chunks-per-batch`` chunks, and the first test is expected to fail."""

from __future__ import annotations

import ast
import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from test_snapshot_stream import check_against_source, ordered
from test_stream import changelog, options
from workload import (
    ITEMS_DDL,
    LINES_DDL,
    SKUS_DDL,
    MultiWorkload,
    Workload,
    random_row,
    source_state,
)

from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin import server
from sparkcdc.spark.compat import ADMISSION_CONTROL
from sparkcdc_dev.devserver import DevServer
from sparkcdc_dev.oracle import compare, replay

pytestmark = pytest.mark.integration

ROWS_PER_TABLE = 20_000
CHUNK_SIZE = 400
DEFAULT_CHUNKS_PER_BATCH = 8  # scan.incremental.snapshot.chunks-per-batch's default
# PySpark 4.1 gives Python sources no Trigger.AvailableNow: the tests that need it fail there
AVAILABLE_NOW = pytest.mark.xfail(
    not ADMISSION_CONTROL,
    reason="PySpark 4.1 runs Trigger.AvailableNow as one batch of chunks-per-batch chunks",
    strict=True,
)


def load(sql: Any, rows: int, seed: int) -> None:
    """``items``, ``skus`` (string key) and ``order_lines`` (composite key), ``rows`` each."""
    rng = random.Random(seed)
    for ddl in (ITEMS_DDL, SKUS_DDL, LINES_DDL):
        sql.execute(ddl)
    step = 2_000
    for first in range(1, rows + 1, step):
        keys = range(first, min(first + step, rows + 1))
        sql.executemany(
            "INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", [random_row(rng, k) for k in keys]
        )
        sql.executemany(
            "INSERT INTO skus VALUES (%s,%s,%s)",
            [(f"s{k:07d}", rng.randint(0, 99), rng.choice(["x", None])) for k in keys],
        )
        sql.executemany(
            "INSERT INTO order_lines VALUES (%s,%s,%s)",
            [(1 + (k - 1) // 5, 1 + (k - 1) % 5, rng.randint(0, 9999) / 100) for k in keys],
        )


def load_items(sql: Any, rows: int, seed: int) -> random.Random:
    """Table ``items`` holding keys 1..``rows``; returns the generator, for more rows alike."""
    sql.execute(ITEMS_DDL)
    rng = random.Random(seed)
    sql.executemany(
        "INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
        [random_row(rng, k) for k in range(1, rows + 1)],
    )
    return rng


def items_options(
    server: DevServer, database: str, tmp_path: Path, server_ids: str, chunks_per_batch: int
) -> dict[str, str]:
    """Options of an ``initial`` stream of ``items`` in chunks of CHUNK_SIZE keys."""
    return options(
        server,
        database,
        "items",
        **{
            "server-id": server_ids,
            "scan.startup.mode": "initial",
            "state.location": str(tmp_path / "state"),
            "scan.incremental.snapshot.chunk.size": str(CHUNK_SIZE),
            "scan.incremental.snapshot.chunks-per-batch": str(chunks_per_batch),
        },
    )


def offset_of(shown: str) -> Any:
    """A Python source's offset as a query's progress shows it: JSON on PySpark 4.2, the
    dict's repr on 4.1."""
    try:
        return json.loads(shown)
    except json.JSONDecodeError:
        return ast.literal_eval(shown)


def binlog_ranges(query: Any) -> list[tuple[BinlogPosition, BinlogPosition]]:
    """The binlog (start, end) of each batch of ``query`` that moved its offset."""
    return [
        (
            BinlogPosition.from_offset(offset_of(p["sources"][0]["startOffset"])["binlog"]),
            BinlogPosition.from_offset(offset_of(p["sources"][0]["endOffset"])["binlog"]),
        )
        for p in query.recentProgress
        if p["sources"][0]["startOffset"] != p["sources"][0]["endOffset"]
    ]


def run_available_now(spark: Any, opts: dict[str, str], checkpoint: Path, on_batch: Any) -> Any:
    reader = spark.readStream.format("mysql-cdc")
    for key, value in opts.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


@AVAILABLE_NOW
@pytest.mark.parametrize("binlog_bound", ["256m", "64k"])
def test_one_available_now_run_copies_the_whole_snapshot_under_writes(
    spark: Any,
    dev_server: DevServer,
    database: str,
    sql: Any,
    tmp_path: Path,
    binlog_bound: str,
) -> None:
    """Three tables (integer, string and composite keys) under writes; with a small binlog
    bound (``64k``) the batches end short of the server's end too, never before the HWs of
    the chunks the batch before read, whichever table they were of."""
    load(sql, ROWS_PER_TABLE, seed=61)
    stop = threading.Event()
    workload = MultiWorkload(dev_server.connection(database), seed=62, key_space=ROWS_PER_TABLE)
    writer = threading.Thread(target=workload.run, args=(600, stop, 1_000_000), daemon=True)
    batches: dict[int, list[dict[str, Any]]] = {}
    ops_when_stopped: list[int] = []

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]
        if len(batches) == 3:
            # the writes end during the run, so the source is still after it; every batch
            # from here on is planned after the last write
            stop.set()
            writer.join()
            ops_when_stopped.append(workload.operations)
            # the workload inserts only keys loaded before (an upsert: an update then), so
            # a new key before every other in each table, in its first chunk: read by now
            # for one table at least (24 chunks are), whose insert comes as a binlog row
            with dev_server.connection(database) as conn, conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                    random_row(random.Random(63), 0),
                )
                cur.execute("INSERT INTO skus VALUES ('0', 1, 'x')")
                cur.execute("INSERT INTO order_lines VALUES (0, 1, 1.00)")

    opts = options(
        dev_server,
        database,
        "items|skus|order_lines",
        **{
            "server-id": "5800-5809",
            "scan.startup.mode": "initial",
            "state.location": str(tmp_path / "state"),
            "scan.incremental.snapshot.chunk.size": str(CHUNK_SIZE),
            "scan.binlog.max-bytes-per-batch": binlog_bound,
        },
    )
    writer.start()  # writes run before and while the run starts and reads its first batches
    query = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    try:
        assert query.awaitTermination(900), "the AvailableNow run did not stop by itself"
    finally:
        stop.set()
        writer.join()
        query.stop()
    assert query.exception() is None
    # bounded batches: 150 chunks of at most 400 rows (a few more where the writes inserted
    # into a chunk read later), eight a batch, so 19 batches with snapshot rows at least
    snapshot_rows = [sum(r["op"] == "r" for r in batches[b]) for b in sorted(batches)]
    assert sum(1 for n in snapshot_rows if n) >= -(-3 * ROWS_PER_TABLE // CHUNK_SIZE // 8), (
        f"one run read {sum(snapshot_rows)} snapshot rows in batches {snapshot_rows}"
    )
    assert max(snapshot_rows) <= DEFAULT_CHUNKS_PER_BATCH * CHUNK_SIZE * 1.1, snapshot_rows
    assert ops_when_stopped and ops_when_stopped[0] > 0, "no write ran during the run"
    rows = ordered(batches)
    ops = {r["op"] for r in rows}
    assert {"r", "c", "u", "d"} <= ops, ops
    check_against_source(rows, dev_server, database)


@AVAILABLE_NOW
@pytest.mark.parametrize("binlog_bound", ["256m", "32k"])
def test_a_run_stops_while_writes_go_on_and_the_next_run_goes_on_from_it(
    spark: Any,
    dev_server: DevServer,
    database: str,
    sql: Any,
    tmp_path: Path,
    binlog_bound: str,
) -> None:
    """What arrives after the start is not waited for: the run ends while the writes never
    pause, and the next run from its checkpoint takes up exactly where it ended. With a
    small binlog bound (``32k``) the batches of the snapshot end short of the server's end
    too, where the algorithm allows any transaction boundary before every chunk's LW."""
    load_items(sql, 4_000, seed=81)  # ten chunks of 400 keys
    stop = threading.Event()
    workload = Workload(dev_server.connection(database), seed=82, key_space=4_000)
    writer = threading.Thread(target=workload.run, args=(600, stop, 1_000_000), daemon=True)
    batches: dict[int, list[dict[str, Any]]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]

    opts = items_options(dev_server, database, tmp_path, "5820-5829", chunks_per_batch=3)
    opts["scan.binlog.max-bytes-per-batch"] = binlog_bound
    writer.start()
    try:
        first = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
        assert first.awaitTermination(600), "the run waited for writes made after its start"
        assert writer.is_alive() and workload.operations > 0, "the writes stopped before the run"
        assert first.exception() is None
        first_run = sorted(batches)
    finally:
        stop.set()
        writer.join()
    second = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert second.awaitTermination(600) and second.exception() is None
    # ten chunks, three a batch, all in the first run (the writes delete and move keys, so
    # a chunk holds at most its 400 keys)
    snapshot_rows = [sum(r["_op_ts"] is None for r in batches[b]) for b in first_run]
    assert len([n for n in snapshot_rows if n]) == 4, snapshot_rows
    assert max(snapshot_rows) <= 3 * CHUNK_SIZE, snapshot_rows
    log = changelog(batches)
    assert {r["_op"] for r in log} == {"+I", "-U", "+U", "-D"}
    result = replay(log, ["id"])
    assert result.violations == [], result.violations[:10]
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []


@AVAILABLE_NOW
def test_on_an_idle_server_the_run_ends_with_the_batch_of_the_last_chunks(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """No write while the chunks are read: every chunk's HW is its batch's binlog end, so the
    rows read are the table at the last batch's end, and no batch follows to read a binlog
    that holds nothing new. The next run goes on from there: what was written since comes
    once, from the binlog."""
    rng = load_items(sql, 2_000, seed=83)  # five chunks of 400 keys
    batches: dict[int, list[dict[str, Any]]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]

    opts = items_options(dev_server, database, tmp_path, "5830-5839", chunks_per_batch=2)
    first = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert first.awaitTermination(600) and first.exception() is None
    # every chunk read, two a batch, and no batch after the last of them (a batch of no rows)
    sizes = [len(batches[b]) for b in sorted(batches)]
    last = offset_of(first.lastProgress["sources"][0]["endOffset"])["snapshot"][f"{database}.items"]
    assert sum(sizes) == 2_000 and all(sizes), (sizes, last)
    assert last["next"] == last["total"] and last["prev"] < last["next"], (sizes, last)
    sql.execute("INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", random_row(rng, 2_001))
    sql.execute("UPDATE items SET qty = COALESCE(qty, 0) + 1 WHERE id IN (1, 2000)")
    sql.execute("DELETE FROM items WHERE id = 1000")
    second = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert second.awaitTermination(600) and second.exception() is None
    log = changelog(batches)
    assert sorted(r["_op"] for r in log if r["_op_ts"] is not None) == [
        "+I",
        "+U",
        "+U",
        "-D",
        "-U",
        "-U",
    ]
    result = replay(log, ["id"])
    assert result.violations == [], result.violations[:10]
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []


def test_a_processing_time_trigger_reads_chunks_per_batch_chunks_a_batch(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """Admission control (4.2) or not (4.1), a batch takes ``chunks-per-batch`` chunks."""
    sql.execute(ITEMS_DDL)
    rng = random.Random(71)
    sql.executemany(
        "INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
        [random_row(rng, k) for k in range(1, 4_001)],
    )  # ids 1..4000: ten chunks of exactly 400 keys
    batches: dict[int, list[dict[str, Any]]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]

    reader = spark.readStream.format("mysql-cdc")
    opts = options(
        dev_server,
        database,
        "items",
        **{
            "server-id": "5810-5819",
            "scan.startup.mode": "initial",
            "state.location": str(tmp_path / "state"),
            "scan.incremental.snapshot.chunk.size": str(CHUNK_SIZE),
            "scan.incremental.snapshot.chunks-per-batch": "3",
            "changelog.shape": "envelope",
        },
    )
    for key, value in opts.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        progress = query.recentProgress
    finally:
        query.stop()
    # chunks per batch, from the offsets: how many rows a chunk holds is the splitter's
    # (its bounds follow the server's row estimate, which varies from run to run)
    per_batch, total = [], 0
    for p in progress:
        if p["numInputRows"] or p["batchId"] in batches:
            end = offset_of(p["sources"][0]["endOffset"])["snapshot"]
            (table,) = end.values()
            per_batch.append(table["next"] - table["prev"])
            total = table.get("total") or total
    assert total >= 10, total
    assert [n for n in per_batch if n] == [3] * (total // 3) + [total % 3] * (total % 3 > 0)
    snapshot_rows = [sum(r["op"] == "r" for r in batches[b]) for b in sorted(batches)]
    assert sum(snapshot_rows) == 4_000
    assert max(snapshot_rows) <= 3 * CHUNK_SIZE, snapshot_rows


@AVAILABLE_NOW
def test_a_binlog_backlog_is_read_in_bounded_batches_cut_between_transactions(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """A backlog larger than ``scan.binlog.max-bytes-per-batch`` is read by one AvailableNow
    run in several batches, each ending at the first transaction to start past the bound
    from its start, with the GTID position MariaDB gives there; a transaction larger than the
    bound is read whole in one batch; the changelog equals the source."""
    budget = 16_384
    load_items(sql, 2_000, seed=84)  # five chunks of 400 keys
    batches: dict[int, list[dict[str, Any]]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]

    opts = items_options(dev_server, database, tmp_path, "5840-5849", chunks_per_batch=8)
    opts["scan.binlog.max-bytes-per-batch"] = str(budget)
    first = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert first.awaitTermination(600) and first.exception() is None
    # the backlog, written while no query runs: transactions of 1-8 changes, and one
    # UPDATE of every row, larger than the bound
    workload = Workload(dev_server.connection(database), seed=85, key_space=2_000)
    for _ in range(300):
        workload.step()
    sql.execute("UPDATE items SET qty = COALESCE(qty, 0) + 1")
    for _ in range(100):
        workload.step()
    second = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert second.awaitTermination(600) and second.exception() is None
    ranges = binlog_ranges(second)
    with dev_server.connection() as conn:
        files = server.binlog_files(conn)
        opening: list[tuple[str, int]] = []
        with conn.cursor() as cur:
            for file, _ in files:
                cur.execute(f"SHOW BINLOG EVENTS IN '{file}'")
                opening.extend((file, row[1]) for row in cur.fetchall() if row[2] == "Gtid")
            # every batch but the last ends at the first transaction past the bound
            for begin, end in ranges[:-1]:
                assert (end.file, end.pos) in opening, (begin, end)
                assert server.binlog_bytes(begin, end, files) >= budget, (begin, end)
                earlier = [
                    BinlogPosition(f, p) for f, p in opening if begin < BinlogPosition(f, p) < end
                ]
                assert all(server.binlog_bytes(begin, p, files) < budget for p in earlier)
                assert end.gtids == server.mariadb_gtid_at(conn, end.file, end.pos)
    # 400 transactions of ~270-2,000 bytes and the update's ~150 KB: more than ten batches
    assert len(ranges) >= 10, ranges
    big = max(server.binlog_bytes(b, e, files) for b, e in ranges)
    assert big > 100_000, "the transaction larger than the bound was cut"
    log = changelog(batches)
    result = replay(log, ["id"])
    assert result.violations == [], result.violations[:10]
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []


def _first_batches(
    spark: Any,
    dev_server: DevServer,
    database: str,
    sql: Any,
    tmp_path: Path,
    server_ids: str,
    seed: int,
    options: dict[str, str],
) -> tuple[list[int], list[int], int]:
    """40 chunks of 100 keys read by a run under a budget of 40 chunks and 64 MiB of binlog
    (``options`` on top), then a backlog of 40 updates of every row (~0.3 MB of binlog each)
    read by a second run: the snapshot rows of each batch of the first run, the binlog bytes
    of each batch of the second, and the whole backlog's bytes. The changelog of both runs
    is checked to equal the source."""
    sql.execute(ITEMS_DDL)
    rng = random.Random(seed)
    sql.executemany(
        "INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
        [random_row(rng, k) for k in range(1, 4_001)],
    )
    batches: dict[int, list[dict[str, Any]]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        batches[batch_id] = [r.asDict() for r in batch.collect()]

    opts = items_options(dev_server, database, tmp_path, server_ids, chunks_per_batch=40)
    opts["scan.incremental.snapshot.chunk.size"] = "100"
    opts["scan.binlog.max-bytes-per-batch"] = "64m"
    opts.update(options)
    first = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert first.awaitTermination(600) and first.exception() is None
    snapshot_rows = [sum(r["_op"] == "+I" for r in batches[b]) for b in sorted(batches)]
    begin = BinlogPosition.from_offset(
        offset_of(first.lastProgress["sources"][0]["endOffset"])["binlog"]
    )
    for _ in range(40):
        sql.execute("UPDATE items SET qty = COALESCE(qty, 0) + 1")
    with dev_server.connection() as conn:
        files = server.binlog_files(conn)
    second = run_available_now(spark, opts, tmp_path / "checkpoint", collect)
    assert second.awaitTermination(600) and second.exception() is None
    ranges = binlog_ranges(second)
    sizes = [server.binlog_bytes(b, e, files) for b, e in ranges]
    backlog = server.binlog_bytes(begin, ranges[-1][1], files)
    result = replay(changelog(batches), ["id"])
    assert result.violations == [], result.violations[:10]
    assert compare(result.state, source_state(dev_server.connection(database), "items")) == []
    return snapshot_rows, sizes, backlog


@AVAILABLE_NOW
def test_a_runs_first_batch_reads_an_eighth_of_a_large_budget_and_the_rest_replays_exactly(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """A budget larger than the floor (8 chunks, 8 MiB of binlog): the first batch of each
    run reads an eighth of it (at least the floor), so a backlog's first rows reach the sink
    before the whole budget is read; the batches after read whole budgets, and the
    changelog equals the source (DESIGN.md §2.4)."""
    snapshot_rows, sizes, backlog = _first_batches(
        spark, dev_server, database, sql, tmp_path, "5850-5859", 86, {}
    )
    assert sum(snapshot_rows) == 4_000, snapshot_rows
    # 40 chunks under a budget of 40: 8 of them first (the floor; 40 / 8 is less), then 32
    assert len([n for n in snapshot_rows if n]) >= 2, snapshot_rows
    assert 0 < snapshot_rows[0] <= 8 * 100, snapshot_rows
    # the backlog is more than the floor
    assert backlog > 8 << 20, sizes
    # the first batch ends at the first transaction past 8 MiB; the next one reads the rest
    assert len(sizes) == 2, sizes
    assert (8 << 20) <= sizes[0] < (16 << 20), sizes


@AVAILABLE_NOW
def test_a_first_batch_share_of_one_reads_whole_budgets_from_the_start(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    """``scan.first-batch.share: 1`` (what pipelines into Delta and Iceberg set: a MERGE
    reads the table whatever the batch holds): the first batch reads a whole budget, the
    snapshot's 40 chunks and the 12 MB backlog each in one batch, and the changelog equals
    the source."""
    snapshot_rows, sizes, _ = _first_batches(
        spark, dev_server, database, sql, tmp_path, "5860-5869", 87, {"scan.first-batch.share": "1"}
    )
    assert snapshot_rows[0] == 4_000, snapshot_rows  # all 40 chunks in the first batch
    assert len(sizes) == 1 and sizes[0] > 8 << 20, sizes  # past the floor, one batch
