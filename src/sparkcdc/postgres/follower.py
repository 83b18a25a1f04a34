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
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.positions import watermark_since
from sparkcdc.postgres.replication import PostgresEndpoint
from sparkcdc.postgres.session import KeptSession

T = TypeVar("T")


@dataclass(frozen=True)
class ServerView:
    """The server as the driver saw it: where its stream ended (a watermark)."""

    end: Lsn
    identity: ServerIdentity | None = None  # MySQL's notion; one PostgreSQL server here

    def where(self) -> str:
        return f"WAL {self.end}"


class LsnFollower:
    """``observe`` takes a watermark on a kept connection, or gives the last one again
    while the server wrote no WAL after it (``watermark_since``); positions are taken as
    they are."""

    def __init__(self, endpoint: PostgresEndpoint) -> None:
        self._session = KeptSession(endpoint)
        self._last: Lsn | None = None

    def run(self, work: Callable[[Any], T]) -> T:
        return self._session.run(work)

    def observe(self) -> ServerView:
        self._last = self._session.run(partial(watermark_since, last=self._last))
        return ServerView(self._last)

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
