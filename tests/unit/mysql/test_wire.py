"""Wire protocol codecs: framing, handshake, auth scrambles, commands (pure bytes)."""

from __future__ import annotations

import socket
import struct
import threading
import uuid

import pymysql._auth as reference_auth
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import ProtocolError
from sparkcdc.model.position import MySqlGtidSet
from sparkcdc.mysql.protocol import wire
from sparkcdc.mysql.protocol.constants import Command


def _handshake_bytes(plugin: bytes = b"mysql_native_password") -> bytes:
    nonce = bytes(range(1, 21))
    caps = (
        wire.Capability.PROTOCOL_41
        | wire.Capability.SECURE_CONNECTION
        | wire.Capability.PLUGIN_AUTH
        | wire.Capability.LONG_PASSWORD
    )
    return (
        b"\x0a"
        + b"5.5.5-10.11.6-MariaDB-log\x00"
        + struct.pack("<I", 42)
        + nonce[:8]
        + b"\x00"
        + struct.pack("<H", caps & 0xFFFF)
        + struct.pack("<BHHB10s", 45, 2, caps >> 16, 21, bytes(10))
        + nonce[8:]
        + b"\x00"
        + plugin
        + b"\x00"
    )


def test_parse_handshake_v10() -> None:
    hs = wire.parse_handshake(_handshake_bytes())
    assert hs.server_version == "5.5.5-10.11.6-MariaDB-log"
    assert hs.connection_id == 42
    assert hs.nonce == bytes(range(1, 21))
    assert hs.auth_plugin == "mysql_native_password"
    assert hs.is_mariadb
    assert hs.capabilities & wire.Capability.PLUGIN_AUTH


def test_parse_handshake_rejects_other_protocols() -> None:
    with pytest.raises(ProtocolError, match="protocol version 9"):
        wire.parse_handshake(b"\x09abc")
    with pytest.raises(ProtocolError, match="Too many connections"):
        wire.parse_handshake(b"\xff\x10\x04Too many connections")


@pytest.mark.parametrize("password", ["", "cdc-dev-password", "pässwörd ☃"])
def test_scrambles_match_reference(password: str) -> None:
    nonce = bytes(range(100, 120))
    assert wire.scramble_native_password(password, nonce) == (
        reference_auth.scramble_native_password(password.encode(), nonce)
    )
    if password:
        assert wire.scramble_caching_sha2(password, nonce) == (
            reference_auth.scramble_caching_sha2(password.encode(), nonce)
        )


def test_unknown_auth_plugin_is_a_clear_error() -> None:
    with pytest.raises(ProtocolError, match=r"auth_gssapi_client.*mysql_native_password"):
        wire.auth_response_for("auth_gssapi_client", "pw", bytes(20))


def test_rsa_encrypt_password_round_trips() -> None:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    nonce = bytes(range(20))
    secret = wire.rsa_encrypt_password("pw", nonce, pem)
    plain = key.decrypt(
        secret,
        padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None),
    )
    assert bytes(b ^ nonce[i % 20] for i, b in enumerate(plain)) == b"pw\x00"


def test_handshake_response_layout() -> None:
    caps = wire.CLIENT_CAPABILITIES
    payload = wire.handshake_response("cdc", b"\x01" * 20, "mysql_native_password", caps)
    flags, max_packet, charset = struct.unpack_from("<IIB", payload)
    assert flags == caps and max_packet == wire.CLIENT_MAX_PACKET_SIZE and charset == 45
    rest = payload[32:]
    assert rest.startswith(b"cdc\x00\x14" + b"\x01" * 20 + b"mysql_native_password\x00")


