"""PostgreSQL source throughput: the snapshot against Spark's JDBC read, the catch-up against
the server's own pgoutput decoding (issue 59).

Runnable with no arguments after scripts/test.sh's set-up (it starts the private
PostgreSQL with ``wal_level = logical`` and fetches the PostgreSQL JDBC driver with Maven):

    python bench/postgres_cdc.py [--rows 200000] [--changes 60000] [--rounds 2]

Loads a table of ``--rows`` rows (8 mixed columns) and, in one run, on ``local[2]``, after
a warm-up of both Spark paths on a quarter-size table, ``--rounds`` times in turn (the
median of each counts):
  - (a) snapshot: ``format("postgres-cdc")``, ``scan.startup.mode=initial`` (each round on
    a slot of its own), chunk size 8096, one Trigger.AvailableNow query into Spark's no-op
    sink, which takes every column of every row; its rows counted from the query's progress
    and checked equal to the table's. The reference: Spark's JDBC reader (the PostgreSQL
    JDBC driver jars/pom.xml pins) partitioned on the key into as many ranges as there are
    chunks, into the same no-op sink (its count checked once, untimed);
  - (b) catch-up: a ``latest-offset`` query run once to make its slot and checkpoint, then,
    with no query running, ``--changes`` row changes written by multi-row statements (a
    third inserts, a third updates, a third deletes, 1,000 rows a statement), then one
    AvailableNow run from that checkpoint into the no-op sink, its rows checked equal to
    the changes written. The reference: the server decoding the same WAL with pgoutput for
    the same publication (``pg_logical_slot_peek_binary_changes`` over SQL, its row messages
    counted): what any pgoutput client is bounded by. The two sides go in turn, first one
    then the other, alternating per round.
The load average before and after is printed with the figures. The last line printed is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sparkcdc.spark.connectors import connector_jars
from sparkcdc.spark.session import spark_session
from sparkcdc_dev.devpostgres import DevPostgres

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "bench_pgcdc"
PUBLICATION = "bench_pgcdc_pub"
CHUNK = 8096
STATEMENT_ROWS = 1000
DDL = """
CREATE TABLE {name} (
  id bigint NOT NULL PRIMARY KEY,
  user_id int NOT NULL,
  amount numeric(12,2) NOT NULL,
  score double precision,
  name varchar(64),
  status text NOT NULL,
  created_at timestamp(3) NOT NULL,
  note text
)
"""
FILL = """
INSERT INTO {name}
SELECT g, g %% 100000, (g %% 99999) / 100.0, g / 7.0, 'name-' || g || '-ü',
       (ARRAY['new','paid','shipped','cancelled'])[1 + g %% 4],
       timestamp '2026-01-01' + g * interval '1 second', repeat('x', (g %% 40)::int)
