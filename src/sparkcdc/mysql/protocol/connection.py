"""How to reach the source server, and ordinary SQL connections to it.

``ConnectionSettings`` is the one value every part of sparkcdc passes around to reach
MySQL/MariaDB; its ``repr`` never shows the password. ``sql_connection`` opens a pymysql
connection and turns connection failures into ``SourceError`` messages that say what to
check (and never contain the password).

    >>> s = ConnectionSettings("127.0.0.1", 23306, "cdc", "secret")
    >>> "secret" in repr(s)
    False
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pymysql
from pymysql.constants import COMMAND

from sparkcdc.errors import SourceConnectionError, SourceError
from sparkcdc.model.tls import TlsSettings
from sparkcdc.mysql.protocol import ed25519

T = TypeVar("T")

log = logging.getLogger(__name__)

# Server error codes (https://mariadb.com/kb/en/mariadb-error-code-reference/).
ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_BAD_DB = 1049
ER_HOST_NOT_PRIVILEGED = 1130
# MySQL ER_SECURE_TRANSPORT_REQUIRED; MariaDB ER_SECURE_TRANSPORT_REQUIRED
ER_SECURE_TRANSPORT_REQUIRED = (3159, 4036)
CLIENT_SSL = 1 << 11  # capability flag: the server speaks TLS
# Client-side codes pymysql uses for connection failures.
CR_SSL_CONNECTION_ERROR = 2026
CR_CONN_HOST_ERROR = 2003
CR_SERVER_LOST = 2013
CR_SERVER_GONE_ERROR = 2006  # a write to a connection the server has closed
# Server codes sent as the server drops a connection.
ER_SERVER_SHUTDOWN = 1053
ER_CONNECTION_KILLED = 1927  # MariaDB: KILL of a connection that runs a statement

# the pause before the first attempt to connect again after a loss; each later one doubles,
# up to the cap
RETRY_PAUSE_S = 1.0
RETRY_PAUSE_CAP_S = 10.0


@dataclass(frozen=True)
class ConnectionSettings:
    """Where the source server is and how to log in.

    ``connect_timeout_s`` bounds the TCP connect and the wait for the server's greeting;
    ``read_timeout_s`` bounds every later read. ``tls`` says how every connection
    negotiates TLS (default: MySQL's ``preferred``). ``connect_max_retries``: how many
    times a read connects again, one attempt after another, when its connection is lost
    (a binlog read: ``replication.resumed_events``; SQL reads: ``KeptConnection``).
    """

    host: str
    port: int = 3306
    user: str = ""
    password: str = field(default="", repr=False)
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    tls: TlsSettings = field(default_factory=TlsSettings)
    connect_max_retries: int = 3

    @property
    def endpoint(self) -> str:
        """``host:port`` for messages.

        >>> ConnectionSettings("db", 3307, "u", "p").endpoint
        'db:3307'
        """
        return f"{self.host}:{self.port}"


def describe_connect_failure(settings: ConnectionSettings, exc: BaseException) -> SourceError:
    """A ``SourceError`` for a failed TCP connect / greeting wait.

    >>> e = describe_connect_failure(ConnectionSettings("h", 1, "u", "p"), ConnectionRefusedError())
    >>> "connection refused" in str(e)
    True
    """
    where = settings.endpoint
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        why = "connection refused (nothing listens on that port)"
        check = "check hostname and port, and that the server is running"
    elif isinstance(exc, TimeoutError | socket.timeout):
        why = f"no answer within connect timeout {settings.connect_timeout_s:g}s"
        check = (
            "check hostname and port (is it a MySQL/MariaDB port?), that the server is up, "
            "and that no firewall drops the traffic"
        )
    elif isinstance(exc, socket.gaierror):
        why = f"the hostname {settings.host!r} does not resolve ({exc.strerror})"
        check = "check the hostname"
    else:
        why = str(exc) or type(exc).__name__
        check = "check hostname, port and network"
    return SourceConnectionError(f"cannot connect to MySQL/MariaDB at {where}: {why}; {check}")


def access_denied_error(settings: ConnectionSettings, server_message: str = "") -> SourceError:
    """The message for a refused login (the password itself never appears)."""
    detail = f" (server says: {server_message})" if server_message else ""
    return SourceError(
        f"access denied for user {settings.user}@{settings.host} on {settings.endpoint}: "
        f"check username/password{detail}"
    )


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (the server closed it, killed it or is
    shutting down, or it was closed here), not that a statement failed on a live one."""
    if isinstance(exc, pymysql.err.InterfaceError):  # used after it was closed
        return True
    if not isinstance(exc, pymysql.err.OperationalError) or not exc.args:
        return False
    return exc.args[0] in (
        CR_SERVER_LOST,
        CR_SERVER_GONE_ERROR,
        ER_CONNECTION_KILLED,
        ER_SERVER_SHUTDOWN,
    )


def retry_pause(failures: int) -> float:
    """The pause before the attempt to connect again that follows ``failures`` failed ones:
    1, 2, 4 ... up to 10 s.

    >>> [retry_pause(n) for n in range(6)]
    [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    """
    return min(RETRY_PAUSE_S * 2.0**failures, RETRY_PAUSE_CAP_S)


def out_of_retries(loss: str, failures: int, retries: int) -> SourceConnectionError:
    """The error a read stops with when its connection is lost after ``retries`` attempts."""
    tried = f" ({failures} attempt(s) to connect again failed)" if failures else ""
    return SourceConnectionError(
        f"{loss}{tried}; connect.max-retries ({retries}) sets how many attempts a read makes "
        "before it fails"
    )


class KeptConnection:
    """A connection kept for reads: a driver's look-ups between batches (the chunk
    splitter's queries, each trigger's look at the server), a task's chunk reads. Opened on
    first use and opened again when the server drops it: a KILL, a restart,
    ``wait_timeout``, a proxy's idle timeout. Only for work that changes nothing on the
    server: work a lost connection cut short is done again, whole, on the new one.

    Up to ``retries`` attempts (``connect.max-retries``) follow one another, after pauses of
    1, 2, 4 ... up to 10 s, while connections are lost or cannot be opened (refused, timed
    out: :class:`SourceConnectionError`); then the loss is the error, naming the option.
    Any other error (a refused statement, a refused login) is the caller's at once. A kept
    connection found dropped before its next work (a ping: ``wait_timeout``, a proxy's idle
    timeout, a restart between two uses) is opened again at once, as Flink CDC's and
    Debezium's clients reconnect a dropped one: that is no retry, so ``retries=0`` still
    outlives an idle drop.

    ``session`` statements (a time zone) run on every connection it opens."""

    def __init__(
        self,
        opener: Callable[[], Any],
        *,
        reopens: bool = True,
        retries: int = 3,
        where: str = "the source",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._opener = opener
        self._reopens = reopens
        self._retries = retries
        self._where = where
        self._sleep = sleep
        self._conn: Any = None
        self._session: list[str] = []

    @classmethod
    def to(cls, settings: ConnectionSettings, database: str | None = None) -> KeptConnection:
        """A kept connection to ``settings``' server (``database`` its default), attempts
        to connect again as ``settings.connect_max_retries`` says."""
        return cls(
            partial(sql_connection, settings, database),
            retries=settings.connect_max_retries,
            where=settings.endpoint,
        )

    @classmethod
    def over(cls, conn: Any) -> KeptConnection:
        """The caller's open connection, never opened again: its loss is the error."""
        kept = cls(lambda: conn, reopens=False)
        kept._conn = conn
        return kept

    def run(self, work: Callable[[Any], T]) -> T:
        """``work(connection)``, done again on a new connection while the one it ran on is
        lost, up to ``retries`` attempts in a row."""
        failures = 0
        if self._conn is not None and self._reopens and not _alive(self._conn):
            log.info(
                "the kept connection to %s was dropped while idle; connecting again", self._where
            )
            self.close()
        while True:
            try:
                if self._conn is None:
                    self._conn = self._open()
                return work(self._conn)
            except Exception as exc:
                # a lost SQL connection, or one that did not open, is tried again; the
                # work's own connection errors (a binlog read's, retried there) are the caller's
                lost = connection_lost(exc) or (
                    self._conn is None and isinstance(exc, SourceConnectionError)
                )
                if not (self._reopens and lost):
                    raise
                self.close()
                loss = self._loss(exc)
                if failures >= self._retries:
                    raise out_of_retries(loss, failures, self._retries) from None
                pause = retry_pause(failures)
                failures += 1
                log.warning(
                    "%s; connecting again in %.0fs (attempt %d of %d)",
                    loss,
                    pause,
                    failures,
                    self._retries,
                )
                self._sleep(pause)

    def _open(self) -> Any:
        conn = self._opener()
        try:
            for sql in self._session:
                _execute(conn, sql)
        except BaseException:
            with contextlib.suppress(Exception):
                conn.close()
            raise
        return conn

    def _loss(self, exc: Exception) -> str:
        if isinstance(exc, SourceConnectionError):
            return str(exc)
        detail = exc.args[1] if len(exc.args) > 1 else str(exc)
        return f"the connection to MySQL/MariaDB at {self._where} was lost ({detail})"

    def session(self, sql: str) -> None:
        """Run ``sql`` on this connection and on every one opened after it."""
        if sql not in self._session:
            self._session.append(sql)
        if self._conn is not None:
            self.run(lambda conn: _execute(conn, sql))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._reopens:
            with contextlib.suppress(Exception):
                conn.close()


def _alive(conn: Any) -> bool:
    """Whether ``conn`` still answers (one round trip); False when it is lost."""
    if not getattr(conn, "open", True):  # pymysql closed it at an earlier failure
        return False
    try:
        conn.ping(reconnect=False)
    except Exception as exc:
        if connection_lost(exc):
            return False
        raise
    return True


def _execute(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)


def _scrub(text: str, settings: ConnectionSettings) -> str:
    return text.replace(settings.password, "***") if settings.password else text


class _Connection(pymysql.connections.Connection):
    """A pymysql connection that never trusts a server-sent RSA key unless allowed.

    pymysql asks the server for its public key whenever caching_sha2_password or
    sha256_password need the password without TLS; a man in the middle answers with
    their own key and reads the password. Here the key is the pinned file's
    (``server-public-key-path``), and a key from the server is refused unless
    ``allow-public-key-retrieval`` is set (MySQL's clients behave the same).
    """

    _tls: TlsSettings = TlsSettings()
    _pinned_key: bytes | None = None

    @property
    def server_public_key(self) -> bytes | None:
        if self._pinned_key is None and not self._tls.allow_public_key_retrieval:
            raise pymysql.err.OperationalError(CR_AUTH_PLUGIN_ERR, NO_PUBLIC_KEY_MESSAGE)
        return self._pinned_key

    @server_public_key.setter
    def server_public_key(self, value: bytes | None) -> None:
        if value is None or value == self._pinned_key:
            return
        if not self._tls.allow_public_key_retrieval:
            raise pymysql.err.OperationalError(CR_AUTH_PLUGIN_ERR, NO_PUBLIC_KEY_MESSAGE)
        self._pinned_key = value

    def _process_auth(self, plugin_name: bytes, auth_packet: Any, handler: Any = None) -> Any:
        # MariaDB's ed25519: signed here (pymysql's own needs PyNaCl, not a dependency)
        if plugin_name == b"client_ed25519" and handler is None:
            password = self.password or b""
            self.write_packet(ed25519.sign(password, auth_packet.read_all()[:32]))
            packet = self._read_packet()  # type: ignore[no-untyped-call]
            packet.check_error()
            return packet
        return super()._process_auth(plugin_name, auth_packet, handler)  # type: ignore[misc]

    # -- a result's rows read as bytes (mysql/chunks/textrows.py) ----------------------
    # pymysql's unbuffered result without its per-row reads: the query and its column
    # definitions go through pymysql; the rows are left on the wire for read_some().

    def start_result(self, sql: str) -> tuple[Any, int]:
        """Send ``sql`` and read its column definitions: (pymysql's ``MySQLResult``, with
        ``fields`` and ``converters``; the sequence id the first row packet carries)."""
        inner = self._pymysql
        inner._execute_command(COMMAND.COM_QUERY, sql)
        result: Any = pymysql.connections.MySQLResult(self)
        result.init_unbuffered_query()
        # the rows are the caller's: pymysql's result must not read them when collected
        result.unbuffered_active = False
        result.connection = None
        return result, int(inner._next_seq_id)

    def read_some(self, size: int) -> bytes:
        """Up to ``size`` bytes of the rows (at least one; blocks until one arrives)."""
        try:
            data = self._pymysql._rfile.read1(size)
        except OSError as exc:
            self.abandon()
            raise pymysql.err.OperationalError(
                CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})"
            ) from None
        if not data:
            self.abandon()
            raise pymysql.err.OperationalError(
                CR_SERVER_LOST, "Lost connection to MySQL server during query"
            )
        return bytes(data)

    def abandon(self) -> None:
        """Close the connection without a word to the server: rows are left unread."""
        self._pymysql._force_close()

    @property
    def _pymysql(self) -> Any:
        """This connection, for pymysql's own attributes (not in its type stubs)."""
        return self


