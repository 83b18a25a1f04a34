"""The messages inside START_REPLICATION's CopyBoth stream, as pure functions of bytes.

Server to client: XLogData ('w', carrying one pgoutput message) and primary keepalive
('k'); client to server: standby status update ('r'). Layouts:
https://www.postgresql.org/docs/current/protocol-replication.html ("START_REPLICATION").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from sparkcdc.errors import ProtocolError
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import POSTGRES_EPOCH


class CopyMessageType(bytes, Enum):
    XLOG_DATA = b"w"
    PRIMARY_KEEPALIVE = b"k"
    STANDBY_STATUS_UPDATE = b"r"


# XLogData: Byte1('w') Int64 dataStart, Int64 walEnd, Int64 sendTime, then the data
_XLOG_DATA = struct.Struct(">cQQq")
# Primary keepalive: Byte1('k') Int64 walEnd, Int64 sendTime, Byte1 replyRequested
_KEEPALIVE = struct.Struct(">cQqB")
# Standby status update: Byte1('r') Int64 written, Int64 flushed, Int64 applied,
# Int64 clientTime, Byte1 replyRequested
_STATUS_UPDATE = struct.Struct(">cQQQqB")


@dataclass(frozen=True)
class XLogData:
    data_start: Lsn
    wal_end: Lsn
    send_time: datetime
    data: bytes


@dataclass(frozen=True)
class PrimaryKeepalive:
    wal_end: Lsn  # the server has sent everything before this position
    send_time: datetime
    reply_requested: bool  # answer soon, or wal_sender_timeout ends the connection


def _time(microseconds: int) -> datetime:
    try:
        return POSTGRES_EPOCH + timedelta(microseconds=microseconds)
    except OverflowError:
        raise ProtocolError(
            f"a replication message has a send time of {microseconds} microseconds since "
            "2000-01-01, outside the years 1-9999: the message is damaged"
        ) from None


def decode_copy_message(payload: bytes) -> XLogData | PrimaryKeepalive:
    """One CopyData payload of the replication stream.

    >>> decode_copy_message(bytes.fromhex("6b" "0000000000000010" "0000000000000000" "01"))
    PrimaryKeepalive(wal_end=Lsn(value=16), send_time=datetime.datetime(2000, 1, 1, 0, 0, tzinfo=datetime.timezone.utc), reply_requested=True)
    """  # noqa: E501
    kind = payload[:1]
    if kind == CopyMessageType.XLOG_DATA.value and len(payload) >= _XLOG_DATA.size:
        _, start, end, sent = _XLOG_DATA.unpack_from(payload)
        return XLogData(Lsn(start), Lsn(end), _time(sent), payload[_XLOG_DATA.size :])
    if kind == CopyMessageType.PRIMARY_KEEPALIVE.value and len(payload) == _KEEPALIVE.size:
        _, end, sent, reply = _KEEPALIVE.unpack(payload)
        return PrimaryKeepalive(Lsn(end), _time(sent), bool(reply))
    raise ProtocolError(
        f"a replication stream message of {len(payload)} bytes starting {payload[:1]!r}: "
        f"expected XLogData ('w', at least {_XLOG_DATA.size} bytes) or a primary keepalive "
        f"('k', {_KEEPALIVE.size} bytes)"
    )


def standby_status_update(confirmed: Lsn, now: datetime, *, reply_requested: bool = False) -> bytes:
    """The feedback that tells the server how far the client has durably kept the stream.

    For a logical slot the flushed position becomes the slot's ``confirmed_flush_lsn``, and
    the server may recycle WAL before it; ``Lsn(0)`` confirms nothing. The written and
    applied positions are reported as the same.

    >>> from datetime import UTC, datetime
    >>> standby_status_update(Lsn(16), datetime(2000, 1, 1, tzinfo=UTC)).hex()
    '72000000000000001000000000000000100000000000000010000000000000000000'
    """
    micros = (now - POSTGRES_EPOCH) // timedelta(microseconds=1)
    return _STATUS_UPDATE.pack(
        CopyMessageType.STANDBY_STATUS_UPDATE.value,
        confirmed.value,
        confirmed.value,
        confirmed.value,
        micros,
        int(reply_requested),
    )
