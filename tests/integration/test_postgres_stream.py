"""``spark.readStream.format("postgres-cdc")`` against the private PostgreSQL and local
Spark (issue 59): the typed changelog of Trigger.AvailableNow runs replays to the table,
a run from the checkpoint reads only what came after, and the slot's confirmed LSN never
passes what Spark committed."""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_postgres_dialect import options
from test_snapshot_stream import KILLS, batches_across_kills, ordered
from workload import envelope_to_changelog

from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.positions import watermark
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.oracle import compare, replay

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

_names = itertools.count()


@pytest.fixture
def database(pg: DevPostgres) -> Iterator[str]:
    """A database of its own, dropped with the test's slot afterwards (a slot keeps WAL)."""
    with pg.scratch_database("pgstream") as name:
        yield name


class Runs:
    """Trigger.AvailableNow runs of one query from one checkpoint; each run's rows."""

    def __init__(self, spark: Any, opts: dict[str, str], checkpoint: Path) -> None:
        self.spark, self.opts, self.checkpoint = spark, opts, checkpoint
        self.seq = "seq" if opts.get("changelog.shape") == "envelope" else "_seq"
        self.batches: dict[int, list[dict[str, Any]]] = {}

    def _collect(self, batch: Any, batch_id: int) -> None:
        self.batches[batch_id] = [r.asDict() for r in batch.collect()]

    def start(self, **trigger: Any) -> Any:
        """The query, started from the checkpoint."""
        return (
            self.spark.readStream.format("postgres-cdc")
            .options(**self.opts)
            .load()
            .writeStream.foreachBatch(self._collect)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**trigger)
            .start()
        )

    def rows(self) -> list[dict[str, Any]]:
        return [r for batch in list(self.batches.values()) for r in batch]

    def run(self) -> list[dict[str, Any]]:
        """One AvailableNow run to its end; the rows of its batches in ``_seq`` (the
        envelope's ``seq``) order."""
        before = set(self.batches)
        query = self.start(availableNow=True)
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        assert not query.isActive, "the AvailableNow run did not end"
        rows: list[dict[str, Any]] = []
        for batch_id in sorted(set(self.batches) - before):
            rows.extend(sorted(self.batches[batch_id], key=lambda r: r[self.seq]))
        return rows

    def run_while(self, write: Callable[[threading.Event], Any]) -> list[dict[str, Any]]:
        """A run while ``write(stop)`` writes in a thread, then a run for what it wrote
        after the first run's target; both runs' rows."""
        stop = threading.Event()
        writer = threading.Thread(target=write, args=(stop,), daemon=True)
        writer.start()
        try:
            rows = self.run()
        finally:
            stop.set()
            writer.join()
        return rows + self.run()

    def committed_end(self) -> Lsn:
        end = committed_end(self.checkpoint)
        assert end is not None, "no batch committed"
        return end


def snapshot_options(
    pg: DevPostgres, database: str, slot: str, tmp_path: Path, **more: str
) -> dict[str, str]:
    """A postgres-cdc source on ``items`` taking its snapshot first (state in ``tmp_path``)."""
    return options(
        pg,
        database,
        slot,
        **{
            "scan.startup.mode": "initial",
            "state.location": str(tmp_path / "state"),
            "scan.incremental.snapshot.chunks-per-batch": "3",
            **more,
        },
    )


def committed_end(checkpoint: Path) -> Lsn | None:
    """The WAL end of the last batch the checkpoint committed (None: none yet)."""
    commits = checkpoint / "commits"
    done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.exists() else []
    if not done:
        return None
    text = (checkpoint / "offsets" / str(max(done))).read_text()
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


def test_a_column_added_between_two_batches_stops_the_typed_stream_then_it_goes_on(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    slot = f"stream_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        sql.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int)")
        runs = Runs(spark, options(pg, database, slot), tmp_path / "checkpoint")
        assert runs.run() == []
        query = runs.start(processingTime="1 second")
        try:
            sql.execute("INSERT INTO items VALUES (1, 'a', 1)")
            deadline = time.monotonic() + 120
            while not [r for r in runs.rows() if r["id"] == 1]:
                assert query.isActive and time.monotonic() < deadline, query.exception()
                query.awaitTermination(0.2)
            # no row of the table between the two statements: the next batch's first
            # Relation has the column already, and only the query's schema tells it is new
            sql.execute("ALTER TABLE items ADD COLUMN note text")
            sql.execute("INSERT INTO items VALUES (2, 'b', 2, 'n')")
            with contextlib.suppress(Exception):  # the failed query raises here
                query.awaitTermination(120)
            assert not query.isActive
            error = str(query.exception())
        finally:
            query.stop()
        assert 'ADD COLUMN "note" text' in error and "Restart the query" in error, error
        assert not [r for r in runs.rows() if r["id"] == 2]  # not written without its column
        # started again, the stream's columns are the new schema's; the row is not lost
        assert [(r["_op"], r["id"], r["note"]) for r in runs.run()] == [("+I", 2, "n")]


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
                        new = key + 3000 * rng.randint(1, 3)
                        sql.execute(
                            "INSERT INTO items SELECT %s, 'w', %s WHERE NOT EXISTS "
                            "(SELECT 1 FROM items WHERE id = %s)",  # a key-less table too
                            [new, done, new],
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


def items_with_rows(sql: psycopg.Connection[Any], rows: int) -> None:
    sql.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text, qty int);"
        "ALTER TABLE items REPLICA IDENTITY FULL;"
        f"INSERT INTO items SELECT g, 'n' || g, g FROM generate_series(1, {int(rows)}) g"
    )


