"""The PostgreSQL source behind the source interface (:mod:`sparkcdc.model.dialect`).

Positions are :class:`Lsn`; the change stream is the replication slot ``slot.name``
decoded with pgoutput over the publication ``debezium.publication.name``; tables are
``(schema, table)`` pairs (the layers' "database" is the schema). The slot moves only with
``commit``: what Spark committed (DESIGN.md §12.2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import psycopg

from sparkcdc.errors import ConfigError, ReplicationSlotError, SnapshotError, SourceError
from sparkcdc.model.dialect import (
    CODE_POINT_COLLATION,
    CapturedSchemas,
    KeyRanking,
    RangeRead,
    Session,
    SourceDialect,
    StreamHold,
)
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.options import ServerIdRange, SourceOptions
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.tables import TableFilter
from sparkcdc.model.validation import ValidationIssue
from sparkcdc.postgres import catalog
from sparkcdc.postgres.changes import ChangeDecoder
from sparkcdc.postgres.chunks import (
    INTEGER_KEYS,
    TEXT_KEYS,
    UUID_KEYS,
    BackfillSlot,
    PgChunkReader,
    PgSplitQueries,
)
from sparkcdc.postgres.ddl import PostgresDdl
from sparkcdc.postgres.follower import LsnFollower
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.options import PostgresSourceOptions
from sparkcdc.postgres.pgoutput import LogicalMessage
from sparkcdc.postgres.positions import watermark
from sparkcdc.postgres.read_back import read_column_pages
from sparkcdc.postgres.replication import PostgresEndpoint, ReplicationConnection, quote_literal
from sparkcdc.postgres.session import KeptSession, sql_connection
from sparkcdc.postgres.slots import (
    ensure_publication,
    ensure_slot,
    read_slot,
    release_stream,
    slot_info,
)
from sparkcdc.postgres.types import TypeCatalog
from sparkcdc.postgres.validator import check_source, validate_source

log = logging.getLogger(__name__)

_OBJECT_IN_USE = "55006"


def endpoint_of(options: PostgresSourceOptions) -> PostgresEndpoint:
    """Where the options' connections go."""
    assert options.database_name is not None  # PostgresSourceOptions requires it
    return PostgresEndpoint(
        options.hostname,
        options.port,
        options.username,
        options.password.get_secret_value(),
        options.database_name,
        connect_timeout_s=max(1, int(options.connect_timeout_s)),
    )


class SlotClaim:
    """The stream's hold on its replication slot: created if missing; refused while another
    reader streams it; ``check`` that it is still there. The slot stays at ``close``: it is
    dropped only when asked (it keeps the WAL the stream has yet to read)."""

    def __init__(self, endpoint: PostgresEndpoint, slot: str) -> None:
        self.endpoint = endpoint
        self.slot = slot

    @classmethod
    def take(
        cls,
        endpoint: PostgresEndpoint,
        slot: str,
        publication: str,
        tables: Sequence[tuple[str, str]],
    ) -> SlotClaim:
        with ReplicationConnection.open(endpoint) as conn:
            info = ensure_slot(conn, slot)
            if tables:
                ensure_publication(conn, publication, tables)
            if info.active:
                pid = conn.query(
                    "SELECT active_pid FROM pg_replication_slots WHERE slot_name = "
                    + quote_literal(slot)
                )
                holder = pid[0][0] if pid else "?"
                raise ReplicationSlotError(
                    f"replication slot {slot!r} on {endpoint.where()} is streamed by another "
                    f"reader (pid {holder}): one slot has one reader. Stop that one "
                    f"(SELECT pg_terminate_backend({holder}) if it is a leftover), or give this "
                    "stream a slot.name of its own"
                )
        return cls(endpoint, slot)

    def check(self) -> None:
        with ReplicationConnection.open(self.endpoint) as conn:
            if slot_info(conn, self.slot) is None:
                raise ReplicationSlotError(
                    f"replication slot {self.slot!r} on {self.endpoint.where()} was dropped "
                    "while the stream ran: the changes since its last commit are gone. Take "
                    "a new snapshot (or start again from latest-offset with a new checkpoint)"
                )

    def close(self) -> None:
        """The slot stays (``sparkcdc`` drops it only when asked)."""


