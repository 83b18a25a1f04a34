"""How to reach the source server, and ordinary SQL connections to it.

``ConnectionSettings`` is the one value every part of sparkcdc passes around to reach
MySQL/MariaDB; its ``repr`` never shows the password. ``sql_connection`` opens a pymysql
connection and turns connection failures into ``SourceError`` messages that say what to
check (and never contain the password).

    >>> s = ConnectionSettings("127.0.0.1", 33061, "cdc", "secret")
    >>> "secret" in repr(s)
    False
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field
from typing import Any

import pymysql

from sparkcdc.errors import SourceError

# Server error codes (https://mariadb.com/kb/en/mariadb-error-code-reference/).
ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_BAD_DB = 1049
ER_HOST_NOT_PRIVILEGED = 1130
# Client-side codes pymysql uses for connection failures.
CR_CONN_HOST_ERROR = 2003
CR_SERVER_LOST = 2013


@dataclass(frozen=True)
class ConnectionSettings:
    """Where the source server is and how to log in.

    ``connect_timeout_s`` bounds the TCP connect and the wait for the server's greeting;
    ``read_timeout_s`` bounds every later read.
    """

    host: str
    port: int = 3306
    user: str = ""
    password: str = field(default="", repr=False)
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0

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
    return SourceError(f"cannot connect to MySQL/MariaDB at {where}: {why}; {check}")


def access_denied_error(settings: ConnectionSettings, server_message: str = "") -> SourceError:
    """The message for a refused login (the password itself never appears)."""
    detail = f" (server says: {server_message})" if server_message else ""
    return SourceError(
        f"access denied for user {settings.user}@{settings.host} on {settings.endpoint}: "
        f"check username/password{detail}"
    )


def _scrub(text: str, settings: ConnectionSettings) -> str:
    return text.replace(settings.password, "***") if settings.password else text


_preferred_tls: Any = None  # the TLS context pymysql built for its first connection


def _connect(**kwargs: Any) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    """``pymysql.connect``, sharing one TLS context between connections.

    Without TLS options pymysql connects in PREFERRED mode (TLS when the server offers it)
    and builds a new default TLS context for every connection: ~18 ms of loading the CA
    store, more than a snapshot chunk's read. The first connection's context serves the
    process's later ones, in the same mode.
    """
    global _preferred_tls
    if _preferred_tls is None:
        conn = pymysql.connect(**kwargs)
        if getattr(conn, "ssl", False) and getattr(conn, "_ssl_required", None) is False:
            _preferred_tls = conn.ctx
        return conn
    conn = pymysql.connect(ssl_disabled=True, **kwargs)
    conn.ssl, conn._ssl_required, conn.ctx = True, False, _preferred_tls
    return conn


def sql_connection(
    settings: ConnectionSettings, database: str | None = None
) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    """An autocommit utf8mb4 pymysql connection, or a clear ``SourceError``.

    >>> settings = ConnectionSettings("127.0.0.1", 33061, "cdc", "...")
    >>> conn = sql_connection(settings)  # doctest: +SKIP
    >>> conn.cursor().execute("SELECT 1")  # doctest: +SKIP
    1
    """
    conn = _connect(
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
        defer_connect=True,
    )
    try:
        conn.connect()
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else 0
        message = _scrub(str(exc.args[1]) if len(exc.args) > 1 else str(exc), settings)
        if code in (ER_ACCESS_DENIED, ER_HOST_NOT_PRIVILEGED):
            raise access_denied_error(settings, message) from None
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
        original = getattr(exc, "original_exception", None)
        if isinstance(original, OSError):
            raise describe_connect_failure(settings, original) from None
        if code in (CR_CONN_HOST_ERROR, CR_SERVER_LOST):
            raise SourceError(
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
