"""The PostgreSQL replication client against the private PostgreSQL (wal_level=logical):
every pgoutput message decoded from the server's own output, the [start, end) reader,
confirm() as the only thing that moves the slot, and clear errors (issue 59, item 2)."""

from __future__ import annotations

import dataclasses
import itertools
import secrets
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from sparkcdc.errors import (
    PublicationError,
    ReplicationSlotError,
    SourceConnectionError,
    SourceError,
)
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    LogicalMessage,
    Relation,
    ReplicaIdentity,
    Truncate,
    TupleKind,
    TypeDefinition,
    Update,
)
from sparkcdc.postgres.replication import PostgresEndpoint, ReplicationConnection
from sparkcdc.postgres.slots import (
    drop_publication,
    drop_slot,
    ensure_publication,
    ensure_slot,
    slot_info,
)
from sparkcdc.postgres.transactions import Transaction
from sparkcdc_dev.devpostgres import SUPERUSER, DevPostgres

pytestmark = pytest.mark.integration

_names = itertools.count()


@dataclass
class Source:
    """A fresh database with a slot and a publication of its own."""

    pg: DevPostgres
    endpoint: PostgresEndpoint
    sql: psycopg.Connection[Any]  # autocommit, as the replicating user
    slot: str
    publication: str

    def superuser(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=str(self.pg.datadir),
            port=self.pg.port,
            user=SUPERUSER,
            dbname=self.endpoint.database,
            autocommit=True,
        )

    def lsn(self, query: str) -> Lsn:
        row = self.sql.execute(f"SELECT ({query})::text").fetchone()
        assert row is not None
        return Lsn.parse(row[0])

    def watermark(self) -> Lsn:
        """A non-transactional logical message's LSN: a range end the WAL surely reaches."""
        return self.lsn("pg_logical_emit_message(false, 'sparkcdc.test', 'end')")

    def confirmed(self) -> Lsn:
        return self.lsn(
            f"SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{self.slot}'"
        )

    def read(self, start: Lsn, end: Lsn, **options: Any) -> list[Transaction | LogicalMessage]:
        with ReplicationConnection.open(self.endpoint) as conn:
            stream = conn.start_replication(self.slot, start, [self.publication], **options)
            return list(stream.transactions(end))


@pytest.fixture
def source(pg: DevPostgres) -> Iterator[Source]:
    with pg.scratch_database("pgwire") as database, pg.connection(database) as sql:
        s = pg.settings
        endpoint = PostgresEndpoint(s.host, s.port, s.user, s.password, database)
        sql.execute(
            "CREATE TABLE items (id int PRIMARY KEY, name text, qty int);"
            "CREATE TABLE audit (id int, note text);"
            "ALTER TABLE audit REPLICA IDENTITY FULL"
        )
        source = Source(pg, endpoint, sql, "pgwire_slot", "pgwire_pub")
        with ReplicationConnection.open(endpoint) as conn:
            ensure_slot(conn, source.slot)
            ensure_publication(conn, source.publication, [("public", "items"), ("public", "audit")])
        yield source


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s}s")
        time.sleep(0.05)


def transactions(items: list[Transaction | LogicalMessage]) -> list[Transaction]:
    return [item for item in items if isinstance(item, Transaction)]


def changes(transaction: Transaction) -> list[Any]:
    return [i for i in transaction.items if not isinstance(i, Relation | TypeDefinition)]


def same(transactions: list[Transaction]) -> list[tuple[Any, ...]]:
    """What every read of these transactions gives alike (a new stream sends a table's
    Relation again before its first change; a streamed change carries its xid)."""
    return [
        (t.xid, t.commit_lsn, t.end_lsn, [dataclasses.replace(c, xid=None) for c in changes(t)])
        for t in transactions
    ]


