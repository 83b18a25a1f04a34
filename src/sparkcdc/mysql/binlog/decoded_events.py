"""Decoded binlog events: frozen dataclasses, one per event type the decoder understands.

Every event carries the common :class:`EventHeader` as its first field. Row values are
plain Python objects (see :mod:`sparkcdc.mysql.binlog.column_values` for the mapping of
column types); a column absent from a row image (``binlog_row_image=MINIMAL/NOBLOB``) holds the
:data:`MISSING` sentinel, a NULL holds ``None``.

>>> h = EventHeader(timestamp=0, type_code=16, server_id=1, event_size=31, log_pos=120, flags=0)
>>> XidEvent(h, xid=7).xid
7
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sparkcdc.model.events import EncodedRows, ImageColumns, RowsKind
from sparkcdc.mysql.protocol.constants import (
    LOG_EVENT_IGNORABLE_F,
    BinlogChecksum,
    ColumnType,
    PayloadCompression,
)


class _Missing:
    """Type of :data:`MISSING`: a column that is not part of a row image."""

    __slots__ = ()
    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        # pickles (e.g. to a Spark executor) as the module attribute: stays a singleton
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()
"""Value of a column absent from a row image (its bit is clear in the columns-present bitmap)."""


@dataclass(frozen=True, slots=True)
class EventHeader:
    """The 19-byte common header (v4) of every binlog event.

    ``log_pos`` is the position of the *next* event (end of this one) in the binlog file.
    """

    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int


@dataclass(frozen=True, slots=True)
class RotateEvent:
    header: EventHeader
    next_file: str
    next_pos: int


@dataclass(frozen=True, slots=True)
class FormatDescriptionEvent:
    header: EventHeader
    binlog_version: int
    server_version: str
    header_length: int
    # post_header_lengths[type_code - 1] is the post-header length of that event type
    post_header_lengths: bytes
    checksum: BinlogChecksum

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def post_header_length(self, type_code: int) -> int | None:
        """The post-header length this server uses for ``type_code``, None if it does not say."""
        if 1 <= type_code <= len(self.post_header_lengths):
            return self.post_header_lengths[type_code - 1]
        return None


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column of a TABLE_MAP.

    ``type`` is the *real* type: ENUM and SET, which the binlog hides inside STRING, are
    reported as ``ColumnType.ENUM`` / ``ColumnType.SET``. ``meta`` is the type's metadata
    as an int: VARCHAR/VAR_STRING max byte length; STRING max byte length; ENUM/SET pack
    length; BLOB/TEXT/JSON/GEOMETRY length-prefix size; FLOAT/DOUBLE size; NEWDECIMAL
    ``precision << 8 | scale``; BIT ``bytes << 8 | bits``; TIME2/DATETIME2/TIMESTAMP2 the
    fractional-second precision; 0 for the rest.

    ``charset`` is the collation id of character, ENUM and SET columns (63 = binary) from
    the optional metadata; when it is None (no ``binlog_row_metadata=FULL``) string and BLOB
    values are returned as bytes.

    ``unsigned`` is None for a numeric column whose TABLE_MAP has no SIGNEDNESS block:
    the binlog does not say, and the schema history must (``tablemeta.complete_columns``);
    rows of such a column are never decoded by a guess.
    """

    name: str | None
    type: ColumnType
    meta: int
    nullable: bool
    unsigned: bool | None
    charset: int | None
    enum_values: tuple[str, ...] | None
    set_values: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class TableMapEvent:
    header: EventHeader
    table_id: int
    database: str
    table: str
    columns: tuple[ColumnInfo, ...]
    # column indexes of the primary key from optional metadata, () if absent
    primary_key: tuple[int, ...]
    # ``columns`` as the model describes row images (names, storage): built once per
    # TABLE_MAP body by the decoder (``tablemeta.image_columns``), shared by its events
    image_columns: ImageColumns