# pymysql's "authentication plugin error" client code
CR_AUTH_PLUGIN_ERR = 2061
NO_PUBLIC_KEY_MESSAGE = (
    "the server wants the password over RSA (caching_sha2_password full authentication or "
    "sha256_password) on a connection without TLS, and sparkcdc does not fetch the "
    "server's public key unverified; use TLS (ssl-mode preferred/required/verify-ca on a "
    "server with TLS), or give the server's public key file as server-public-key-path, "
    "or set allow-public-key-retrieval=true if you trust the network"
)


def connect_with_tls(tls: TlsSettings, **kwargs: Any) -> pymysql.connections.Connection[Any]:
    """A deferred pymysql connection with ``tls``'s mode and its shared TLS context.

    pymysql builds a new TLS context for every connection (~18 ms of loading a CA store,
    more than a snapshot chunk's read) and knows no ``required``-without-verification
    mode: the connection gets the context of ``tls`` instead, built once per process,
    with pymysql's own switch for "TLS or fail" (``_ssl_required``).
    """
    conn = _Connection(ssl_disabled=True, defer_connect=True, **kwargs)
    conn._tls = tls
    if tls.server_public_key:
        conn._pinned_key = Path(tls.server_public_key).read_bytes()
    ctx = tls.context()
    if ctx is not None:
        conn.ssl = True
        conn._ssl_required = tls.requires_tls  # type: ignore[attr-defined]
        conn.ctx = ctx  # type: ignore[attr-defined]
    return conn


