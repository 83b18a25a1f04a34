"""The PostgreSQL source on the source interface, against the private PostgreSQL
(wal_level=logical): found by its type name, tables and schemas read, read_range's changes
exact and in order, the slot moved only by commit, TOAST and option errors (issue 59)."""

from __future__ import annotations

import itertools
import random
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from sparkcdc.errors import ConfigError, ReplicationSlotError, SnapshotError, SourceError
from sparkcdc.model.dialect import RangeRead, dialect_class, dialect_for, options_for
from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.model.options import ServerIdRange
from sparkcdc.postgres.changes import UnchangedToastError
from sparkcdc.postgres.chunks import chunk_condition, key_column_of, key_sql
from sparkcdc.postgres.dialect import PostgresDialect
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.positions import insert_lsn
from sparkcdc.postgres.replication import ReplicationConnection
from sparkcdc.postgres.slots import drop_slot, slot_info
from sparkcdc.snapshot.keys import in_range, key_sort_key
from sparkcdc.snapshot.splitter import ChunkSplitter
from sparkcdc_dev.devpostgres import DevPostgres

pytestmark = pytest.mark.integration

_names = itertools.count()
CAPTURED = frozenset({("public", "items")})


@dataclass
class Source:
    dialect: PostgresDialect
    sql: psycopg.Connection[Any]  # autocommit, as the replicating user

    def position(self) -> Lsn:
        return self.dialect.current_position(self.sql)

    def read(self, start: Lsn, end: Lsn, **spec: Any) -> list[RowChanges | SchemaChange]:
        return list(self.dialect.read_range(RangeRead(start, end, 0, CAPTURED, **spec)))

    def confirmed(self) -> Lsn:
        row = self.sql.execute(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
            [self.dialect.options.slot_name],
        ).fetchone()
        assert row is not None
        return Lsn.parse(row[0])


def options(
    pg: DevPostgres, database: str, slot: str = "dialect_slot", **more: str
) -> dict[str, str]:
    """A postgres-cdc source on ``items`` of ``database``, read through ``slot`` and the
    publication ``<slot>_pub``."""
    s = pg.settings
    return {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": database,
        "schema-name": "public",
        "table-name": "items",
        "slot.name": slot,
        "debezium.publication.name": f"{slot}_pub",
        "scan.startup.mode": "latest-offset",
        **more,
    }


@pytest.fixture
def source(pg: DevPostgres) -> Iterator[Source]:
    with pg.scratch_database("pgdialect") as database, pg.connection(database) as sql:
        sql.execute(
            "CREATE TABLE items (id int PRIMARY KEY, name text, qty numeric(10,2));"
            "CREATE TABLE other (id int PRIMARY KEY)"
        )
        dialect = dialect_for(options_for("postgres-cdc", options(pg, database)), "postgres-cdc")
        assert isinstance(dialect, PostgresDialect)
        dialect.claim_readers(ServerIdRange(1, 1)).check()
        yield Source(dialect, sql)


def rows(changes: list[RowChanges | SchemaChange]) -> list[tuple[str, Any, Any, int]]:
    """(kind, before, after, seq) of every row, in stream order."""
    out = []
    for change in changes:
        assert isinstance(change, RowChanges), change
        seqs = change.position.seqs(change.first_row, len(change.rows))
        out += [(change.kind.value, b, a, q) for (b, a), q in zip(change.rows, seqs, strict=True)]
    return out


def test_the_dialect_is_found_by_its_type_name() -> None:
    assert dialect_class("postgres-cdc") is PostgresDialect


def test_tables_schemas_and_keys(source: Source) -> None:
    source.sql.execute("CREATE UNIQUE INDEX items_name ON items (name)")
    dialect = source.dialect
    filter_ = dialect.options.table_filter()
    assert dialect.match_tables(source.sql, filter_) == [("public", "items")]
    schema = dialect.load_schema(source.sql, "public", "items")
    assert [(c.name, c.spark_type, c.nullable) for c in schema.columns] == [
        ("id", "INT", False),
        ("name", "STRING", True),
        ("qty", "DECIMAL(10,2)", True),
    ]
    assert schema.primary_key == ("id",)
    assert dialect.unique_keys(source.sql, "public", "items") == [("id",), ("name",)]
    assert dialect.create_table_statement(schema) == (
        'CREATE TABLE "public"."items" ("id" integer NOT NULL, "name" text, '
        '"qty" numeric(10,2), PRIMARY KEY ("id"))'
    )
    source.sql.execute("INSERT INTO items VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2)")
    assert dialect.shared_keys(source.sql, "public", "items", ["qty"], 10) == [(1, 2)]
    source.sql.execute("ANALYZE items")
    assert dialect.estimated_rows(source.sql, "public", "items") == 3
    captured = dialect.capture_schemas([("public", "items")])
    assert captured.tables == (schema,) and captured.position > Lsn(0)