def test_parse_err_and_eof() -> None:
    err = wire.parse_err(b"\xff\xd4\x04#HY000Could not find first log file name")
    assert (err.code, err.sql_state) == (1236, "HY000")
    assert "first log file" in err.message
    assert wire.is_eof(b"\xfe\x00\x00\x02\x00")
    assert not wire.is_eof(b"\xfe" + bytes(20))  # a long 0xFE payload is data


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_lenenc_int_round_trip(value: int) -> None:
    encoded = wire.lenenc_int(value)
    assert wire.read_lenenc_int(encoded, 0) == (value, len(encoded))


def test_text_row_with_null() -> None:
    assert wire.parse_text_row(b"\x03CRC\xfb", 2) == ("CRC", None)


@pytest.mark.parametrize(
    ("size", "packets"),
    [
        (0, 1),
        (10, 1),
        (wire.MAX_PACKET_PAYLOAD - 1, 1),
        (wire.MAX_PACKET_PAYLOAD, 2),
        (wire.MAX_PACKET_PAYLOAD + 5, 2),
        (2 * wire.MAX_PACKET_PAYLOAD, 3),
    ],
)
def test_framing_splits_large_payloads(size: int, packets: int) -> None:
    payload = bytes(i & 0xFF for i in range(size))
    framed, next_seq = wire.frame_packets(payload, 7)
    assert next_seq == (7 + packets) & 0xFF
    assert len(framed) == size + 4 * packets
    # read it back through a real socket pair
    left, right = socket.socketpair()
    try:
        sender = threading.Thread(target=left.sendall, args=(framed,))
        sender.start()
        channel = wire.PacketChannel(right)
        channel.seq = 7
        assert channel.read_packet() == payload
        sender.join()
        assert channel.seq == next_seq
    finally:
        left.close()
        right.close()


def test_channel_detects_out_of_order_and_closed_peer() -> None:
    left, right = socket.socketpair()
    try:
        left.sendall(b"\x01\x00\x00\x05\x00")
        channel = wire.PacketChannel(right)
        with pytest.raises(ProtocolError, match="sequence id 5, expected 0"):
            channel.read_packet()
        left.close()
        channel = wire.PacketChannel(right)
        with pytest.raises(wire.ConnectionLostError):
            channel.read_packet()
    finally:
        right.close()


def test_send_command_resets_sequence() -> None:
    left, right = socket.socketpair()
    try:
        channel = wire.PacketChannel(left)
        channel.seq = 3
        channel.send_command(Command.PING)
        assert right.recv(16) == b"\x01\x00\x00\x00\x0e"
    finally:
        left.close()
        right.close()


def test_replication_commands_layout() -> None:
    body = wire.com_binlog_dump("mysql-bin.000003", 154, 1, 5401)
    assert struct.unpack_from("<IHI", body) == (154, 1, 5401)
    assert body[10:] == b"mysql-bin.000003"

    reg = wire.com_register_slave(5401, "host", "cdc", 0)
    assert reg == struct.pack("<I", 5401) + b"\x04host\x03cdc\x00" + struct.pack("<HII", 0, 0, 0)

    gtid = wire.com_binlog_dump_gtid("", 4, 1, 5401, b"SIDS")
    flags, server_id, name_len = struct.unpack_from("<HII", gtid)
    assert flags == wire.GtidDumpFlag.NON_BLOCK | wire.GtidDumpFlag.THROUGH_GTID
    assert (server_id, name_len) == (5401, 0)
    assert gtid[10:] == struct.pack("<QI", 4, 4) + b"SIDS"


def test_sid_set_encoding() -> None:
    sid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    gtids = MySqlGtidSet.parse(f"{sid}:1-5:7")
    encoded = wire.encode_sid_set(gtids.sets)
    # n_sids, uuid, n_intervals, [1, 6), [7, 8)
    assert encoded == (
        struct.pack("<Q", 1) + uuid.UUID(sid).bytes + struct.pack("<QQQQQ", 2, 1, 6, 7, 8)
    )
    assert wire.decode_sid_set(encoded) == gtids.sets
    with pytest.raises(ProtocolError, match="malformed"):
        wire.decode_sid_set(encoded[:-3])
