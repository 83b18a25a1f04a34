"""The login state machine against a scripted server on a socket pair.

The dev server (MariaDB) has no caching_sha2_password, so its fast path, its RSA full
authentication and the auth switch are exercised here, packet by packet.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from sparkcdc.errors import SourceError
from sparkcdc.mysql import wire
from sparkcdc.mysql.connection import ConnectionSettings
from sparkcdc.mysql.replication import BinlogClient

PASSWORD = "s3cret-pw"
NONCE = bytes(range(33, 53))
OK = b"\x00\x00\x00\x02\x00\x00\x00"

Script = Callable[[wire.PacketChannel], None]


def _handshake(plugin: str) -> bytes:
    caps = wire.CLIENT_CAPABILITIES | wire.Capability.CONNECT_WITH_DB
    return (
        b"\x0a8.0.36\x00"
        + struct.pack("<I", 7)
        + NONCE[:8]
        + b"\x00"
        + struct.pack("<H", caps & 0xFFFF)
        + struct.pack("<BHHB10s", 45, 2, caps >> 16, 21, bytes(10))
        + NONCE[8:]
        + b"\x00"
        + plugin.encode()
        + b"\x00"
    )


def _auth_data(response: bytes) -> bytes:
    user_end = response.index(b"\x00", 32)
    length, offset = wire.read_lenenc_int(response, user_end + 1)
    assert length is not None
    return response[offset : offset + length]


@pytest.fixture
def login() -> Iterator[Callable[[str, Script], None]]:
    sockets: list[socket.socket] = []

    def run(plugin: str, script: Script) -> None:
        client_sock, server_sock = socket.socketpair()
        sockets.extend([client_sock, server_sock])
        server = wire.PacketChannel(server_sock)
        failures: list[BaseException] = []

        def serve() -> None:
            try:
                server.write_packet(_handshake(plugin))
                script(server)
            except BaseException as exc:  # reported in the test thread
                failures.append(exc)

        thread = threading.Thread(target=serve)
        thread.start()
        client = BinlogClient(ConnectionSettings("127.0.0.1", 3306, "cdc", PASSWORD), 5401)
        client._channel = wire.PacketChannel(client_sock)
        try:
            client._authenticate(wire.parse_handshake(client._channel.read_packet()))
        finally:
            thread.join(5)
        if failures:
            raise failures[0]

    yield run
    for s in sockets:
        s.close()


def test_caching_sha2_fast_auth(login: Callable[[str, Script], None]) -> None:
    def script(server: wire.PacketChannel) -> None:
        response = server.read_packet()
        assert _auth_data(response) == wire.scramble_caching_sha2(PASSWORD, NONCE)
        server.write_packet(b"\x01\x03")  # fast auth success
        server.write_packet(OK)

    login("caching_sha2_password", script)


def test_caching_sha2_full_auth_with_rsa(login: Callable[[str, Script], None]) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\x01\x04")  # perform full authentication
        assert server.read_packet() == b"\x02"  # the client asks for the public key
        server.write_packet(b"\x01" + pem)
        secret = server.read_packet()
        oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
        plain = key.decrypt(secret, oaep)
        assert bytes(b ^ NONCE[i % 20] for i, b in enumerate(plain)) == PASSWORD.encode() + b"\0"
        server.write_packet(OK)

    login("caching_sha2_password", script)


def test_auth_switch_to_native_password(login: Callable[[str, Script], None]) -> None:
    new_nonce = bytes(range(70, 90))

    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\xfemysql_native_password\x00" + new_nonce + b"\x00")
        assert server.read_packet() == wire.scramble_native_password(PASSWORD, new_nonce)
        server.write_packet(OK)

    login("caching_sha2_password", script)


def test_access_denied(login: Callable[[str, Script], None]) -> None:
    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\xff\x15\x04#28000Access denied for user 'cdc'@'10.0.0.1'")

    with pytest.raises(SourceError, match=r"access denied for user cdc@127\.0\.0\.1") as raised:
        login("mysql_native_password", script)
    assert PASSWORD not in str(raised.value)
