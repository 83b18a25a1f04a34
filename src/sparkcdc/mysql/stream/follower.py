"""The driver's watch over the binlog a stream reads: which server answers, where an offset
is on it (followed by GTID after a failover), and where a bounded batch may end.

The Spark source asks it before each batch is planned (``continuity.judge`` decides); it
keeps, per process, the file tags per (server, file), the offsets checked in full, and where
offsets of a failed-over server land, so that each costs one look at the server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from sparkcdc.errors import DifferentServerError
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin import server
from sparkcdc.mysql.protocol.connection import ConnectionSettings, KeptConnection
from sparkcdc.mysql.stream import positions
from sparkcdc.mysql.stream.continuity import Continuity, ServerView, judge

log = logging.getLogger(__name__)
T = TypeVar("T")


class BinlogFollower:
    """One stream's driver-side view of its server (``observe``) and the continuity checks
    of its offsets there. Holds a kept connection (not pickled: it stays on the driver)."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self._tags: dict[tuple[str, str], str | None] = {}
        self._checked: set[str] = set()
        self._located: dict[str, BinlogPosition] = {}
        self._highs: dict[tuple[str, str], BinlogPosition] = {}  # chunk HWs' sets followed
        # the driver's connection for each trigger's look at the server, kept between polls
        # (a login, and a TLS handshake, saved at every trigger); made at the first poll
        self._poll: KeptConnection | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_poll"] = None
        return state

    def run(self, work: Callable[[Any], T]) -> T:
        """``work`` on the kept connection, done again on a new one when the server has
        dropped it (wait_timeout, a KILL, a restart, a failover)."""
        if self._poll is None:
            self._poll = KeptConnection.to(self.settings)
        return self._poll.run(work)

    def observe(self) -> ServerView:
        """The server as the driver sees it now."""
        return self.run(partial(ServerView.observe, endpoint=self.settings.endpoint))

    def schemas_of(self, view: ServerView) -> None:
        """None: the binlog carries every DDL at its place."""
        return None

    def close(self) -> None:
        if self._poll is not None:
            self._poll.close()

    # -- places on the server ----------------------------------------------------------

    def _tag(self, view: ServerView, file: str) -> str | None:
        key = (json.dumps(view.identity.to_offset(), sort_keys=True), file)
        if key not in self._tags:
            self._tags[key] = positions.file_tag(self.settings, file)
        return self._tags[key]

    def stamp(self, view: ServerView, position: BinlogPosition) -> BinlogPosition:
        """``position`` on the server of ``view`` with the tag of its file."""
        return position.with_file_tag(self._tag(view, position.file))

    def end_of(self, view: ServerView) -> BinlogPosition:
        """The end of the server's binlog as a place on it (tagged, with its GTID set)."""
        return self.stamp(view, view.end)

    def mark(self, view: ServerView, position: BinlogPosition) -> BinlogPosition:
        """A start position taken elsewhere, tagged when its file is one the server has."""
        return self.stamp(view, position) if position.file in dict(view.files) else position

    def continued(self, position: BinlogPosition, start: BinlogPosition) -> BinlogPosition:
        """``position`` in the seq numbering of ``start`` (a batch's rows all take the seq
        base of its start; see ``BinlogPosition.after_failover``)."""
        return replace(position, seq_file_base=start.seq_file_base)

    # -- continuity of offsets -----------------------------------------------------------

    def trust(self, key: str) -> None:
        """An offset this process wrote on the server that answers: no full check."""
        self._checked.add(key)

    def locate(
        self,
        key: str,
        position: BinlogPosition,
        identity: ServerIdentity | None,
        view: ServerView,
        highs: Callable[[], Sequence[BinlogPosition]],
    ) -> tuple[BinlogPosition, bool]:
        """Where ``position`` (taken on ``identity``; ``key`` names the offset) is on the
        server of ``view``, and whether that is another server it was followed to by GTID.
        Raises ``ServerContinuityError`` when it is no place there. An offset is checked in
        full (its file's tag too) once per process; the cheap checks (identity, files, end,
        GTID state) every time. ``highs()``: the HWs of the chunks read in the batch up to
        the offset, asked only on a failover, each followed too (``high_on``)."""
        located = self._located.get(key + json.dumps(view.identity.to_offset()))
        if located is not None:
            return located, True
        tag_of = None if key in self._checked else partial(self._tag, view)
        verdict = judge(position, identity, view, tag_of)
        self._checked.add(key)
        if verdict is Continuity.ADOPT:
            log.warning(
                "mysql-cdc: the offset %s carries no server identity (written by an older "
                "sparkcdc); it is taken as a place on %s, which answers now, and later offsets "
                "carry that identity",
                position,
                view.where(),
            )
        if verdict is not Continuity.FAILOVER:
            return position, False
        assert position.gtids is not None and identity is not None  # judge's FAILOVER
        # every chunk is read; the last batch's HWs (after the offset) are followed
        # by their GTID sets: each is checked here, before anything is planned
        chunk_highs = list(highs())
        for high in chunk_highs:
            self.high_on(view, identity, high)
        found = positions.position_after_gtids(self.settings, position.gtids, view.end)
        # the chunk rows carry their HW's seq: new events sort after the latest of them
        latest = max([position, *chunk_highs], key=lambda p: p.seq())
        found = self.stamp(view, found).after_failover(latest)
        log.warning(
            "mysql-cdc: followed failover from server %s to %s at GTID %s: offset %s there is "
            "%s here",
            identity,
            view.where(),
            position.gtids,
            position,
            found,
        )
        self._located[key + json.dumps(view.identity.to_offset())] = found
        return found, True

    def high_on(
        self, view: ServerView, old: ServerIdentity, high: BinlogPosition
    ) -> BinlogPosition:
        """A chunk's HW, taken on the server ``old`` we failed over from, as a place on the
        server of ``view``: right after the transactions of its GTID set, as an offset is
        followed. The chunk saw those transactions; a server that lacks one of them lost
        a change the chunk's rows hold, and the query stops (DESIGN.md §2.7)."""
        # chunks read while the server was idle share a set: one dump each set
        key = (json.dumps(view.identity.to_offset(), sort_keys=True), str(high.gtids))
        found = self._highs.get(key)
        if found is not None:
            return found
        if high.gtids is None or not server.gtid_state_contains(view.gtid_state, high.gtids):
            have = (
                "has no GTID set to follow it by (read before sparkcdc kept one, or while "
                "the binlog kept moving)"
                if high.gtids is None
                else f"has GTID set {high.gtids}, which the GTID state of the new server "
                f"({view.gtid_state or 'empty'}) does not hold: transactions the chunk's "
                "rows hold were lost in the failover"
            )
            raise DifferentServerError(
                f"the source failed over from {old} to {view.where()} right after the batch "
                f"that read the snapshot's last chunks; a chunk's high watermark {high} "
                f"{have}. The rows already delivered may hold changes the new server does "
                "not have. Start the query over with a new checkpoint and an empty "
                "state.location (scan.startup.mode=initial) on the new server"
            )
        found = positions.position_after_gtids(self.settings, high.gtids, view.end)
        self._highs[key] = found
        return found

    # -- bounded batches -----------------------------------------------------------------

    def cut(
        self,
        here: BinlogPosition,
        end: BinlogPosition,
        view: ServerView,
        budget: int,
        high: Callable[[], BinlogPosition | None],
    ) -> BinlogPosition:
        """``end``, or a transaction boundary before it when ``[here, end)`` is more than
        ``budget`` bytes of binlog (<= 0: no bound): the one the budget reaches first
        (``positions.transaction_cut``: ``here``'s GTID set grown by the GTIDs read up to it, or
        asked of MariaDB where ``here`` has none). Never before ``high()`` (the previous
        batch's chunk HWs as places here), asked only when the range is over budget."""
        waiting = server.binlog_bytes(here, end, view.files)
        if budget <= 0 or waiting <= budget:
            return end
        last = high()
        if last is not None:
            budget = max(budget, server.binlog_bytes(here, last, view.files))
        if waiting <= budget:
            return end
        cut = positions.transaction_cut(self.settings, here, end, budget)
        if cut is None:
            return end
        if cut.gtids is None and view.identity.flavor == "mariadb":
            file, pos = cut.file, cut.pos
            cut = cut.with_gtids(self.run(lambda conn: server.mariadb_gtid_at(conn, file, pos)))
        return self.continued(self.stamp(view, cut), end)
