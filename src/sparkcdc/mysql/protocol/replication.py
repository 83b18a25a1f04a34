"""The binlog replication client: our own implementation of the replica side of the protocol.

``BinlogClient.events`` logs in (Handshake v10, mysql_native_password or
caching_sha2_password), announces checksum support and a heartbeat period, registers
as a replica (COM_REGISTER_SLAVE) and asks for the binlog (COM_BINLOG_DUMP by file and
position, or by GTID: MariaDB ``@slave_connect_state``, MySQL COM_BINLOG_DUMP_GTID).
It yields raw events, each the 19-byte common header plus the body, with the CRC32
checksum verified and stripped. Decoding the bodies is ``mysql/binlog/decoder.py``'s job.

The header is passed on as the server sent it: ``event_size`` still counts the 4
checksum bytes when checksums are on, so ``log_pos - event_size`` is the event's start
position in the file; the FORMAT_DESCRIPTION body keeps its checksum-algorithm byte.

    >>> settings = ConnectionSettings("127.0.0.1", 23306, "cdc", "...")       # doctest: +SKIP
    >>> with BinlogClient(settings, server_id=5401) as client:                 # doctest: +SKIP
    ...     for event in client.events(BinlogPosition("mysql-bin.000001", 4)):
    ...         print(EventType(event[4]).name)
    ROTATE
    FORMAT_DESCRIPTION
    ...

Replication protocol: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication.html,
https://mariadb.com/kb/en/replication-protocol/
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
import time
import zlib
from collections.abc import Callable, Generator
from pathlib import Path
from types import TracebackType

from sparkcdc.errors import (
    ConfigError,
    PositionError,
    ProtocolError,
    SourceConnectionError,
    SourceError,
)
from sparkcdc.model.position import BinlogPosition, MariaDbGtidSet, MySqlGtidSet
from sparkcdc.mysql.protocol import wire
from sparkcdc.mysql.protocol.connection import (
    ER_ACCESS_DENIED,
    ER_CONNECTION_KILLED,
    ER_HOST_NOT_PRIVILEGED,
    ER_SECURE_TRANSPORT_REQUIRED,
    ER_SERVER_SHUTDOWN,
    NO_PUBLIC_KEY_MESSAGE,
    ConnectionSettings,
    denied_error,
    describe_connect_failure,
    insecure_transport_error,
    no_tls_error,
    out_of_retries,
    retry_pause,
    tls_failure,
)
from sparkcdc.mysql.protocol.constants import (
    CHECKSUM_SIZE,
    EVENT_HEADER,
    EVENT_HEADER_SIZE,
    FIRST_EVENT_POS,
    Command,
    DumpFlag,
    EventType,
)

log = logging.getLogger(__name__)

# Server error codes met on a replication connection.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236  # position/file/GTID problems, server-id clash
ER_QUERY_INTERRUPTED = 1317
ER_SPECIFIC_ACCESS_DENIED = 1227  # missing REPLICATION SLAVE
ER_SLAVE_SAME_ID = 4052  # MariaDB: another replica connected with our server_id

# MariaDB replica capability announced with ``SET @mariadb_slave_capability``:
# 4 = MARIA_SLAVE_CAPABILITY_GTID (understands GTID events; sends GTID_LIST etc.).
MARIADB_SLAVE_CAPABILITY_GTID = 4

# MariaDB COM_BINLOG_DUMP flag BINLOG_SEND_ANNOTATE_ROWS_EVENT: without it the server
# skips ANNOTATE_ROWS events (the SQL text of row events), leaving gaps in the log_pos chain.
MARIADB_DUMP_SEND_ANNOTATE_ROWS = 2

# ROTATE body: position u64, then the next file name (rest of the body).
ROTATE_POSITION = struct.Struct("<Q")
_CRC = struct.Struct("<I")

# LOG_EVENT_ARTIFICIAL_F: the event was made up by the server for this dump (fake ROTATE)
LOG_EVENT_ARTIFICIAL_F = 0x20

_COLLISION_MARKERS = ("same server_uuid", "same server_id", "same server id")
_MISSING_FILE_MARKERS = (
    "could not find first log file",
    "could not find gtid state",
    "purged",
    "could not open log file",
    "could not find",
)

# lists the binlog files on the server (name, size) for a refused position's message; the
# SQL side has the query (mysql/admin/server.py files_on_server), the client takes it given
FileLister = Callable[[ConnectionSettings], list[tuple[str, int]]]


def verify_checksum(event: bytes, where: str = "") -> bytes:
    """Check the trailing CRC32 of one event and return the event without it.

    The CRC32 (zlib polynomial) covers the header and the body; it is stored
    little-endian in the last 4 bytes. A mismatch raises ``ProtocolError`` naming ``where``.

    >>> body = bytes(19) + b"x"
    >>> verify_checksum(body + zlib.crc32(body).to_bytes(4, "little")) == body
    True
    """
    if len(event) < EVENT_HEADER_SIZE + CHECKSUM_SIZE:
        raise ProtocolError(
            f"binlog event{_at(where)} is {len(event)} bytes, shorter than a header plus checksum"
        )
    content = event[:-CHECKSUM_SIZE]
    (stored,) = _CRC.unpack_from(event, len(event) - CHECKSUM_SIZE)
    computed = zlib.crc32(content)
    if stored != computed:
        raise ProtocolError(
            f"binlog event{_at(where)} fails its CRC32 checksum (stored 0x{stored:08x}, "
            f"computed 0x{computed:08x}): the stream is corrupt; re-read from this position, "
            "and if it persists check the binlog file on the server "
            "(mysqlbinlog --verify-binlog-checksum)"
        )
    return content


def _at(where: str) -> str:
    return f" at {where}" if where else ""


def parse_rotate(event: bytes) -> BinlogPosition:
    """The position a ROTATE event (checksum stripped) points to.

    >>> ev = bytes(19) + ROTATE_POSITION.pack(4) + b"mysql-bin.000002"
    >>> str(parse_rotate(ev))
    'mysql-bin.000002:4'
    """
    (pos,) = ROTATE_POSITION.unpack_from(event, EVENT_HEADER_SIZE)
    name = event[EVENT_HEADER_SIZE + ROTATE_POSITION.size :].decode("utf-8", "replace")
    return BinlogPosition(name, pos)


class BinlogClient:
    """A replica connection that streams raw binlog events. Use as a context manager.

    Each ``events()`` call opens a fresh connection (a dump cannot be restarted on the
    same one); ``close()`` ends it. ``position`` is the position after the last event
    yielded (the next event's start), useful for resuming and for messages. With
    ``list_files`` a position the server refuses is reported with the files it has.
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        server_id: int,
        *,
        heartbeat_period_s: float = 5.0,
        list_files: FileLister | None = None,
    ) -> None:
        if not 1 <= server_id < (1 << 32):
            raise ConfigError(
                f"server-id {server_id} is out of range: a replica needs a server-id between 1 "
                "and 4294967295, distinct from the source's and from every other replica's"
            )
        if not 0 < heartbeat_period_s < settings.read_timeout_s:
            raise ConfigError(
                f"heartbeat period {heartbeat_period_s:g}s must be positive and shorter than the "
                f"read timeout {settings.read_timeout_s:g}s, or an idle stream times out"
            )
        self.settings = settings
        self.server_id = server_id
        self.heartbeat_period_s = heartbeat_period_s
        self.list_files = list_files
        self.handshake: wire.Handshake | None = None
        self.position: BinlogPosition | None = None
        self._sock: socket.socket | None = None
        self._channel: wire.PacketChannel | None = None
        self._checksum = False
        self._secure = False
        # the TLS cipher of the current connection (None: plain TCP)
        self.cipher: str | None = None

    # -- context manager ---------------------------------------------------------------

    def __enter__(self) -> BinlogClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def connection_id(self) -> int | None:
        """The server's id of the current connection (as in SHOW PROCESSLIST)."""
        return self.handshake.connection_id if self.handshake is not None else None

    @property
    def is_mariadb(self) -> bool:
        return self.handshake is not None and self.handshake.is_mariadb

    # -- public ------------------------------------------------------------------------

    def events(
        self,
        start: BinlogPosition,
        *,
        blocking: bool = False,
        use_gtid: bool = False,
        annotate_rows: bool = False,
    ) -> Generator[bytes, None, None]:
        """Connect, request the binlog from ``start`` and return an iterator of raw events.

        The server first sends a fake ROTATE (to ``start``'s file) and the file's
        FORMAT_DESCRIPTION, then the events from ``start``. With ``blocking=False``
        the iterator ends at the current end of the binlog; with ``blocking=True`` it
        waits for new events (and yields HEARTBEAT events while idle). With
        ``use_gtid`` the start is ``start.gtids`` instead of file/pos. MariaDB skips
        ANNOTATE_ROWS events (the statement text before row events) unless
        ``annotate_rows``; the skipped bytes leave gaps between one event's ``log_pos``
        and the next event's start.

        >>> with BinlogClient(settings, 5401) as c:                  # doctest: +SKIP
        ...     n = sum(1 for _ in c.events(current))
        """
        self.close()
        if use_gtid and start.gtids is None:
            raise PositionError(
                f"cannot start by GTID from {start}: the position has no GTID set; start by "
                "file/position or give a position with GTIDs"
            )
        self.position = start
        try:
            self._connect()
            self._prepare_dump(
                start, blocking=blocking, use_gtid=use_gtid, annotate_rows=annotate_rows
            )
        except (wire.ConnectionLostError, OSError) as exc:
            self.close()
            raise SourceConnectionError(
                f"connection to {self.settings.endpoint} lost while asking for the binlog from "
                f"{start} ({exc}): the connection was killed, the server restarted or the "
                "network failed"
            ) from None
        except BaseException:
            self.close()
            raise
        return self._stream(start)  # closing it early (``.close()``) closes the connection

    def session_tls(self) -> str:
        """Log in and ask the server how this replication session is protected: its
        ``Ssl_version`` and ``Ssl_cipher`` (empty when the connection is plain TCP); closes.

        >>> BinlogClient(settings, 5401).session_tls()        # doctest: +SKIP
        'TLSv1.3 TLS_AES_256_GCM_SHA384'
        """
        self.close()
        try:
            self._connect()
            rows = self._query(
                "SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')"
            )
        finally:
            self.close()
        found = {str(name).lower(): value or "" for name, value in rows}
        cipher = found.get("ssl_cipher", "")
        return f"{found.get('ssl_version', '')} {cipher}".strip() if cipher else ""

    def close(self) -> None:
        """Send COM_QUIT (best effort) and close the socket; safe to call twice."""
        channel, sock = self._channel, self._sock
        self._channel = self._sock = None
        if channel is not None:
            with contextlib.suppress(OSError, ProtocolError):
                channel.send_command(Command.QUIT)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    # -- connection phase ----------------------------------------------------------------

    def _connect(self) -> None:
        settings = self.settings
        try:
            sock = socket.create_connection(
                (settings.host, settings.port), timeout=settings.connect_timeout_s
            )
        except OSError as exc:
            raise describe_connect_failure(settings, exc) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self._sock = sock
        self._channel = wire.PacketChannel(sock)
        self.cipher = None
        try:
            # the greeting and the login are bounded by the connect timeout
            self.handshake = wire.parse_handshake(self._channel.read_packet())
            self._authenticate(self.handshake, self._start_tls(self.handshake))
        except ssl.SSLError as exc:
            raise tls_failure(settings, exc) from None
        except TimeoutError:
            raise SourceConnectionError(
                f"cannot connect to MySQL/MariaDB at {settings.endpoint}: the TCP connection "
                f"opened but the server sent no greeting within connect timeout "
                f"{settings.connect_timeout_s:g}s; check that host:port is a MySQL/MariaDB "
                "server and that it is not overloaded"
            ) from None
        except wire.ConnectionLostError as exc:
            raise SourceConnectionError(
                f"MySQL/MariaDB at {settings.endpoint} closed the connection during login "
                f"({exc}); check the server's max_connections and its error log"
            ) from None
        except OSError as exc:
            raise describe_connect_failure(settings, exc) from None
        self._sock.settimeout(settings.read_timeout_s)  # the TLS socket after an upgrade

    def _start_tls(self, hs: wire.Handshake) -> bool:
        """Upgrade to TLS after the greeting when the mode asks for it: SSLRequest, then the
        TLS handshake on the same socket. False when the connection stays plain."""
        tls = self.settings.tls
        ctx = tls.context()
        if ctx is None:
            return False
        if not hs.capabilities & wire.Capability.SSL:
            if tls.requires_tls:
                raise no_tls_error(self.settings)
            return False  # preferred: plain, as MySQL's clients do
        channel = self._require_channel()
        capabilities = wire.CLIENT_CAPABILITIES & (hs.capabilities | wire.Capability.LONG_PASSWORD)
        channel.write_packet(wire.ssl_request(capabilities))
        assert self._sock is not None
        self._sock = ctx.wrap_socket(self._sock, server_hostname=self.settings.host)
        channel.sock = self._sock
        cipher = self._sock.cipher()
        self.cipher = cipher[0] if cipher else None
        return True

    def _authenticate(self, hs: wire.Handshake, secure: bool = False) -> None:
        channel = self._require_channel()
        missing = wire.REQUIRED_SERVER_CAPABILITIES & ~hs.capabilities
        if missing:
            raise ProtocolError(
                f"server {hs.server_version} at {self.settings.endpoint} lacks capabilities "
                f"{missing!r}; MySQL >= 5.7 or MariaDB >= 10.4 is required"
            )
        capabilities = wire.CLIENT_CAPABILITIES & (hs.capabilities | wire.Capability.LONG_PASSWORD)
        if secure:
            capabilities |= wire.Capability.SSL
        self._secure = secure
        plugin = hs.auth_plugin
        if plugin not in (wire.AuthPlugin.NATIVE, wire.AuthPlugin.CACHING_SHA2):
            plugin = wire.AuthPlugin.NATIVE  # the server switches us if it insists
        nonce = hs.nonce
        password = self.settings.password
        channel.write_packet(
            wire.handshake_response(
                self.settings.user,
                wire.auth_response_for(plugin, password, nonce),
                plugin,
                capabilities,
            )
        )
        while True:
            payload = channel.read_packet()
            if wire.is_ok(payload):
                return
            if wire.is_err(payload):
                error = wire.parse_err(payload)
                if error.code in ER_SECURE_TRANSPORT_REQUIRED:
                    raise insecure_transport_error(self.settings, error.message)
                if error.code in (ER_ACCESS_DENIED, ER_HOST_NOT_PRIVILEGED):
                    raise denied_error(
                        self.settings,
                        error.message,
                        offers_tls=bool(hs.capabilities & wire.Capability.SSL),
                        used_tls=secure,
                    )
                raise SourceError(f"login to {self.settings.endpoint} failed: {error}")
            if payload[0] == wire.EOF_HEADER:  # AuthSwitchRequest
                plugin, nonce = wire.parse_auth_switch(payload)
                if plugin == wire.AuthPlugin.SHA256:
                    self._sha256(nonce)
                else:
                    channel.write_packet(wire.auth_response_for(plugin, password, nonce))
            elif (
                payload[0] == wire.AUTH_MORE_DATA_HEADER and plugin == wire.AuthPlugin.CACHING_SHA2
            ):
                self._caching_sha2_more(payload, nonce)
            else:
                raise ProtocolError(
                    f"unexpected packet 0x{payload[0]:02x} during {plugin} login to "
                    f"{self.settings.endpoint}"
                )

    def _caching_sha2_more(self, payload: bytes, nonce: bytes) -> None:
        """AuthMoreData of caching_sha2_password: fast-auth success, or full auth.

        Full authentication sends the password itself: in clear inside TLS, else encrypted
        with the server's RSA key (``_rsa_password``).
        https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html
        """
        channel = self._require_channel()
        state = payload[1] if len(payload) > 1 else 0
        if state == wire.CachingSha2State.FAST_AUTH_SUCCESS:
            return  # an OK packet follows
        if state != wire.CachingSha2State.PERFORM_FULL_AUTHENTICATION:
            raise ProtocolError(f"unexpected caching_sha2_password state {state}")
        if self._secure:
            channel.write_packet(wire.clear_password(self.settings.password))
            return
        channel.write_packet(
            self._rsa_password(nonce, bytes([wire.CachingSha2State.REQUEST_PUBLIC_KEY]))
        )

    def _sha256(self, nonce: bytes) -> None:
        """sha256_password after an AuthSwitchRequest: the password in clear inside TLS,
        else RSA-encrypted (pinned key, or the server's when retrieval is allowed)."""
        channel = self._require_channel()
        password = self.settings.password
        if self._secure or not password:
            channel.write_packet(
                wire.auth_response_for(wire.AuthPlugin.SHA256, password, nonce, secure=True)
            )
            return
        channel.write_packet(self._rsa_password(nonce, wire.SHA256_REQUEST_PUBLIC_KEY))

    def _rsa_password(self, nonce: bytes, request_key: bytes) -> bytes:
        """The password encrypted with the server's RSA key, for a connection without TLS.

        The key is the pinned file (``server-public-key-path``); asking the server for it
        (``request_key``) is only done with ``allow-public-key-retrieval``: a man in the
        middle would answer with their own key and read the password.
        """
        tls = self.settings.tls
        if tls.server_public_key:
            key = Path(tls.server_public_key).read_bytes()
        elif tls.allow_public_key_retrieval:
            channel = self._require_channel()
            channel.write_packet(request_key)
            key_packet = channel.read_packet()
            if wire.is_err(key_packet):
                raise SourceError(
                    f"login to {self.settings.endpoint} failed: {wire.parse_err(key_packet)}"
                )
            if key_packet[:1] != bytes([wire.AUTH_MORE_DATA_HEADER]):
                raise ProtocolError("expected the server's RSA public key during login")
            key = key_packet[1:]
        else:
            raise SourceError(f"cannot log in to {self.settings.endpoint}: {NO_PUBLIC_KEY_MESSAGE}")
        return wire.rsa_encrypt_password(self.settings.password, nonce, key)

    # -- simple queries on the replication connection -----------------------------------

    def _require_channel(self) -> wire.PacketChannel:
        if self._channel is None:
            raise ProtocolError("the replication connection is closed")
        return self._channel

    def _query(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run one statement; rows of a text result set (empty for OK)."""
        channel = self._require_channel()
        channel.send_command(Command.QUERY, sql.encode("utf-8"))
        first = channel.read_packet()
        if wire.is_ok(first):
            return []
        if wire.is_err(first):
            raise SourceError(
                f"{sql.split('=')[0].strip()!r} failed on {self.settings.endpoint}: "
                f"{wire.parse_err(first)}"
            )
        columns, _ = wire.read_lenenc_int(first, 0)
        for _ in range(columns or 0):
            channel.read_packet()  # column definitions: not needed
        if not wire.is_eof(channel.read_packet()):
            raise ProtocolError("expected EOF after the column definitions")
        rows: list[tuple[str | None, ...]] = []
        while True:
            payload = channel.read_packet()
            if wire.is_eof(payload):
                return rows
            if wire.is_err(payload):
                raise SourceError(
                    f"query failed on {self.settings.endpoint}: {wire.parse_err(payload)}"
                )
            rows.append(wire.parse_text_row(payload, columns or 0))

    # -- dump ----------------------------------------------------------------------------

    def _prepare_dump(
        self, start: BinlogPosition, *, blocking: bool, use_gtid: bool, annotate_rows: bool
    ) -> None:
        channel = self._require_channel()
        rows = self._query("SELECT @@global.binlog_checksum, @@global.log_bin")
        checksum, log_bin = rows[0] if rows else (None, None)
        if log_bin not in ("1", "ON"):
            raise SourceError(
                f"the binary log is not enabled on {self.settings.endpoint} (log_bin=OFF): CDC "
                "reads the binlog; start the server with log-bin=mysql-bin, binlog_format=ROW, "
                "binlog_row_image=FULL (my.cnf [mysqld]) and restart it"
            )
        self._checksum = (checksum or "NONE").upper() != "NONE"
        # Tell the server we understand checksums; otherwise it refuses to send them.
        self._query("SET @master_binlog_checksum = @@global.binlog_checksum")
        period_ns = int(self.heartbeat_period_s * 1_000_000_000)
        self._query(f"SET @master_heartbeat_period = {period_ns}")
        if self.is_mariadb:
            self._query(f"SET @mariadb_slave_capability = {MARIADB_SLAVE_CAPABILITY_GTID}")
        else:
            # MySQL >= 8.0.26 reads the source_* names first; older ones ignore them.
            self._query("SET @source_binlog_checksum = @@global.binlog_checksum")
            self._query(f"SET @source_heartbeat_period = {period_ns}")
        host = socket.gethostname()[:60]
        channel.send_command(
            Command.REGISTER_SLAVE,
            wire.com_register_slave(self.server_id, host, self.settings.user[:255], 0),
        )
        reply = channel.read_packet()
        if wire.is_err(reply):
            raise self._dump_error(wire.parse_err(reply), start)
        flags = int(DumpFlag.NONE if blocking else DumpFlag.NON_BLOCK)
        if annotate_rows and self.is_mariadb:
            flags |= MARIADB_DUMP_SEND_ANNOTATE_ROWS
        if not use_gtid:
            channel.send_command(
                Command.BINLOG_DUMP,
                wire.com_binlog_dump(start.file, start.pos, flags, self.server_id),
            )
        elif self.is_mariadb:
            gtids = start.gtids
            if not isinstance(gtids, MariaDbGtidSet):
                raise PositionError(
                    f"cannot start by GTID from {start} on MariaDB: {gtids} is not a MariaDB GTID "
                    "position (domain-server-seq)"
                )
            self._query(f"SET @slave_connect_state = '{gtids}'")
            self._query("SET @slave_gtid_strict_mode = 1")
            self._query("SET @slave_gtid_ignore_duplicates = 0")
            # with @slave_connect_state the server ignores file/pos: empty name, pos 4
            channel.send_command(
                Command.BINLOG_DUMP,
                wire.com_binlog_dump("", FIRST_EVENT_POS, flags, self.server_id),
            )
        else:
            gtids = start.gtids
            if not isinstance(gtids, MySqlGtidSet):
                raise PositionError(
                    f"cannot start by GTID from {start} on MySQL: {gtids} is not a MySQL GTID set"
                )
            channel.send_command(
                Command.BINLOG_DUMP_GTID,
                wire.com_binlog_dump_gtid(
                    "", FIRST_EVENT_POS, flags, self.server_id, wire.encode_sid_set(gtids.sets)
                ),
            )

    def _stream(self, start: BinlogPosition) -> Generator[bytes, None, None]:
        endpoint = self.settings.endpoint
        try:
            channel = self._require_channel()
            first = True
            while True:
                try:
                    payload = channel.read_packet()
                except TimeoutError:
                    raise SourceConnectionError(
                        f"no data from {endpoint} for {self.settings.read_timeout_s:g}s (read "
                        f"timeout) at {self.position}; the server stopped sending events and "
                        "heartbeats: check that it is alive and the network between us"
                    ) from None
                except (wire.ConnectionLostError, OSError) as exc:
                    raise SourceConnectionError(
                        f"connection to {endpoint} lost at {self.position} ({exc}): the "
                        "connection was killed, the server restarted or the network failed; "
                        "the read fails here and can be restarted from that position"
                    ) from None
                if wire.is_ok(payload):
                    event = payload[1:]
                elif wire.is_eof(payload):
                    return  # NON_BLOCK: end of the binlog
                elif wire.is_err(payload):
                    raise self._dump_error(wire.parse_err(payload), start, during_stream=not first)
                else:
                    raise ProtocolError(
                        f"unexpected packet 0x{payload[0]:02x} in the binlog stream from "
                        f"{endpoint} at {self.position}"
                    )
                first = False
                if self._checksum:
                    event = verify_checksum(event, str(self.position))
                self._advance(event)
                yield event
        finally:
            self.close()

    def _advance(self, event: bytes) -> None:
        """Track the position after ``event`` (ROTATE switches files)."""
        if len(event) < EVENT_HEADER_SIZE:
            raise ProtocolError(
                f"binlog event at {self.position} is {len(event)} bytes, shorter than its header"
            )
        _, type_code, _, _, log_pos, _ = EVENT_HEADER.unpack_from(event)
        if type_code == EventType.ROTATE:
            self.position = parse_rotate(event)
        elif (
            log_pos
            and self.position is not None
            and type_code
            not in (
                EventType.HEARTBEAT,
                EventType.HEARTBEAT_V2,
            )
        ):
            self.position = BinlogPosition(self.position.file, log_pos)

    def _dump_error(
        self, error: wire.ServerError, start: BinlogPosition, *, during_stream: bool = False
    ) -> SourceError:
        endpoint = self.settings.endpoint
        text = error.message.lower()
        if error.code == ER_SLAVE_SAME_ID or any(m in text for m in _COLLISION_MARKERS):
            return SourceError(
                f"server-id {self.server_id} collides with another replica connection to "
                f"{endpoint}: the server dropped this one when another connected with the "
                f"same server-id (at {self.position}). Give each job a distinct 'server-id' "
                "range (e.g. 5400-5408 for one job, 5410-5418 for the next) and make sure no "
                f"real replica uses it. Server said: {error}"
            )
        if error.code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
            if "binary log is not open" in text or "binlog is not open" in text:
                return SourceError(
                    f"the binary log is not enabled on {endpoint}: start the server with "
                    "log-bin=mysql-bin, binlog_format=ROW, binlog_row_image=FULL"
                )
            return self._position_error(error, start)
        if error.code == ER_SPECIFIC_ACCESS_DENIED:
            return SourceError(
                f"user {self.settings.user} may not read the binlog on {endpoint}: "
                f"{error.message}; GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO "
                f"'{self.settings.user}'@'<host>';"
            )
        if error.code in (ER_CONNECTION_KILLED, ER_QUERY_INTERRUPTED, ER_SERVER_SHUTDOWN):
            return SourceConnectionError(
                f"connection to {endpoint} lost at {self.position}: {error}; the replication "
                "connection was killed or the server is shutting down; restart from that position"
            )
        where = f"at {self.position}" if during_stream else f"from {start}"
        return SourceError(f"binlog dump {where} on {endpoint} failed: {error}")

    def _position_error(self, error: wire.ServerError, start: BinlogPosition) -> PositionError:
        listing = "(SHOW BINARY LOGS lists them)"
        if self.list_files is not None:
            try:
                files = self.list_files(self.settings)
                listing = ", ".join(f"{name} ({size} bytes)" for name, size in files) or "(none)"
            except SourceError as exc:
                listing = f"(could not list them: {exc})"
        text = error.message.lower()
        if any(marker in text for marker in _MISSING_FILE_MARKERS):
            what = "is not available (purged, or never existed)"
        else:
            what = "is not a valid start (beyond the end of the file, or not at an event boundary)"
        requested = f"GTID position {start.gtids}" if "gtid" in text else f"position {start}"
        return PositionError(
            f"the requested binlog {requested} {what} on {self.settings.endpoint}. "
            f"Binlog files on the server: {listing}. Server said: "
            f"({error.code}) {error.message.rstrip('.')}. "
            "Restart with scan.startup.mode=earliest-offset, or take a new snapshot "
            "(scan.startup.mode=initial)"
        )


def resumed_events(
    client: BinlogClient,
    start: BinlogPosition,
    retries: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Generator[bytes, None, None]:
    """``client.events(start)`` to the binlog's end (non-blocking), its connection opened
    again when it is lost: the dump goes on from the position after the last event yielded,
    so every event comes once and in order, whatever the loss cut (a transaction, a file).

    The server starts each dump with an artificial ROTATE and the file's
    FORMAT_DESCRIPTION, as at ``start``; the reader's state (the TABLE_MAPs of a transaction
    cut in two) is the caller's and lives on. Up to ``retries`` attempts follow one another
    without a real event between them (Flink CDC's ``connect.max-retries``), after pauses of
    1, 2, 4 ... up to 10 s; then the last loss is the error, naming the option. Only a lost
    or refused connection is tried again (:class:`SourceConnectionError`); a refused
    position, login or server-id is the error at once.
    """
    position, failures = start, 0
    while True:
        try:
            for event in client.events(position, blocking=False):
                if failures and _moved(client.position, position):  # a real event came
                    failures = 0
                yield event
            return
        except SourceConnectionError as exc:
            if failures >= retries:
                raise out_of_retries(str(exc), failures, retries) from None
            pause = retry_pause(failures)
            failures += 1
            position = client.position or position
            log.warning(
                "%s; connecting again in %.0fs to read on from %s (attempt %d of %d)",
                exc,
                pause,
                position,
                failures,
                retries,
            )
            sleep(pause)


def _moved(now: BinlogPosition | None, since: BinlogPosition) -> bool:
    """Whether the dump went past ``since`` (the artificial ROTATE names it again)."""
    return now is not None and (now.file, now.pos) != (since.file, since.pos)
