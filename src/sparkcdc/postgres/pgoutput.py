"""A pure decoder of the ``pgoutput`` plugin's logical replication messages.

``decode_message(payload, context)`` turns the bytes of one message (the data of one
XLogData) into a frozen dataclass; no sockets, no server state beyond the explicit
``DecodeContext``. Layouts follow
https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
(protocol versions 1-4): integers are big-endian, a String is NUL-terminated.

Tuple data gives each column as ``None`` (SQL NULL, 'n'), ``UNCHANGED_TOAST`` (a TOASTed
value the update did not change and the WAL does not carry, 'u'), ``str`` (text format,
't') or ``bytes`` (the type's binary send format, 'b'). ``UNCHANGED_TOAST`` is a marker
of its own type, never a value: whoever writes rows must resolve it or refuse it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum, IntEnum, IntFlag
from typing import Final

from sparkcdc.errors import ProtocolError
from sparkcdc.postgres.lsn import Lsn

# ------------------------------------------------------------------- layouts and constants

_INT8 = struct.Struct(">b")
_UINT8 = struct.Struct(">B")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_INT32 = struct.Struct(">i")
_UINT64 = struct.Struct(">Q")
_INT64 = struct.Struct(">q")

# Timestamps are microseconds since the PostgreSQL epoch, 2000-01-01 00:00:00 UTC.
POSTGRES_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)


class MessageType(bytes, Enum):
    """The first byte of each pgoutput message."""

    BEGIN = b"B"
    COMMIT = b"C"
    ORIGIN = b"O"
    RELATION = b"R"
    TYPE = b"Y"
    INSERT = b"I"
    UPDATE = b"U"
    DELETE = b"D"
    TRUNCATE = b"T"
    MESSAGE = b"M"
    STREAM_START = b"S"
    STREAM_STOP = b"E"
    STREAM_COMMIT = b"c"
    STREAM_ABORT = b"A"


class TupleKind(bytes, Enum):
    """The submessage byte before a TupleData in Insert / Update / Delete."""

    NEW = b"N"
    KEY = b"K"  # the old image holds the replica identity key columns only
    OLD = b"O"  # the old image is the whole row (REPLICA IDENTITY FULL)


class ColumnFormat(bytes, Enum):
    """The byte before each column of a TupleData."""

    NULL = b"n"
    UNCHANGED_TOAST = b"u"
    TEXT = b"t"
    BINARY = b"b"


class ReplicaIdentity(bytes, Enum):
    """``pg_class.relreplident``, as a Relation message carries it."""

    DEFAULT = b"d"  # the primary key
    NOTHING = b"n"
    FULL = b"f"
    INDEX = b"i"  # a chosen unique index


class ColumnFlag(IntFlag):
    KEY = 1  # the column is part of the replica identity key


class MessageFlag(IntFlag):
    TRANSACTIONAL = 1  # a Message emitted inside a transaction (pg_logical_emit_message(true,...))


class TruncateOption(IntFlag):
    CASCADE = 1
    RESTART_IDENTITY = 2


class StreamSegment(IntEnum):
    """Stream Start's flag: whether this is the transaction's first streamed segment."""

    LATER = 0
    FIRST = 1


class UnchangedToast:
    """The type of ``UNCHANGED_TOAST``: a TOASTed value the WAL does not carry."""

    _instance: UnchangedToast | None = None

    def __new__(cls) -> UnchangedToast:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"  # pickles as the module's singleton


UNCHANGED_TOAST: Final = UnchangedToast()

ColumnValue = str | bytes | UnchangedToast | None


# -------------------------------------------------------------------------- the messages


@dataclass(frozen=True)
class Begin:
    final_lsn: Lsn  # the LSN of the transaction's commit record
    commit_time: datetime
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int  # unused by the server so far
    commit_lsn: Lsn
    end_lsn: Lsn  # the end of the commit record: confirm this once the transaction is kept
    commit_time: datetime


@dataclass(frozen=True)
class Origin:
    commit_lsn: Lsn  # the commit LSN on the origin server
    name: str


@dataclass(frozen=True)
class RelationColumn:
    name: str
    type_oid: int
    type_modifier: int  # atttypmod: -1 when the type has none
    is_key: bool


@dataclass(frozen=True)
class Relation:
    """A table's shape, sent before its first change in a session and after it changes."""

    xid: int | None  # the streamed transaction's xid, inside a stream
    oid: int
    namespace: str  # '' for pg_catalog
    name: str
    replica_identity: ReplicaIdentity
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True)
class TypeDefinition:
    """A non-built-in type's name, sent before a Relation that uses it."""

    xid: int | None
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Insert:
    xid: int | None
    relation_oid: int
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True)
class Update:
    xid: int | None
    relation_oid: int
    old_kind: TupleKind | None  # KEY, OLD, or None when the old image is not sent
    old: tuple[ColumnValue, ...] | None
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True)
class Delete:
    xid: int | None
    relation_oid: int
    old_kind: TupleKind  # KEY or OLD
    old: tuple[ColumnValue, ...]