Row = tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]
"""One row change: ``(before, after)``; INSERT ``(None, after)``, DELETE ``(before, None)``."""


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """The rows one ROWS event changes in one table.

    ``absent_before`` / ``absent_after`` are the indexes of the columns missing from every
    before / after image of this event (their columns-present bit is clear, as under
    ``binlog_row_image=MINIMAL`` or ``NOBLOB``; those values are :data:`MISSING`); ``()``
    when the images are complete, and for the image an event kind does not have. A
    PARTIAL_UPDATE_ROWS event comes out as an UPDATE whose partial JSON values were
    applied to the before image, so they are complete values here.
    """

    header: EventHeader
    kind: RowsKind
    table_id: int
    table: TableMapEvent | None
    # None when the table filter excluded the table (rows were not decoded); from a lazy
    # decoder, the rows not decoded yet (decoder.EventRows)
    rows: list[Row] | EncodedRows | None
    absent_before: tuple[int, ...] = ()
    absent_after: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class QueryEvent:
    header: EventHeader
    thread_id: int
    exec_time: int
    error_code: int
    database: str
    query: str


@dataclass(frozen=True, slots=True)
class XidEvent:
    header: EventHeader
    xid: int


@dataclass(frozen=True, slots=True)
class GtidEvent:
    """MySQL GTID: the next transaction is ``uuid:gno``."""

    header: EventHeader
    uuid: str
    gno: int


@dataclass(frozen=True, slots=True)
class MariaGtidEvent:
    """MariaDB GTID ``domain_id-header.server_id-sequence``; starts an event group.

    ``standalone`` (FL_STANDALONE): the group is one statement with no XID/COMMIT (e.g. DDL).
    ``xa_prepare`` (FL_PREPARED_XA): the group is an XA PREPARE with its row events, which
    take effect only at a later XA COMMIT; ``xa_complete`` (FL_COMPLETED_XA): the group is
    that XA COMMIT or XA ROLLBACK.
    """

    header: EventHeader
    domain_id: int
    sequence: int
    standalone: bool
    xa_prepare: bool = False
    xa_complete: bool = False


@dataclass(frozen=True, slots=True)
class MariaGtidListEvent:
    header: EventHeader
    # (domain_id, server_id, sequence)
    gtids: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class PreviousGtidsEvent:
    header: EventHeader
    # MySQL text form, e.g. '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5'
    gtid_set: str


@dataclass(frozen=True, slots=True)
class HeartbeatEvent:
    header: EventHeader
    log_file: str


@dataclass(frozen=True, slots=True)
class AnnotateRowsEvent:
    """MariaDB ANNOTATE_ROWS: the SQL statement that produced the following ROWS events."""

    header: EventHeader
    query: str


@dataclass(frozen=True, slots=True)
class TransactionPayloadEvent:
    """MySQL TRANSACTION_PAYLOAD: a whole transaction's events, compressed into one event.

    ``events`` are the inner events (TABLE_MAP, ROWS, QUERY, XID...) decoded in order by the
    same decoder; they have their own 19-byte headers and no checksums.
    """

    header: EventHeader
    compression: PayloadCompression
    uncompressed_size: int
    events: tuple[BinlogEvent, ...]


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """Any event type the decoder does not interpret; ``body`` is everything after the header."""

    header: EventHeader
    body: bytes

    @property
    def ignorable(self) -> bool:
        """True when the server flagged the event LOG_EVENT_IGNORABLE_F (safe to skip).

        An unknown event without the flag may carry changes: a reader must not skip it.

        >>> h = EventHeader(0, 99, 1, 19, 0, LOG_EVENT_IGNORABLE_F)
        >>> UnknownEvent(h, b"").ignorable
        True
        """
        return bool(self.header.flags & LOG_EVENT_IGNORABLE_F)


BinlogEvent = (
    RotateEvent
    | FormatDescriptionEvent
    | TableMapEvent
    | RowsEvent
    | QueryEvent
    | XidEvent
    | GtidEvent
    | MariaGtidEvent
    | MariaGtidListEvent
    | PreviousGtidsEvent
    | HeartbeatEvent
    | AnnotateRowsEvent
    | TransactionPayloadEvent
    | UnknownEvent
)
"""Everything :meth:`BinlogDecoder.decode` returns."""
