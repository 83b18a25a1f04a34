"""The MySQL/MariaDB client/server wire protocol: packets, handshake, auth, commands.

Everything here except ``PacketChannel`` is a pure function of bytes, so every
layout is unit-tested without a server. ``PacketChannel`` frames packets over a
connected socket (it is the only place that touches one).

Byte layouts (each function names the one it follows):
- packets: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html
- handshake: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase.html
- OK/ERR/EOF: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_response_packets.html
- replication commands: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication.html
- MariaDB: https://mariadb.com/kb/en/connection/ and https://mariadb.com/kb/en/com_binlog_dump/
"""

from __future__ import annotations

import hashlib
import socket
import struct
import uuid as uuid_mod
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.protocol import ed25519
from sparkcdc.mysql.protocol.constants import Command

# ------------------------------------------------------------------------ packet framing

# Packet header: 3-byte little-endian payload length + 1-byte sequence id.
PACKET_HEADER_SIZE = 4
# A payload of exactly this length continues in the next packet (multi-packet payload);
# the last packet of such a payload is shorter, possibly empty.
MAX_PACKET_PAYLOAD = 0xFFFFFF

# First byte of a response payload.
OK_HEADER = 0x00
EOF_HEADER = 0xFE  # EOF packet when the payload is shorter than 9 bytes; AuthSwitchRequest in auth
ERR_HEADER = 0xFF
AUTH_MORE_DATA_HEADER = 0x01
# A length-encoded string starting with this byte is SQL NULL (text result rows).
NULL_COLUMN = 0xFB

_U16 = struct.Struct("<H")
_U24_LOW = struct.Struct("<HB")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class Capability(IntFlag):
    """Client/server capability flags.

    https://dev.mysql.com/doc/dev/mysql-server/latest/group__group__cs__capabilities__flags.html
    """

    LONG_PASSWORD = 1 << 0
    FOUND_ROWS = 1 << 1
    LONG_FLAG = 1 << 2
    CONNECT_WITH_DB = 1 << 3
    NO_SCHEMA = 1 << 4
    COMPRESS = 1 << 5
    ODBC = 1 << 6
    LOCAL_FILES = 1 << 7
    IGNORE_SPACE = 1 << 8
    PROTOCOL_41 = 1 << 9
    INTERACTIVE = 1 << 10
    SSL = 1 << 11
    IGNORE_SIGPIPE = 1 << 12
    TRANSACTIONS = 1 << 13
    RESERVED = 1 << 14
    SECURE_CONNECTION = 1 << 15  # "RESERVED2": 4.1 authentication
    MULTI_STATEMENTS = 1 << 16
    MULTI_RESULTS = 1 << 17
    PS_MULTI_RESULTS = 1 << 18
    PLUGIN_AUTH = 1 << 19
    CONNECT_ATTRS = 1 << 20
    PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
    CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
    SESSION_TRACK = 1 << 23
    DEPRECATE_EOF = 1 << 24


# What we ask for: 4.1 protocol with plugin auth; no compression, and classic EOF packets
# (no DEPRECATE_EOF) so that result sets end the way ``read_result_rows`` expects. SSL is
# added when the connection upgrades to TLS (``ssl_request``).
CLIENT_CAPABILITIES = (
    Capability.LONG_PASSWORD
    | Capability.LONG_FLAG
    | Capability.PROTOCOL_41
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.MULTI_RESULTS
    | Capability.PLUGIN_AUTH
    | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA
)
REQUIRED_SERVER_CAPABILITIES = Capability.PROTOCOL_41 | Capability.SECURE_CONNECTION

# utf8mb4_general_ci; the replication connection only exchanges ASCII SQL and binlog bytes
CHARSET_UTF8MB4_GENERAL_CI = 45
CLIENT_MAX_PACKET_SIZE = 1 << 30


