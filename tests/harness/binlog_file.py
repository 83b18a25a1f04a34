"""Binlog files read from disk, for the tests: the events of a file's bytes, checksums checked.

The decoder type tests read what MariaDB wrote straight from its data directory; sparkcdc
itself reads binlogs only over the replication protocol.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog.decoder import checksum_aware
from sparkcdc.mysql.protocol.constants import (
    BINLOG_MAGIC,
    CHECKSUM_ALG_SIZE,
    CHECKSUM_SIZE,
    EVENT_FLAGS_OFFSET,
    EVENT_HEADER,
    EVENT_HEADER_SIZE,
    FIRST_EVENT_POS,
    FORMAT_DESCRIPTION_FIXED,
    LOG_EVENT_BINLOG_IN_USE_F,
    BinlogChecksum,
    EventType,
)

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def split_binlog_file(data: bytes) -> Iterator[bytes]:
    """Walk a binlog file's bytes and yield each event with its checksum stripped.

    The file starts with ``b'\\xfebin'``; the FORMAT_DESCRIPTION that follows says whether
    events carry a CRC32 trailer. Each CRC32 is verified (``zlib.crc32`` of header + body).

    >>> list(split_binlog_file(BINLOG_MAGIC))
    []
    """
    if data[: len(BINLOG_MAGIC)] != BINLOG_MAGIC:
        raise ProtocolError(
            f"not a binlog file: it starts with {data[:4].hex()}, expected {BINLOG_MAGIC.hex()}"
        )
    pos = FIRST_EVENT_POS
    crc = False
    end = len(data)
    while pos < end:
        if end - pos < EVENT_HEADER_SIZE:
            raise ProtocolError(
                f"binlog file ends inside an event header at byte {pos} ({end - pos} bytes left)"
            )
        _ts, type_code, _server, size, _log_pos, _flags = EVENT_HEADER.unpack_from(data, pos)
        if size < EVENT_HEADER_SIZE or pos + size > end:
            raise ProtocolError(
                f"binlog event at byte {pos} announces {size} bytes but the file has "
                f"{end - pos} left; read the file only up to a position the server reported"
            )
        event = data[pos : pos + size]
        strip = crc
        if type_code == EventType.FORMAT_DESCRIPTION:
            _, version, _, _ = FORMAT_DESCRIPTION_FIXED.unpack_from(event, EVENT_HEADER_SIZE)
            if checksum_aware(version.split(b"\0", 1)[0].decode("ascii", "replace")):
                # a checksum-aware server's FDE always has the algorithm byte + 4-byte trailer
                alg = event[-(CHECKSUM_SIZE + CHECKSUM_ALG_SIZE)]
                crc = alg == BinlogChecksum.CRC32
                strip = True
            else:
                crc = strip = False
        if strip:
            body, trailer = event[:-CHECKSUM_SIZE], event[-CHECKSUM_SIZE:]
            if crc:
                _verify_crc32(body, trailer, type_code, pos)
            yield body
        else:
            yield event
        pos += size


def _verify_crc32(body: bytes, trailer: bytes, type_code: int, pos: int) -> None:
    checked = body
    if type_code == EventType.FORMAT_DESCRIPTION:
        # the server sets "binlog in use" in the FDE flags after computing its checksum
        flags = _U16.unpack_from(body, EVENT_FLAGS_OFFSET)[0] & ~LOG_EVENT_BINLOG_IN_USE_F
        checked = body[:EVENT_FLAGS_OFFSET] + _U16.pack(flags) + body[EVENT_HEADER_SIZE:]
    computed = zlib.crc32(checked)
    if computed != _U32.unpack(trailer)[0]:
        raise ProtocolError(
            f"CRC32 mismatch in binlog event type {type_code} at byte {pos}: stored "
            f"{trailer[::-1].hex()}, computed {computed:08x}; the file is corrupt or was "
            "read while being written past the position the server reported"
        )