class _Decoding:
    """A ``ChangeDecoder`` whose types beyond the built-in ones are read from ``pg_type`` on
    a SQL connection of its own, opened when first needed (the stream is busy with COPY)."""

    def __init__(
        self,
        endpoint: PostgresEndpoint,
        captures: Callable[[str, str], bool],
        rows: bool,
        mode: Any,
        known: Sequence[TableSchema] = (),
    ) -> None:
        self._endpoint = endpoint
        self._types = TypeCatalog.builtin()
        self._sql: psycopg.Connection[Any] | None = None
        self.decoder = ChangeDecoder(
            captures,
            self._load_types,
            rows=rows,
            mode=mode,
            known={(t.database, t.table): t for t in known},
        )

    def _load_types(self, oids: Iterable[int]) -> TypeCatalog:
        wanted = self._types.missing(oids)
        if wanted:
            if self._sql is None:
                self._sql = sql_connection(self._endpoint)
            self._types = self._types.load(catalog.SqlRows(self._sql), wanted)
        return self._types

    def __enter__(self) -> _Decoding:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sql is not None:
            self._sql.close()


class _NoRanking:
    """Chunk keys Python orders only (``key_collation``): nothing is ranked by the server."""

    def ranks(self, collation: str, keys: Sequence[Any], bounds: Sequence[Any]) -> list[int]:
        raise SnapshotError(f"no server ranking of keys under {collation!r} on PostgreSQL yet")

    def close(self) -> None:
        """Nothing held."""