FROM generate_series(%s::bigint, %s::bigint) g
"""
# whole before images, as the validator asks: updates and deletes carry every column
FULL = "ALTER TABLE {name} REPLICA IDENTITY FULL"
# pgoutput's row messages start with their kind's byte (PostgreSQL's "Logical Replication
# Message Formats": Insert 'I', Update 'U', Delete 'D')
ROW_MESSAGES = (ord("I"), ord("U"), ord("D"))


def load(pg: DevPostgres, name: str, rows: int) -> None:
    """``name`` with ``rows`` rows, kept from an earlier run when it has them."""
    with pg.connection(DATABASE) as conn:
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()
        if found and found[0]:
            count = conn.execute(f"SELECT count(*) FROM {name}").fetchone()
            if count and count[0] == rows:
                return
            conn.execute(f"DROP TABLE {name}")
        conn.execute(DDL.format(name=name))
        conn.execute(FULL.format(name=name))
        conn.execute(FILL.format(name=name), [1, rows])
        conn.execute(f"VACUUM ANALYZE {name}")


def source_options(pg: DevPostgres, table: str, slot: str, **more: str) -> dict[str, str]:
    s = pg.settings
    return {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": DATABASE,
        "schema-name": "public",
        "table-name": table,
        "slot.name": slot,
        "debezium.publication.name": PUBLICATION,
        "scan.incremental.snapshot.chunk.size": str(CHUNK),
        **more,
    }


def available_now(spark: Any, opts: dict[str, str], checkpoint: Path) -> tuple[float, int]:
    """Seconds of one AvailableNow run into the no-op sink, and the rows it read."""
    began = time.perf_counter()
    query = (
        spark.readStream.format("postgres-cdc")
        .options(**opts)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    if query.exception() is not None:
        raise RuntimeError(f"the postgres-cdc query failed: {query.exception()}")
    return elapsed, sum(int(p["numInputRows"]) for p in query.recentProgress)


def drop_slot(pg: DevPostgres, slot: str) -> None:
    """A slot keeps WAL: none is left behind."""
    with pg.superuser_connection() as admin:
        admin.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s",
            [slot],
        )


def sparkcdc_snapshot(spark: Any, pg: DevPostgres, table: str, workdir: Path) -> float:
    """Seconds to snapshot ``table`` (mode initial) into the no-op sink; its count checked."""
    slot = f"bench_snap_{uuid.uuid4().hex[:8]}"
    run = workdir / slot
    opts = source_options(
        pg,
        table,
        slot,
        **{
            "scan.startup.mode": "initial",
            "state.location": str(run / "state"),
            "scan.incremental.snapshot.chunks-per-batch": "0",
        },
    )
    try:
        elapsed, rows = available_now(spark, opts, run / "checkpoint")
    finally:
        drop_slot(pg, slot)
        shutil.rmtree(run, ignore_errors=True)
    expected = table_rows(pg, table)
    assert rows == expected, f"the snapshot of {table} read {rows} rows, the table has {expected}"
    return elapsed


def table_rows(pg: DevPostgres, table: str) -> int:
    with pg.connection(DATABASE) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def jdbc_frame(spark: Any, pg: DevPostgres, table: str, rows: int) -> Any:
    """Spark's built-in JDBC reader on ``table``, partitioned on the key into as many ranges
    as sparkcdc has chunks: the plain way to read the table into Spark."""
    s = pg.settings
    return (
        spark.read.format("jdbc")
        .option("url", f"jdbc:postgresql://{s.host}:{s.port}/{DATABASE}")
        .option("driver", "org.postgresql.Driver")
        .option("dbtable", table)
        .option("user", s.user)
        .option("password", s.password)
        .option("partitionColumn", "id")
        .option("lowerBound", "1")
        .option("upperBound", str(rows))
        .option("numPartitions", str(-(-rows // CHUNK)))
        .option("fetchsize", "10000")
        .load()
    )


def spark_jdbc(spark: Any, pg: DevPostgres, table: str, rows: int) -> float:
    began = time.perf_counter()
    jdbc_frame(spark, pg, table, rows).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def write_changes(pg: DevPostgres, table: str, changes: int) -> dict[str, int]:
    """About ``changes`` row changes to ``table`` (a fresh one each round) by multi-row
    statements: inserts of new keys, then updates and deletes of them; the rows of each."""
    third = max(1, changes // 3)
    with pg.connection(DATABASE) as conn:
        row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()
        assert row is not None
        base = int(row[0])
        done = {"insert": 0, "update": 0, "delete": 0}
        for kind in ("insert", "update", "delete"):
            for lo in range(base + 1, base + third + 1, STATEMENT_ROWS):
                hi = min(lo + STATEMENT_ROWS, base + third + 1) - 1
                if kind == "insert":
                    cur = conn.execute(FILL.format(name=table), [lo, hi])
                elif kind == "update":
                    cur = conn.execute(
                        f"UPDATE {table} SET amount = amount + 1, note = 'changed' "
                        "WHERE id BETWEEN %s AND %s",
                        [lo, hi],
                    )
                else:
                    cur = conn.execute(f"DELETE FROM {table} WHERE id BETWEEN %s AND %s", [lo, hi])
                done[kind] += cur.rowcount
    return done


def wait_flushed(conn: Any, timeout_s: float = 60.0) -> None:
    """Until the WAL written so far is flushed: decoding reads only flushed WAL, and the dev
    server commits with ``synchronous_commit = off`` (the WAL writer flushes soon after)."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
    deadline = time.monotonic() + timeout_s
    while not conn.execute("SELECT pg_current_wal_flush_lsn() >= %s", [row[0]]).fetchone()[0]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the WAL up to {row[0]} was not flushed in {timeout_s} s")
        time.sleep(0.05)


def server_decode(pg: DevPostgres, slot: str) -> tuple[float, int]:
    """Seconds for the server to decode the slot's pending WAL with pgoutput over SQL
    (peeked: the slot does not move), and the row messages it gave."""
    with pg.connection(DATABASE) as conn:
        began = time.perf_counter()
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE get_byte(data, 0) = ANY(%s)) FROM "
            "pg_logical_slot_peek_binary_changes(%s, NULL, NULL, 'proto_version', '1', "
            "'publication_names', %s)",
            [list(ROW_MESSAGES), slot, PUBLICATION],
        ).fetchone()
        elapsed = time.perf_counter() - began
    assert row is not None
    return elapsed, int(row[0])


