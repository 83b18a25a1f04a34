"""Binlog decode throughput: sparkcdc's client + decoder vs python-mysql-replication.

Runnable with no arguments after scripts/test.sh's set-up (it starts the private MariaDB):

    python bench/binlog_decode.py [--rows 1000000]

Builds a binlog of >= 1,000,000 row changes (issue 13's workload, ~4 minutes here: inserts,
updates, deletes) on an 8-column mixed-type table, then, in the same run, measures decoded
row changes per second:
  - sparkcdc, end to end: its replication client reads the range over the network and
    its decoder turns every row into Python values (one process, pure Python), in clear
    (``ssl-mode=disabled``: ``sparkcdc_rows_per_s``) and over TLS (``verify-ca`` on the dev
    server's own CA: ``tls_rows_per_s``; ``tls_vs_plain`` = TLS / clear);
  - sparkcdc, decode only: the same events from captured bytes (no network);
  - the reference: python-mysql-replication reading the same range, in a subprocess with a
    time limit (it is known to loop on MariaDB; a timeout is reported, not hidden);
  - the decoder into Arrow, as the streaming source builds its batches (captured bytes, no
    network; the typed changelog's record batches): ``decode_rows_per_s`` with the compiled
    kernel (``sparkcdc.mysql.binlog.arrowrows``), ``decode_pure_rows_per_s`` with the pure-Python
    fallback, ``decode_compiled_vs_pure`` their ratio;
  - through Spark, as users read it: ``format("mysql-cdc")`` from the range's start
    (``specific-offset``, the default ``ssl-mode=preferred``: TLS, as the dev server has a
    certificate), one Trigger.AvailableNow batch of the typed changelog into a
    ``foreachBatch`` that counts: on ``local[2]`` with ``scan.binlog.partitions=auto``
    (``stream_changes_per_s``) and ``=1`` (``stream_one_partition_changes_per_s``), and on
    ``local[1]`` (``local1_changes_per_s``; ``scaling`` = local[2] / local[1]); and on
    ``local[2]``, ``auto``, in clear (``ssl-mode=disabled``: ``stream_clear_changes_per_s``;
    ``stream_tls_vs_clear`` = TLS rate / clear rate); the best of
    ``--spark-runs`` runs each, query start to end (each session started before);
  - how busy the machine's cores were during the best ``local[1]`` run
    (``local1_busy_cores``: CPU seconds of every process, MariaDB and the JVM included, per
    second of wall time, from /proc/stat) and so the most any split of the same work could
    gain on this machine (``scaling_ceiling`` = cores / busy cores).
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any

from sparkcdc.model.events import RowsKind
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.tls import TlsSettings
from sparkcdc.mysql.binlog.decoded_events import RotateEvent, RowsEvent
from sparkcdc.mysql.binlog.decoder import BinlogDecoder
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc.mysql.protocol.replication import BinlogClient
from sparkcdc_dev.devserver import DevServer

DATABASE = "bench_decode"
DDL = """
CREATE TABLE events (
  id BIGINT NOT NULL PRIMARY KEY,
  user_id INT UNSIGNED NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  score DOUBLE,
  name VARCHAR(64) CHARACTER SET utf8mb4,
  status ENUM('new','paid','shipped','cancelled') NOT NULL,
  created_at DATETIME(3) NOT NULL,
  payload TEXT
)
"""
BATCH = 1000


def build_binlog(server: DevServer, rows: int) -> tuple[BinlogPosition, BinlogPosition, int]:
    """Write the workload; return (start, end, row changes written)."""
    inserts = rows // 2
    updates = rows * 3 // 10
    deletes = rows - inserts - updates
    with server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"USE {DATABASE}")
        cur.execute(DDL)
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
        start = BinlogPosition(file, int(pos))
        for base in range(0, inserts, BATCH):
            values = [
                (
                    i,
                    i % 100_000,
                    f"{i % 9999}.{i % 100:02d}",
                    i / 7.0,
                    f"name-{i}-ü",
                    ("new", "paid", "shipped", "cancelled")[i % 4],
                    f"2026-11-{1 + i % 28:02d} 10:{i % 60:02d}:{i % 60:02d}.{i % 1000:03d}",
                    "x" * (i % 40),
                )
                for i in range(base, min(base + BATCH, inserts))
            ]
            cur.executemany("INSERT INTO events VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", values)
        for base in range(0, updates, BATCH):
            cur.execute(
                "UPDATE events SET amount = amount + 1, status = 'paid' WHERE id >= %s AND id < %s",
                (base, min(base + BATCH, updates)),
            )
        for base in range(inserts - deletes, inserts, BATCH):
            cur.execute(
                "DELETE FROM events WHERE id >= %s AND id < %s", (base, min(base + BATCH, inserts))
            )
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
        end = BinlogPosition(file, int(pos))
    return start, end, inserts + updates + deletes


def only_bench_table(database: str, table: str) -> bool:
    return database == DATABASE


def capture(
    settings: ConnectionSettings, start: BinlogPosition, end: BinlogPosition
) -> list[bytes]:
    """The raw events of [start, end) over the replication protocol."""
    events: list[bytes] = []
    decoder = BinlogDecoder(table_filter=lambda d, t: False)
    current = start.file
    with BinlogClient(settings, server_id=6601) as client:
        for raw in client.events(start, blocking=False):
            header = decoder.decode(raw)
            if isinstance(header, RotateEvent):
                current = header.next_file
            elif (
                header.header.log_pos
                and BinlogPosition(current, header.header.log_pos - header.header.event_size) >= end
            ):
                break
            events.append(bytes(raw))
    return events


def count_rows(decoder: BinlogDecoder, events: Any) -> int:
    rows = 0
    for raw in events:
        event = decoder.decode(raw)
        if isinstance(event, RowsEvent) and event.rows is not None:
            rows += len(event.rows)
    return rows


def sparkcdc_end_to_end(
    settings: ConnectionSettings, start: BinlogPosition, end: BinlogPosition
) -> tuple[int, float]:
    decoder = BinlogDecoder(table_filter=only_bench_table)
    rows = 0
    current = start.file
    began = time.perf_counter()
    with BinlogClient(settings, server_id=6602) as client:
        for raw in client.events(start, blocking=False):
            event = decoder.decode(raw)
            header = event.header
            if isinstance(event, RotateEvent):
                current = event.next_file
                continue
            if (
                header.log_pos
                and BinlogPosition(current, header.log_pos - header.event_size) >= end
            ):
                break
            if isinstance(event, RowsEvent) and event.rows is not None:
                rows += len(event.rows)
                assert event.kind in (RowsKind.INSERT, RowsKind.UPDATE, RowsKind.DELETE)
    return rows, time.perf_counter() - began


REFERENCE = r"""
import json, sys, time
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent
cfg = json.loads(sys.argv[1])
stream = BinLogStreamReader(
    connection_settings=cfg["conn"], server_id=6603, log_file=cfg["file"], log_pos=cfg["pos"],
    resume_stream=True, blocking=False, is_mariadb=True,
    only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=[cfg["db"]])
