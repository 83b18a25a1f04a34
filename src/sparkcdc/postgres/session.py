"""A kept SQL connection to the PostgreSQL source (the ``Session`` of the source interface).

Opened on first use and opened again when the server dropped it (a restart, an idle
timeout, ``pg_terminate_backend``): the work it was doing is done again, whole, on the new
one, so it is only for work that changes nothing on the server, or nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from sparkcdc.errors import SourceConnectionError
from sparkcdc.postgres.replication import PostgresEndpoint

T = TypeVar("T")
log = logging.getLogger(__name__)


def sql_connection(endpoint: PostgresEndpoint) -> psycopg.Connection[Any]:
    """A plain (not replication) autocommit connection, with the session's text forms."""
    try:
        return psycopg.connect(endpoint.conninfo(replication=False), autocommit=True)
    except psycopg.OperationalError as error:
        raise SourceConnectionError(
            f"cannot connect to PostgreSQL {endpoint.where()}: {str(error).strip()}. Check "
            "hostname, port, database-name, username and password"
        ) from None


class KeptSession:
    """``run(work)`` gives ``work`` the open connection; on a connection lost during or
    before it, ``work`` runs again once, whole, on a new one.

    >>> with KeptSession(endpoint) as session:                  # doctest: +SKIP
    ...     session.run(lambda conn: conn.execute("SELECT 1").fetchone())
    (1,)
    """

    def __init__(self, endpoint: PostgresEndpoint) -> None:
        self.endpoint = endpoint
        self._conn: psycopg.Connection[Any] | None = None

    def __enter__(self) -> KeptSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self.close()
            self._conn = sql_connection(self.endpoint)
        return self._conn

    def run(self, work: Callable[[Any], T]) -> T:
        try:
            return work(self._open())
        except psycopg.OperationalError as lost:
            if self._conn is None or not (self._conn.closed or self._conn.broken):
                raise  # a refused statement, not a lost connection
            log.info(
                "the connection to PostgreSQL %s was lost (%s); connecting again",
                self.endpoint.where(),
                str(lost).strip(),
            )
        self.close()
        return work(self._open())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
