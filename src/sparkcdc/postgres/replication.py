"""A logical replication client of PostgreSQL's streaming replication protocol.

libpq (through psycopg's ``pq`` layer) opens the ``replication=database`` connection: it
does the startup, SCRAM-SHA-256 / md5 / trust authentication and TLS, and carries the
CopyBoth stream of START_REPLICATION, which psycopg's own API has no call for. Everything
inside the stream is decoded here by pure functions (``copyboth``, ``pgoutput``,
``transactions``). Commands: https://www.postgresql.org/docs/current/protocol-replication.html

    >>> with ReplicationConnection.open(endpoint) as conn:          # doctest: +SKIP
    ...     stream = conn.start_replication("sparkcdc_slot", start, ["sparkcdc_pub"])
    ...     for transaction in stream.transactions(end):
    ...         keep(transaction)
    ...     stream.confirm(end)  # only once what was kept is durable

The slot's ``confirmed_flush_lsn`` moves only with ``confirm(lsn)``: the standby status
updates this client sends report that LSN and nothing ahead of it.
"""

from __future__ import annotations

import codecs
import re
import select
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType

from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.conninfo import make_conninfo

from sparkcdc.errors import (
    ProtocolError,
    ReplicationSlotError,
    SourceConnectionError,
    SourceError,
)
from sparkcdc.postgres.copyboth import (
    PrimaryKeepalive,
    XLogData,
    decode_copy_message,
    standby_status_update,
)
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import (
    Begin,
    DecodeContext,
    LogicalMessage,
    Relation,
    decode_message,
)
from sparkcdc.postgres.transactions import Transaction, TransactionAssembler

# pgoutput's protocol version by server version (server_version_num): 2 streams large
# in-progress transactions (PostgreSQL 14), 3 adds two-phase (15), 4 parallel streaming (16).
_PROTOCOL_BY_SERVER = ((160000, 4), (150000, 3), (140000, 2), (0, 1))
STREAMING_PROTOCOL = 2
# Server encodings whose Python codec name differs from a lookup of the name itself.
_ENCODINGS = {"UTF8": "utf-8", "SQL_ASCII": "ascii", "LATIN1": "latin-1", "WIN1252": "cp1252"}
# The text forms values.py reads: the output functions follow the session's settings, and
# the walsender's are the connection's (whatever the server's defaults are).
SESSION_SETTINGS = {
    "datestyle": "ISO",
    "intervalstyle": "iso_8601",
    "bytea_output": "hex",
    "timezone": "UTC",
    "extra_float_digits": "3",
}


@dataclass(frozen=True)
class PostgresEndpoint:
    """Where and as whom to connect; the password never appears in a message or repr."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    sslmode: str = "prefer"
    sslrootcert: str | None = None
    connect_timeout_s: int = 10

    def where(self) -> str:
        """``user@host:port/database``, for messages."""
        return f"{self.user}@{self.host}:{self.port}/{self.database}"

    def conninfo(self, *, replication: bool) -> str:
        options: dict[str, str | int] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": self.database,
            "sslmode": self.sslmode,
            "connect_timeout": self.connect_timeout_s,
            "application_name": "sparkcdc",
            "options": " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS.items()),
        }
        if self.sslrootcert:
            options["sslrootcert"] = self.sslrootcert
        if replication:
            options["replication"] = "database"
        return make_conninfo(**options)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SystemIdentity:
    """IDENTIFY_SYSTEM's answer."""

    system_id: str  # the cluster's unique identifier
    timeline: int
    wal_position: Lsn  # the current WAL flush location
    database: str


def quote_identifier(name: str) -> str:
    """An SQL identifier, always double-quoted.

    >>> quote_identifier('a"b')
    '"a""b"'
    """
    if "\0" in name:
        raise SourceError(f"the name {name!r} holds a NUL character, which PostgreSQL refuses")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """An SQL string literal (standard_conforming_strings on, the default since 9.1).

    A replication connection takes the simple query protocol only, so values travel quoted.

    >>> quote_literal("it's")
    "'it''s'"
    """
    if "\0" in value:
        raise SourceError(f"the value {value!r} holds a NUL character, which PostgreSQL refuses")
    return "'" + value.replace("'", "''") + "'"


_SLOT_NAME_RE = re.compile(r"^[a-z0-9_]{1,63}$")


def check_slot_name(name: str) -> str:
    """A replication slot name as PostgreSQL allows it: lower-case letters, digits, '_'."""
    if not _SLOT_NAME_RE.match(name):
        raise ReplicationSlotError(
            f"replication slot name {name!r} is not one PostgreSQL allows: use 1 to 63 "
            "lower-case letters, digits and underscores (like 'sparkcdc_orders')"
        )
    return name