rows = 0
began = time.perf_counter()
for event in stream:
    for row in event.rows:
        rows += 1
    if rows >= cfg["expected"]:
        break
elapsed = time.perf_counter() - began
stream.close()
print(json.dumps({"rows": rows, "seconds": elapsed}))
"""


def reference(
    server: DevServer, start: BinlogPosition, expected: int, timeout_s: float
) -> dict[str, Any]:
    s = server.settings
    cfg = {
        "conn": {"host": s.host, "port": s.port, "user": s.user, "passwd": s.password},
        "file": start.file,
        "pos": start.pos,
        "db": DATABASE,
        "expected": expected,
    }
    try:
        out = subprocess.run(
            [sys.executable, "-c", REFERENCE, json.dumps(cfg)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"rows": 0, "seconds": timeout_s, "error": f"timed out after {timeout_s:.0f}s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"rows": 0, "seconds": 0.0, "error": out.stderr.strip()[-500:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def decode_to_arrow(events: list[bytes], start: BinlogPosition, end: BinlogPosition) -> int:
    """Rows of the typed changelog's record batches built from captured events."""
    from sparkcdc.model.schema import Column, TableSchema
    from sparkcdc.mysql.stream.binlog_range import changes_of_events
    from sparkcdc.spark.changelog.typed import TypedChangelogBuilder

    columns = (
        Column.from_mysql("id", "bigint", "bigint", False),
        Column.from_mysql("user_id", "int", "int unsigned", False),
        Column.from_mysql("amount", "decimal", "decimal(12,2)", False),
        Column.from_mysql("score", "double", "double", True),
        Column.from_mysql("name", "varchar", "varchar(64)", True, charset="utf8mb4"),
        Column.from_mysql(
            "status", "enum", "enum('new','paid','shipped','cancelled')", False, charset="utf8mb4"
        ),
        Column.from_mysql("created_at", "datetime", "datetime(3)", False),
        Column.from_mysql("payload", "text", "text", True, charset="utf8mb4"),
    )
    builder = TypedChangelogBuilder(TableSchema(DATABASE, "events", columns, ("id",)))
    changes = changes_of_events(events, start, end, only_bench_table)
    return sum(batch.num_rows for batch in builder.batches(changes))


