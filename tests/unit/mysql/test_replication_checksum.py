"""CRC32 verification of binlog events, and small pure helpers of the client."""

from __future__ import annotations

import zlib

import pytest

from sparkcdc.errors import ConfigError, ProtocolError
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EventType
from sparkcdc.mysql.protocol.replication import (
    ROTATE_POSITION,
    BinlogClient,
    parse_rotate,
    verify_checksum,
)


def _event(body: bytes, type_code: int = EventType.QUERY) -> bytes:
    size = EVENT_HEADER.size + len(body) + 4
    content = EVENT_HEADER.pack(1_700_000_000, type_code, 1, size, 1000 + size, 0) + body
    return content + zlib.crc32(content).to_bytes(4, "little")


def test_valid_checksum_is_stripped() -> None:
    event = _event(b"BEGIN")
    assert verify_checksum(event, "mysql-bin.000001:1000") == event[:-4]


@pytest.mark.parametrize("flip", [0, 4, 19, -5, -1])
def test_any_flipped_byte_is_detected(flip: int) -> None:
    event = bytearray(_event(b"INSERT INTO t VALUES (1)"))
    event[flip] ^= 0x01
    with pytest.raises(ProtocolError, match=r"at mysql-bin.000001:1000 fails its CRC32"):
        verify_checksum(bytes(event), "mysql-bin.000001:1000")


def test_truncated_event_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="shorter than a header"):
        verify_checksum(b"\x00" * 10, "x:4")


def test_parse_rotate() -> None:
    event = EVENT_HEADER.pack(0, EventType.ROTATE, 1, 0, 0, 0x20)
    event += ROTATE_POSITION.pack(154) + b"mysql-bin.000007"
    position = parse_rotate(event)
    assert (position.file, position.pos) == ("mysql-bin.000007", 154)


def test_client_rejects_bad_server_id_and_heartbeat() -> None:
    settings = ConnectionSettings("127.0.0.1", 1, "u", "p", read_timeout_s=10)
    with pytest.raises(ConfigError, match="server-id 0 is out of range"):
        BinlogClient(settings, 0)
    with pytest.raises(ConfigError, match="heartbeat period 30s"):
        BinlogClient(settings, 1, heartbeat_period_s=30)


def test_settings_repr_hides_password() -> None:
    settings = ConnectionSettings("db", 3306, "cdc", "hunter2")
    assert "hunter2" not in repr(settings)
    assert settings.endpoint == "db:3306"