def tls_failure(settings: ConnectionSettings, exc: ssl.SSLError) -> SourceError:
    """The message for a failed TLS handshake (certificate check or protocol)."""
    tls = settings.tls
    if isinstance(exc, ssl.SSLCertVerificationError):
        what = exc.verify_message or str(exc)
        ca = f"ssl-ca {tls.ca!r}" if tls.ca else "the system's trusted CAs"
        if "hostname" in what.lower() or "ip address mismatch" in what.lower():
            hint = (
                f"the certificate does not name {settings.host!r}: connect by a name it "
                "holds, or use ssl-mode verify-ca"
            )
        else:
            hint = (
                f"the certificate is not signed by {ca}: give the CA that signed the "
                "server's certificate as ssl-ca"
            )
        return SourceError(
            f"the TLS certificate of {settings.endpoint} failed verification "
            f"(ssl-mode {tls.effective_mode}): {what}; {hint}. Nothing was read"
        )
    return SourceError(
        f"the TLS handshake with {settings.endpoint} failed (ssl-mode {tls.effective_mode}): "
        f"{exc}; check the server's TLS set-up (ssl_cert/ssl_key) and ssl-cert/ssl-key"
    )


def no_tls_error(settings: ConnectionSettings) -> SourceError:
    return SourceError(
        f"ssl-mode {settings.tls.effective_mode} needs TLS but MySQL/MariaDB at "
        f"{settings.endpoint} does not offer it; configure ssl_cert/ssl_key on the server, "
        "or use ssl-mode preferred/disabled on a trusted network"
    )