Row = tuple[str | None, ...]


class ReplicationConnection:
    """One ``replication=database`` connection: commands, SQL, then at most one stream."""

    def __init__(self, pgconn: pq.abc.PGconn, endpoint: PostgresEndpoint) -> None:
        self._pgconn = pgconn
        self.endpoint = endpoint
        self.server_version = pgconn.server_version
        encoding = pgconn.parameter_status(b"server_encoding") or b"UTF8"
        self.encoding = _python_encoding(encoding.decode())

    @classmethod
    def open(cls, endpoint: PostgresEndpoint) -> ReplicationConnection:
        pgconn = pq.PGconn.connect(endpoint.conninfo(replication=True).encode())
        if pgconn.status != pq.ConnStatus.OK:
            reason = pgconn.get_error_message().strip()
            pgconn.finish()
            raise SourceConnectionError(
                f"cannot open a replication connection to PostgreSQL {endpoint.where()}: "
                f"{reason}. Check that the server runs, that pg_hba.conf has a 'replication' "
                "line for this host and user, and that the user has the REPLICATION attribute"
            )
        return cls(pgconn, endpoint)

    def __enter__(self) -> ReplicationConnection:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._pgconn.finish()

    @property
    def tls_in_use(self) -> bool:
        return self._pgconn.ssl_in_use

    @property
    def backend_pid(self) -> int:
        return self._pgconn.backend_pid

    @property
    def protocol_version(self) -> int:
        """The newest pgoutput protocol version this server speaks."""
        return next(v for since, v in _PROTOCOL_BY_SERVER if self.server_version >= since)

    def query(self, command: str) -> list[Row]:
        """Run one command or SQL statement (simple query protocol); rows as text."""
        try:
            result = self._pgconn.exec_(command.encode(self.encoding))
        except pg_errors.OperationalError as lost:
            raise self._lost(command, str(lost)) from None
        if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY):
            return []
        if result.status == pq.ExecStatus.TUPLES_OK:
            return [
                tuple(
                    None
                    if (value := result.get_value(row, column)) is None
                    else value.decode(self.encoding)
                    for column in range(result.nfields)
                )
                for row in range(result.ntuples)
            ]
        if self._pgconn.status != pq.ConnStatus.OK:
            raise self._lost(command, self._pgconn.get_error_message())
        message = result.get_error_message(self.encoding).strip()
        sqlstate = result.error_field(pq.DiagnosticField.SQLSTATE) or b""
        raise CommandError(
            f"PostgreSQL {self.endpoint.where()} refused {_shorten(command)!r}: {message}",
            sqlstate.decode(),
        )

    def _lost(self, command: str, reason: str) -> SourceConnectionError:
        return SourceConnectionError(
            f"the replication connection to PostgreSQL {self.endpoint.where()} was lost "
            f"during {_shorten(command)!r}: {reason.strip()}. Reconnect and read again from "
            "the last confirmed LSN"
        )

    def identify_system(self) -> SystemIdentity:
        (row,) = self.query("IDENTIFY_SYSTEM")
        system_id, timeline, position, database = row
        return SystemIdentity(
            system_id or "", int(timeline or 0), Lsn.parse(position or "0/0"), database or ""
        )

    def start_replication(
        self,
        slot: str,
        start: Lsn,
        publications: Sequence[str],
        *,
        protocol_version: int | None = None,
        streaming: bool = True,
        messages: bool = True,
        binary: bool = False,
    ) -> ReplicationStream:
        """START_REPLICATION SLOT ... LOGICAL ``start`` with pgoutput's options.

        ``protocol_version``: the server's newest by default. ``streaming``: large
        in-progress transactions arrive in segments (where the protocol has it, 2+).
        ``messages``: pg_logical_emit_message's messages too. ``binary``: values in their
        types' binary send format instead of text.
        """
        version = protocol_version or self.protocol_version
        if not publications:
            raise SourceError("START_REPLICATION with pgoutput needs at least one publication")
        options = {
            "proto_version": str(version),
            "publication_names": ",".join(quote_identifier(name) for name in publications),
        }
        if messages:
            options["messages"] = "true"
        if binary:
            options["binary"] = "true"
        if streaming and version >= STREAMING_PROTOCOL:
            options["streaming"] = "on"
        self._check_start(slot, start)
        rendered = ", ".join(
            f"{quote_identifier(k)} {quote_literal(v)}" for k, v in options.items()
        )
        command = f"START_REPLICATION SLOT {check_slot_name(slot)} LOGICAL {start} ({rendered})"
        self._pgconn.send_query(command.encode(self.encoding))
        result = self._pgconn.get_result()
        if result is None or result.status != pq.ExecStatus.COPY_BOTH:
            if self._pgconn.status != pq.ConnStatus.OK:
                raise self._lost(command, self._pgconn.get_error_message())
            message = "" if result is None else result.get_error_message(self.encoding)
            while self._pgconn.get_result() is not None:
                pass
            raise ReplicationSlotError(
                f"PostgreSQL {self.endpoint.where()} refused to stream slot {slot!r} from "
                f"{start}: {message.strip()}. If the slot is "
                "active, another reader holds it: stop that one first"
            )
        return ReplicationStream(self, slot, start, version)

    def _check_start(self, slot: str, start: Lsn) -> None:
        """The server would silently start a slot at its confirmed_flush_lsn when asked for
        an earlier place: what lies between was confirmed, so it is refused here."""
        rows = self.query(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots "
            f"WHERE slot_name = {quote_literal(check_slot_name(slot))}"
        )
        if not rows:
            raise ReplicationSlotError(
                f"replication slot {slot!r} does not exist on {self.endpoint.where()}: create "
                "it first (sparkcdc.postgres.slots.ensure_slot)"
            )
        confirmed = Lsn.parse(rows[0][0] or "0/0")
        if confirmed > start:
            raise ReplicationSlotError(
                f"replication slot {slot!r} on {self.endpoint.where()} has confirmed WAL up "
                f"to {confirmed}, past the requested start {start}: the changes in between are "
                "no longer in the slot. Start at or after its confirmed_flush_lsn, or take a "
                "new snapshot of the tables"
            )