@dataclass(frozen=True)
class Truncate:
    xid: int | None
    options: TruncateOption
    relation_oids: tuple[int, ...]


@dataclass(frozen=True)
class LogicalMessage:
    """A message of ``pg_logical_emit_message`` (sent with the option ``messages``)."""

    xid: int | None
    transactional: bool
    lsn: Lsn
    prefix: str
    content: bytes


@dataclass(frozen=True)
class StreamStart:
    xid: int
    first_segment: bool


@dataclass(frozen=True)
class StreamStop:
    pass


@dataclass(frozen=True)
class StreamCommit:
    xid: int
    flags: int
    commit_lsn: Lsn
    end_lsn: Lsn
    commit_time: datetime


@dataclass(frozen=True)
class StreamAbort:
    xid: int
    subxid: int  # == xid when the whole transaction aborted, else the aborted subtransaction
    abort_lsn: Lsn | None  # protocol 4 with streaming = parallel only
    abort_time: datetime | None


Change = Insert | Update | Delete | Truncate
Message = (
    Begin
    | Commit
    | Origin
    | Relation
    | TypeDefinition
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
)


@dataclass(frozen=True)
class DecodeContext:
    """What a message's bytes do not say themselves.

    ``in_stream``: between Stream Start and Stream Stop, where data messages carry the
    (sub)transaction's xid first. ``encoding``: the database's encoding (text values and
    names arrive in it).
    """

    in_stream: bool = False
    encoding: str = "utf-8"


# ----------------------------------------------------------------------------- decoding