def denied_error(
    settings: ConnectionSettings, message: str, *, offers_tls: bool, used_tls: bool
) -> SourceError:
    """A refused login. MariaDB refuses a plain-TCP login to a server with
    ``require_secure_transport=ON`` as "access denied" (MySQL has its own code): when the
    login was plain and the server offers TLS, one login over TLS tells the two apart."""
    if offers_tls and not used_tls:
        probe = ConnectionSettings(
            settings.host,
            settings.port,
            settings.user,
            settings.password,
            settings.connect_timeout_s,
            settings.read_timeout_s,
            TlsSettings(mode="required"),
        )
        try:
            sql_connection(probe).close()
        except SourceError:
            pass
        else:
            return insecure_transport_error(settings, message)
    return access_denied_error(settings, message)


def insecure_transport_error(settings: ConnectionSettings, message: str) -> SourceError:
    return SourceError(
        f"MySQL/MariaDB at {settings.endpoint} refuses connections without TLS "
        f"(require_secure_transport=ON) and ssl-mode is {settings.tls.mode}: enable TLS "
        f"(ssl-mode preferred, required or verify-ca) (server says: {message})"
    )


def sql_connection(
    settings: ConnectionSettings, database: str | None = None
) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    """An autocommit utf8mb4 pymysql connection, or a clear ``SourceError``.

    >>> settings = ConnectionSettings("127.0.0.1", 23306, "cdc", "...")
    >>> conn = sql_connection(settings)  # doctest: +SKIP
    >>> conn.cursor().execute("SELECT 1")  # doctest: +SKIP
    1
    """
    conn = connect_with_tls(
        settings.tls,
        host=settings.host,
        port=settings.port,
        user=settings.user,
        password=settings.password,
        database=database,
        charset="utf8mb4",
        autocommit=True,
        connect_timeout=settings.connect_timeout_s,
        # pymysql waits for the server greeting with the read timeout: bound it by the
        # connect timeout, then switch to the read timeout once logged in.
        read_timeout=settings.connect_timeout_s,
        write_timeout=settings.read_timeout_s,
    )
    try:
        conn.connect()
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else 0
        message = _scrub(str(exc.args[1]) if len(exc.args) > 1 else str(exc), settings)
        original = getattr(exc, "original_exception", None)
        if isinstance(original, ssl.SSLError):
            raise tls_failure(settings, original) from None
        if code == CR_SSL_CONNECTION_ERROR:
            raise no_tls_error(settings) from None
        if code in ER_SECURE_TRANSPORT_REQUIRED:
            raise insecure_transport_error(settings, message) from None
        if code == CR_AUTH_PLUGIN_ERR:
            raise SourceError(f"cannot log in to {settings.endpoint}: {message}") from None
        if code in (ER_ACCESS_DENIED, ER_HOST_NOT_PRIVILEGED):
            raise denied_error(
                settings,
                message,
                offers_tls=bool(getattr(conn, "server_capabilities", 0) & CLIENT_SSL),
                used_tls=bool(getattr(conn, "_secure", False)),
            ) from None
        if code == ER_BAD_DB:
            raise SourceError(
                f"database {database!r} does not exist on {settings.endpoint}; check the "
                "database name"
            ) from None
        if code == ER_DBACCESS_DENIED:
            raise SourceError(
                f"user {settings.user}@{settings.host} may not use database {database!r} on "
                f"{settings.endpoint}: {message}; GRANT SELECT on it"
            ) from None
        if isinstance(original, OSError):
            raise describe_connect_failure(settings, original) from None
        if code in (CR_CONN_HOST_ERROR, CR_SERVER_LOST):
            raise SourceConnectionError(
                f"cannot connect to MySQL/MariaDB at {settings.endpoint}: {message}; check "
                "hostname, port, that the server is running and reachable"
            ) from None
        raise SourceError(f"cannot log in to {settings.endpoint}: {message}") from None
    except pymysql.MySQLError as exc:
        raise SourceError(
            f"cannot connect to MySQL/MariaDB at {settings.endpoint}: {_scrub(str(exc), settings)}"
        ) from None
    # logged in: from now on reads wait up to read_timeout_s (pymysql re-applies
    # ``_read_timeout`` before each read).
    conn._read_timeout = settings.read_timeout_s  # type: ignore[attr-defined]
    return conn