def test_read_range_yields_each_change_once_in_order_and_stops_at_its_end(source: Source) -> None:
    sql = source.sql
    start = source.position()
    sql.execute("INSERT INTO items VALUES (1, 'a', 1.5), (2, 'b', 2)")
    sql.execute("INSERT INTO other VALUES (1)")  # not captured
    with sql.transaction():
        sql.execute("UPDATE items SET qty = 3 WHERE id = 1")
        sql.execute("UPDATE items SET id = 20 WHERE id = 2")  # a key change
    middle = source.position()
    sql.execute("DELETE FROM items WHERE id = 1")
    end = source.position()
    sql.execute("INSERT INTO items VALUES (9, 'after the end', 0)")

    first = rows(source.read(start, middle))
    assert [r[:3] for r in first] == [
        ("insert", None, (1, "a", 1.5)),
        ("insert", None, (2, "b", 2)),
        ("update", (1, None, None), (1, "a", 3)),  # REPLICA IDENTITY DEFAULT: the key only
        ("update", (2, None, None), (20, "b", 2)),
    ]
    second = rows(source.read(middle, end))
    assert [r[:3] for r in second] == [("delete", (1, None, None), None)]
    seqs = [r[3] for r in first + second]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(middle.seq() <= q < end.seq() for q in [r[3] for r in second])
    # a read again of the same range gives the same changes (Spark replays a batch)
    assert rows(source.read(start, middle)) == first


def test_the_slot_moves_only_with_commit(source: Source) -> None:
    before = source.confirmed()
    start = source.position()
    source.sql.execute("INSERT INTO items VALUES (1, 'a', 1)")
    end = source.position()
    assert len(rows(source.read(start, end))) == 1
    assert source.confirmed() == before  # a read confirms nothing
    source.dialect.commit(end)
    assert source.confirmed() == end
    source.dialect.commit(start)  # never back
    assert source.confirmed() == end
    with pytest.raises(ReplicationSlotError, match="past the requested start"):
        source.read(start, end)  # what was committed is gone from the slot: refused


def test_an_idle_follower_writes_no_wal_and_its_next_observe_sees_a_commit(
    source: Source,
) -> None:
    """observe() on an idle server gives the last watermark again without writing WAL (an
    idle query plans no batch); a commit after it moves the next observe past it, and the
    range between the two holds the commit whole."""
    follower = source.dialect.follower()
    try:
        # the background writer logs running transactions within 15 s after other WAL: a
        # window it fell into is measured again (the code before wrote WAL every observe)
        for _ in range(5):
            first = follower.observe().end
            before = insert_lsn(source.sql)
            ends = [follower.observe().end for _ in range(3)]
            after = insert_lsn(source.sql)
            if after == before:
                break
        assert after == before, f"observe() wrote WAL while idle: {before} -> {after}"
        assert ends == [first] * 3
        source.sql.execute("INSERT INTO items VALUES (7, 'after the idle checks', 1)")
        second = follower.observe().end
        assert second > first
        assert [r[:3] for r in rows(source.read(first, second))] == [
            ("insert", None, (7, "after the idle checks", 1))
        ]
    finally:
        follower.close()


def test_an_update_without_its_toasted_value_stops_naming_the_fix(source: Source) -> None:
    big = secrets.token_hex(40_000)  # stored out of line
    source.sql.execute("INSERT INTO items VALUES (1, %s, 1)", (big,))
    start = source.position()
    source.sql.execute("UPDATE items SET qty = 2 WHERE id = 1")
    end = source.position()
    with pytest.raises(UnchangedToastError, match=r"REPLICA IDENTITY FULL") as caught:
        source.read(start, end)
    assert '"public"."items"' in str(caught.value) and "'name'" in str(caught.value)
    # under FULL the old image holds the value: the new image is whole
    source.sql.execute("ALTER TABLE items REPLICA IDENTITY FULL")
    start = source.position()
    source.sql.execute("UPDATE items SET qty = 3 WHERE id = 1")
    end = source.position()
    ((kind, before, after, _),) = rows(source.read(start, end))
    assert (kind, before, after) == ("update", (1, big, 2), (1, big, 3))


