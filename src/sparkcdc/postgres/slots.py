"""Replication slots and publications, created, checked and dropped explicitly.

A logical slot keeps the WAL its reader has not confirmed, for ever: sparkcdc creates one
only when asked, reports what it retains, and drops it only when asked. Each function runs
on a ``ReplicationConnection`` (replication commands and SQL both pass there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparkcdc.errors import PublicationError, ReplicationSlotError
from sparkcdc.model.dialect import StreamHold
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.replication import (
    CommandError,
    ReplicationConnection,
    check_slot_name,
    quote_identifier,
    quote_literal,
)
from sparkcdc.postgres.types import SqlRunner

PLUGIN = "pgoutput"
CREATED_BY = "created by sparkcdc"  # the comment on a publication sparkcdc created
_DUPLICATE_OBJECT = "42710"


@dataclass(frozen=True)
class SlotInfo:
    name: str
    plugin: str
    database: str
    active: bool
    restart_lsn: Lsn | None  # the oldest WAL the slot keeps
    confirmed_flush_lsn: Lsn | None  # where a reader of the slot starts: all before is confirmed
    retained_wal_bytes: int | None  # WAL kept for the slot, behind the server's position
    active_pid: int | None = None  # the walsender streaming it, if one does
    # PostgreSQL 13+: reserved / extended / unreserved (beyond max_slot_wal_keep_size, about
    # to lose WAL) / lost (the WAL it needs is gone); None before 13
    wal_status: str | None = None

    def hold(self) -> StreamHold:
        """The slot as ``sparkcdc status`` shows it."""
        return StreamHold(
            f"replication slot {self.name}",
            self.retained_wal_bytes,
            (
                ("active pid", "none" if self.active_pid is None else str(self.active_pid)),
                ("confirmed_flush_lsn", str(self.confirmed_flush_lsn)),
                ("restart_lsn", str(self.restart_lsn)),
                ("wal_status", self.wal_status or "unknown"),
            ),
        )


def slot_info(conn: ReplicationConnection, name: str) -> SlotInfo | None:
    """The slot ``name`` as pg_replication_slots shows it, or None if there is none."""
    return read_slot(conn, name, conn.endpoint.where())


def read_slot(conn: SqlRunner, name: str, where: str) -> SlotInfo | None:
    """``slot_info`` on any connection (a plain SQL one takes no WAL sender); ``where``:
    the server, for messages."""
    # wal_status (13+) read through to_jsonb: NULL where the server has no such column
    rows = conn.query(
        "SELECT slot_name, plugin, slot_type, database, active, restart_lsn, "
        "confirmed_flush_lsn, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, "
        "active_pid, to_jsonb(s) ->> 'wal_status' "
        f"FROM pg_replication_slots s WHERE slot_name = {quote_literal(check_slot_name(name))}"
    )
    if not rows:
        return None
    slot, plugin, kind, database, active, restart, confirmed, retained, pid, status = rows[0]
    if kind != "logical":
        raise ReplicationSlotError(
            f"replication slot {name!r} on {where} is a {kind} slot: expected "
            f"a logical slot of plugin {PLUGIN}. Choose another slot.name"
        )
    return SlotInfo(
        slot or name,
        plugin or "",
        database or "",
        active == "t",
        Lsn.parse(restart) if restart else None,
        Lsn.parse(confirmed) if confirmed else None,
        int(retained) if retained is not None else None,
        int(pid) if pid is not None else None,
        status,
    )


def ensure_slot(conn: ReplicationConnection, name: str) -> SlotInfo:
    """The logical slot ``name`` for pgoutput in the connection's database: created if
    missing (CREATE_REPLICATION_SLOT ... LOGICAL pgoutput), checked if present."""
    existing = slot_info(conn, name)
    if existing is None:
        try:
            conn.query(
                f"CREATE_REPLICATION_SLOT {check_slot_name(name)} LOGICAL {PLUGIN} "
                "NOEXPORT_SNAPSHOT"
            )
        except CommandError as error:
            if error.sqlstate != _DUPLICATE_OBJECT:  # else another reader created it meanwhile
                raise ReplicationSlotError(
                    f"cannot create replication slot {name!r} on {conn.endpoint.where()}: "
                    f"{error}. Check max_replication_slots (all slots may be in use: see "
                    "pg_replication_slots) and wal_level = logical"
                ) from None
        existing = slot_info(conn, name)
        assert existing is not None
    if existing.plugin != PLUGIN or existing.database != conn.endpoint.database:
        raise ReplicationSlotError(
            f"replication slot {name!r} on {conn.endpoint.where()} decodes with plugin "
            f"{existing.plugin!r} for database {existing.database!r}: expected {PLUGIN!r} for "
            f"{conn.endpoint.database!r}. Choose another slot.name, or drop that slot "
            f"(SELECT pg_drop_replication_slot({quote_literal(name)})) if nothing needs it"
        )
    return existing


def drop_slot(conn: ReplicationConnection, name: str) -> bool:
    """Drop the slot (its retained WAL is freed); False if there was none."""
    if slot_info(conn, name) is None:
        return False
    try:
        conn.query(f"DROP_REPLICATION_SLOT {check_slot_name(name)}")
    except CommandError as error:
        raise ReplicationSlotError(
            f"cannot drop replication slot {name!r} on {conn.endpoint.where()}: {error}. "
            "If it is active, stop the reader that holds it first"
        ) from None
    return True


def ensure_publication(
    conn: ReplicationConnection, name: str, tables: Sequence[tuple[str, str]]
) -> None:
    """The publication ``name`` publishing (at least) ``tables`` (schema, table): created
    if missing; if present, checked to publish each table and every operation."""
    quoted = ", ".join(f"{quote_identifier(s)}.{quote_identifier(t)}" for s, t in tables)
    found = conn.query(
        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication "
        f"WHERE pubname = {quote_literal(name)}"
    )
    if not found:
        try:
            conn.query(f"CREATE PUBLICATION {quote_identifier(name)} FOR TABLE {quoted}")
            # marked, so that a cleanup drops only publications sparkcdc made
            conn.query(
                f"COMMENT ON PUBLICATION {quote_identifier(name)} IS {quote_literal(CREATED_BY)}"
            )
        except CommandError as error:
            if error.sqlstate != _DUPLICATE_OBJECT:
                raise PublicationError(
                    f"cannot create publication {name!r} on {conn.endpoint.where()}: {error}. "
                    "Creating a publication takes ownership of its tables; a database owner "
                    f"can run: CREATE PUBLICATION {quote_identifier(name)} FOR TABLE {quoted}"
                ) from None
        found = conn.query(
            "SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication "
            f"WHERE pubname = {quote_literal(name)}"
        )
    if any(flag != "t" for flag in found[0]):
        raise PublicationError(
            f"publication {name!r} on {conn.endpoint.where()} does not publish every operation "
            f"(insert, update, delete, truncate: {found[0]}): run ALTER PUBLICATION "
            f"{quote_identifier(name)} SET (publish = 'insert, update, delete, truncate')"
        )
    published = {
        (schema, table)
        for schema, table in conn.query(
            "SELECT schemaname, tablename FROM pg_publication_tables "
            f"WHERE pubname = {quote_literal(name)}"
        )
    }
    missing = [table for table in tables if table not in published]
    if missing:
        names = ", ".join(f"{quote_identifier(s)}.{quote_identifier(t)}" for s, t in missing)
        raise PublicationError(
            f"publication {name!r} on {conn.endpoint.where()} does not publish {names}: run "
            f"ALTER PUBLICATION {quote_identifier(name)} ADD TABLE {names}"
        )


def drop_publication(conn: ReplicationConnection, name: str) -> None:
    """Drop the publication if it exists."""
    conn.query(f"DROP PUBLICATION IF EXISTS {quote_identifier(name)}")


def release_stream(conn: ReplicationConnection, slot: str, publication: str) -> list[str]:
    """Drop what a stream keeps on the server: its slot (refused while a reader streams
    it) and its publication, if sparkcdc created it and no other slot of the database
    may read through it. Says what was dropped, and what was left and why."""
    info = slot_info(conn, slot)
    where = conn.endpoint.where()
    if info is not None and info.active:
        raise ReplicationSlotError(
            f"replication slot {slot!r} on {where} is being streamed (pid {info.active_pid}): "
            "stop the pipeline that reads it first (SELECT pg_terminate_backend("
            f"{info.active_pid}) if it is a leftover), then clean up again"
        )
    said = []
    if info is None:
        said.append(f"replication slot {slot}: none on {where}")
    else:
        drop_slot(conn, slot)
        kept = "unknown" if info.retained_wal_bytes is None else f"{info.retained_wal_bytes:,}"
        said.append(f"replication slot {slot}: dropped ({kept} bytes of WAL it kept freed)")
    found = conn.query(
        "SELECT obj_description(oid, 'pg_publication') FROM pg_publication "
        f"WHERE pubname = {quote_literal(publication)}"
    )
    others = [
        name
        for (name,) in conn.query(
            "SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'logical' AND "
            f"plugin = {quote_literal(PLUGIN)} AND database = current_database() AND "
            f"slot_name <> {quote_literal(slot)} AND NOT temporary"
        )
    ]
    drop = f"DROP PUBLICATION {quote_identifier(publication)}"
    if not found:
        said.append(f"publication {publication}: none")
    elif found[0][0] != CREATED_BY:
        said.append(
            f"publication {publication}: kept (not created by sparkcdc); if nothing reads "
            f"through it: {drop}"
        )
    elif others:
        said.append(
            f"publication {publication}: kept, other slots may read through it "
            f"({', '.join(str(o) for o in others)}); when none does: {drop}"
        )
    else:
        drop_publication(conn, publication)
        said.append(f"publication {publication}: dropped")
    return said
