"""A running pipeline's progress: one rewritten line on a terminal, log lines otherwise; and
what a committed offset says of the snapshot and the binlog.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from sparkcdc.model.dialect import SourceDialect
from sparkcdc.model.position import BinlogPosition, binlog_file_number

# the run's progress lines are the runner's: users read and filter them by this name
# (docs/cli.md shows them)
log = logging.getLogger("sparkcdc.pipeline.runner")


POLL_S = 0.5


@dataclass(frozen=True)
class StreamOffsets:
    """Where a source's offsets hold its stream position (``SourceDialect.offset_key``: a
    MySQL binlog position under ``binlog``, a PostgreSQL LSN under ``wal``) and how it
    reads (``position_from_offset``).

    >>> str(StreamOffsets().position({"binlog": BinlogPosition("b.000002", 4).to_offset()}))
    'b.000002:4'
    """

    key: str = "binlog"
    parse: Callable[[dict[str, Any]], Any] = BinlogPosition.from_offset

    @classmethod
    def of(cls, dialect: SourceDialect[Any]) -> StreamOffsets:
        return cls(dialect.offset_key, dialect.position_from_offset)

    def position(self, offset: dict[str, Any] | None) -> Any | None:
        """The stream position of ``offset``, None where it has none."""
        if not offset or self.key not in offset:
            return None
        return self.parse(offset[self.key])


BINLOG = StreamOffsets()


def offset_caught_up(
    offset: dict[str, Any] | None, target: Any, stream: StreamOffsets = BINLOG
) -> bool:
    """Whether a committed source offset has every chunk read and the stream at ``target``.

    >>> offset_caught_up({"binlog": BinlogPosition("b.000002", 4).to_offset(),
    ...     "snapshot": {"a.t": {"next": 2, "prev": 2, "total": 2}}}, BinlogPosition("b.000001", 9))
    True
    """
    position = stream.position(offset)
    if position is None:
        return False
    return snapshot_done(offset) and bool(position >= target)


LOG_EVERY_S = 10.0


class Progress:
    """Progress of a running pipeline: one rewritten line on a terminal, log lines otherwise.

    The terminal's line is rewritten at most every ``POLL_S``; a log (not a terminal: a
    file, a service's journal) gets a line at most every ``log_every_s`` seconds, and at once
    when the phase changes (the snapshot done) and at the end (``finish``), so that a run of
    days does not flood it. During a snapshot the line has the rows per second since the
    first batch began (the JVM's start and the planning before it are not the pipeline's
    speed), tables and chunks done of their totals, and an ETA: a table whose chunk
    plan is still growing (DESIGN.md §2) counts the chunks its row estimate over the chunk
    size gives (``chunk_estimates``), marked ``~``. Then the binlog position, its lag
    behind the server in bytes, and the last batch's event lag in seconds.

    >>> import io
    >>> progress = Progress(io.StringIO(), interactive=False, chunk_estimates={"db.t": 62})
    >>> progress.line(None, -1, None)
    'first batch running | 0 rows | snapshot: 0/1 tables, chunks 0/~62'
    """

    def __init__(
        self,
        out: TextIO,
        interactive: bool | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        log_every_s: float = LOG_EVERY_S,
        chunk_estimates: Mapping[str, int] | None = None,
        stream: StreamOffsets = BINLOG,
    ) -> None:
        self.out = out
        self.stream = stream
        self.interactive = out.isatty() if interactive is None else interactive
        self.every_s = POLL_S if self.interactive else log_every_s
        self._clock = clock
        self.started = clock()
        self.rows = 0
        self.first_began: float | None = None  # when the first batch began writing
        self.chunk_estimates = dict(chunk_estimates or {})
        self._last_text = ""  # the last text shown
        self._pending = ""  # a newer text, held back by the interval
        self._shown_at: float | None = None
        self._phase: str | None = None

    def count(self, rows: int) -> None:
        """Rows the sink took for the batch being written (the batch writer's listener)."""
        self.rows += rows

    def timed(self, write: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """``write`` (a foreachBatch function), noting when the first batch began: the
        rate counts from then."""

        def run(frame: Any, batch_id: int) -> None:
            if self.first_began is None:
                self.first_began = self._clock()
            write(frame, batch_id)

        return run

    def line(
        self,
        offset: dict[str, Any] | None,
        batch: int,
        server_pos: Any | None,
        event_lag_s: float | None = None,
    ) -> str:
        now = self._clock()
        writing = None if self.first_began is None else max(now - self.first_began, 1e-6)
        rows = f"{self.rows:,} rows"
        tables = (offset or {}).get("snapshot")
        if tables is None and not offset:  # before the first batch: the tables to snapshot
            tables = {name: {"next": 0, "total": None} for name in self.chunk_estimates}
        snapshot = bool(tables) and not snapshot_done({"snapshot": tables})
        if snapshot and writing is not None and self.rows and batch >= 0:
            # batches run back to back while a snapshot lasts; after it, a rate would sink
            # in every idle gap between batches: the lag says how the binlog keeps up
            rows += f", {self.rows / writing:,.0f} rows/s"
        # batch: the last committed one (-1 before the first commits)
        parts = [f"batch {batch}" if batch >= 0 else "first batch running", rows]
        if tables:
            parts.append(self._snapshot_text(tables, writing))
        position = self.stream.position(offset)
        if position is not None:
            stream = f"{self.stream.key} {position_text(position)}"
            if server_pos is not None:
                stream += f", lag {lag_text(position, server_pos)}"
            if event_lag_s is not None:
                stream += f", {event_lag_s:,.1f}s behind"
            parts.append(stream)
        return " | ".join(parts)

    def _snapshot_text(self, tables: Mapping[str, Any], writing: float | None) -> str:
        """Tables and chunks done of their totals (``~``: a total from an estimate), and
        the time left at the rate the chunks were read so far."""
        done = sum(1 for p in tables.values() if table_snapshot_done(p))
        chunks_done = sum(int(p["next"]) for p in tables.values())
        total = 0
        estimated = False
        for name, p in tables.items():
            if p.get("total") is not None:
                total += int(p["total"])
            else:  # the plan still grows: at least one chunk more than read
                estimated = True
                total += max(int(p["next"]) + 1, self.chunk_estimates.get(name, 0))
        text = (
            f"snapshot: {done}/{len(tables)} tables, chunks {chunks_done:,}/"
            f"{'~' if estimated else ''}{total:,}"
        )
        if writing is not None and chunks_done and total > chunks_done:
            eta = writing * (total - chunks_done) / chunks_done
            text += f", ETA {'~' if estimated else ''}{_duration(eta)}"
        return text

    def update(
        self,
        offset: dict[str, Any] | None,
        batch: int,
        server_pos: Any | None,
        event_lag_s: float | None = None,
    ) -> None:
        """Show the current line, unless one was shown less than the interval ago in the
        same phase (then it is held back: a later update or ``finish`` shows it)."""
        phase = self.stream.key if snapshot_done(offset) else "snapshot"
        text = self.line(offset, batch, server_pos, event_lag_s)
        now = self._clock()
        due = self._shown_at is None or now - self._shown_at >= self.every_s
        if due or phase != self._phase:
            self._phase = phase
            self._show(text, now)
        else:
            self._pending = text

    def _show(self, text: str, now: float) -> None:
        self._pending = ""
        if text == self._last_text:
            return
        self._last_text, self._shown_at = text, now
        if self.interactive:
            self.out.write("\r\033[K" + text)
            self.out.flush()
        else:
            log.info("%s", text)

    def finish(self) -> None:
        """The end of the run: the last line held back is shown."""
        if self._pending:
            self._show(self._pending, self._clock())
        if self.interactive and self._last_text:
            self.out.write("\n")
            self.out.flush()


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads it.

    >>> _duration(42.4), _duration(754), _duration(7384)
    ('42s', '12m34s', '2h03m')
    """
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def table_snapshot_done(progress: dict[str, Any]) -> bool:
    """Whether a table's snapshot progress (in a source offset) has every chunk read.

    >>> table_snapshot_done({"next": "3", "prev": 2, "total": 3})
    True
    """
    total = progress.get("total")
    return total is not None and int(progress["next"]) >= int(total)


def snapshot_done(offset: dict[str, Any] | None) -> bool:
    """Whether a source offset has every table's snapshot done (True for no snapshot)."""
    tables = (offset or {}).get("snapshot") or {}
    return all(table_snapshot_done(p) for p in tables.values())


def position_text(position: Any) -> str:
    """A stream position as the progress line shows it (a binlog's ``file:pos``)."""
    if isinstance(position, BinlogPosition):
        return f"{position.file}:{position.pos}"
    return str(position)


def lag_text(position: Any, server_pos: Any) -> str:
    """How far ``position`` is behind the server: in bytes of the same binlog file or in
    files; in bytes of WAL for a position that counts them (a PostgreSQL LSN)."""
    if not isinstance(position, BinlogPosition) or not isinstance(server_pos, BinlogPosition):
        return f"{max(0, server_pos.value - position.value):,} bytes"
    if position.file == server_pos.file:
        return f"{max(0, server_pos.pos - position.pos):,} bytes"
    files = binlog_file_number(server_pos.file) - binlog_file_number(position.file)
    return f"{max(files, 0)} binlog file(s)"