def test_a_column_added_and_a_truncate_are_schema_changes(source: Source) -> None:
    sql = source.sql
    start = source.position()
    sql.execute("INSERT INTO items VALUES (1, 'a', 1)")
    sql.execute("ALTER TABLE items ADD COLUMN note varchar(20)")
    sql.execute("INSERT INTO items VALUES (2, 'b', 2, 'n')")
    sql.execute("TRUNCATE items")
    end = source.position()
    changes = source.read(start, end)
    kinds = [c.statement if isinstance(c, SchemaChange) else (c.kind, c.rows) for c in changes]
    assert kinds == [
        (RowsKind.INSERT, [(None, (1, "a", 1))]),
        'ALTER TABLE "public"."items" ADD COLUMN "note" varchar',
        (RowsKind.INSERT, [(None, (2, "b", 2, "n"))]),
        'TRUNCATE TABLE "public"."items"',
    ]
    seqs = [c.seq if isinstance(c, SchemaChange) else c.position.seq(c.first_row) for c in changes]
    assert seqs == sorted(seqs)


def test_a_column_added_between_two_reads_is_told_against_the_known_schema(
    source: Source,
) -> None:
    sql = source.sql
    known = source.dialect.load_schema(sql, "public", "items")
    start = source.position()
    sql.execute("INSERT INTO items VALUES (1, 'a', 1)")
    middle = source.position()
    assert [r[:3] for r in rows(source.read(start, middle, schemas=(known,)))] == [
        ("insert", None, (1, "a", 1))
    ]
    # no read between the ALTER and the insert: the second read's first Relation has the
    # column already, and only the known schema tells it is new
    sql.execute("ALTER TABLE items ADD COLUMN note varchar(20)")
    sql.execute("INSERT INTO items VALUES (2, 'b', 2, 'n')")
    end = source.position()
    changes = source.read(middle, end, schemas=(known,))
    kinds = [c.statement if isinstance(c, SchemaChange) else (c.kind, c.rows) for c in changes]
    assert kinds == [
        'ALTER TABLE "public"."items" ADD COLUMN "note" varchar',
        (RowsKind.INSERT, [(None, (2, "b", 2, "n"))]),
    ]
    assert changes[0].seq < changes[1].position.seq(changes[1].first_row)  # type: ignore[union-attr]
    # a reader that knows the schema now is told nothing; one that knows none neither
    now = source.dialect.load_schema(sql, "public", "items")
    assert [type(c) for c in source.read(middle, end, schemas=(now,))] == [RowChanges]
    assert [type(c) for c in source.read(middle, end)] == [RowChanges]
    # a retype that changes the values' form, and a drop, told the same way
    sql.execute("ALTER TABLE items ALTER COLUMN qty TYPE bigint, DROP COLUMN note")
    sql.execute("INSERT INTO items VALUES (3, 'c', 3)")
    later = source.position()
    statements = [
        c.statement for c in source.read(end, later, schemas=(now,)) if isinstance(c, SchemaChange)
    ]
    assert statements == [
        'ALTER TABLE "public"."items" DROP COLUMN "note"',
        'ALTER TABLE "public"."items" ALTER COLUMN "qty" TYPE int8',
    ]


def test_a_second_reader_of_the_slot_is_refused_with_its_pid(source: Source) -> None:
    dialect = source.dialect
    with ReplicationConnection.open(dialect.settings) as conn:
        start = source.position()
        conn.start_replication(dialect.options.slot_name, start, ["dialect_slot_pub"])
        with pytest.raises(ReplicationSlotError, match=rf"pid {conn.backend_pid}"):
            dialect.claim_readers(ServerIdRange(1, 1))
    with ReplicationConnection.open(dialect.settings) as conn:
        assert slot_info(conn, dialect.options.slot_name) is not None


