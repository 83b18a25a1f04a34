"""The driver's watch over a PostgreSQL source's stream (the interface's ``StreamFollower``).

One server, one slot: an offset's LSN is a place on the slot's stream as long as the slot
holds it (the replication client refuses a start before the slot's confirmed LSN, naming
the fix), so there is no failover to follow and no byte budget to cut by: a range ends at
the watermark taken when the batch is planned (the last one again while the server is idle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.schema import TableSchema
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.positions import still_at, watermark
from sparkcdc.postgres.replication import PostgresEndpoint
from sparkcdc.postgres.session import KeptSession

T = TypeVar("T")


@dataclass(frozen=True)
class ServerView:
    """The server as the driver saw it: where its stream ended (a watermark)."""

    end: Lsn
    identity: ServerIdentity | None = None  # MySQL's notion; one PostgreSQL server here
    # the captured tables' schemas as of ``end`` (read under locks that keep their DDL
    # out until ``end`` is taken): the WAL carries no DDL (DESIGN.md §12.2)
    schemas: tuple[TableSchema, ...] = ()

    def where(self) -> str:
        return f"WAL {self.end}"


class LsnFollower:
    """``observe`` takes a watermark on a kept connection together with the captured
    tables' schemas as of it, or gives the last view again while the server wrote no WAL
    after it (``still_at``: no commit, so no DDL either); positions are taken as
    they are."""

    def __init__(
        self,
        endpoint: PostgresEndpoint,
        schemas: Callable[[Any], tuple[TableSchema, ...]],
    ) -> None:
        """``schemas(conn)``: the captured tables' schemas, read on ``conn`` in its open
        transaction with each table locked against DDL (``catalog.lock_for_schema_read``)."""
        self._session = KeptSession(endpoint)
        self._schemas = schemas
        self._last: ServerView | None = None

    def run(self, work: Callable[[Any], T]) -> T:
        return self._session.run(work)

    def observe(self) -> ServerView:
        self._last = self._session.run(partial(self._look, last=self._last))
        return self._last

    def _look(self, conn: Any, last: ServerView | None) -> ServerView:
        if last is not None and still_at(conn, last.end):
            return last
        with conn.transaction():  # the schemas and the watermark agree: DDL waits
            schemas = self._schemas(conn)
            return ServerView(watermark(conn), schemas=schemas)

    def schemas_of(self, view: ServerView) -> tuple[TableSchema, ...] | None:
        return view.schemas

    def end_of(self, view: ServerView) -> Lsn:
        return view.end

    def mark(self, view: ServerView, position: Lsn) -> Lsn:
        return position

    def continued(self, position: Lsn, start: Lsn) -> Lsn:
        return position

    def trust(self, key: str) -> None:
        """Nothing to check lightly: the slot refuses a start it no longer holds."""

    def locate(
        self,
        key: str,
        position: Lsn,
        identity: ServerIdentity | None,
        view: ServerView,
        highs: Callable[[], Sequence[Lsn]],
    ) -> tuple[Lsn, bool]:
        return position, False

    def high_on(self, view: ServerView, old: ServerIdentity, high: Lsn) -> Lsn:
        return high

    def cut(
        self, here: Lsn, end: Lsn, view: ServerView, budget: int, high: Callable[[], Lsn | None]
    ) -> Lsn:
        return end

    def close(self) -> None:
        self._session.close()