class CommandError(SourceError):
    """PostgreSQL refused a command; ``sqlstate`` says why (42710: the object exists)."""

    def __init__(self, message: str, sqlstate: str = "") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate

    def __reduce__(self) -> tuple[type[CommandError], tuple[str, str]]:
        return (CommandError, (str(self), self.sqlstate))


# A reader asks the server for a keepalive (whose WAL end says how far it has sent)
# when nothing arrived for this long; the server answers at once.
POLL_INTERVAL_S = 0.5


class ReplicationStream:
    """The CopyBoth stream of one START_REPLICATION: read, decode, confirm."""

    def __init__(
        self, connection: ReplicationConnection, slot: str, start: Lsn, protocol_version: int
    ) -> None:
        self.connection = connection
        self.slot = slot
        self.start = start
        self.protocol_version = protocol_version
        self.relations: dict[int, Relation] = {}  # the shapes the server sent, by table OID
        self.wal_end = start  # how far the server has said it sent (keepalives)
        self._confirmed = Lsn(0)  # Lsn(0): nothing confirmed by this stream yet
        self._assembler = TransactionAssembler()
        # what a range read past its end: the next range starts with it
        self._held: Begin | Transaction | LogicalMessage | None = None
        self._progress_wal_end = start

    @property
    def confirmed(self) -> Lsn:
        return self._confirmed

    def confirm(self, lsn: Lsn) -> None:
        """Tell the server everything before ``lsn`` is kept: the slot's
        ``confirmed_flush_lsn`` may move up to ``lsn`` and WAL before it may go.

        Give a Transaction's ``end_lsn`` (or a range's end) once the sink has committed it;
        the stream never confirms anything by itself. A smaller LSN than one confirmed
        before changes nothing.
        """
        self._confirmed = max(self._confirmed, lsn)
        self._send_status(reply_requested=False)

    def _send_status(self, *, reply_requested: bool) -> None:
        update = standby_status_update(
            self._confirmed, datetime.now(UTC), reply_requested=reply_requested
        )
        pgconn = self.connection._pgconn
        try:
            pgconn.put_copy_data(update)
            pgconn.flush()
        except pg_errors.OperationalError as lost:
            raise self._lost(str(lost)) from None

    def _lost(self, reason: str) -> SourceConnectionError:
        return SourceConnectionError(
            f"the replication stream of slot {self.slot!r} from PostgreSQL "
            f"{self.connection.endpoint.where()} was lost after WAL {self.wal_end}: "
            f"{reason.strip()}. Read again from the last confirmed LSN "
            f"({self._confirmed if self._confirmed.value else self.start}); nothing after it "
            "was confirmed"
        )

    def messages(self, timeout_s: float) -> Iterator[XLogData | PrimaryKeepalive | None]:
        """The stream's messages as they arrive; None after ``timeout_s`` without one.

        Keepalives that ask for a reply are answered (with the confirmed LSN only).
        """
        pgconn = self.connection._pgconn
        while True:
            try:
                size, data = pgconn.get_copy_data(1)
            except pg_errors.OperationalError as lost:
                raise self._lost(str(lost)) from None
            if size > 0:
                message = decode_copy_message(bytes(data))
                if isinstance(message, PrimaryKeepalive):
                    self.wal_end = max(self.wal_end, message.wal_end)
                    if message.reply_requested:
                        self._send_status(reply_requested=False)
                yield message
            elif size == -1:  # the server ended the COPY: an error or a shutdown
                result = pgconn.get_result()
                reason = "" if result is None else result.get_error_message()
                raise self._lost(reason or "the server ended the stream")
            else:
                readable, _, _ = select.select([pgconn.socket], [], [], timeout_s)
                if not readable:
                    yield None
                    continue
                try:
                    pgconn.consume_input()
                except pg_errors.OperationalError as lost:
                    raise self._lost(str(lost)) from None

    def transactions(
        self, end: Lsn, *, stall_timeout_s: float = 120.0
    ) -> Iterator[Transaction | LogicalMessage]:
        """The transactions committed in ``[start, end)`` (by commit LSN), in commit order,
        and the non-transactional logical messages in that range; then stop.

        It stops at the first transaction committed at or after ``end``, or when the server
        says it has sent all WAL before ``end`` (a keepalive). ``end`` must be a WAL
        position the server reaches: a commit's LSN, ``pg_current_wal_insert_lsn()``, or
        the LSN of a ``pg_logical_emit_message`` watermark (``pg_current_wal_lsn()`` is
        reached too, but lags commits made with ``synchronous_commit = off``). If the
        server sends nothing that moves towards ``end`` for ``stall_timeout_s``, a
        SourceError says so. Called again, it goes on with ``[end, next end)``: what it
        read past ``end`` is held for that range.
        """
        if end < self.start:
            raise SourceError(
                f"a range end {end} before the stream's position {self.start} (slot "
                f"{self.slot!r}): ranges of one stream follow each other"
            )
        held, self._held = self._held, None
        for item in self._items(held, end, stall_timeout_s):
            if isinstance(item, Begin):
                self._held = item  # the first transaction past the range: not read further
                break
            position = item.lsn if isinstance(item, LogicalMessage) else item.commit_lsn
            if position >= end:
                self._held = item
                break
            if position >= self.start:
                yield item
        self.start = end

    def _items(
        self,
        held: Begin | Transaction | LogicalMessage | None,
        end: Lsn,
        stall_timeout_s: float,
    ) -> Iterator[Begin | Transaction | LogicalMessage]:
        """Whole transactions and non-transactional messages as they complete, and the
        Begin of a transaction that commits at or after ``end`` (which ends the range)."""
        assembler = self._assembler
        progress_at = time.monotonic()
        if held is not None:
            if not isinstance(held, Begin) or held.final_lsn >= end:
                yield held
                if isinstance(held, Begin):
                    return
            else:
                assembler.feed(held)
        for message in self.messages(POLL_INTERVAL_S):
            if message is None:
                self._send_status(reply_requested=True)  # ask how far the server is
            elif isinstance(message, PrimaryKeepalive):
                if self.wal_end >= end and not assembler.in_transaction:
                    return
                if message.wal_end > self._progress_wal_end:
                    self._progress_wal_end, progress_at = message.wal_end, time.monotonic()
            else:
                progress_at = time.monotonic()
                decoded = decode_message(
                    message.data,
                    DecodeContext(in_stream=assembler.in_stream, encoding=self.connection.encoding),
                )
                if isinstance(decoded, Relation):
                    self.relations[decoded.oid] = decoded
                if isinstance(decoded, LogicalMessage) and not decoded.transactional:
                    yield decoded
                    continue
                if isinstance(decoded, Begin) and decoded.final_lsn >= end:
                    yield decoded
                    return
                done = assembler.feed(decoded)
                if done is not None:
                    yield done
            if time.monotonic() - progress_at > stall_timeout_s:
                raise SourceError(
                    f"PostgreSQL {self.connection.endpoint.where()} has sent WAL up to "
                    f"{self.wal_end} and no further for {stall_timeout_s:.0f}s, short of the "
                    f"range end {end} (slot {self.slot!r}): give an end the WAL reaches, "
                    "such as pg_current_wal_insert_lsn() or a pg_logical_emit_message watermark"
                )


def _python_encoding(server_encoding: str) -> str:
    name = _ENCODINGS.get(server_encoding.upper(), server_encoding)
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise ProtocolError(
            f"the database's encoding {server_encoding!r} has no Python codec here; use a "
            "UTF8 database for the PostgreSQL source"
        ) from None


def _shorten(command: str, limit: int = 200) -> str:
    return command if len(command) <= limit else command[:limit] + "..."
