"""The binlog event decoder: pure functions of bytes plus the context a binlog carries.

:class:`BinlogDecoder` turns one event (19-byte header + body, checksum already stripped)
into a dataclass of :mod:`sparkcdc.mysql.binlog.decoded_events`. The only state it keeps is what the
binlog itself establishes: the last FORMAT_DESCRIPTION (post-header lengths) and the
TABLE_MAPs by table id. Row images are decoded by functions generated per table map
(:mod:`sparkcdc.mysql.binlog.rowcodec`), cached by the table map's bytes.

Byte layouts: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html
and https://mariadb.com/kb/en/replication-protocol/ (MariaDB events and compression).

>>> decoder = BinlogDecoder()
>>> header = EVENT_HEADER.pack(0, EventType.XID, 1, EVENT_HEADER_SIZE + 8, 500, 0)
>>> decoder.decode(header + (42).to_bytes(8, "little")).xid
42
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntFlag

import pyarrow as pa

from sparkcdc.errors import ProtocolError, SourceError
from sparkcdc.model.events import ImageColumns, RowsKind
from sparkcdc.model.tables import TablePredicate
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.compression import decompress_mariadb, zstd_decompress
from sparkcdc.mysql.binlog.decoded_events import (
    AnnotateRowsEvent,
    BinlogEvent,
    ColumnInfo,
    EventHeader,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    MariaGtidEvent,
    MariaGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    Row,
    RowsEvent,
    TableMapEvent,
    TransactionPayloadEvent,
    UnknownEvent,
    XidEvent,
)
from sparkcdc.mysql.binlog.metadata_from_schema import image_columns
from sparkcdc.mysql.binlog.rowcodec import RowsDecoder, build_rows_decoder
from sparkcdc.mysql.binlog.table_map import parse_table_map_body, read_lenenc
from sparkcdc.mysql.protocol.constants import (
    CHECKSUM_ALG_SIZE,
    EVENT_HEADER,
    EVENT_HEADER_SIZE,
    FORMAT_DESCRIPTION_FIXED,
    BinlogChecksum,
    EventType,
    PayloadCompression,
    TransactionPayloadField,
)

# ------------------------------------------------------------------------ byte layouts

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
# QUERY post-header: thread_id u32, exec_time u32, db_len u8, error_code u16, status_vars_len u16
_QUERY_POST_HEADER = struct.Struct("<IIBHH")
# ROTATE post-header: position of the first event in the next file, u64
_ROTATE_POST_HEADER = _U64
# MySQL GTID body: flags u8, server uuid 16 bytes, gno i64
_MYSQL_GTID = struct.Struct("<B16sq")
# MariaDB GTID body: sequence u64, domain_id u32, flags u8
_MARIA_GTID = struct.Struct("<QIB")
# MariaDB GTID_LIST: count u32 (low 28 bits), then per GTID domain u32, server_id u32, seq u64
_MARIA_GTID_LIST_COUNT = _U32
_MARIA_GTID_LIST_ENTRY = struct.Struct("<IIQ")
_MARIA_GTID_LIST_COUNT_MASK = (1 << 28) - 1
# PREVIOUS_GTIDS: n_sids u64, per sid: uuid 16 bytes, n_intervals u64, per interval
# start i64, end i64 (end exclusive)
_PREV_GTIDS_SID = struct.Struct("<16sQ")
_PREV_GTIDS_INTERVAL = struct.Struct("<qq")
# table ids are 6 bytes; a post-header of 6 (MySQL < 5.1.4) means 4-byte table ids
_TABLE_ID_BYTES = 6
_OLD_TABLE_ID_BYTES = 4
_OLD_TABLE_MAP_POST_HEADER = 6
_TABLE_MAP_POST_HEADER = 8
_ROWS_V1_POST_HEADER = 8
_ROWS_V2_POST_HEADER = 10
_ROWS_FLAGS = _U16
_ROWS_EXTRA_LEN = _U16
# ROWS events with this table id and no table map are "dummy" statement-end markers
_DUMMY_TABLE_ID = 0x00FFFFFF
# versions from which FORMAT_DESCRIPTION carries the checksum algorithm byte
_MYSQL_CHECKSUM_VERSION = (5, 6, 1)
_MARIADB_CHECKSUM_VERSION = (5, 3, 0)
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_HEARTBEAT_V2_LOG_FILENAME = 1
# TRANSACTION_PAYLOAD has no post-header (MySQL TRANSACTION_PAYLOAD_HEADER_LEN); its header
# fields are TLVs in the body, see TransactionPayloadField
_TRANSACTION_PAYLOAD_POST_HEADER = 0
_PAYLOAD_VALUE_FIELDS = frozenset(
    {
        TransactionPayloadField.PAYLOAD_SIZE,
        TransactionPayloadField.COMPRESSION_TYPE,
        TransactionPayloadField.UNCOMPRESSED_SIZE,
    }
)
# what to do when a MySQL 8.0 row value option stands in the way of an exact change
_PARTIAL_JSON_FIX = (
    "; the server logged this change with binlog_row_value_options=PARTIAL_JSON and it "
    "cannot be applied exactly. Run SET GLOBAL binlog_row_value_options='' (and "
    "binlog_row_image=FULL) on the source, then restart capture from a snapshot"
)


class MariaGtidFlag(IntFlag):
    """Flags byte of the MariaDB GTID event."""

    STANDALONE = 0x01
    GROUP_COMMIT_ID = 0x02
    TRANSACTIONAL = 0x04
    ALLOW_PARALLEL = 0x08
    WAITED = 0x10
    DDL = 0x20
    # MariaDB >= 10.5 (sql/log_event.h): the group is an XA PREPARE (its row events
    # follow) or the XA COMMIT / XA ROLLBACK of a transaction prepared earlier
    PREPARED_XA = 0x40
    COMPLETED_XA = 0x80


_ROWS_KINDS: dict[int, RowsKind] = {
    EventType.WRITE_ROWS_V1: RowsKind.INSERT,
    EventType.UPDATE_ROWS_V1: RowsKind.UPDATE,
    EventType.DELETE_ROWS_V1: RowsKind.DELETE,
    EventType.WRITE_ROWS_V2: RowsKind.INSERT,
    EventType.UPDATE_ROWS_V2: RowsKind.UPDATE,
    EventType.DELETE_ROWS_V2: RowsKind.DELETE,
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: RowsKind.INSERT,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: RowsKind.UPDATE,
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: RowsKind.DELETE,
    EventType.MARIA_WRITE_ROWS_COMPRESSED: RowsKind.INSERT,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED: RowsKind.UPDATE,
    EventType.MARIA_DELETE_ROWS_COMPRESSED: RowsKind.DELETE,
    # MySQL 8.0 binlog_row_value_options=PARTIAL_JSON: UPDATE_ROWS_V2 whose after images
    # start with value_options and may log JSON values as diffs (rowcodec applies them)
    EventType.PARTIAL_UPDATE_ROWS: RowsKind.UPDATE,
}
ROWS_EVENT_TYPES = frozenset(_ROWS_KINDS)  # the type codes of ROWS events
_ROWS_V2_TYPES = frozenset(
    {
        EventType.PARTIAL_UPDATE_ROWS,
        EventType.WRITE_ROWS_V2,
        EventType.UPDATE_ROWS_V2,
        EventType.DELETE_ROWS_V2,
        EventType.MARIA_WRITE_ROWS_COMPRESSED,
        EventType.MARIA_UPDATE_ROWS_COMPRESSED,
        EventType.MARIA_DELETE_ROWS_COMPRESSED,
    }
)
_COMPRESSED_ROWS_TYPES = frozenset(
    {
        EventType.MARIA_WRITE_ROWS_COMPRESSED_V1,
        EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1,
        EventType.MARIA_DELETE_ROWS_COMPRESSED_V1,
        EventType.MARIA_WRITE_ROWS_COMPRESSED,
        EventType.MARIA_UPDATE_ROWS_COMPRESSED,
        EventType.MARIA_DELETE_ROWS_COMPRESSED,
    }
)

# ---------------------------------------------------------------------------- helpers


def checksum_aware(server_version: str) -> bool:
    """True when a server of this version ends FORMAT_DESCRIPTION with the checksum byte."""
    match = _VERSION_RE.match(server_version)
    if not match:
        return True
    version = tuple(int(x) for x in match.groups())
    if "mariadb" in server_version.lower():
        return version >= _MARIADB_CHECKSUM_VERSION
    return version >= _MYSQL_CHECKSUM_VERSION


def _format_uuid(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


# ----------------------------------------------------------------------- table maps


@dataclass(frozen=True, slots=True)
class _RowsShape:
    """What one (kind, columns-present bitmaps) combination of a table decodes with."""

    decode_rows: RowsDecoder
    # column indexes missing from the before / after images (RowsEvent.absent_*)
    absent_before: tuple[int, ...]
    absent_after: tuple[int, ...]


# (kind, present bitmap, after-image present bitmap, partial JSON)
_ShapeKey = tuple[RowsKind, int, int | None, bool]


@dataclass
class _MappedTable:
    """A parsed TABLE_MAP body (shared by every TABLE_MAP with the same bytes)."""

    table_id: int
    database: str
    table: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[int, ...]
    included: bool
    shapes: dict[_ShapeKey, _RowsShape] = field(default_factory=dict)
    # what RowChanges of the table carry: built here, once per TABLE_MAP body
    image_columns: ImageColumns = field(init=False)

    def __post_init__(self) -> None:
        self.image_columns = image_columns(self.columns)

    def event(self, header: EventHeader) -> TableMapEvent:
        """The TABLE_MAP event of this body (with ``header``)."""
        return TableMapEvent(
            header,
            self.table_id,
            self.database,
            self.table,
            self.columns,
            self.primary_key,
            self.image_columns,
        )

    def shape(self, key: _ShapeKey) -> _RowsShape:
        """The row decoder and absent columns for ``key``, built once per key."""
        shape = self.shapes.get(key)
        if shape is None:
            kind, present, present_after, partial = key
            absent = _absent_columns(len(self.columns), present)
            before: tuple[int, ...]
            after: tuple[int, ...]
            if kind is RowsKind.INSERT:
                before, after = (), absent
            elif kind is RowsKind.DELETE:
                before, after = absent, ()
            else:
                second = present if present_after is None else present_after
                before, after = absent, _absent_columns(len(self.columns), second)
            try:
                decode = build_rows_decoder(self.columns, kind, present, present_after, partial)
            except SourceError as exc:
                raise SourceError(f"rows of {self.database}.{self.table}: {exc}") from None
            shape = _RowsShape(decode, before, after)
            self.shapes[key] = shape
        return shape


@dataclass(frozen=True, slots=True)
class EventRows:
    """The row images of one ROWS event as the binlog holds them (``data[pos:end]``,
    decompressed), decoded when asked: the :class:`~sparkcdc.model.events.EncodedRows` of
    the changes a lazy decoder yields. ``complete``: every image has every column and no
    JSON diff (what the compiled decoder into Arrow reads; sparkcdc.mysql.binlog.arrowrows)."""

    data: bytes
    pos: int
    end: int
    shape: _RowsShape
    table: _MappedTable
    type_code: int
    log_pos: int  # where the event ends, for messages

    @property
    def complete(self) -> bool:
        return not (self.shape.absent_before or self.shape.absent_after or self.partial)

    @property
    def partial(self) -> bool:
        return self.type_code == EventType.PARTIAL_UPDATE_ROWS

    def what(self) -> str:
        """The event, for messages."""
        table = self.table
        return (
            f"{EventType(self.type_code).name} event for {table.database}.{table.table} ending "
            f"at position {self.log_pos}"
        )

    def kernel(self, wanted: Sequence[tuple[int, pa.DataType]]) -> arrowrows.KernelRows | None:
        """The compiled decoder of images of this table shape into the Arrow columns
        ``wanted`` (:func:`arrowrows.plan`), or None: not built, or not exact for them."""
        if not arrowrows.compiled():
            return None
        plan = arrowrows.plan(self.table.columns, wanted)
        return None if plan is None else arrowrows.KernelRows(plan)

    def key_kernel(self, position: int) -> arrowrows.KernelRows | None:
        """The compiled decoder of the column at image ``position`` alone
        (:func:`arrowrows.key_plan`), or None: not built, or not that column's type."""
        columns = self.table.columns
        if not arrowrows.compiled() or not 0 <= position < len(columns):
            return None
        plan = arrowrows.key_plan(columns, position)
        return None if plan is None else arrowrows.KernelRows(plan)

    def decode(self) -> list[Row]:
        """The rows, as Python values; ProtocolError if the bytes do not hold them."""
        try:
            rows, stop = self.shape.decode_rows(self.data, self.pos, self.end)
        except ProtocolError as exc:
            fix = _PARTIAL_JSON_FIX if self.partial else ""
            raise ProtocolError(f"{self.what()}: {exc}{fix}") from None
        except (IndexError, ValueError, struct.error, KeyError) as exc:
            raise ProtocolError(
                f"cannot decode the {self.what()} ({self.end - self.pos} bytes of rows): "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if stop != self.end:
            raise ProtocolError(
                f"{self.what()}: row images end at byte {stop} of {self.end}; the TABLE_MAP "
                "does not describe these rows"
            )
        return rows


def _absent_columns(count: int, present: int) -> tuple[int, ...]:
    """Indexes of the ``count`` columns whose bit is clear in a columns-present bitmap."""
    return tuple(i for i in range(count) if not present >> i & 1)


# ---------------------------------------------------------------------------- decoder


class BinlogDecoder:
    """Decode binlog events one at a time, keeping FORMAT_DESCRIPTION and TABLE_MAP context.

    ``table_filter(database, table)`` says whether to decode the rows of a table; the ROWS
    events of other tables come back with ``rows=None`` (cheap: their bytes are not read).

    >>> decoder = BinlogDecoder(table_filter=lambda db, table: db == "shop")
    >>> decoder.format is None
    True
    """

    def __init__(
        self,
        table_filter: TablePredicate | None = None,
        on_table_map: Callable[[TableMapEvent], None] | None = None,
        *,
        lazy_rows: bool = False,
    ) -> None:
        self._filter = table_filter
        # ROWS events carry EventRows (decoded when asked) instead of decoded rows
        self.lazy_rows = lazy_rows
        # called with each TABLE_MAP as it is decoded (also inside a TRANSACTION_PAYLOAD),
        # before any ROWS event that uses it: it may complete it (``complete_table``)
        self._on_table_map = on_table_map
        self.format: FormatDescriptionEvent | None = None
        self._tables: dict[int, tuple[TableMapEvent, _MappedTable]] = {}
        self._map_cache: dict[bytes, _MappedTable] = {}
        # (id of a cached TABLE_MAP, schema version) -> (that TABLE_MAP, it completed)
        self._completed: dict[tuple[int, object], tuple[_MappedTable, _MappedTable]] = {}
        self._dispatch: dict[int, Callable[[EventHeader, bytes], BinlogEvent]] = {
            EventType.FORMAT_DESCRIPTION: self._format_description,
            EventType.ROTATE: self._rotate,
            EventType.TABLE_MAP: self._table_map,
            EventType.QUERY: self._query,
            EventType.MARIA_QUERY_COMPRESSED: self._query,
            EventType.XID: self._xid,
            EventType.GTID: self._mysql_gtid,
            EventType.MARIA_GTID: self._maria_gtid,
            EventType.MARIA_GTID_LIST: self._maria_gtid_list,
            EventType.PREVIOUS_GTIDS: self._previous_gtids,
            EventType.HEARTBEAT: self._heartbeat,
            EventType.HEARTBEAT_V2: self._heartbeat_v2,
            EventType.MARIA_ANNOTATE_ROWS: self._annotate_rows,
            EventType.TRANSACTION_PAYLOAD: self._transaction_payload,
        }
        for code in _ROWS_KINDS:
            self._dispatch[code] = self._rows

    # -- public ------------------------------------------------------------------------

    def decode(self, buf: bytes | memoryview) -> BinlogEvent:
        """Decode one event: 19-byte header + body, with any checksum already stripped.

        Raises ProtocolError for bytes that do not form the event their header announces.
        """
        data = bytes(buf) if not isinstance(buf, bytes) else buf
        if len(data) < EVENT_HEADER_SIZE:
            raise ProtocolError(
                f"binlog event of {len(data)} bytes is shorter than the {EVENT_HEADER_SIZE}-byte "
                "event header"
            )
        header = EventHeader(*EVENT_HEADER.unpack_from(data, 0))
        handler = self._dispatch.get(header.type_code)
        if handler is None:
            return UnknownEvent(header, data[EVENT_HEADER_SIZE:])
        try:
            return handler(header, data)
        except ProtocolError:
            raise
        except (IndexError, ValueError, struct.error, KeyError) as exc:
            raise ProtocolError(
                f"cannot decode binlog event type {header.type_code} ending at position "
                f"{header.log_pos} ({len(data)} bytes): {type(exc).__name__}: {exc}"
            ) from None

    def table(self, table_id: int) -> TableMapEvent | None:
        """The current TABLE_MAP for ``table_id``, if one was seen."""
        entry = self._tables.get(table_id)
        return entry[0] if entry else None

    def complete_table(
        self,
        table_id: int,
        version: object,
        complete: Callable[[tuple[ColumnInfo, ...]], tuple[ColumnInfo, ...]],
    ) -> TableMapEvent:
        """Give the current TABLE_MAP of ``table_id`` the column metadata the binlog left
        out (``binlog_row_metadata`` not FULL): ``complete`` maps its columns to complete
        ones, once per TABLE_MAP body and ``version`` (the schema version used); the
        following ROWS events of the table decode with them."""
        event, mapped = self._tables[table_id]
        key = (id(mapped), version)
        cached = self._completed.get(key)
        if cached is None or cached[0] is not mapped:
            columns = complete(mapped.columns)
            done = _MappedTable(
                mapped.table_id,
                mapped.database,
                mapped.table,
                columns,
                mapped.primary_key,
                mapped.included,
            )
            if len(self._completed) > _MAP_CACHE_LIMIT:
                self._completed.clear()
            cached = self._completed[key] = (mapped, done)
        done = cached[1]
        completed = done.event(event.header)
        self._tables[table_id] = (completed, done)
        return completed

    # -- context -----------------------------------------------------------------------

    def _post_header_length(self, type_code: int, default: int) -> int:
        fde = self.format
        if fde is None:
            return default
        length = fde.post_header_length(type_code)
        return default if length is None else length

    # -- events ------------------------------------------------------------------------

    def _format_description(self, header: EventHeader, data: bytes) -> FormatDescriptionEvent:
        body = data[EVENT_HEADER_SIZE:]
        version, raw_server, _created, header_length = FORMAT_DESCRIPTION_FIXED.unpack_from(body, 0)
        server_version = raw_server.split(b"\0", 1)[0].decode("ascii", "replace")
        rest = body[FORMAT_DESCRIPTION_FIXED.size :]
        checksum = BinlogChecksum.OFF
        if checksum_aware(server_version) and rest:
            alg = rest[-CHECKSUM_ALG_SIZE]
            rest = rest[:-CHECKSUM_ALG_SIZE]
            try:
                checksum = BinlogChecksum(alg)
            except ValueError:
                raise ProtocolError(
                    f"FORMAT_DESCRIPTION of {server_version} names checksum algorithm {alg}, "
                    "expected 0 (OFF) or 1 (CRC32); was its 4-byte checksum left on?"
                ) from None
        event = FormatDescriptionEvent(
            header, version, server_version, header_length, bytes(rest), checksum
        )
        self.format = event
        return event

    def _rotate(self, header: EventHeader, data: bytes) -> RotateEvent:
        post = self._post_header_length(EventType.ROTATE, _ROTATE_POST_HEADER.size)
        (position,) = _ROTATE_POST_HEADER.unpack_from(data, EVENT_HEADER_SIZE)
        name = data[EVENT_HEADER_SIZE + post :].decode("utf-8", "replace")
        return RotateEvent(header, name, position)

    def _table_map(self, header: EventHeader, data: bytes) -> TableMapEvent:
        body = data[EVENT_HEADER_SIZE:]
        mapped = self._map_cache.get(body)
        if mapped is None:
            post = self._post_header_length(EventType.TABLE_MAP, _TABLE_MAP_POST_HEADER)
            id_bytes = (
                _OLD_TABLE_ID_BYTES if post == _OLD_TABLE_MAP_POST_HEADER else _TABLE_ID_BYTES
            )
            mariadb = self.format.is_mariadb if self.format is not None else True
            table_id, database, table, columns, pk = parse_table_map_body(body, id_bytes, mariadb)
            included = self._filter(database, table) if self._filter is not None else True
            mapped = _MappedTable(table_id, database, table, columns, pk, included)
            if len(self._map_cache) > _MAP_CACHE_LIMIT:
                self._map_cache.clear()
            self._map_cache[body] = mapped
        event = mapped.event(header)
        self._tables[mapped.table_id] = (event, mapped)
        if self._on_table_map is not None:
            self._on_table_map(event)
            return self._tables[mapped.table_id][0]
        return event

    def rows_of_captured_table(self, buf: bytes | memoryview) -> bool:
        """Whether a ROWS event (not decoded) changes a table the filter captures, by the
        TABLE_MAP its table id names: what a reader that leaves the event to another
        reader (a share of the range) needs to know of it."""
        data = bytes(buf) if not isinstance(buf, bytes) else buf
        header = EventHeader(*EVENT_HEADER.unpack_from(data, 0))
        table_id, _ = self._rows_table_id(header, data)
        entry = self._tables.get(table_id)
        return entry is not None and entry[1].included

    def _rows_table_id(self, header: EventHeader, data: bytes) -> tuple[int, int]:
        """A ROWS event's table id, and where its post-header ends."""
        type_code = header.type_code
        default_post = _ROWS_V2_POST_HEADER if type_code in _ROWS_V2_TYPES else _ROWS_V1_POST_HEADER
        post = self._post_header_length(type_code, default_post)
        pos = EVENT_HEADER_SIZE
        id_bytes = _OLD_TABLE_ID_BYTES if post == _OLD_TABLE_MAP_POST_HEADER else _TABLE_ID_BYTES
        return int.from_bytes(data[pos : pos + id_bytes], "little"), pos + post

    def _rows(self, header: EventHeader, data: bytes) -> RowsEvent:
        type_code = header.type_code
        kind = _ROWS_KINDS[type_code]
        table_id, pos = self._rows_table_id(header, data)
        post = pos - EVENT_HEADER_SIZE
        if post == _ROWS_V2_POST_HEADER:
            # v2: the extra-data length (which counts its own 2 bytes) ends the post-header
            (extra_len,) = _ROWS_EXTRA_LEN.unpack_from(data, pos - _ROWS_EXTRA_LEN.size)
            pos += extra_len - _ROWS_EXTRA_LEN.size
        entry = self._tables.get(table_id)
        if entry is None:
            if table_id == _DUMMY_TABLE_ID:
                return RowsEvent(header, kind, table_id, None, [])
            raise ProtocolError(
                f"ROWS event for table id {table_id} ending at position {header.log_pos} has no "
                "preceding TABLE_MAP; start reading at a transaction boundary (a GTID or BEGIN "
                "event), not in the middle of a transaction"
            )
        table_map, mapped = entry
        if not mapped.included:
            return RowsEvent(header, kind, table_id, table_map, None)
        width, pos = read_lenenc(data, pos)
        bitmap_bytes = (width + 7) // 8
        present = int.from_bytes(data[pos : pos + bitmap_bytes], "little")
        pos += bitmap_bytes
        present_after: int | None = None
        if kind is RowsKind.UPDATE:
            present_after = int.from_bytes(data[pos : pos + bitmap_bytes], "little")
            pos += bitmap_bytes
        if width != len(mapped.columns):
            raise ProtocolError(
                f"ROWS event for {mapped.database}.{mapped.table} ending at position "
                f"{header.log_pos} has {width} columns but its TABLE_MAP has "
                f"{len(mapped.columns)}"
            )
        columns = (1 << width) - 1
        present &= columns
        if present_after is not None:
            present_after &= columns
        if not present and not present_after:
            # images of no column take no bytes: the rows would never end
            raise ProtocolError(
                f"ROWS event for {mapped.database}.{mapped.table} ending at position "
                f"{header.log_pos} names no column present in its row images"
            )
        partial = type_code == EventType.PARTIAL_UPDATE_ROWS
        key = (kind, present, present_after, partial)
        shape = mapped.shapes.get(key) or mapped.shape(key)
        if type_code in _COMPRESSED_ROWS_TYPES:
            data = decompress_mariadb(data[pos:])
            pos = 0
        rows = EventRows(data, pos, len(data), shape, mapped, type_code, header.log_pos)
        return RowsEvent(
            header,
            kind,
            table_id,
            table_map,
            rows if self.lazy_rows else rows.decode(),
            shape.absent_before,
            shape.absent_after,
        )

    def _transaction_payload(self, header: EventHeader, data: bytes) -> TransactionPayloadEvent:
        """MySQL 8.0.20+ TRANSACTION_PAYLOAD: header TLVs, then the compressed transaction.

        Layout (libbinlogevents ``codecs/binary.cpp``, ``Transaction_payload::decode``):
        fields of packed-int ``type``, ``length``, ``value`` until the end mark (type 0); then
        exactly ``PAYLOAD_SIZE`` bytes of payload: the transaction's events, each with its
        own 19-byte header and, unlike events in a binlog file, no checksum (WL#3549: the
        payload event's own checksum covers them).
        """
        where = f"TRANSACTION_PAYLOAD ending at position {header.log_pos}"
        post = self._post_header_length(header.type_code, _TRANSACTION_PAYLOAD_POST_HEADER)
        pos, end = EVENT_HEADER_SIZE + post, len(data)
        fields: dict[TransactionPayloadField, int] = {}
        while True:
            if pos >= end:
                raise ProtocolError(
                    f"{where} ends inside its header fields, before the end mark (field type 0)"
                )
            kind, pos = read_lenenc(data, pos)
            if kind == TransactionPayloadField.HEADER_END_MARK:
                break
            length, pos = read_lenenc(data, pos)
            if pos + length > end:
                raise ProtocolError(
                    f"{where}: header field {kind} announces {length} bytes but the event has "
                    f"{end - pos} left"
                )
            if kind in _PAYLOAD_VALUE_FIELDS:
                value, stop = read_lenenc(data, pos)
                if stop != pos + length:
                    raise ProtocolError(
                        f"{where}: header field {TransactionPayloadField(kind).name} announces "
                        f"{length} bytes but its value takes {stop - pos}"
                    )
                fields[TransactionPayloadField(kind)] = value
            # other field types are skipped by their length, as MySQL's own decoder does:
            # later servers append fields that do not change how the payload is read
            pos += length
        size = fields.get(TransactionPayloadField.PAYLOAD_SIZE)
        code = fields.get(TransactionPayloadField.COMPRESSION_TYPE)
        if size is None or code is None:
            raise ProtocolError(
                f"{where} has no {'payload size' if size is None else 'compression type'} "
                "header field; MySQL always writes both"
            )
        try:
            compression = PayloadCompression(code)
        except ValueError:
            raise ProtocolError(
                f"{where} names compression type {code}, expected 0 (ZSTD) or 255 (NONE); "
                "a newer server compresses in a way sparkcdc cannot read: set "
                "binlog_transaction_compression=OFF on the source"
            ) from None
        if end - pos != size:
            raise ProtocolError(
                f"{where} announces a payload of {size} bytes but {end - pos} follow its "
                "header; the event is corrupt"
            )
        uncompressed = fields.get(TransactionPayloadField.UNCOMPRESSED_SIZE)
        payload = data[pos:end]
        if compression is PayloadCompression.NONE:
            raw = payload
        else:
            if uncompressed is None:
                raise ProtocolError(
                    f"{where} is ZSTD-compressed but has no uncompressed size header field, "
                    "so its contents cannot be verified; MySQL always writes it"
                )
            raw = zstd_decompress(payload, uncompressed, where)
        if compression is PayloadCompression.NONE and uncompressed not in (None, len(raw)):
            raise ProtocolError(
                f"{where}: the payload holds {len(raw)} bytes of events, its header says "
                f"{uncompressed}; the event is corrupt"
            )
        return TransactionPayloadEvent(
            header, compression, len(raw), self._payload_events(raw, where)
        )

    def _payload_events(self, raw: bytes, where: str) -> tuple[BinlogEvent, ...]:
        """Decode the events of a transaction payload with this decoder.

        The TABLE_MAPs of the payload's transaction serve its ROWS events and end with it:
        the payload starts with no table maps and the ones from before are restored after.
        """
        events: list[BinlogEvent] = []
        outer_tables = self._tables
        self._tables = {}
        try:
            pos, end = 0, len(raw)
            while pos < end:
                if end - pos < EVENT_HEADER_SIZE:
                    raise ProtocolError(
                        f"{where}: the payload ends inside an event header at byte {pos} of "
                        f"{end}; the event is corrupt"
                    )
                _ts, type_code, _server, size, _log_pos, _flags = EVENT_HEADER.unpack_from(raw, pos)
                if size < EVENT_HEADER_SIZE or pos + size > end:
                    raise ProtocolError(
                        f"{where}: inner event {len(events) + 1} at byte {pos} announces "
                        f"{size} bytes but the payload has {end - pos} left; the event is corrupt"
                    )
                if type_code == EventType.TRANSACTION_PAYLOAD:
                    raise ProtocolError(
                        f"{where}: inner event {len(events) + 1} is itself a "
                        "TRANSACTION_PAYLOAD; payloads do not nest, the event is corrupt"
                    )
                try:
                    events.append(self.decode(raw[pos : pos + size]))
                except ProtocolError as exc:
                    raise ProtocolError(
                        f"{where}, inner event {len(events) + 1} at byte {pos} of the "
                        f"payload: {exc}"
                    ) from None
                pos += size
        finally:
            self._tables = outer_tables
        return tuple(events)

    def _query(self, header: EventHeader, data: bytes) -> QueryEvent:
        thread_id, exec_time, db_len, error_code, status_len = _QUERY_POST_HEADER.unpack_from(
            data, EVENT_HEADER_SIZE
        )
        post = self._post_header_length(header.type_code, _QUERY_POST_HEADER.size)
        pos = EVENT_HEADER_SIZE + post + status_len
        database = data[pos : pos + db_len].decode("utf-8", "replace")
        pos += db_len + 1  # NUL terminator
        query = data[pos:]
        if header.type_code == EventType.MARIA_QUERY_COMPRESSED:
            query = decompress_mariadb(query)
        return QueryEvent(
            header, thread_id, exec_time, error_code, database, query.decode("utf-8", "replace")
        )

    def _xid(self, header: EventHeader, data: bytes) -> XidEvent:
        return XidEvent(header, _U64.unpack_from(data, EVENT_HEADER_SIZE)[0])

    def _mysql_gtid(self, header: EventHeader, data: bytes) -> GtidEvent:
        _flags, sid, gno = _MYSQL_GTID.unpack_from(data, EVENT_HEADER_SIZE)
        return GtidEvent(header, _format_uuid(sid), gno)

    def _maria_gtid(self, header: EventHeader, data: bytes) -> MariaGtidEvent:
        sequence, domain, flags = _MARIA_GTID.unpack_from(data, EVENT_HEADER_SIZE)
        return MariaGtidEvent(
            header,
            domain,
            sequence,
            bool(flags & MariaGtidFlag.STANDALONE),
            xa_prepare=bool(flags & MariaGtidFlag.PREPARED_XA),
            xa_complete=bool(flags & MariaGtidFlag.COMPLETED_XA),
        )

    def _maria_gtid_list(self, header: EventHeader, data: bytes) -> MariaGtidListEvent:
        (raw_count,) = _MARIA_GTID_LIST_COUNT.unpack_from(data, EVENT_HEADER_SIZE)
        count = raw_count & _MARIA_GTID_LIST_COUNT_MASK
        pos = EVENT_HEADER_SIZE + _MARIA_GTID_LIST_COUNT.size
        gtids = []
        for _ in range(count):
            gtids.append(_MARIA_GTID_LIST_ENTRY.unpack_from(data, pos))
            pos += _MARIA_GTID_LIST_ENTRY.size
        return MariaGtidListEvent(header, tuple(gtids))

    def _previous_gtids(self, header: EventHeader, data: bytes) -> PreviousGtidsEvent:
        pos = EVENT_HEADER_SIZE
        (n_sids,) = _U64.unpack_from(data, pos)
        pos += _U64.size
        parts = []
        for _ in range(n_sids):
            sid, n_intervals = _PREV_GTIDS_SID.unpack_from(data, pos)
            pos += _PREV_GTIDS_SID.size
            text = _format_uuid(sid)
            for _ in range(n_intervals):
                start, stop = _PREV_GTIDS_INTERVAL.unpack_from(data, pos)
                pos += _PREV_GTIDS_INTERVAL.size
                last = stop - 1  # stored end is exclusive
                text += f":{start}" if start == last else f":{start}-{last}"
            parts.append(text)
        return PreviousGtidsEvent(header, ",".join(parts))

    def _heartbeat(self, header: EventHeader, data: bytes) -> HeartbeatEvent:
        return HeartbeatEvent(header, data[EVENT_HEADER_SIZE:].decode("utf-8", "replace"))

    def _heartbeat_v2(self, header: EventHeader, data: bytes) -> HeartbeatEvent:
        # body: TLV fields (type u8, length-encoded length, value)
        pos = EVENT_HEADER_SIZE
        name = ""
        while pos < len(data):
            kind = data[pos]
            length, pos = read_lenenc(data, pos + 1)
            if kind == _HEARTBEAT_V2_LOG_FILENAME:
                name = data[pos : pos + length].decode("utf-8", "replace")
            pos += length
        return HeartbeatEvent(header, name)

    def _annotate_rows(self, header: EventHeader, data: bytes) -> AnnotateRowsEvent:
        return AnnotateRowsEvent(header, data[EVENT_HEADER_SIZE:].decode("utf-8", "replace"))


# distinct TABLE_MAP bodies remembered before the cache starts over
_MAP_CACHE_LIMIT = 4096