def frame_packets(payload: bytes, seq: int) -> tuple[bytes, int]:
    """Frame one payload as one or more packets; returns (bytes, next sequence id).

    Payloads of 16 MiB - 1 bytes or more are split; a payload whose length is an exact
    multiple of 0xFFFFFF ends with an empty packet.

    >>> frame_packets(b"\\x0e", 0)
    (b'\\x01\\x00\\x00\\x00\\x0e', 1)
    """
    out = bytearray()
    offset = 0
    while True:
        chunk = payload[offset : offset + MAX_PACKET_PAYLOAD]
        out += _U24_LOW.pack(len(chunk) & 0xFFFF, len(chunk) >> 16)
        out.append(seq & 0xFF)
        out += chunk
        seq = (seq + 1) & 0xFF
        offset += len(chunk)
        if len(chunk) < MAX_PACKET_PAYLOAD:
            return bytes(out), seq


class ConnectionLostError(ProtocolError):
    """The peer closed or reset the socket (callers turn it into a message with a position)."""


class PacketChannel:
    """Reads and writes framed packets on a connected socket.

    Sequence ids run per command: ``reset_sequence()`` before sending a new command.
    Socket errors propagate as ``OSError`` (``TimeoutError`` on timeouts); a peer that
    closes the connection raises ``ConnectionLostError``.
    """

    _RECV_SIZE = 1 << 18

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.seq = 0
        self._buf = bytearray()
        self._pos = 0

    def reset_sequence(self) -> None:
        self.seq = 0

    def _fill(self, need: int) -> None:
        """Make sure ``need`` unread bytes are buffered."""
        available = len(self._buf) - self._pos
        if available >= need:
            return
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        while len(self._buf) < need:
            try:
                data = self.sock.recv(max(self._RECV_SIZE, need - len(self._buf)))
            except ConnectionResetError as exc:
                raise ConnectionLostError(f"connection reset by peer ({exc})") from None
            if not data:
                raise ConnectionLostError("the server closed the connection")
            self._buf += data

    def _take(self, n: int) -> bytes:
        self._fill(n)
        start = self._pos
        self._pos += n
        return bytes(self._buf[start : self._pos])

    def read_packet(self) -> bytes:
        """The next payload, multi-packet payloads joined into one."""
        parts: list[bytes] = []
        while True:
            self._fill(PACKET_HEADER_SIZE)
            low, high = _U24_LOW.unpack_from(self._buf, self._pos)
            seq = self._buf[self._pos + 3]
            self._pos += PACKET_HEADER_SIZE
            length = low | (high << 16)
            if seq != self.seq:
                raise ProtocolError(
                    f"packet out of order: got sequence id {seq}, expected {self.seq}"
                )
            self.seq = (seq + 1) & 0xFF
            parts.append(self._take(length))
            if length < MAX_PACKET_PAYLOAD:
                return parts[0] if len(parts) == 1 else b"".join(parts)

    def write_packet(self, payload: bytes) -> None:
        data, self.seq = frame_packets(payload, self.seq)
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionLostError(f"connection lost while sending ({exc})") from None

    def send_command(self, command: Command, body: bytes = b"") -> None:
        """Start a new command (sequence id 0)."""
        self.reset_sequence()
        self.write_packet(bytes([command]) + body)


# ------------------------------------------------------------- length-encoded integers


def read_lenenc_int(data: bytes, offset: int) -> tuple[int | None, int]:
    """A length-encoded integer at ``offset``: (value or None for 0xFB NULL, next offset).

    >>> read_lenenc_int(b"\\xfc\\x00\\x01", 0)
    (256, 3)
    """
    first = data[offset]
    if first < 0xFB:
        return first, offset + 1
    if first == NULL_COLUMN:
        return None, offset + 1
    if first == 0xFC:
        return _U16.unpack_from(data, offset + 1)[0], offset + 3
    if first == 0xFD:
        low, high = _U24_LOW.unpack_from(data, offset + 1)
        return low | (high << 16), offset + 4
    if first == 0xFE:
        return _U64.unpack_from(data, offset + 1)[0], offset + 9
    raise ProtocolError(f"invalid length-encoded integer prefix 0x{first:02x} at byte {offset}")


def lenenc_int(value: int) -> bytes:
    """Encode a length-encoded integer.

    >>> lenenc_int(250), lenenc_int(251)
    (b'\\xfa', b'\\xfc\\xfb\\x00')
    """
    if value < 0xFB:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + _U16.pack(value)
    if value < 1 << 24:
        return b"\xfd" + _U24_LOW.pack(value & 0xFFFF, value >> 16)
    return b"\xfe" + _U64.pack(value)