def test_every_change_decodes_from_the_servers_output(source: Source) -> None:
    start = source.confirmed()
    sql = source.sql
    sql.execute("INSERT INTO items VALUES (1, 'one', 10), (2, NULL, 20)")
    sql.execute("UPDATE items SET qty = 11 WHERE id = 1")  # key unchanged: no old image
    sql.execute("UPDATE items SET id = 3 WHERE id = 2")  # key changed: the old key 'K'
    sql.execute("INSERT INTO audit VALUES (1, 'a')")
    sql.execute("UPDATE audit SET note = 'b'")  # REPLICA IDENTITY FULL: the old tuple 'O'
    sql.execute("DELETE FROM audit")
    sql.execute("DELETE FROM items WHERE id = 1")
    with sql.transaction():
        sql.execute("SELECT pg_logical_emit_message(true, 'sparkcdc.test', 'inside')")
        sql.execute("TRUNCATE items, audit")
    sql.execute("CREATE TYPE mood AS ENUM ('ok', 'sad'); ALTER TABLE audit ADD COLUMN m mood")
    sql.execute("INSERT INTO audit VALUES (2, 'c', 'sad')")
    with source.superuser() as admin:  # a change applied by a replication origin
        admin.execute("SELECT pg_replication_origin_create('pgwire_node')")
        admin.execute("SELECT pg_replication_origin_session_setup('pgwire_node')")
        admin.execute("INSERT INTO items VALUES (9, 'from node', 0)")
        admin.execute("SELECT pg_replication_origin_session_reset()")
        admin.execute("SELECT pg_replication_origin_drop('pgwire_node')")
    between = source.watermark()
    end = source.watermark()

    items = source.read(start, end)
    assert [i.lsn for i in items if isinstance(i, LogicalMessage)] == [between]
    done = transactions(items)
    assert [changes(t) for t in done[:8]] == [
        [
            Insert(None, oid(done, "items"), ("1", "one", "10")),
            Insert(None, oid(done, "items"), ("2", None, "20")),
        ],
        [Update(None, oid(done, "items"), None, None, ("1", "one", "11"))],
        [Update(None, oid(done, "items"), TupleKind.KEY, ("2", None, None), ("3", None, "20"))],
        [Insert(None, oid(done, "audit"), ("1", "a"))],
        [Update(None, oid(done, "audit"), TupleKind.OLD, ("1", "a"), ("1", "b"))],
        [Delete(None, oid(done, "audit"), TupleKind.OLD, ("1", "b"))],
        [Delete(None, oid(done, "items"), TupleKind.KEY, ("1", None, None))],
        [
            LogicalMessage(None, True, changes(done[7])[0].lsn, "sparkcdc.test", b"inside"),
            Truncate(None, changes(done[7])[1].options, (oid(done, "items"), oid(done, "audit"))),
        ],
    ]
    shapes = {i.name: i for t in done for i in t.items if isinstance(i, Relation)}
    assert shapes["items"].replica_identity is ReplicaIdentity.DEFAULT
    assert [(c.name, c.is_key) for c in shapes["items"].columns] == [
        ("id", True),
        ("name", False),
        ("qty", False),
    ]
    assert shapes["audit"].replica_identity is ReplicaIdentity.FULL
    enum_insert, from_origin = done[8], done[9]
    enum_type = next(i for i in enum_insert.items if isinstance(i, TypeDefinition))
    assert (enum_type.namespace, enum_type.name) == ("public", "mood")
    assert shapes["audit"].columns[2].type_oid == enum_type.oid
    assert changes(enum_insert) == [Insert(None, oid(done, "audit"), ("2", "c", "sad"))]
    assert from_origin.origin == "pgwire_node"
    assert [t.commit_lsn for t in done] == sorted(t.commit_lsn for t in done)
    assert all(start <= t.commit_lsn < t.end_lsn for t in done) and done[-1].end_lsn <= between


def oid(done: list[Transaction], table: str) -> int:
    return next(i.oid for t in done for i in t.items if isinstance(i, Relation) and i.name == table)


def test_binary_values_are_the_types_send_format(source: Source) -> None:
    start = source.confirmed()
    source.sql.execute("INSERT INTO items VALUES (7, 'x', -2)")
    (done,) = transactions(source.read(start, source.watermark(), binary=True))
    (insert,) = changes(done)
    assert insert.new == (struct.pack(">i", 7), b"x", struct.pack(">i", -2))


def test_an_update_that_leaves_a_toasted_value_gives_the_unchanged_marker(source: Source) -> None:
    big = secrets.token_hex(40_000)  # incompressible enough to be stored out of line
    source.sql.execute("INSERT INTO items VALUES (1, %s, 1)", (big,))
    start = source.watermark()  # a range may start after the slot's confirmed position
    source.sql.execute("UPDATE items SET qty = 2 WHERE id = 1")
    source.sql.execute("UPDATE items SET name = 'short', qty = 3 WHERE id = 1")
    first, second = transactions(source.read(start, source.watermark()))
    assert [i.new for i in changes(first)] == [("1", UNCHANGED_TOAST, "2")]
    assert [i.new for i in changes(second)] == [("1", "short", "3")]


