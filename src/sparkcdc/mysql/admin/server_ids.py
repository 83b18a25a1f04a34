"""A stream's replication server ids, claimed on the source for as long as it runs.

Two replicas that read one server's binlog with the same server id disturb each other (MySQL
drops the older dump; MariaDB keeps both). A stream's binlog connections are short (one per
batch read), so a processlist or ``SHOW SLAVE HOSTS`` looked at once sees another stream's
only while it reads. Two checks at start, then:

- ``SHOW SLAVE HOSTS``: the replicas connected now that registered their server id (real
  replicas, other CDC tools, a stream mid-read). It needs REPLICATION MASTER ADMIN on
  MariaDB >= 10.5 (REPLICATION SLAVE before, and on MySQL); without it only the next check
  runs.
- a named lock per id (``GET_LOCK('sparkcdc.server-id.<id>', 0)``) on a connection kept for
  the run: another sparkcdc stream holds the lock of every id of its range for as long as it
  runs, read or not, and the server frees them when its connection ends (a crash too).

    >>> lock_name(5400)
    'sparkcdc.server-id.5400'
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pymysql

from sparkcdc.errors import ServerIdClashError
from sparkcdc.model.options import ServerIdRange
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection

log = logging.getLogger(__name__)

_FIX = (
    "Give each pipeline (each streaming query) reading this server a server-id range of its "
    "own that no replica uses (e.g. server-id: 5400-5408 for one, 5410-5418 for the next), "
    "or stop the other one first"
)


def lock_name(server_id: int) -> str:
    return f"sparkcdc.server-id.{server_id}"


def registered_replicas(conn: Any) -> dict[int, str] | None:
    """``SHOW SLAVE HOSTS``: server id → host of each registered replica; None when this
    user may not ask."""
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SLAVE HOSTS")
            return {int(row[0]): str(row[1] or "") for row in cur.fetchall()}
    except pymysql.err.OperationalError as exc:
        log.debug("SHOW SLAVE HOSTS is not allowed (%s): replicas not checked", exc)
        return None


class ServerIdClaim:
    """The named locks of a stream's server ids on the source (``take``; ``check`` while
    the run goes on; ``close`` at its end)."""

    def __init__(self, settings: ConnectionSettings, ids: ServerIdRange) -> None:
        self.settings = settings
        self.ids = ids
        self._conn: Any = None

    @classmethod
    def take(cls, settings: ConnectionSettings, ids: ServerIdRange) -> ServerIdClaim:
        """Claim ``ids`` on the server, or raise ``ServerIdClashError`` saying who uses one."""
        claim = cls(settings, ids)
        claim._conn = sql_connection(settings)
        try:
            replicas = registered_replicas(claim._conn) or {}
            clash = sorted(i for i in replicas if ids.low <= i <= ids.high)
            if clash:
                raise ServerIdClashError(
                    f"server-id {ids} clashes on {settings.endpoint}: a replica reads its "
                    f"binlog with server id {clash[0]} now (from host "
                    f"{replicas[clash[0]] or 'unknown'}, as SHOW SLAVE HOSTS lists it). {_FIX}"
                )
            claim._lock()
        except BaseException:
            claim.close()
            raise
        return claim

    def _lock(self) -> None:
        names = [lock_name(i) for i in range(self.ids.low, self.ids.high + 1)]
        with self._conn.cursor() as cur:
            for name in names:
                cur.execute("SELECT GET_LOCK(%s, 0), IS_USED_LOCK(%s)", (name, name))
                got, holder = cur.fetchone()
                if got == 1:
                    continue
                who = ""
                if holder is not None:
                    cur.execute(
                        "SELECT USER, HOST FROM information_schema.PROCESSLIST WHERE ID = %s",
                        (holder,),
                    )
                    row = cur.fetchone()
                    if row is not None:
                        who = f" (connection {holder}, user {row[0]} from {row[1]})"
                raise ServerIdClashError(
                    f"server-id {self.ids} clashes on {self.settings.endpoint}: another "
                    f"sparkcdc stream running now uses server id {name.rpartition('.')[2]}"
                    f"{who}; two binlog readers with one server id disturb each other. {_FIX}"
                )

    def check(self) -> None:
        """Keep the claim: a connection the server dropped (wait_timeout, a restart) is
        opened again and the locks taken again, unless another stream took one meanwhile."""
        try:
            self._conn.ping(reconnect=False)
            return
        except pymysql.err.Error:
            pass
        self.close()
        self._conn = sql_connection(self.settings)
        try:
            self._lock()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(pymysql.err.Error):
                self._conn.close()
            self._conn = None