def read_lenenc_bytes(data: bytes, offset: int) -> tuple[bytes | None, int]:
    """A length-encoded string: (bytes or None for NULL, next offset)."""
    length, offset = read_lenenc_int(data, offset)
    if length is None:
        return None, offset
    return data[offset : offset + length], offset + length


def read_nul_str(data: bytes, offset: int) -> tuple[bytes, int]:
    """A NUL-terminated string (or the rest of the data when there is no NUL)."""
    end = data.find(b"\x00", offset)
    if end < 0:
        return data[offset:], len(data)
    return data[offset:end], end + 1


# ---------------------------------------------------------------------- OK / ERR / EOF


@dataclass(frozen=True)
class ServerError:
    """An ERR packet: ``0xFF``, error code u16, ``#`` + 5-char SQL state, message."""

    code: int
    sql_state: str
    message: str

    def __str__(self) -> str:
        return f"({self.code}) {self.message}"


def is_ok(payload: bytes) -> bool:
    return bool(payload) and payload[0] == OK_HEADER


def is_err(payload: bytes) -> bool:
    return bool(payload) and payload[0] == ERR_HEADER


def is_eof(payload: bytes) -> bool:
    """EOF packets are ``0xFE`` with a payload shorter than 9 bytes (a longer 0xFE is data)."""
    return bool(payload) and payload[0] == EOF_HEADER and len(payload) < 9


def parse_err(payload: bytes) -> ServerError:
    """Parse an ERR packet (4.1 protocol).

    >>> parse_err(b"\\xff\\x15\\x04#28000Access denied")
    ServerError(code=1045, sql_state='28000', message='Access denied')
    """
    if not is_err(payload) or len(payload) < 3:
        raise ProtocolError(f"expected an ERR packet, got {payload[:16]!r}")
    code = _U16.unpack_from(payload, 1)[0]
    rest = payload[3:]
    state = ""
    if rest[:1] == b"#":
        state, rest = rest[1:6].decode("ascii", "replace"), rest[6:]
    return ServerError(code, state, rest.decode("utf-8", "replace"))


# -------------------------------------------------------------------------- handshake

# Initial handshake v10: protocol_version u8 (10), server_version NUL-str, thread_id u32,
# auth_plugin_data_part_1 [8], filler u8, capability_flags_1 u16, then (optional)
# character_set u8, status_flags u16, capability_flags_2 u16, auth_plugin_data_len u8,
# reserved [10] (MariaDB: [6] + extended capabilities u32), auth_plugin_data_part_2
# [max(13, len - 8)], auth_plugin_name NUL-str.
HANDSHAKE_V10 = 10
_HANDSHAKE_TAIL = struct.Struct("<BHHB10s")


@dataclass(frozen=True)
class Handshake:
    """What the server says first."""

    server_version: str
    connection_id: int
    capabilities: Capability
    charset: int
    status: int
    nonce: bytes  # the 20-byte auth scramble
    auth_plugin: str

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()


def parse_handshake(payload: bytes) -> Handshake:
    """Parse an Initial Handshake v10 packet (an ERR packet raises)."""
    if is_err(payload):
        error = parse_err(payload)
        raise ProtocolError(f"the server refused the connection before the handshake: {error}")
    if not payload or payload[0] != HANDSHAKE_V10:
        version = payload[0] if payload else None
        raise ProtocolError(
            f"unsupported handshake protocol version {version} (expected 10); is this a "
            "MySQL/MariaDB server?"
        )
    version_raw, offset = read_nul_str(payload, 1)
    connection_id = _U32.unpack_from(payload, offset)[0]
    offset += 4
    nonce = payload[offset : offset + 8]
    offset += 9  # + filler
    capabilities = _U16.unpack_from(payload, offset)[0]
    offset += 2
    charset = status = 0
    plugin = "mysql_native_password"
    if offset < len(payload):
        charset, status, caps_high, data_len, _ = _HANDSHAKE_TAIL.unpack_from(payload, offset)
        offset += _HANDSHAKE_TAIL.size
        capabilities |= caps_high << 16
        if capabilities & Capability.SECURE_CONNECTION:
            part2_len = max(13, data_len - 8)
            part2 = payload[offset : offset + part2_len]
            nonce += part2[:-1] if part2.endswith(b"\x00") else part2  # NUL-terminated
            offset += part2_len
        if capabilities & Capability.PLUGIN_AUTH:
            name, offset = read_nul_str(payload, offset)
            plugin = name.decode("ascii", "replace") or plugin
    return Handshake(
        server_version=version_raw.decode("utf-8", "replace"),
        connection_id=connection_id,
        capabilities=Capability(capabilities),
        charset=charset,
        status=status,
        nonce=nonce,
        auth_plugin=plugin,
    )