def catch_up_round(
    spark: Any, pg: DevPostgres, changes: int, workdir: Path, reference_first: bool
) -> tuple[float, float, int]:
    """(sparkcdc seconds, server decode seconds, changes) of one catch-up round."""
    slot = f"bench_cu_{uuid.uuid4().hex[:8]}"
    table = "churn"
    run = workdir / slot
    with pg.connection(DATABASE) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(DDL.format(name=table))
        conn.execute(FULL.format(name=table))
        conn.execute(f"ALTER PUBLICATION {PUBLICATION} ADD TABLE {table}")
    opts = source_options(pg, table, slot, **{"scan.startup.mode": "latest-offset"})
    try:
        _, first = available_now(spark, opts, run / "checkpoint")  # the slot and the start
        assert first == 0, f"the latest-offset start read {first} rows before any change"
        kinds = write_changes(pg, table, changes)
        written = sum(kinds.values())
        # the reference decodes a copy of the slot: sparkcdc's commit moves the slot itself
        with pg.connection(DATABASE) as conn:
            wait_flushed(conn)
            conn.execute("SELECT pg_copy_logical_replication_slot(%s, %s)", [slot, f"{slot}_ref"])
        if reference_first:
            server_s, decoded = server_decode(pg, f"{slot}_ref")
        sparkcdc_s, read = available_now(spark, opts, run / "checkpoint")
        if not reference_first:
            server_s, decoded = server_decode(pg, f"{slot}_ref")
    finally:
        drop_slot(pg, slot)
        drop_slot(pg, f"{slot}_ref")
        shutil.rmtree(run, ignore_errors=True)
    # the changelog has two rows an update (-U and +U)
    rows = written + kinds["update"]
    assert read == rows, f"the catch-up read {read} changelog rows for {kinds}, not {rows}"
    assert decoded == written, f"the server decoded {decoded} changes, {written} were written"
    return sparkcdc_s, server_s, written


def ensure_database(pg: DevPostgres) -> None:
    with pg.superuser_connection() as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE])
        if found.fetchone() is None:
            admin.execute(f'CREATE DATABASE "{DATABASE}" OWNER "{pg.settings.user}"')


def publish(pg: DevPostgres) -> None:
    """One publication of the benchmark's tables (``churn`` made anew each catch-up round)."""
    with pg.connection(DATABASE) as conn:
        conn.execute(f"DROP PUBLICATION IF EXISTS {PUBLICATION}")
        conn.execute("DROP TABLE IF EXISTS churn")
        conn.execute(DDL.format(name="churn"))
        conn.execute(FULL.format(name="churn"))
        conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE big, small, churn")


def _seconds(times: list[float]) -> str:
    return " ".join(f"{t:.2f}s" for t in times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=60_000)
    parser.add_argument(
        "--rounds", type=int, default=2, help="timed runs of each side; the median counts"
    )
    args = parser.parse_args()
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "fetch_jars.sh")], check=True, stdout=subprocess.DEVNULL
    )
    jars = connector_jars()
    load_before = os.getloadavg()

    pg = DevPostgres.from_env()
    pg.start()
    ensure_database(pg)
    small_rows = args.rows // 4
    load(pg, "big", args.rows)
    load(pg, "small", small_rows)
    publish(pg)
    print(f"tables loaded: big {args.rows} rows, small {small_rows} rows", file=sys.stderr)

    spark = spark_session(
        "bench-postgres-cdc", "local[2]", jars=jars, conf={"spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-pg-"))
    try:
        # warm-up of both sides: JVM code paths, Python workers, the JDBC driver, caches
        sparkcdc_snapshot(spark, pg, "small", workdir)
        spark_jdbc(spark, pg, "small", small_rows)
        jdbc_count = jdbc_frame(spark, pg, "big", args.rows).count()
        assert jdbc_count == args.rows, f"Spark's JDBC read {jdbc_count} of {args.rows} rows"
        snaps, jdbcs = [], []
        for _ in range(args.rounds):  # alternating, so both see the same machine
            snaps.append(sparkcdc_snapshot(spark, pg, "big", workdir))
            jdbcs.append(spark_jdbc(spark, pg, "big", args.rows))
        catch_up = [
            catch_up_round(spark, pg, args.changes, workdir, reference_first=i % 2 == 0)
            for i in range(args.rounds)
        ]
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    load_after = os.getloadavg()
    cdcs, servers = [c[0] for c in catch_up], [c[1] for c in catch_up]
    print(
        f"rounds: snapshot sparkcdc {_seconds(snaps)}, spark jdbc {_seconds(jdbcs)}; "
        f"catch-up sparkcdc {_seconds(cdcs)}, server decode {_seconds(servers)}",
        file=sys.stderr,
    )
    snap_s, jdbc_s = statistics.median(snaps), statistics.median(jdbcs)
    cdc_s, server_s = statistics.median(cdcs), statistics.median(servers)
    changes = catch_up[0][2]
    result = {
        "rows": args.rows,
        "snapshot_rows_per_s": round(args.rows / snap_s),
        "spark_jdbc_rows_per_s": round(args.rows / jdbc_s),
        "vs_spark_jdbc": round(jdbc_s / snap_s, 2),
        "changes": changes,
        "catch_up_changes_per_s": round(changes / cdc_s),
        "server_decode_changes_per_s": round(changes / server_s),
        "vs_server_decode": round(server_s / cdc_s, 2),
        "load_average_before": round(load_before[0], 2),
        "load_average_after": round(load_after[0], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