def test_a_large_transaction_streams_and_its_aborted_parts_are_dropped(source: Source) -> None:
    start = source.confirmed()
    # a database setting reaches the walsender of a replication=database connection
    with source.superuser() as admin:
        admin.execute(
            f'ALTER DATABASE "{source.endpoint.database}" SET logical_decoding_work_mem = "64kB"'
        )
    sql = source.sql
    with sql.transaction():
        sql.execute(
            "INSERT INTO items SELECT g, repeat('k', 100), g FROM generate_series(1, 3000) g"
        )
        sql.execute("SAVEPOINT s")
        sql.execute(
            "INSERT INTO items SELECT g, 'rolled back', g FROM generate_series(5001, 8000) g"
        )
        sql.execute("ROLLBACK TO SAVEPOINT s")
        sql.execute("INSERT INTO items VALUES (9000, 'after', 0)")
    with pytest.raises(psycopg.errors.RaiseException), sql.transaction():
        sql.execute(
            "INSERT INTO items SELECT g, repeat('x', 100), g FROM generate_series(10001, 13000) g"
        )
        sql.execute("DO $$ BEGIN RAISE EXCEPTION 'abort it'; END $$")
    sql.execute("INSERT INTO items VALUES (9001, 'small', 0)")
    with ReplicationConnection.open(source.endpoint) as conn:
        if conn.protocol_version < 2:
            pytest.skip(f"PostgreSQL {conn.server_version} has no streaming of large transactions")
    end = source.watermark()
    large, small = transactions(source.read(start, end))
    assert large.streamed and not small.streamed
    keys = [int(i.new[0]) for i in changes(large)]
    assert keys == [*range(1, 3001), 9000]
    assert [i.new[0] for i in changes(small)] == ["9001"]
    # protocol 1 has no streaming: the same transactions whole, from the server's buffer
    whole = transactions(source.read(start, end, protocol_version=1))
    assert [t.streamed for t in whole] == [False, False]
    assert same(whole) == same([large, small])


def test_the_reader_stops_exactly_at_end(source: Source) -> None:
    start = source.confirmed()
    for key in (1, 2, 3):
        source.sql.execute("INSERT INTO items VALUES (%s, 'k', 0)", (key,))
    t1, t2, t3 = transactions(source.read(start, source.watermark()))
    assert [
        len(transactions(source.read(start, end))) for end in (t1.commit_lsn, t2.commit_lsn)
    ] == [0, 1]
    assert same(transactions(source.read(start, t3.commit_lsn))) == same([t1, t2])
    assert same(transactions(source.read(t2.end_lsn, source.watermark()))) == same([t3])
    assert same(transactions(source.read(t2.commit_lsn, t3.commit_lsn))) == same([t2])
    with ReplicationConnection.open(source.endpoint) as conn:  # ranges of one stream
        stream = conn.start_replication(source.slot, start, [source.publication])
        ranges = [t2.commit_lsn, t2.commit_lsn, t3.commit_lsn, source.watermark()]
        read = [same(transactions(list(stream.transactions(end)))) for end in ranges]
    assert read == [same([t1]), [], same([t2]), same([t3])]


def test_the_slot_moves_only_to_what_confirm_was_given(source: Source) -> None:
    initial = source.confirmed()
    for key in (1, 2, 3):
        source.sql.execute("INSERT INTO items VALUES (%s, 'k', 0)", (key,))
    # no watermark message: the read ends on a keepalive the reader asked for, with a WAL
    # end past ``end`` that the stream must not confirm by itself
    # (the insert position: pg_current_wal_lsn() lags it here, with synchronous_commit off)
    end = source.lsn("pg_current_wal_insert_lsn()")
    with ReplicationConnection.open(source.endpoint) as conn:
        stream = conn.start_replication(source.slot, initial, [source.publication])
        t1, t2, t3 = transactions(list(stream.transactions(end)))
        assert stream.wal_end >= end  # status updates went to the server, confirming nothing
        assert source.confirmed() == initial
        stream.confirm(t1.end_lsn)
        wait_for(lambda: source.confirmed() != initial, 10, "the slot taking the confirmed LSN")
        assert source.confirmed() == t1.end_lsn
        stream.confirm(t1.commit_lsn)  # behind: changes nothing
        with source.superuser() as admin:  # the reader is killed before confirming more
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.backend_pid,))
    wait_for(lambda: not slot_active(source), 10, "the slot's release")
    assert source.confirmed() == t1.end_lsn < t3.end_lsn
    with ReplicationConnection.open(source.endpoint) as conn:
        info = slot_info(conn, source.slot)
    assert info is not None and info.restart_lsn is not None and info.restart_lsn <= t1.end_lsn
    assert info.retained_wal_bytes is not None and info.retained_wal_bytes > 0
    # the next reader starts where the slot was confirmed and gets what was not
    assert same(transactions(source.read(t1.end_lsn, end))) == same([t2, t3])