def handshake_response(
    user: str, auth_response: bytes, auth_plugin: str, capabilities: Capability
) -> bytes:
    """HandshakeResponse41: capability_flags u32, max_packet_size u32, character_set u8,
    filler [23], username NUL-str, auth_response (lenenc), auth_plugin_name NUL-str."""
    out = bytearray(
        struct.pack("<IIB23x", capabilities, CLIENT_MAX_PACKET_SIZE, CHARSET_UTF8MB4_GENERAL_CI)
    )
    out += user.encode("utf-8") + b"\x00"
    if capabilities & Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA:
        out += lenenc_int(len(auth_response)) + auth_response
    else:
        out += bytes([len(auth_response)]) + auth_response
    if capabilities & Capability.PLUGIN_AUTH:
        out += auth_plugin.encode("ascii") + b"\x00"
    return bytes(out)


def ssl_request(capabilities: Capability) -> bytes:
    """SSLRequest: the first 32 bytes of HandshakeResponse41 (capability_flags u32 with
    CLIENT_SSL, max_packet_size u32, character_set u8, filler [23]). The client sends it
    instead of the response, starts TLS, then sends the whole response over TLS (with the
    next sequence id).
    https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_packets_protocol_ssl_request.html

    >>> len(ssl_request(Capability.PROTOCOL_41)), ssl_request(Capability.SSL)[:2].hex()
    (32, '0008')
    """
    return struct.pack(
        "<IIB23x", capabilities | Capability.SSL, CLIENT_MAX_PACKET_SIZE, CHARSET_UTF8MB4_GENERAL_CI
    )


# ------------------------------------------------------------------------------- auth


class AuthPlugin:
    """Names of the authentication plugins we speak."""

    NATIVE = "mysql_native_password"
    CACHING_SHA2 = "caching_sha2_password"
    SHA256 = "sha256_password"
    ED25519 = "client_ed25519"  # MariaDB's ed25519 plugin


# sha256_password: an auth response of this single byte asks the server for its RSA key
# (https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_connection_phase_authentication_methods_sha256_password_authentication.html)
SHA256_REQUEST_PUBLIC_KEY = b"\x01"


def clear_password(password: str) -> bytes:
    """The password as sent inside TLS by caching_sha2_password full authentication and
    sha256_password: its bytes and a NUL.

    >>> clear_password("pw")
    b'pw\\x00'
    """
    return password.encode("utf-8") + b"\x00"


class CachingSha2State(IntEnum):
    """Second byte of an AuthMoreData packet during caching_sha2_password.

    https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
    """

    REQUEST_PUBLIC_KEY = 2  # client -> server
    FAST_AUTH_SUCCESS = 3
    PERFORM_FULL_AUTHENTICATION = 4


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def scramble_native_password(password: str, nonce: bytes) -> bytes:
    """mysql_native_password: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))); empty pw -> b"".

    >>> len(scramble_native_password("secret", bytes(20)))
    20
    """
    if not password:
        return b""
    stage1 = hashlib.sha1(password.encode("utf-8")).digest()
    stage2 = hashlib.sha1(stage1).digest()
    return _xor(stage1, hashlib.sha1(nonce[:20] + stage2).digest())