class PostgresDialect(SourceDialect[Lsn]):
    """The PostgreSQL source: a logical replication slot (pgoutput) is its change stream."""

    type_name = "postgres-cdc"
    options_type = PostgresSourceOptions
    offset_key = "wal"

    def __init__(self, options: SourceOptions) -> None:
        self._backfill: BackfillSlot | None = None
        if not isinstance(options, PostgresSourceOptions):
            raise ConfigError(
                "the postgres-cdc source takes PostgreSQL options (slot.name, schema-name, ...): "
                "parse them with sparkcdc.model.dialect.options_for('postgres-cdc', options)"
            )
        self.options = options
        self.settings = endpoint_of(options)
        # scan.startup.mode=snapshot reads the chunks and ends: no slot of its own to keep
        # WAL after it (each chunk's backfill reads a temporary one)
        self._streams = options.scan_startup_mode != "snapshot"

    # -- the server -------------------------------------------------------------------

    def _tables(self) -> list[tuple[str, str]]:
        with sql_connection(self.settings) as conn:
            return catalog.match_tables(conn, self.options.table_filter())

    def check_server(self) -> None:
        options = self.options
        check_source(self.settings, options.slot_name, options.publication_name, self._tables())

    def validate(self) -> list[ValidationIssue]:
        options = self.options
        return validate_source(
            self.settings, options.slot_name, options.publication_name, self._tables()
        )

    def server_name(self) -> str:
        where: str = self.settings.where()
        return where

    def session(self, database: str | None = None) -> KeptSession:
        """A kept connection to the source's database (``database``, a schema here, is
        the tables' own qualifier: no default schema is set)."""
        return KeptSession(self.settings)

    def follower(self) -> LsnFollower:
        """The driver's watch; the slot and publication are in place before it hands out a
        position, so every offset is a place the slot holds (a snapshot's first one too)."""
        self._ensure_stream()
        return LsnFollower(self.settings, self._locked_schemas)

    def _locked_schemas(self, conn: Any) -> tuple[TableSchema, ...]:
        """The tables the options match now, locked against DDL in ``conn``'s open
        transaction, and their schemas (the follower's, taken with its watermark)."""
        names = self.match_tables(conn, self.options.table_filter())
        catalog.lock_for_schema_read(conn, names)
        return tuple(self.load_schema(conn, schema, table) for schema, table in names)

    def _ensure_stream(self) -> None:
        """The slot (not in snapshot mode), and the publication of the captured tables the
        stream and the backfills decode through: created if missing."""
        options = self.options
        tables = self._tables()
        with ReplicationConnection.open(self.settings) as replication:
            if self._streams:
                ensure_slot(replication, options.slot_name)
            if tables:
                ensure_publication(replication, options.publication_name, tables)

    def claim_readers(self, ids: ServerIdRange) -> SlotClaim:
        """The replication slot (``ids``, MySQL's server ids, mean nothing here)."""
        options = self.options
        return SlotClaim.take(
            self.settings, options.slot_name, options.publication_name, self._tables()
        )

    # -- tables -----------------------------------------------------------------------

    def match_tables(self, conn: Any, tables: TableFilter) -> list[tuple[str, str]]:
        return catalog.match_tables(conn, tables)

    def check_databases(self, conn: Any, databases: Iterable[str]) -> None:
        """The WAL holds every schema of the database; which tables the stream carries is
        the publication's (checked by ``check_server`` and ``claim_readers``)."""

    def load_schema(self, conn: Any, database: str, table: str) -> TableSchema:
        return catalog.load_schema(conn, database, table, self.options.decimal_handling_mode)

    def capture_schemas(self, names: Sequence[tuple[str, str]]) -> CapturedSchemas[Lsn]:
        # the tables locked against DDL while their schemas and the position are read: a
        # schema change of theirs commits after the position, and its Relation follows it
        with sql_connection(self.settings) as conn, conn.transaction():
            catalog.lock_for_schema_read(conn, names)
            tables = tuple(self.load_schema(conn, schema, table) for schema, table in names)
            position = watermark(conn)
        return CapturedSchemas(tables, position, rows_carry_columns=True)

    def unique_keys(self, conn: Any, database: str, table: str) -> list[tuple[str, ...]]:
        return catalog.unique_keys(conn, database, table)

    def shared_keys(
        self, conn: Any, database: str, table: str, columns: Sequence[str], limit: int
    ) -> list[tuple[Any, ...]]:
        return catalog.shared_keys(conn, database, table, columns, limit)

    def estimated_rows(self, conn: Any, database: str, table: str) -> int:
        return catalog.estimated_rows(conn, database, table)

    def create_table_statement(self, schema: TableSchema) -> str:
        return catalog.create_table_statement(schema)

    # -- positions --------------------------------------------------------------------

    def current_position(self, conn: Any) -> Lsn:
        return watermark(conn)

    def startup_position(self) -> Lsn:
        """latest-offset: a watermark taken after the slot exists (a slot created later
        would refuse a start before its creation) and the publication the stream decodes
        through publishes the captured tables (created if missing)."""
        self._ensure_stream()
        with sql_connection(self.settings) as conn:
            return watermark(conn)

    def position_from_offset(self, offset: dict[str, Any]) -> Lsn:
        return Lsn.from_offset(offset)

    def commit(self, position: Lsn) -> None:
        """Let the slot's ``confirmed_flush_lsn`` move up to ``position`` (never past it, and
        never back): ``pg_replication_slot_advance``. While a reader streams the slot the
        server refuses; the next commit moves it further then. Snapshot mode has no slot."""
        if not self._streams:
            return
        slot = self.options.slot_name
        with sql_connection(self.settings) as conn:
            row = conn.execute(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                [slot],
            ).fetchone()
            if row is None:
                raise ReplicationSlotError(
                    f"replication slot {slot!r} on {self.settings.where()} is gone: the "
                    f"changes after the last commit cannot be read. Take a new snapshot"
                )
            if row[0] is not None and Lsn.parse(row[0]) >= position:
                return
            try:
                conn.execute(
                    "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", [slot, str(position)]
                )
            except psycopg.errors.ObjectInUse:
                log.info("slot %s is being read; its confirmed LSN moves at the next commit", slot)

    def stream_hold(self) -> StreamHold:
        """The slot: the WAL it retains (``pg_current_wal_lsn() - restart_lsn``), the pid
        streaming it, its confirmed and restart LSNs and ``wal_status``; read on a plain
        SQL connection (no WAL sender taken from a running stream's server)."""
        slot = self.options.slot_name
        with sql_connection(self.settings) as conn:
            info = read_slot(catalog.SqlRows(conn), slot, self.settings.where())
        if info is None:
            return StreamHold(
                f"replication slot {slot}", 0, (("exists", "no (the next run creates it)"),)
            )
        return info.hold()

    def release_stream(self) -> list[str]:
        """The slot dropped, and the publication if sparkcdc created it and no other slot
        may read through it (``slots.release_stream``)."""
        with ReplicationConnection.open(self.settings) as conn:
            return release_stream(conn, self.options.slot_name, self.options.publication_name)

    # -- the change stream ------------------------------------------------------------

    def _decoder(
        self,
        captures: Callable[[str, str], bool],
        rows: bool = True,
        known: Sequence[TableSchema] = (),
    ) -> _Decoding:
        return _Decoding(self.settings, captures, rows, self.options.decimal_handling_mode, known)

    def read_range(self, spec: RangeRead[Lsn]) -> Iterator[RowChanges | SchemaChange]:
        if spec.shares != 1:
            raise SourceError(
                "the PostgreSQL source reads a range in one part (its slot has one reader); "
                f"got share {spec.share} of {spec.shares}"
            )
        if not spec.start < spec.end:
            return
        options = self.options
        with (
            self._decoder(
                lambda schema, table: spec.captures(schema, table) or (schema, table) in spec.gone,
                spec.rows,
                spec.schemas,
            ) as decoding,
            ReplicationConnection.open(self.settings) as conn,
        ):
            stream = conn.start_replication(
                options.slot_name, spec.start, [options.publication_name]
            )
            for item in stream.transactions(spec.end):
                if not isinstance(item, LogicalMessage):
                    yield from decoding.decoder.changes(item)

    # -- the incremental snapshot (DESIGN.md §12.3) -----------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_backfill"] = None  # a live replication connection stays where it was made
        return state

    def _open_backfill(self) -> None:
        """A new backfill slot for the next chunk read (the last one's dropped)."""
        self._close_backfill()
        self._backfill = BackfillSlot(self.settings, self.options.slot_name)

    def _close_backfill(self) -> None:
        backfill, self._backfill = getattr(self, "_backfill", None), None
        if backfill is not None:
            backfill.close()

    def chunk_reader(self, conn: Any) -> PgChunkReader:
        return PgChunkReader(
            conn, self.options.decimal_handling_mode, self._open_backfill, self._close_backfill
        )

    def split_queries(
        self, conn: Session, schema: TableSchema, key_column: str, collation: str | None
    ) -> PgSplitQueries:
        if not isinstance(conn, KeptSession):
            raise TypeError(f"the splitter's queries run on a session, got {type(conn).__name__}")
        return PgSplitQueries(conn, schema, key_column)

    def key_collation(self, conn: Any, database: str, table: str, column: str) -> str | None:
        """None for an integer or uuid chunk key (Python orders it as the server does);
        ``CODE_POINT_COLLATION`` for text and varchar, which the chunk queries compare under
        "C" (a UTF-8 database's: code point order). Other keys are refused."""
        row = conn.execute(
            "SELECT t.typname, pg_encoding_to_char(d.encoding) FROM pg_attribute a "
            "JOIN pg_type t ON t.oid = a.atttypid "
            "JOIN pg_database d ON d.datname = current_database() "
            "WHERE a.attrelid = %s::regclass AND a.attname = %s",
            [catalog.quote_table(database, table), column],
        ).fetchone()
        type_name, encoding = (str(row[0]), str(row[1])) if row else ("?", "?")
        if type_name in INTEGER_KEYS or type_name in UUID_KEYS:
            return None
        if type_name in TEXT_KEYS and encoding == "UTF8":
            return CODE_POINT_COLLATION
        why = (
            f"of a {encoding} database (text keys are ordered by code point: a UTF8 database)"
            if type_name in TEXT_KEYS
            else f"of type {type_name}"
        )
        raise SnapshotError(
            f"the chunk key {column!r} of {database}.{table} is {why}: the PostgreSQL "
            "snapshot chunks by an integer (smallint, integer, bigint), uuid, text or "
            "varchar key. Set scan.incremental.snapshot.chunk.key-column to such a column, "
            "or use scan.startup.mode=latest-offset"
        )

    def key_ranking(self, conn: Any = None) -> KeyRanking:
        return _NoRanking()

    def read_backfill(
        self, schema: TableSchema, start: Lsn, end: Lsn, reader_id: int, settled: list[Lsn]
    ) -> Iterator[RowChanges | SchemaChange]:
        backfill, self._backfill = getattr(self, "_backfill", None), None
        if backfill is None:
            raise SnapshotError(
                f"the backfill of {schema.qualified_name} [{start}, {end}) has no slot: "
                "read_backfill follows a chunk reader's low() on this dialect"
            )
        db, name = schema.database, schema.table
        with self._decoder(lambda d, t: d == db and t == name) as decoding:
            for transaction in backfill.transactions(start, end, self.options.publication_name):
                yield from decoding.decoder.changes(transaction)

    # -- what the pipelines ask of the source ------------------------------------------

    def ddl(self) -> PostgresDdl:
        return PostgresDdl(self.options.decimal_handling_mode)

    def read_column(
        self, schema: TableSchema, keys: Sequence[Column], column: Column
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Keyset pages on the primary key (plain SELECTs, each read whole)."""
        return read_column_pages(
            self.settings, schema, keys, column, self.options.decimal_handling_mode
        )