def slot_active(source: Source) -> bool:
    with ReplicationConnection.open(source.endpoint) as conn:
        info = slot_info(conn, source.slot)
    assert info is not None
    return info.active


def test_a_dropped_connection_is_a_clear_error(source: Source) -> None:
    start = source.confirmed()
    source.sql.execute("INSERT INTO items VALUES (1, 'k', 0)")
    with ReplicationConnection.open(source.endpoint) as conn:
        stream = conn.start_replication(source.slot, start, [source.publication])
        with source.superuser() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.backend_pid,))
        with pytest.raises(SourceConnectionError, match="was lost") as lost:
            list(stream.transactions(Lsn.parse("FFFFFFFF/0")))
    assert "pgwire_slot" in str(lost.value) and "Read again from the last confirmed LSN" in str(
        lost.value
    )
    assert source.endpoint.password not in str(lost.value)


def test_an_end_the_wal_does_not_reach_is_a_clear_error(source: Source) -> None:
    start = source.confirmed()
    with ReplicationConnection.open(source.endpoint) as conn:
        stream = conn.start_replication(source.slot, start, [source.publication])
        with pytest.raises(SourceError, match="no further for 1s, short of the range end"):
            list(stream.transactions(Lsn.parse("FFFFFFFF/0"), stall_timeout_s=1))


def test_tls_and_a_refused_password(source: Source) -> None:
    verified = dataclasses.replace(
        source.endpoint, sslmode="verify-full", sslrootcert=str(source.pg.tls.ca)
    )
    with ReplicationConnection.open(verified) as conn:
        assert conn.tls_in_use
        assert conn.identify_system().database == source.endpoint.database
    wrong = dataclasses.replace(source.endpoint, password="not-the-password")
    with pytest.raises(SourceConnectionError, match="password authentication failed") as refused:
        ReplicationConnection.open(wrong)
    assert "not-the-password" not in str(refused.value) + repr(wrong)
    assert "REPLICATION attribute" in str(refused.value)


def test_slot_and_publication_errors_say_what_to_do(source: Source) -> None:
    start = source.confirmed()
    with ReplicationConnection.open(source.endpoint) as conn:
        with pytest.raises(ReplicationSlotError, match="does not exist"):
            conn.start_replication("no_such_slot", start, [source.publication])
        with pytest.raises(ReplicationSlotError, match="lower-case letters"):
            ensure_slot(conn, "Bad-Name")
        with pytest.raises(PublicationError, match=r"ALTER PUBLICATION .* ADD TABLE"):
            ensure_publication(conn, source.publication, [("public", "items"), ("public", "other")])
        source.sql.execute(
            "SELECT pg_create_logical_replication_slot('pgwire_other', 'test_decoding')"
        )
        try:
            with pytest.raises(ReplicationSlotError, match="plugin 'test_decoding'"):
                ensure_slot(conn, "pgwire_other")
        finally:
            assert drop_slot(conn, "pgwire_other")
        assert not drop_slot(conn, "pgwire_other")
        drop_publication(conn, source.publication)
        ensure_publication(conn, source.publication, [("public", "items")])  # created again
    source.sql.execute("INSERT INTO items VALUES (1, 'k', 0)")
    (done,) = transactions(source.read(start, source.watermark()))
    with ReplicationConnection.open(source.endpoint) as conn:
        stream = conn.start_replication(source.slot, start, [source.publication])
        with (  # one reader per slot
            ReplicationConnection.open(source.endpoint) as other,
            pytest.raises(ReplicationSlotError, match="another reader holds it"),
        ):
            other.start_replication(source.slot, start, [source.publication])
        stream.confirm(done.end_lsn)
        wait_for(lambda: source.confirmed() == done.end_lsn, 10, "the confirmation")
    with pytest.raises(ReplicationSlotError, match="past the requested start"):
        source.read(start, source.watermark())