def scramble_caching_sha2(password: str, nonce: bytes) -> bytes:
    """caching_sha2_password fast path: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce).

    >>> len(scramble_caching_sha2("secret", bytes(20)))
    32
    """
    if not password:
        return b""
    p1 = hashlib.sha256(password.encode("utf-8")).digest()
    p2 = hashlib.sha256(p1).digest()
    return _xor(p1, hashlib.sha256(p2 + nonce[:20]).digest())


def auth_response_for(
    plugin: str,
    password: str,
    nonce: bytes,
    *,
    secure: bool = False,
    public_key_pem: bytes | None = None,
) -> bytes:
    """The first auth response for ``plugin`` (raises for plugins we do not speak).

    sha256_password sends the password itself: in clear when ``secure`` (inside TLS),
    RSA-encrypted with ``public_key_pem`` otherwise; with neither, the response asks the
    server for its key (the caller decides whether that is allowed).
    """
    if plugin == AuthPlugin.NATIVE:
        return scramble_native_password(password, nonce)
    if plugin == AuthPlugin.CACHING_SHA2:
        return scramble_caching_sha2(password, nonce)
    if plugin == AuthPlugin.ED25519:  # the password signs the 32-byte scramble
        return ed25519.sign(password.encode("utf-8"), nonce[:32])
    if plugin == AuthPlugin.SHA256:
        if not password:
            return b"\x00"
        if secure:
            return clear_password(password)
        if public_key_pem is not None:
            return rsa_encrypt_password(password, nonce, public_key_pem)
        return SHA256_REQUEST_PUBLIC_KEY
    raise ProtocolError(
        f"the server asks for authentication plugin {plugin!r}; sparkcdc's replication client "
        f"speaks {AuthPlugin.NATIVE}, {AuthPlugin.CACHING_SHA2}, {AuthPlugin.SHA256} and "
        f"MariaDB's ed25519. "
        f"Create the CDC user with one of them (e.g. ALTER USER ... IDENTIFIED WITH "
        f"{AuthPlugin.NATIVE} BY '...')"
    )


def rsa_encrypt_password(password: str, nonce: bytes, public_key_pem: bytes) -> bytes:
    """caching_sha2_password full auth / sha256_password over plain TCP:
    RSA-OAEP(SHA1) of (pw + NUL) XOR nonce (the nonce repeated over the password).
    """
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa
    except ImportError:  # pragma: no cover - depends on the environment
        raise ProtocolError(
            "the server wants the password RSA-encrypted, which needs the 'cryptography' "
            "package (a dependency of sparkcdc: reinstall sparkcdc), or use TLS"
        ) from None
    plain = password.encode("utf-8") + b"\x00"
    nonce = nonce[:20]
    mixed = bytes(b ^ nonce[i % len(nonce)] for i, b in enumerate(plain))
    key = serialization.load_pem_public_key(public_key_pem)
    if not isinstance(key, rsa.RSAPublicKey):
        raise ProtocolError("the server's public key for caching_sha2_password is not RSA")
    return key.encrypt(
        mixed,
        padding.OAEP(
            mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None
        ),
    )


def parse_auth_switch(payload: bytes) -> tuple[str, bytes]:
    """AuthSwitchRequest: 0xFE, plugin name NUL-str, plugin data (nonce, NUL-terminated)."""
    name, offset = read_nul_str(payload, 1)
    data = payload[offset:]
    if data.endswith(b"\x00"):
        data = data[:-1]
    return name.decode("ascii", "replace"), data


# -------------------------------------------------------------------- text result sets


def parse_text_row(payload: bytes, columns: int) -> tuple[str | None, ...]:
    """A text-protocol result row: one length-encoded string (or 0xFB NULL) per column."""
    values: list[str | None] = []
    offset = 0
    for _ in range(columns):
        raw, offset = read_lenenc_bytes(payload, offset)
        values.append(None if raw is None else raw.decode("utf-8", "replace"))
    return tuple(values)


# ---------------------------------------------------------------- replication commands

# COM_REGISTER_SLAVE: 0x15, server_id u32, hostname (u8 len + str), user (u8 len + str),
# password (u8 len + str), port u16, replication_rank u32, master_id u32.
# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_register_replica.html
_REGISTER_TAIL = struct.Struct("<HII")