class _Reader:
    """A cursor over one message's bytes; every read checks the length it needs."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def take(self, size: int) -> memoryview:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise ProtocolError(
                f"a pgoutput {self.what} message ends at byte {len(self.data)}, but byte "
                f"{self.pos} needs {size} more: the message is truncated or not pgoutput's; "
                "check that the slot's plugin is pgoutput"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, layout: struct.Struct) -> int:
        value: int = layout.unpack(self.take(layout.size))[0]
        return value

    def lsn(self) -> Lsn:
        return Lsn(self.unpack(_UINT64))

    def timestamp(self) -> datetime:
        micros = self.unpack(_INT64)
        try:
            return POSTGRES_EPOCH + timedelta(microseconds=micros)
        except OverflowError:
            raise ProtocolError(
                f"a pgoutput {self.what} message has a timestamp of {micros} microseconds "
                "since 2000-01-01, outside the years 1-9999: the message is damaged or not "
                "pgoutput's"
            ) from None

    def byte(self) -> bytes:
        return bytes(self.take(1))

    def string(self, encoding: str) -> str:
        end = bytes(self.data[self.pos :]).find(b"\0")
        if end < 0:
            raise ProtocolError(
                f"a pgoutput {self.what} message has a string at byte {self.pos} without its "
                "terminating NUL: the message is truncated or not pgoutput's"
            )
        return self.text(bytes(self.take(end + 1)[:-1]), encoding)

    def text(self, raw: bytes, encoding: str) -> str:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as error:
            raise ProtocolError(
                f"a pgoutput {self.what} message has text before byte {self.pos} that is not "
                f"{encoding} ({error.reason} at {error.start}): the decode context's encoding "
                "must be the database's (SHOW server_encoding)"
            ) from None

    def rest(self) -> bytes:
        return bytes(self.take(len(self.data) - self.pos))

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError(
                f"a pgoutput {self.what} message has {len(self.data) - self.pos} bytes after "
                f"its end (byte {self.pos} of {len(self.data)}): a protocol version this "
                "decoder does not know; check the proto_version the stream was started with"
            )


def decode_message(payload: bytes, context: DecodeContext = DecodeContext()) -> Message:
    """Decode one pgoutput message.

    >>> decode_message(bytes.fromhex("42" "0000000001000000" "0000000000000000" "000002d2"))
    Begin(final_lsn=Lsn(value=16777216), commit_time=datetime.datetime(2000, 1, 1, 0, 0, tzinfo=datetime.timezone.utc), xid=722)
    """  # noqa: E501
    if not payload:
        raise ProtocolError("an empty pgoutput message: expected a type byte first")
    try:
        kind = MessageType(payload[:1])
    except ValueError:
        raise ProtocolError(
            f"pgoutput message type {payload[:1]!r} is not one this decoder knows "
            f"({', '.join(repr(t.value) for t in MessageType)}); two-phase messages come only "
            "when the stream asks for two_phase, which this client does not"
        ) from None
    reader = _Reader(payload[1:], kind.name.lower())
    message = _DECODERS[kind](reader, context)
    reader.done()
    return message


def _xid(reader: _Reader, context: DecodeContext) -> int | None:
    return reader.unpack(_UINT32) if context.in_stream else None


def _begin(reader: _Reader, context: DecodeContext) -> Begin:
    return Begin(reader.lsn(), reader.timestamp(), reader.unpack(_UINT32))


def _commit(reader: _Reader, context: DecodeContext) -> Commit:
    return Commit(reader.unpack(_INT8), reader.lsn(), reader.lsn(), reader.timestamp())


def _origin(reader: _Reader, context: DecodeContext) -> Origin:
    return Origin(reader.lsn(), reader.string(context.encoding))


def _relation(reader: _Reader, context: DecodeContext) -> Relation:
    xid = _xid(reader, context)
    oid = reader.unpack(_UINT32)
    namespace = reader.string(context.encoding)
    name = reader.string(context.encoding)
    identity_byte = reader.byte()
    try:
        identity = ReplicaIdentity(identity_byte)
    except ValueError:
        raise ProtocolError(
            f"relation {namespace}.{name} has replica identity {identity_byte!r}: expected "
            "one of 'd', 'n', 'f', 'i' (pg_class.relreplident)"
        ) from None
    columns = []
    for _ in range(reader.unpack(_INT16)):
        flags = reader.unpack(_UINT8)
        column_name = reader.string(context.encoding)
        type_oid = reader.unpack(_UINT32)
        modifier = reader.unpack(_INT32)
        columns.append(
            RelationColumn(column_name, type_oid, modifier, bool(flags & ColumnFlag.KEY))
        )
    return Relation(xid, oid, namespace, name, identity, tuple(columns))


def _type(reader: _Reader, context: DecodeContext) -> TypeDefinition:
    xid = _xid(reader, context)
    oid = reader.unpack(_UINT32)
    return TypeDefinition(
        xid, oid, reader.string(context.encoding), reader.string(context.encoding)
    )


def _tuple_kind(reader: _Reader, allowed: tuple[TupleKind, ...]) -> TupleKind:
    value = reader.byte()
    kinds = [kind for kind in allowed if kind.value == value]
    if not kinds:
        raise ProtocolError(
            f"a pgoutput {reader.what} message has tuple kind {value!r} at byte {reader.pos}: "
            f"expected one of {', '.join(repr(kind.value) for kind in allowed)}"
        )
    return kinds[0]


# each column's format byte as the int a memoryview gives (the hot loop of every row)
_NULL_BYTE, _TOAST_BYTE, _TEXT_BYTE, _BINARY_BYTE = (
    f.value[0]
    for f in (
        ColumnFormat.NULL,
        ColumnFormat.UNCHANGED_TOAST,
        ColumnFormat.TEXT,
        ColumnFormat.BINARY,
    )
)


def _tuple_data(reader: _Reader, context: DecodeContext) -> tuple[ColumnValue, ...]:
    """The columns of a TupleData, read straight off the buffer (a row's columns are most of
    a change's bytes); a short buffer raises ``_Reader.take``'s error at the same byte."""
    data, size = reader.data, len(reader.data)
    count = reader.unpack(_INT16)
    pos = reader.pos
    values: list[ColumnValue] = []
    append, encoding = values.append, context.encoding
    for _ in range(count):
        if pos >= size:
            reader.pos = pos
            reader.take(1)
        marker = data[pos]
        pos += 1
        if marker in (_TEXT_BYTE, _BINARY_BYTE):
            if pos + 4 > size:
                reader.pos = pos
                reader.take(4)
            length: int = _INT32.unpack_from(data, pos)[0]
            pos += 4
            end = pos + length
            if length < 0 or end > size:
                reader.pos = pos
                reader.take(length)
            raw = bytes(data[pos:end])
            pos = end
            if marker == _BINARY_BYTE:
                append(raw)
                continue
            try:
                append(raw.decode(encoding))
            except UnicodeDecodeError:
                reader.pos = pos
                append(reader.text(raw, encoding))  # raises, naming the encoding
        elif marker == _NULL_BYTE:
            append(None)
        elif marker == _TOAST_BYTE:
            append(UNCHANGED_TOAST)
        else:
            reader.pos = pos
            raise ProtocolError(
                f"a pgoutput {reader.what} message has column format {bytes([marker])!r} at "
                f"byte {pos}: expected 'n' (null), 'u' (unchanged TOAST), 't' (text) or "
                "'b' (binary)"
            )
    reader.pos = pos
    return tuple(values)


def _insert(reader: _Reader, context: DecodeContext) -> Insert:
    xid = _xid(reader, context)
    oid = reader.unpack(_UINT32)
    _tuple_kind(reader, (TupleKind.NEW,))
    return Insert(xid, oid, _tuple_data(reader, context))


def _update(reader: _Reader, context: DecodeContext) -> Update:
    xid = _xid(reader, context)
    oid = reader.unpack(_UINT32)
    kind = _tuple_kind(reader, (TupleKind.KEY, TupleKind.OLD, TupleKind.NEW))
    old_kind: TupleKind | None = None
    old = None
    if kind is not TupleKind.NEW:
        old_kind, old = kind, _tuple_data(reader, context)
        _tuple_kind(reader, (TupleKind.NEW,))
    return Update(xid, oid, old_kind, old, _tuple_data(reader, context))


def _delete(reader: _Reader, context: DecodeContext) -> Delete:
    xid = _xid(reader, context)
    oid = reader.unpack(_UINT32)
    kind = _tuple_kind(reader, (TupleKind.KEY, TupleKind.OLD))
    return Delete(xid, oid, kind, _tuple_data(reader, context))


def _truncate(reader: _Reader, context: DecodeContext) -> Truncate:
    xid = _xid(reader, context)
    count = reader.unpack(_INT32)
    options = TruncateOption(reader.unpack(_UINT8))
    return Truncate(xid, options, tuple(reader.unpack(_UINT32) for _ in range(count)))


def _message(reader: _Reader, context: DecodeContext) -> LogicalMessage:
    # the xid is there inside a stream for a transactional message only
    xid = _xid(reader, context)
    flags = MessageFlag(reader.unpack(_UINT8))
    lsn = reader.lsn()
    prefix = reader.string(context.encoding)
    content = bytes(reader.take(reader.unpack(_INT32)))
    return LogicalMessage(xid, bool(flags & MessageFlag.TRANSACTIONAL), lsn, prefix, content)


def _stream_start(reader: _Reader, context: DecodeContext) -> StreamStart:
    xid = reader.unpack(_UINT32)
    return StreamStart(xid, reader.unpack(_UINT8) == StreamSegment.FIRST)


def _stream_stop(reader: _Reader, context: DecodeContext) -> StreamStop:
    return StreamStop()


def _stream_commit(reader: _Reader, context: DecodeContext) -> StreamCommit:
    xid = reader.unpack(_UINT32)
    return StreamCommit(xid, reader.unpack(_INT8), reader.lsn(), reader.lsn(), reader.timestamp())


def _stream_abort(reader: _Reader, context: DecodeContext) -> StreamAbort:
    xid = reader.unpack(_UINT32)
    subxid = reader.unpack(_UINT32)
    if reader.remaining():  # protocol 4, streaming = parallel: the abort's LSN and time
        return StreamAbort(xid, subxid, reader.lsn(), reader.timestamp())
    return StreamAbort(xid, subxid, None, None)


_DECODERS: dict[MessageType, Callable[[_Reader, DecodeContext], Message]] = {
    MessageType.BEGIN: _begin,
    MessageType.COMMIT: _commit,
    MessageType.ORIGIN: _origin,
    MessageType.RELATION: _relation,
    MessageType.TYPE: _type,
    MessageType.INSERT: _insert,
    MessageType.UPDATE: _update,
    MessageType.DELETE: _delete,
    MessageType.TRUNCATE: _truncate,
    MessageType.MESSAGE: _message,
    MessageType.STREAM_START: _stream_start,
    MessageType.STREAM_STOP: _stream_stop,
    MessageType.STREAM_COMMIT: _stream_commit,
    MessageType.STREAM_ABORT: _stream_abort,
}