def test_the_snapshot_with_concurrent_writes_replays_to_the_table(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    """The snapshot oracle of DESIGN.md §8 on PostgreSQL: chunks read while transactions
    change, move and delete keys across them; the changelog replays to the table."""
    slot = f"snap_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        items_with_rows(sql, 3000)
        opts = snapshot_options(
            pg, database, slot, tmp_path, **{"scan.incremental.snapshot.chunk.size": "200"}
        )
        runs = Runs(spark, opts, tmp_path / "checkpoint")
        counts: list[int] = []
        rows = runs.run_while(lambda stop: counts.append(write_randomly(pg, database, stop, 59)))
        assert counts[0] > 20
        result = replay(rows, ["id"])
        assert result.violations == []
        assert result.state == table(sql)
        assert confirmed(sql, slot) <= runs.committed_end()


def test_the_snapshot_survives_kills_and_the_slot_never_passes_a_commit(
    pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    """The kill/restart oracle of the MySQL snapshot (test_snapshot_stream.py) on
    PostgreSQL: the stream's process SIGKILLed at random points while transactions change,
    move and delete keys, restarted from its checkpoint; after each kill the slot's
    confirmed LSN is not past the last committed batch's end; the changelog replays to the
    table."""
    slot = f"kill_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        items_with_rows(sql, 3000)
    opts = snapshot_options(
        pg, database, slot, tmp_path, **{"scan.incremental.snapshot.chunk.size": "150"}
    )
    checked: list[Lsn | None] = []

    def slot_behind_commits(checkpoint: Path) -> None:
        end = committed_end(checkpoint)
        with pg.connection(database) as sql:
            slot_at = confirmed(sql, slot)
        assert end is None or slot_at <= end, f"slot confirmed {slot_at}, committed {end}"
        checked.append(end)

    def now() -> Lsn:
        with pg.connection(database) as sql:
            return watermark(sql)

    batches = batches_across_kills(
        now,
        tmp_path,
        opts,
        KILLS,
        59,
        lambda stop: write_randomly(pg, database, stop, 60),
        source="postgres-cdc",
        after_kill=slot_behind_commits,
    )
    assert len(checked) == KILLS
    with pg.connection(database) as sql:
        result = replay(ordered(batches, "_seq"), ["id"])
        assert result.violations == [], result.violations[:10]
        assert result.state == table(sql)
        end = committed_end(tmp_path / "checkpoint")
        assert end is not None and confirmed(sql, slot) <= end


def test_snapshot_mode_reads_the_table_and_ends_without_a_slot(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    """scan.startup.mode=snapshot (Flink CDC's bounded read): the chunks' rows and no
    stream; no replication slot is left to keep WAL, and a later run reads nothing."""
    slot = f"once_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        items_with_rows(sql, 1000)
        sql.execute("UPDATE items SET name = NULL WHERE id % 10 = 0")
        opts = snapshot_options(
            pg,
            database,
            slot,
            tmp_path,
            **{"scan.startup.mode": "snapshot", "scan.incremental.snapshot.chunk.size": "90"},
        )
        runs = Runs(spark, opts, tmp_path / "checkpoint")
        rows = runs.run()
        assert {r["_op"] for r in rows} == {"+I"}
        result = replay(rows, ["id"])
        assert result.violations == [] and result.state == table(sql)
        sql.execute("INSERT INTO items VALUES (5000, 'after', 1)")
        assert runs.run() == []
        slots = sql.execute(
            "SELECT slot_name FROM pg_replication_slots WHERE database = %s", [database]
        ).fetchall()
        assert slots == []


# text keys whose order under the column's collation (en-x-icu) differs from code points:
# case, accents, trailing spaces, a character beyond the BMP
_LETTERS = ["a", "A", "b", "B", "é", "E", "z", " ", "😀", "ß"]


def a_word(rng: random.Random) -> str:
    return "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 4)))


def write_keys(sql: psycopg.Connection[Any], rng: random.Random, step: int) -> None:
    """One transaction over ``words`` (text key) and ``ids`` (uuid key): inserts, updates,
    key changes and deletes."""
    with sql.transaction():
        for _ in range(rng.randint(1, 3)):
            action = rng.random()
            if action < 0.3:
                sql.execute(
                    "INSERT INTO words VALUES (%s, %s) ON CONFLICT DO NOTHING", [a_word(rng), step]
                )
                sql.execute(
                    "INSERT INTO ids VALUES (%s, %s)",
                    [str(uuid.UUID(int=rng.getrandbits(128))), step],
                )
            elif action < 0.55:
                sql.execute("UPDATE words SET v = %s WHERE k = %s", [step, a_word(rng)])
                sql.execute(
                    "UPDATE ids SET v = %s WHERE k = (SELECT k FROM ids ORDER BY v, k LIMIT 1)",
                    [step],
                )
            elif action < 0.8:  # key changes, across chunks
                sql.execute(
                    "UPDATE words SET k = %s WHERE k = %s AND NOT EXISTS "
                    "(SELECT 1 FROM words WHERE k = %s)",
                    [w := a_word(rng) + "~", a_word(rng), w],
                )
                sql.execute(
                    "UPDATE ids SET k = gen_random_uuid() WHERE k = "
                    "(SELECT k FROM ids ORDER BY md5(k::text || %s) LIMIT 1)",
                    [str(step)],
                )
            else:
                sql.execute("DELETE FROM words WHERE k = %s", [a_word(rng)])
                sql.execute(
                    "DELETE FROM ids WHERE k = (SELECT k FROM ids ORDER BY md5(k::text || %s) "
                    "LIMIT 1)",
                    [str(step)],
                )


def test_text_and_uuid_keys_snapshot_exactly_under_concurrent_writes(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    """Chunks of a text key (compared under "C" whatever the column's collation, as Python
    compares code points) and of a uuid key, read while keys change across them: each
    table's changelog replays to it."""
    slot = f"keys_{uuid.uuid4().hex[:8]}"
    rng = random.Random(591)
    with pg.connection(database) as sql:
        sql.execute(
            'CREATE TABLE words (k text COLLATE "en-x-icu" PRIMARY KEY, v int);'
            "ALTER TABLE words REPLICA IDENTITY FULL;"
            "CREATE TABLE ids (k uuid PRIMARY KEY, v int);"
            "ALTER TABLE ids REPLICA IDENTITY FULL"
        )
        for step in range(400):
            write_keys(sql, rng, step)
    opts = snapshot_options(
        pg,
        database,
        slot,
        tmp_path,
        **{
            "table-name": "words|ids",
            "changelog.shape": "envelope",
            "scan.incremental.snapshot.chunk.size": "15",
            "scan.incremental.snapshot.chunks-per-batch": "4",
        },
    )

    def write(stop: threading.Event) -> None:
        wrng = random.Random(592)
        with pg.connection(database) as sql:
            step = 1000
            while not stop.is_set():
                write_keys(sql, wrng, step)
                step += 1

    rows = Runs(spark, opts, tmp_path / "checkpoint").run_while(write)
    with pg.connection(database) as sql:
        for name in ("words", "ids"):
            changelog = envelope_to_changelog(rows, name)
            assert sum(r["_op"] == "+I" for r in changelog) > 60, name  # many chunks' rows
            result = replay(changelog, ["k"])
            assert result.violations == [], (name, result.violations[:10])
            source = {
                (str(k),): {"k": str(k), "v": v}
                for k, v in sql.execute(f"SELECT k, v FROM {name}").fetchall()
            }
            assert compare(result.state, source) == [], name


def test_a_table_without_a_primary_key_snapshots_by_its_chunk_key_column(
    spark: Any, pg: DevPostgres, database: str, tmp_path: Path
) -> None:
    """scan.incremental.snapshot.chunk.key-column cuts a table without a primary key (its
    rows identified by their whole image: REPLICA IDENTITY FULL) while it is written."""
    slot = f"nokey_{uuid.uuid4().hex[:8]}"
    with pg.connection(database) as sql:
        sql.execute(
            "CREATE TABLE items (id int NOT NULL, name text, qty int);"
            "CREATE INDEX ON items (id);"
            "ALTER TABLE items REPLICA IDENTITY FULL;"
            "INSERT INTO items SELECT g, 'n' || g, g FROM generate_series(1, 1500) g"
        )
        opts = snapshot_options(
            pg,
            database,
            slot,
            tmp_path,
            **{
                "scan.incremental.snapshot.chunk.key-column": "id",
                "scan.incremental.snapshot.chunk.size": "100",
            },
        )
        runs = Runs(spark, opts, tmp_path / "checkpoint")
        rows = runs.run_while(lambda stop: write_randomly(pg, database, stop, 61))
        assert sum(r["_op"] == "+I" for r in rows) >= 1000
        result = replay(rows, ["id"])
        assert result.violations == [], result.violations[:10]
        assert result.state == table(sql)
