"""Is an offset still a place on the server we reach? Decided before any row is read.

An offset carries the server's identity (``ServerIdentity``), its binlog file's tag
(``binlog_file_tag``) and, where the server has GTIDs, its GTID set. ``judge`` compares
them with what the server says now (``ServerView``) and answers:

- ``SAME``: the offset is a place on this server; read on by file/position.
- ``ADOPT``: an old offset without identity; it is taken as this server's (and checked
  like one) and the caller logs that.
- ``FAILOVER``: another server answers, but its GTID state holds the offset's GTID set
  (a replica promoted behind a VIP): read on from the same GTID set there
  (``positions.position_after_gtids``).

Otherwise it raises a ``ServerContinuityError`` saying what was expected and found:
another server without a GTID path to it, the binlog reset (RESET MASTER, a restore: the
offset's file is gone with no later one, or a file of its name holds other content), or
the server behind the offset (its binlog or GTID state ends before it). A purged binlog
(the file gone, later ones present) keeps its own ``PositionError``.

    >>> view = ServerView(ServerIdentity("mariadb", 1, domain_id=0),
    ...                   BinlogPosition("mysql-bin.000002", 900), (("mysql-bin.000002", 900),))
    >>> judge(BinlogPosition("mysql-bin.000002", 400), view.identity, view).name
    'SAME'
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import (
    BinlogResetError,
    DifferentServerError,
    PositionBehindError,
    PositionError,
)
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.position import BinlogPosition, binlog_file_number
from sparkcdc.mysql.admin import server

_RESTART = (
    "Nothing was read. If this is the server you mean to capture, start the query over "
    "with a new checkpoint (and an empty state.location): scan.startup.mode=initial for a "
    "fresh snapshot, or latest-offset; otherwise point hostname/port back at the server "
    "the checkpoint belongs to"
)


class Continuity(enum.Enum):
    SAME = "same"
    ADOPT = "adopt"
    FAILOVER = "failover"


@dataclass(frozen=True)
class ServerView:
    """What the server says now: identity, binlog end (with GTIDs), files, GTID state."""

    identity: ServerIdentity
    end: BinlogPosition
    files: tuple[tuple[str, int], ...]
    gtid_state: str = ""
    endpoint: str = ""

    @classmethod
    def observe(cls, conn: Any, endpoint: str = "") -> ServerView:
        """One look at the server over an open SQL connection."""
        info = server.server_info(conn)
        identity = server.server_identity(conn, info)
        state = server.gtid_state(conn, info)  # before the end: the end holds all of it
        end = server.current_position(conn, info)
        files = tuple(server.binlog_files(conn))
        return cls(identity, end, files, state, endpoint)

    def where(self) -> str:
        return f"{self.identity} at {self.endpoint}" if self.endpoint else str(self.identity)


def judge(
    offset: BinlogPosition,
    identity: ServerIdentity | None,
    view: ServerView,
    tag_of: Callable[[str], str | None] | None = None,
) -> Continuity:
    """Decide how the offset relates to the server (see the module docstring).

    ``tag_of(file)`` reads a file's tag on the server; without it (or without a tag in
    the offset) the file's content is not compared.
    """
    if identity is not None and not identity.same_server(view.identity):
        gtids = offset.gtids
        if gtids is not None and server.gtid_state_contains(view.gtid_state, gtids):
            return Continuity.FAILOVER
        why = (
            "the offset has no GTID set to follow it by (GTIDs: MariaDB always; MySQL with "
            "gtid_mode=ON)"
            if gtids is None
            else f"its GTID state {view.gtid_state or '(empty)'} does not hold the offset's "
            f"GTID set {gtids}, so it is not a replica that has everything we read"
        )
        raise DifferentServerError(
            f"the source is another server: the offset {offset} was taken on {identity}, but "
            f"{view.where()} answers now, and {why}. {_RESTART}"
        )
    _check_place(offset, view, tag_of)
    return Continuity.ADOPT if identity is None else Continuity.SAME


def _check_place(
    offset: BinlogPosition, view: ServerView, tag_of: Callable[[str], str | None] | None
) -> None:
    sizes = dict(view.files)
    listing = _listing(view.files)
    if offset.file not in sizes:
        number = offset.file_number
        if any(binlog_file_number(name) > number for name in sizes):
            raise PositionError(
                f"the offset's binlog file {offset.file} (position {offset}) was purged from "
                f"{view.where()}; binlog files there now: {listing}. Keep binlogs longer "
                "(binlog_expire_logs_seconds / expire_logs_days) and restart with "
                "scan.startup.mode=initial or earliest-offset and a new checkpoint"
            )
        raise BinlogResetError(
            f"the binlog of {view.where()} was reset or restored: the offset {offset} is in "
            f"{offset.file}, which is gone, and no later file exists (binlog files now: "
            f"{listing}; it ends at {view.end}). RESET MASTER, or a restore from a backup, "
            f"restarted the files. {_RESTART}"
        )
    if offset.file_tag is not None and tag_of is not None:
        found = tag_of(offset.file)
        if found is not None and found != offset.file_tag:
            raise BinlogResetError(
                f"the binlog of {view.where()} was reset or restored: {offset.file} now holds "
                f"another file (its FORMAT_DESCRIPTION says created:server_id {found}; the "
                f"offset {offset} was taken in the one of {offset.file_tag}). RESET MASTER or "
                f"a restore replaced it. {_RESTART}"
            )
    if offset.pos > sizes[offset.file] or view.end < offset:
        raise PositionBehindError(
            f"the binlog of {view.where()} went back: it ends at {view.end} "
            f"({offset.file} is {sizes[offset.file]:,} bytes), before the offset {offset}. "
            f"The server was restored from an older backup or its binlog rewritten. {_RESTART}"
        )
    gtids = offset.gtids
    if (
        gtids is not None
        and view.gtid_state
        and not server.gtid_state_contains(view.gtid_state, gtids)
    ):
        raise PositionBehindError(
            f"the GTID state of {view.where()} ({view.gtid_state}) does not hold the "
            f"offset's GTID set {gtids} (offset {offset}): the server is behind the offset "
            f"(restored from an older backup, or its binlog reset). {_RESTART}"
        )


def _listing(files: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ({size:,} bytes)" for name, size in files) or "(none)"