# COM_BINLOG_DUMP: 0x12, binlog_pos u32, flags u16, server_id u32, binlog_filename (rest).
# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_binlog_dump.html
_BINLOG_DUMP = struct.Struct("<IHI")

# COM_BINLOG_DUMP_GTID: 0x1E, flags u16, server_id u32, binlog_name_info_size u32,
# binlog_name, binlog_pos u64, [data_size u32, data] when flags has THROUGH_GTID.
# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_binlog_dump_gtid.html
_BINLOG_DUMP_GTID_HEAD = struct.Struct("<HII")


class GtidDumpFlag(IntFlag):
    """Flags of COM_BINLOG_DUMP_GTID."""

    NON_BLOCK = 1
    THROUGH_POSITION = 2
    THROUGH_GTID = 4


def _short_str(value: str, what: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 255:
        raise ProtocolError(f"{what} {value[:40]!r}... is longer than 255 bytes")
    return bytes([len(raw)]) + raw


def com_register_slave(server_id: int, hostname: str, user: str, port: int) -> bytes:
    """COM_REGISTER_SLAVE body (without the command byte). The password field is sent
    empty on purpose: the server only shows it in SHOW SLAVE HOSTS, it is not needed."""
    return (
        _U32.pack(server_id)
        + _short_str(hostname, "report host")
        + _short_str(user, "report user")
        + _short_str("", "report password")
        + _REGISTER_TAIL.pack(port & 0xFFFF, 0, 0)
    )


def com_binlog_dump(file: str, pos: int, flags: int, server_id: int) -> bytes:
    """COM_BINLOG_DUMP body (without the command byte).

    >>> com_binlog_dump("mysql-bin.000001", 4, 1, 7)[:10].hex()
    '04000000010007000000'
    """
    return _BINLOG_DUMP.pack(pos, flags, server_id) + file.encode("utf-8")


def encode_sid_set(sets: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]) -> bytes:
    """The binary GTID set of COM_BINLOG_DUMP_GTID and PREVIOUS_GTIDS events:
    n_sids u64, then per SID: uuid [16], n_intervals u64, per interval start u64 and
    end u64 (exclusive). ``sets`` is ``MySqlGtidSet.sets`` (closed intervals).

    >>> encode_sid_set(()).hex()
    '0000000000000000'
    """
    out = bytearray(_U64.pack(len(sets)))
    for sid, intervals in sets:
        out += uuid_mod.UUID(sid).bytes
        out += _U64.pack(len(intervals))
        for start, end in intervals:
            out += struct.pack("<QQ", start, end + 1)
    return bytes(out)


def decode_sid_set(
    data: bytes, offset: int = 0
) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    """Inverse of ``encode_sid_set`` (closed intervals, uuids in lower case)."""
    try:
        (count,) = _U64.unpack_from(data, offset)
        offset += 8
        sets: list[tuple[str, tuple[tuple[int, int], ...]]] = []
        for _ in range(count):
            sid = str(uuid_mod.UUID(bytes=bytes(data[offset : offset + 16])))
            offset += 16
            (n_intervals,) = _U64.unpack_from(data, offset)
            offset += 8
            intervals = []
            for _ in range(n_intervals):
                start, end = struct.unpack_from("<QQ", data, offset)
                offset += 16
                intervals.append((start, end - 1))
            sets.append((sid, tuple(intervals)))
    except (struct.error, ValueError) as exc:
        raise ProtocolError(f"malformed binary GTID set at byte {offset}: {exc}") from None
    return tuple(sets)


def com_binlog_dump_gtid(file: str, pos: int, flags: int, server_id: int, sid_set: bytes) -> bytes:
    """COM_BINLOG_DUMP_GTID body (without the command byte); THROUGH_GTID is added."""
    name = file.encode("utf-8")
    flags |= GtidDumpFlag.THROUGH_GTID
    return (
        _BINLOG_DUMP_GTID_HEAD.pack(flags, server_id, len(name))
        + name
        + _U64.pack(pos)
        + _U32.pack(len(sid_set))
        + sid_set
    )
