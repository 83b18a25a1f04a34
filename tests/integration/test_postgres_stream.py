"""``spark.readStream.format("postgres-cdc")`` against the private PostgreSQL and local
Spark (issue 59): the typed changelog of Trigger.AvailableNow runs replays to the table,
a run from the checkpoint reads only what came after, and the slot's confirmed LSN never
passes what Spark committed."""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_postgres_dialect import options

from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.postgres.lsn import Lsn
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.oracle import replay

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

_names = itertools.count()


@pytest.fixture
def database(pg: DevPostgres) -> Iterator[str]:
    """A database of its own, dropped with the test's slot afterwards (a slot keeps WAL)."""
    name = f"pgstream_{os.getpid()}_{next(_names)}_{uuid.uuid4().hex[:6]}"
    with pg.superuser_connection() as admin:
        admin.execute(f'CREATE DATABASE "{name}" OWNER "{pg.settings.user}"')
    yield name
    with pg.superuser_connection() as admin:
        for (slot,) in admin.execute(
            "SELECT slot_name FROM pg_replication_slots WHERE database = %s", [name]
        ).fetchall():
            admin.execute("SELECT pg_drop_replication_slot(%s)", [slot])
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


class Runs:
    """Trigger.AvailableNow runs of one query from one checkpoint; each run's rows."""

    def __init__(self, spark: Any, opts: dict[str, str], checkpoint: Path) -> None:
        self.spark, self.opts, self.checkpoint = spark, opts, checkpoint
        self.batches: dict[int, list[dict[str, Any]]] = {}

    def _collect(self, batch: Any, batch_id: int) -> None:
        self.batches[batch_id] = [r.asDict() for r in batch.collect()]

    def run(self) -> list[dict[str, Any]]:
        """One AvailableNow run to its end; the rows of its batches in ``_seq`` order."""
        before = set(self.batches)
        query = (
            self.spark.readStream.format("postgres-cdc")
            .options(**self.opts)
            .load()
            .writeStream.foreachBatch(self._collect)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        assert not query.isActive, "the AvailableNow run did not end"
        rows: list[dict[str, Any]] = []
        for batch_id in sorted(set(self.batches) - before):
            rows.extend(sorted(self.batches[batch_id], key=lambda r: r["_seq"]))
        return rows

    def committed_end(self) -> Lsn:
        """The WAL end of the last batch the checkpoint committed."""
        commits = [int(p.name) for p in (self.checkpoint / "commits").iterdir() if p.name.isdigit()]
        text = (self.checkpoint / "offsets" / str(max(commits))).read_text()
        return Lsn.from_offset(json.loads(text.splitlines()[-1])["wal"])


def confirmed(sql: psycopg.Connection[Any], slot: str) -> Lsn:
    row = sql.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", [slot]
    ).fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def table(sql: psycopg.Connection[Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    rows = sql.execute("SELECT id, name, qty FROM items").fetchall()
    return {(i,): {"id": i, "name": n, "qty": q} for i, n, q in rows}


def test_available_now_runs_replay_to_the_table_and_the_slot_follows_commits(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    slot = f"stream_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        sql.execute(
            "CREATE TABLE items (id int PRIMARY KEY, name text, qty int);"
            "ALTER TABLE items REPLICA IDENTITY FULL"
        )
        runs = Runs(spark, options(pg, database, slot), tmp_path / "checkpoint")
        assert runs.run() == []  # the query's start: the changes from here on are its
        assert confirmed(sql, slot) <= runs.committed_end()
        with sql.transaction():
            sql.execute("INSERT INTO items SELECT g, 'n' || g, g FROM generate_series(1, 20) g")
        with sql.transaction():
            sql.execute("UPDATE items SET qty = qty * 10 WHERE id % 3 = 0")
            sql.execute("UPDATE items SET id = id + 100, name = 'moved' WHERE id IN (4, 5)")
        with sql.transaction():
            sql.execute("DELETE FROM items WHERE id % 7 = 0")
            sql.execute("INSERT INTO items VALUES (7, 'again', 70)")
        first = runs.run()
        result = replay(first, ["id"])
        assert result.violations == []
        assert result.state == table(sql)
        ops = [(r["_op"], r["id"]) for r in first]
        assert ("-U", 4) in ops and ("+U", 104) in ops  # the key change, as one update
        assert ("-D", 14) in ops
        assert confirmed(sql, slot) <= runs.committed_end()

        with sql.transaction():
            sql.execute("UPDATE items SET name = 'later' WHERE id = 1")
            sql.execute("INSERT INTO items VALUES (50, 'new', 5)")
        second = runs.run()
        assert [(r["_op"], r["id"], r["name"]) for r in second] == [
            ("-U", 1, "n1"),
            ("+U", 1, "later"),
            ("+I", 50, "new"),
        ]
        assert all(r["_seq"] > max(f["_seq"] for f in first) for r in second)
        rows = first + second
        assert {c for c in rows[0] if c in METADATA_COLUMNS} >= {"_op", "_seq"}
        both = replay(rows, ["id"])
        assert both.violations == [] and both.state == table(sql)
        assert confirmed(sql, slot) <= runs.committed_end()


def write_randomly(pg: DevPostgres, database: str, stop: threading.Event, seed: int) -> int:
    """Transactions of inserts, updates, key changes and deletes until ``stop``; how many."""
    rng = random.Random(seed)
    done = 0
    with pg.connection(database) as sql:
        while not stop.is_set():
            with sql.transaction():
                for _ in range(rng.randint(1, 4)):
                    key = rng.randint(1, 3000)
                    action = rng.random()
                    if action < 0.3:
                        sql.execute(
                            "INSERT INTO items VALUES (%s, 'w', %s) ON CONFLICT DO NOTHING",
                            [key + 3000 * rng.randint(1, 3), done],
                        )
                    elif action < 0.6:
                        sql.execute("UPDATE items SET qty = %s WHERE id = %s", [done, key])
                    elif action < 0.8:  # a key change, across chunks
                        sql.execute(
                            "UPDATE items SET id = %s WHERE id = %s AND NOT EXISTS "
                            "(SELECT 1 FROM items WHERE id = %s)",
                            [key + 10000 + done, key, key + 10000 + done],
                        )
                    else:
                        sql.execute("DELETE FROM items WHERE id = %s", [key])
            done += 1
    return done


def test_the_snapshot_with_concurrent_writes_replays_to_the_table(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    """The snapshot oracle of DESIGN.md §8 on PostgreSQL: chunks read while transactions
    change, move and delete keys across them; the changelog replays to the table."""
    slot = f"snap_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        sql.execute(
            "CREATE TABLE items (id int PRIMARY KEY, name text, qty int);"
            "ALTER TABLE items REPLICA IDENTITY FULL;"
            "INSERT INTO items SELECT g, 'n' || g, g FROM generate_series(1, 3000) g"
        )
        opts = options(
            pg,
            database,
            slot,
            **{
                "scan.startup.mode": "initial",
                "state.location": str(tmp_path / "state"),
                "scan.incremental.snapshot.chunk.size": "200",
                "scan.incremental.snapshot.chunks-per-batch": "3",
            },
        )
        runs = Runs(spark, opts, tmp_path / "checkpoint")
        stop = threading.Event()
        counts: list[int] = []
        writer = threading.Thread(
            target=lambda: counts.append(write_randomly(pg, database, stop, 59)), daemon=True
        )
        writer.start()
        try:
            rows = runs.run()
        finally:
            stop.set()
            writer.join()
        rows += runs.run()  # what the writer did after the first run's target
        assert counts[0] > 20
        result = replay(rows, ["id"])
        assert result.violations == []
        assert result.state == table(sql)
        assert confirmed(sql, slot) <= runs.committed_end()