def cpu_jiffies() -> tuple[int, int]:
    """(busy, all) CPU time of the whole machine so far, in clock ticks (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def spark_catch_up(
    server: DevServer,
    start: BinlogPosition,
    expected: int,
    master: str,
    partitions: str,
    runs: int,
    ssl_mode: str | None = None,
) -> tuple[float, float]:
    """Best seconds of ``runs`` Spark queries reading ``[start, now)`` in one batch
    (``ssl_mode``: the source's ``ssl-mode``, else its default), and how many of the
    machine's cores were busy during that run."""
    import tempfile

    from sparkcdc.spark.session import spark_session

    spark = spark_session("bench-binlog", master, conf={"spark.ui.showConsoleProgress": "false"})
    s = server.settings
    options = {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": DATABASE,
        "table-name": "events",
        "server-id": "6640-6643",
        "scan.startup.mode": "specific-offset",
        "scan.startup.specific-offset.file": start.file,
        "scan.startup.specific-offset.pos": str(start.pos),
        "scan.binlog.partitions": partitions,
    }
    if ssl_mode is not None:
        options["ssl-mode"] = ssl_mode
    best, busy_cores = float("inf"), 0.0
    for _ in range(runs):
        counted: list[int] = []
        reader = spark.readStream.format("mysql-cdc")
        for key, value in options.items():
            reader = reader.option(key, value)
        with tempfile.TemporaryDirectory() as checkpoint:
            busy_before, all_before = cpu_jiffies()
            began = time.perf_counter()
            query = (
                reader.load()
                .writeStream.foreachBatch(
                    lambda batch, _id, into=counted: into.append(batch.count())
                )
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            took = time.perf_counter() - began
            busy_after, all_after = cpu_jiffies()
            if took < best:
                share = (busy_after - busy_before) / max(1, all_after - all_before)
                best, busy_cores = took, share * (os.cpu_count() or 1)
        changes = sum(counted)  # an update is two rows (-U, +U)
        if changes < expected:
            raise SystemExit(f"Spark read {changes} rows of the range, expected >= {expected}")
    return best, busy_cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--reference-timeout", type=float, default=300.0)
    parser.add_argument("--spark-runs", type=int, default=2)
    parser.add_argument("--skip-reference", action="store_true")
    args = parser.parse_args()

    server = DevServer.from_env()
    s = server.start()
    settings = ConnectionSettings(
        host=s.host, port=s.port, user=s.user, password=s.password, tls=TlsSettings("disabled")
    )
    tls_settings = dataclasses.replace(
        settings, tls=TlsSettings("verify-ca", ca=str(server.tls.ca))
    )
    start, end, written = build_binlog(server, args.rows)
    print(f"binlog range {start} .. {end}: {written} row changes", file=sys.stderr)

    # clear and TLS alternate, so both see the same machine
    plain, tls = [], []
    for _ in range(3):
        plain.append(sparkcdc_end_to_end(settings, start, end))
        tls.append(sparkcdc_end_to_end(tls_settings, start, end))
    for decoded_rows, _ in plain + tls:
        assert decoded_rows == written, f"sparkcdc decoded {decoded_rows} rows, expected {written}"
    e2e_rows, e2e_s = min(plain, key=lambda r: r[1])
    tls_s = min(s for _, s in tls)

    events = capture(settings, start, end)
    decode_s = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        decoded = count_rows(BinlogDecoder(table_filter=only_bench_table), events)
        decode_s = min(decode_s, time.perf_counter() - began)
    assert decoded == written

    from sparkcdc.mysql.binlog import arrowrows

    compiled = arrowrows.compiled()
    arrow_s, pure_s = float("inf"), float("inf")
    for _ in range(3):  # compiled and pure alternate, so both see the same machine
        for kernel in (True, False):
            arrowrows.COMPILED = compiled and kernel
            began = time.perf_counter()
            built = decode_to_arrow(events, start, end)
            took = time.perf_counter() - began
            if kernel:
                arrow_s = min(arrow_s, took)
            else:
                pure_s = min(pure_s, took)
            assert built >= written
    arrowrows.COMPILED = compiled

    runs = args.spark_runs
    auto_s, _ = spark_catch_up(server, start, written, "local[2]", "auto", runs)
    one_s, _ = spark_catch_up(server, start, written, "local[2]", "1", runs)
    clear_s, _ = spark_catch_up(server, start, written, "local[2]", "auto", runs, "disabled")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    local1_s, local1_busy = spark_catch_up(server, start, written, "local[1]", "auto", runs)
    ref = (
        {"rows": 0, "seconds": 0.0, "error": "skipped"}
        if args.skip_reference
        else reference(server, start, written, args.reference_timeout)
    )
    ref_rate = ref["rows"] / ref["seconds"] if ref.get("rows") and ref["seconds"] else 0.0
    e2e_rate = e2e_rows / e2e_s
    result = {
        "row_changes": written,
        "sparkcdc_rows_per_s": round(e2e_rate),
        "tls_rows_per_s": round(written / tls_s),
        "tls_vs_plain": round(e2e_s / tls_s, 2),
        "sparkcdc_decode_only_rows_per_s": round(decoded / decode_s),
        "reference_rows_per_s": round(ref_rate),
        "reference_rows": ref.get("rows", 0),
        "ratio": round(e2e_rate / ref_rate, 2) if ref_rate else None,
        "decode_rows_per_s": round(written / arrow_s),
        "decode_pure_rows_per_s": round(written / pure_s),
        "decode_compiled_vs_pure": round(pure_s / arrow_s, 2),
        "stream_changes_per_s": round(written / auto_s),
        "stream_one_partition_changes_per_s": round(written / one_s),
        "stream_clear_changes_per_s": round(written / clear_s),
        "stream_tls_vs_clear": round(clear_s / auto_s, 2),
        "local1_changes_per_s": round(written / local1_s),
        "scaling": round(local1_s / auto_s, 2),
        "local1_busy_cores": round(local1_busy, 2),
        "scaling_ceiling": round((os.cpu_count() or 1) / local1_busy, 2) if local1_busy else None,
        "reference_error": ref.get("error"),
        "python": sys.version.split()[0],
        "implementation": "compiled kernel" if compiled else "pure-python (kernel not built)",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