def test_the_slot_hold_shows_the_wal_it_retains_and_its_reader(source: Source) -> None:
    dialect = source.dialect
    slot = dialect.options.slot_name

    def wal_now() -> str:
        row = source.sql.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        return str(row[0])

    before = dialect.stream_hold()
    written_from = wal_now()
    source.sql.execute(
        "INSERT INTO items SELECT g, repeat(md5(g::text), 30), g FROM generate_series(1, 2000) g"
    )
    row = source.sql.execute("SELECT pg_wal_lsn_diff(%s, %s)::bigint", [wal_now(), written_from])
    written = row.fetchone()
    assert written is not None and written[0] > 100_000
    after = dialect.stream_hold()
    assert before.retained_bytes is not None and after.retained_bytes is not None
    # nothing confirmed the slot meanwhile: all the WAL written since is retained too
    assert after.retained_bytes - before.retained_bytes >= written[0]
    facts = dict(after.facts)
    assert after.what == f"replication slot {slot}"
    assert facts["active pid"] == "none" and facts["wal_status"] == "reserved"
    assert facts["confirmed_flush_lsn"] == str(source.confirmed())
    assert f"replication slot {slot}: retains {after.retained_bytes:,} bytes" in after.text()
    with ReplicationConnection.open(dialect.settings) as conn:
        conn.start_replication(slot, source.position(), [f"{slot}_pub"])
        assert dict(dialect.stream_hold().facts)["active pid"] == str(conn.backend_pid)
    with ReplicationConnection.open(dialect.settings) as conn:
        drop_slot(conn, slot)
    gone = dialect.stream_hold()
    assert (gone.retained_bytes, gone.facts) == (0, (("exists", "no (the next run creates it)"),))


def test_options_errors(pg: DevPostgres) -> None:
    base = options(pg, "db")
    with pytest.raises(ConfigError, match=r"decoding.plugin.name='wal2json'.*pgoutput"):
        options_for("postgres-cdc", {**base, "decoding.plugin.name": "wal2json"})
    with pytest.raises(ConfigError, match=r"initial reads a snapshot and needs 'state.location'"):
        options_for("postgres-cdc", {**base, "scan.startup.mode": "initial"})
    with pytest.raises(ConfigError, match=r"slot.name.*lower-case"):
        options_for("postgres-cdc", {**base, "slot.name": "Bad-Slot"})
    with pytest.raises(ConfigError, match=r"unknown option 'server-id' for format 'postgres-cdc'"):
        options_for("postgres-cdc", {**base, "server-id": "5400"})


def test_the_session_runs_work_again_on_a_new_connection_after_a_drop(
    pg: DevPostgres, source: Source
) -> None:
    session = source.dialect.session()

    def pid(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])

    try:
        first = session.run(pid)
        with pg.superuser_connection() as admin:
            # waits (up to 10 s) until the backend is gone (PostgreSQL 14+)
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", [first])
        assert session.run(pid) != first
    finally:
        session.close()


def test_check_server_is_the_validator(source: Source) -> None:
    source.dialect.check_server()  # the fixture's slot, publication and table are ready
    source.sql.execute("ALTER TABLE items REPLICA IDENTITY NOTHING")
    with pytest.raises(SourceError, match=r"items.*REPLICA IDENTITY"):
        source.dialect.check_server()


def test_startup_creates_the_slot_and_starts_where_it_can_be_read(
    pg: DevPostgres, source: Source
) -> None:
    raw = options(pg, source.dialect.settings.database, **{"slot.name": "dialect_new_slot"})
    dialect = dialect_for(options_for("postgres-cdc", raw), "postgres-cdc")
    try:
        start = dialect.startup_position()
        source.sql.execute("INSERT INTO items VALUES (5, 'e', 5)")
        end = dialect.current_position(source.sql)
        changes = list(dialect.read_range(RangeRead(start, end, 0, CAPTURED)))
        assert [r[:3] for r in rows(changes)] == [("insert", None, (5, "e", 5))]
    finally:
        with ReplicationConnection.open(dialect.settings) as conn:
            drop_slot(conn, "dialect_new_slot")


