"""Named constants of the MySQL/MariaDB client/server and replication protocols.

Byte layouts:
- packets and handshake: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html
- binlog events: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html
- MariaDB extensions: https://mariadb.com/kb/en/replication-protocol/
"""

from __future__ import annotations

import struct
from enum import IntEnum, IntFlag


class EventType(IntEnum):
    """Binlog event type codes (byte 4 of the common event header)."""

    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    SLAVE = 7
    APPEND_BLOCK = 9
    DELETE_FILE = 11
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS_V2 = 30
    UPDATE_ROWS_V2 = 31
    DELETE_ROWS_V2 = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    # MariaDB (https://mariadb.com/kb/en/2-binlog-event-header/)
    MARIA_ANNOTATE_ROWS = 160
    MARIA_BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    MARIA_START_ENCRYPTION = 164
    MARIA_QUERY_COMPRESSED = 165
    MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIA_WRITE_ROWS_COMPRESSED = 169
    MARIA_UPDATE_ROWS_COMPRESSED = 170
    MARIA_DELETE_ROWS_COMPRESSED = 171


class ColumnType(IntEnum):
    """Column type codes as they appear in TABLE_MAP events (enum_field_types)."""

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


class TransactionPayloadField(IntEnum):
    """Header fields of TRANSACTION_PAYLOAD (MySQL 8.0.20+ ``binlog_transaction_compression``).

    The body starts with fields ``type value-length value`` (all three packed integers,
    MySQL's ``net_field_length``; see libbinlogevents ``codecs/binary.cpp``,
    ``Transaction_payload::decode``), ended by the type ``HEADER_END_MARK`` alone; the
    payload (the transaction's events, compressed) fills the rest of the event.
    """

    HEADER_END_MARK = 0
    PAYLOAD_SIZE = 1
    COMPRESSION_TYPE = 2
    UNCOMPRESSED_SIZE = 3


class PayloadCompression(IntEnum):
    """Compression type of a TRANSACTION_PAYLOAD (``mysql::binlog::event::compression::type``)."""

    ZSTD = 0
    NONE = 255


class RowsValueOption(IntFlag):
    """``value_options`` that start each after image of PARTIAL_UPDATE_ROWS (a packed int)."""

    # some JSON columns of the after image are logged as diffs; a bitmap saying which follows
    PARTIAL_JSON_UPDATES = 1


class BinlogChecksum(IntEnum):
    """Checksum algorithm byte at the end of FORMAT_DESCRIPTION."""

    OFF = 0
    CRC32 = 1
    UNDEFINED = 255


class DumpFlag(IntFlag):
    """Flags of COM_BINLOG_DUMP."""

    NONE = 0
    # the server answers EOF at the end of the binlog instead of waiting for more
    NON_BLOCK = 1


class Command(IntEnum):
    """Client command bytes (first byte of a command packet)."""

    QUIT = 0x01
    QUERY = 0x03
    PING = 0x0E
    BINLOG_DUMP = 0x12
    REGISTER_SLAVE = 0x15
    BINLOG_DUMP_GTID = 0x1E


# Common binlog event header (v4): timestamp u32, type u8, server_id u32,
# event_size u32, log_pos u32 (end position of the event), flags u16.
EVENT_HEADER = struct.Struct("<IBIIIH")
EVENT_HEADER_SIZE = EVENT_HEADER.size  # 19
EVENT_FLAGS_OFFSET = EVENT_HEADER_SIZE - 2  # the flags u16 ends the header
# the CRC32 trailer of every event when checksums are on (BinlogChecksum.CRC32)
CHECKSUM_SIZE = 4

# common header flag LOG_EVENT_IGNORABLE_F: a server that does not know the event type may
# skip it; without it, an unknown event type must stop replication
LOG_EVENT_IGNORABLE_F = 0x0080
# common header flag LOG_EVENT_BINLOG_IN_USE_F, set in a file's FORMAT_DESCRIPTION while
# the server writes the file (cleared when it is closed): the server sets it after
# computing the event's checksum, so the CRC32 covers the header with it clear
LOG_EVENT_BINLOG_IN_USE_F = 0x0001

# FORMAT_DESCRIPTION body (after the common header): binlog_version u16, server_version
# char[50] (NUL-padded), create_timestamp u32, header_length u8; then one post-header
# length u8 per event type; then, from a checksum-aware server (MySQL >= 5.6.1, MariaDB
# >= 5.3), the checksum algorithm byte (BinlogChecksum), CHECKSUM_ALG_SIZE long, and the
# event's own CRC32 trailer when checksums are on. Layout: FORMAT_DESCRIPTION_EVENT on the
# binlog events page above (MySQL's libbinlogevents: Format_description_event).
FORMAT_DESCRIPTION_FIXED = struct.Struct("<H50sIB")
CHECKSUM_ALG_SIZE = 1

# binlog files start with this magic; the first event is at offset 4
BINLOG_MAGIC = b"\xfebin"
FIRST_EVENT_POS = 4


# Columns the TABLE_MAP optional metadata describes: SIGNEDNESS covers the numeric ones
# (MariaDB adds YEAR), the character-set fields the character ones (MariaDB adds GEOMETRY;
# ENUM/SET have fields of their own).
NUMERIC_TYPES = frozenset(
    {
        ColumnType.TINY,
        ColumnType.SHORT,
        ColumnType.INT24,
        ColumnType.LONG,
        ColumnType.LONGLONG,
        ColumnType.NEWDECIMAL,
        ColumnType.FLOAT,
        ColumnType.DOUBLE,
    }
)
CHARACTER_TYPES = frozenset(
    {
        ColumnType.STRING,
        ColumnType.VAR_STRING,
        ColumnType.VARCHAR,
        ColumnType.BLOB,
        ColumnType.TINY_BLOB,
        ColumnType.MEDIUM_BLOB,
        ColumnType.LONG_BLOB,
    }
)
