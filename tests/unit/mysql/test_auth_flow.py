"""The login state machine against a scripted server on a socket pair.

The dev server (MariaDB) has no caching_sha2_password, so its fast path, its full
authentication (in clear inside TLS; RSA with a pinned or, when allowed, a retrieved key)
and the auth switch are exercised here, packet by packet, with both of sparkcdc's clients
(the replication client and pymysql's SQL connections under sparkcdc's key guard), as MySQL
documents the exchange:
https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from sparkcdc.errors import SourceError
from sparkcdc.model.tls import TlsSettings
from sparkcdc.mysql.protocol import wire
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.replication import BinlogClient
from sparkcdc_dev.devserver import TlsFiles

PASSWORD = "s3cret-pw"
NONCE = bytes(range(33, 53))
OK = b"\x00\x00\x00\x02\x00\x00\x00"

Script = Callable[[wire.PacketChannel], None]


def _handshake(plugin: str, tls: bool = False) -> bytes:
    caps = wire.CLIENT_CAPABILITIES | wire.Capability.CONNECT_WITH_DB
    if tls:
        caps |= wire.Capability.SSL
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


Login = Callable[..., None]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    files = TlsFiles.under(tmp_path_factory.mktemp("tls"))
    files.ensure()
    return files


@pytest.fixture(params=["replication", "sql"])
def login(request: pytest.FixtureRequest, certificates: TlsFiles) -> Iterator[Login]:
    """``login(plugin, script, tls=TlsSettings(...), server_tls=False)``: the client logs in
    to a scripted server; with ``server_tls`` the server offers TLS and, when the client
    sends an SSLRequest, the script runs over TLS.

    Each test runs with both clients: the replication client (``BinlogClient``, on a socket
    pair) and the SQL connections (``sql_connection``: pymysql under sparkcdc's key guard,
    on a loopback TCP socket, which is what pymysql opens).
    """
    sockets: list[socket.socket] = []
    client_kind: str = request.param

    def run(
        plugin: str, script: Script, tls: TlsSettings | None = None, server_tls: bool = False
    ) -> None:
        failures: list[BaseException] = []

        def serve(server_sock: socket.socket) -> None:
            server = wire.PacketChannel(server_sock)
            try:
                server.write_packet(_handshake(plugin, server_tls))
                if server_tls:
                    # exactly the SSLRequest's bytes: the ClientHello behind them is TLS's
                    # to read (a PacketChannel would buffer it)
                    packet = b""
                    while len(packet) < 36:
                        chunk = server_sock.recv(36 - len(packet))
                        assert chunk, "the client closed the connection"
                        packet += chunk
                    assert packet[:4] == b"\x20\x00\x00\x01", packet  # 32 bytes, seq 1
                    request = packet[4:]
                    server.seq = 2
                    (caps,) = struct.unpack_from("<I", request)
                    assert caps & wire.Capability.SSL
                    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    ctx.load_cert_chain(certificates.server_cert, certificates.server_key)
                    server.sock = ctx.wrap_socket(server_sock, server_side=True)
                script(server)
                if client_kind == "sql":  # pymysql's commands after login get an OK each
                    with contextlib.suppress(wire.ConnectionLostError):
                        while True:
                            server.seq = 0  # a command starts a new exchange
                            server.read_packet()
                            server.write_packet(OK)
            except BaseException as exc:  # reported in the test thread
                failures.append(exc)
                with contextlib.suppress(OSError):  # a client waiting for more gives up
                    server.sock.shutdown(socket.SHUT_RDWR)

        if client_kind == "sql":
            listener = socket.create_server(("127.0.0.1", 0))
            sockets.append(listener)

            def accept() -> None:
                server_sock, _ = listener.accept()
                sockets.append(server_sock)
                serve(server_sock)

            thread = threading.Thread(target=accept)
            thread.start()
            settings = ConnectionSettings(
                "127.0.0.1",
                listener.getsockname()[1],
                "cdc",
                PASSWORD,
                connect_timeout_s=5,
                tls=tls or TlsSettings(mode="disabled"),
            )
            try:
                sql_connection(settings).close()
            except SourceError:
                thread.join(5)
                if failures:  # the script's finding first: the client only saw a hang-up
                    raise failures[0] from None
                raise
            thread.join(5)
        else:
            client_sock, server_sock = socket.socketpair()
            sockets.extend([client_sock, server_sock])
            thread = threading.Thread(target=serve, args=(server_sock,))
            thread.start()
            settings = ConnectionSettings(
                "127.0.0.1", 3306, "cdc", PASSWORD, tls=tls or TlsSettings(mode="disabled")
            )
            client = BinlogClient(settings, 5401)
            client._sock = client_sock
            client._channel = wire.PacketChannel(client_sock)
            try:
                hs = wire.parse_handshake(client._channel.read_packet())
                client._authenticate(hs, client._start_tls(hs))
            finally:
                with contextlib.suppress(OSError):  # a server waiting for more gives up
                    (client._sock or client_sock).shutdown(socket.SHUT_RDWR)
                thread.join(5)
        if failures:
            raise failures[0]

    yield run
    for s in sockets:
        s.close()


def _rsa_key() -> tuple[rsa.RSAPrivateKey, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return key, pem


def _decrypt(key: rsa.RSAPrivateKey, secret: bytes, nonce: bytes = NONCE) -> bytes:
    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    plain = key.decrypt(secret, oaep)
    return bytes(b ^ nonce[i % 20] for i, b in enumerate(plain))


def test_caching_sha2_fast_auth(login: Login) -> None:
    def script(server: wire.PacketChannel) -> None:
        response = server.read_packet()
        assert _auth_data(response) == wire.scramble_caching_sha2(PASSWORD, NONCE)
        server.write_packet(b"\x01\x03")  # fast auth success
        server.write_packet(OK)

    login("caching_sha2_password", script)


def test_caching_sha2_full_auth_retrieves_the_key_only_when_allowed(login: Login) -> None:
    key, pem = _rsa_key()

    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\x01\x04")  # perform full authentication
        assert server.read_packet() == b"\x02"  # the client asks for the public key
        server.write_packet(b"\x01" + pem)
        assert _decrypt(key, server.read_packet()) == PASSWORD.encode() + b"\0"
        server.write_packet(OK)

    login("caching_sha2_password", script, TlsSettings("disabled", allow_public_key_retrieval=True))


def test_caching_sha2_full_auth_with_a_pinned_key(login: Login, tmp_path: Path) -> None:
    key, pem = _rsa_key()
    (tmp_path / "server.pem").write_bytes(pem)

    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\x01\x04")
        # no key request: the password comes encrypted with the pinned key at once
        assert _decrypt(key, server.read_packet()) == PASSWORD.encode() + b"\0"
        server.write_packet(OK)

    login(
        "caching_sha2_password",
        script,
        TlsSettings("disabled", server_public_key=str(tmp_path / "server.pem")),
    )


def test_caching_sha2_full_auth_never_fetches_the_key_by_default(login: Login) -> None:
    received: list[bytes] = []

    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\x01\x04")
        # the client gives up without another packet
        with contextlib.suppress(wire.ConnectionLostError):
            received.append(server.read_packet())

    with pytest.raises(SourceError, match="server-public-key-path") as raised:
        login("caching_sha2_password", script, TlsSettings("disabled"))
    assert received == []  # no request for the key, no password
    assert "allow-public-key-retrieval" in str(raised.value)


def test_caching_sha2_full_auth_inside_tls_sends_the_password(login: Login) -> None:
    def script(server: wire.PacketChannel) -> None:
        response = server.read_packet()  # over TLS, sequence id 2
        (caps,) = struct.unpack_from("<I", response)
        assert caps & wire.Capability.SSL
        assert _auth_data(response) == wire.scramble_caching_sha2(PASSWORD, NONCE)
        server.write_packet(b"\x01\x04")
        assert server.read_packet() == PASSWORD.encode() + b"\x00"
        server.write_packet(OK)

    login("caching_sha2_password", script, TlsSettings("required"), server_tls=True)


def test_sha256_password_inside_tls_and_over_a_pinned_key(login: Login, tmp_path: Path) -> None:
    new_nonce = bytes(range(90, 110))

    def inside_tls(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\xfesha256_password\x00" + new_nonce + b"\x00")
        assert server.read_packet() == PASSWORD.encode() + b"\x00"
        server.write_packet(OK)

    login("mysql_native_password", inside_tls, TlsSettings("required"), server_tls=True)

    key, pem = _rsa_key()
    (tmp_path / "server.pem").write_bytes(pem)

    def pinned(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\xfesha256_password\x00" + new_nonce + b"\x00")
        assert _decrypt(key, server.read_packet(), new_nonce) == PASSWORD.encode() + b"\0"
        server.write_packet(OK)

    tls = TlsSettings("disabled", server_public_key=str(tmp_path / "server.pem"))
    login("mysql_native_password", pinned, tls)


def test_required_without_server_tls_fails_clearly(login: Login) -> None:
    def script(server: wire.PacketChannel) -> None:
        with pytest.raises(wire.ConnectionLostError):
            server.read_packet()  # the client sends nothing in clear

    with pytest.raises(SourceError, match="does not offer it"):
        login("mysql_native_password", script, TlsSettings("required"))


def test_auth_switch_to_native_password(login: Login) -> None:
    new_nonce = bytes(range(70, 90))

    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\xfemysql_native_password\x00" + new_nonce + b"\x00")
        assert server.read_packet() == wire.scramble_native_password(PASSWORD, new_nonce)
        server.write_packet(OK)

    login("caching_sha2_password", script)


def test_access_denied(login: Login) -> None:
    def script(server: wire.PacketChannel) -> None:
        server.read_packet()
        server.write_packet(b"\xff\x15\x04#28000Access denied for user 'cdc'@'10.0.0.1'")

    with pytest.raises(SourceError, match=r"access denied for user cdc@127\.0\.0\.1") as raised:
        login("mysql_native_password", script)
    assert PASSWORD not in str(raised.value)