def test_ranges_replayed_in_order_give_the_table(source: Source) -> None:
    """The changelog oracle on one stream: random inserts, updates (key changes too) and
    deletes in transactions across consecutive ranges, replayed by key, equal the table,
    and every row's seq is larger than the one before."""
    rng = random.Random(59)
    sql = source.sql
    replayed: dict[int, tuple[Any, ...]] = {}
    last_seq = -1
    start = source.position()
    for _ in range(8):
        for _ in range(rng.randrange(4)):
            with sql.transaction():
                for _ in range(rng.randrange(1, 5)):
                    ids = [r[0] for r in sql.execute("SELECT id FROM items").fetchall()]
                    op = rng.choice(["insert", "update", "key", "delete"] if ids else ["insert"])
                    new = rng.randrange(1000)
                    if op == "insert" or new in ids:
                        sql.execute(
                            "INSERT INTO items VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE "
                            "SET name = excluded.name",
                            [new, f"n{new}", rng.randrange(100)],
                        )
                    elif op == "update":
                        sql.execute("UPDATE items SET qty = qty + 1 WHERE id = %s", [ids[0]])
                    elif op == "key":
                        sql.execute(
                            "UPDATE items SET id = %s WHERE id = %s", [new, rng.choice(ids)]
                        )
                    else:
                        sql.execute("DELETE FROM items WHERE id = %s", [rng.choice(ids)])
        end = source.position()
        for _, before, after, seq in rows(source.read(start, end)):
            assert seq > last_seq
            last_seq = seq
            if before is not None:
                del replayed[before[0]]
            if after is not None:
                replayed[after[0]] = after
        start = end
    table = {r[0]: tuple(r) for r in sql.execute("SELECT id, name, qty FROM items").fetchall()}
    assert replayed == table and table


# text keys whose order under en-x-icu is not their code points': case, accents, spaces
_LETTERS = ["a", "A", "b", "B", "é", "E", "z", " ", "😀", "ß"]


@pytest.mark.parametrize(
    ("column", "collation"),
    [("id int", None), ("k uuid", None), ('k text COLLATE "en-x-icu"', "C"), ("k varchar(9)", "C")],
)
def test_chunks_of_a_key_hold_what_python_places_in_them(
    source: Source, column: str, collation: str | None
) -> None:
    """The splitter's chunks of an integer, uuid or text key: every row in exactly one
    chunk's SELECT, and it is the chunk Python's order (snapshot/keys.py, which the
    backfill and the interleaving filter judge by) places its key in."""
    rng = random.Random(column)
    name = column.split()[0]
    source.sql.execute(f"CREATE TABLE keyed ({column} PRIMARY KEY, v int)")
    for i in range(300):
        key: Any = {
            "id": lambda: rng.randint(1, 100_000),
            "k": lambda: "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 4))),
        }[name]()
        if "uuid" in column:
            key = str(uuid.UUID(int=rng.getrandbits(128)))
        source.sql.execute("INSERT INTO keyed VALUES (%s, %s) ON CONFLICT DO NOTHING", [key, i])
    dialect = source.dialect
    schema = dialect.load_schema(source.sql, "public", "keyed")
    assert dialect.key_collation(source.sql, "public", "keyed", name) == collation
    session = dialect.session()
    try:
        splitter = ChunkSplitter.for_table(dialect, session, schema, chunk_size=20)
        chunks = splitter.chunks(0, 1000)
    finally:
        session.close()
    assert len(chunks) >= 10
    keys = [str(r[0]) for r in source.sql.execute(f"SELECT {name} FROM keyed").fetchall()]
    sort_key = key_sort_key(collation)
    seen: list[str] = []
    for chunk in chunks:
        where, args = chunk_condition(key_sql(key_column_of(schema, name)), chunk.start, chunk.end)
        got = sorted(
            str(r[0]) for r in source.sql.execute(f"SELECT {name} FROM keyed WHERE {where}", args)
        )
        typed = [int(k) for k in keys] if name == "id" else keys
        placed = sorted(str(k) for k in typed if in_range(k, chunk.start, chunk.end, sort_key))
        assert got == placed, chunk
        seen += got
    assert sorted(seen) == sorted(keys)


@pytest.mark.parametrize("column", ["k numeric", "k char(4)", "k timestamptz"])
def test_a_chunk_key_of_another_type_is_refused_naming_the_option(
    source: Source, column: str
) -> None:
    source.sql.execute(f"CREATE TABLE keyed ({column} PRIMARY KEY, v int)")
    with pytest.raises(SnapshotError, match=r"scan.incremental.snapshot.chunk.key-column"):
        source.dialect.key_collation(source.sql, "public", "keyed", "k")
