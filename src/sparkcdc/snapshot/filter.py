"""The interleaving filter of DESIGN.md §2: which binlog events of a snapshotting table to emit.

Batch k reads the binlog ``[B_{k-1}, B_k)`` beside up to N chunk reads. A binlog event of a
table under snapshot is emitted only if its key lies in a chunk **completed in an earlier
batch** and the event starts at or after that chunk's HW (the backfill of that chunk read
``[LW, HW)``: an event starting at HW was not committed when HW was taken). An event whose
key lies in a chunk not yet completed (planned or not) is dropped: that chunk's later
SELECT sees its effect. Tables not under snapshot are always emitted, and so are tables
whose every chunk is done once the position passed their largest HW ("pure binlog").

The driver builds the filter for batch k from the chunks completed in batches < k
(``complete``), then calls ``compact(B_{k-1})`` so that runs of adjacent chunks whose HW is
behind the batch start merge into one entry: the state in the offset stays small.
Lookups are a binary search over each table's completed chunks sorted by start.

>>> from sparkcdc.model.position import BinlogPosition as P
>>> f = InterleavingFilter()
>>> f.track("app.t", None)
>>> f.complete(ChunkRange("app.t", 0, None, 10), P("b.000001", 500))
>>> f.emit("app.t", 5, P("b.000001", 400)), f.emit("app.t", 5, P("b.000001", 500))
(False, True)
>>> f.emit("app.t", 10, P("b.000001", 900)), f.emit("other.t", 1, P("b.000001", 4))
(False, True)
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sparkcdc.errors import SnapshotError
from sparkcdc.model.position import BinlogPosition, binlog_file_number
from sparkcdc.snapshot.chunks import ChunkRange, KeyValue, decode_key, encode_key
from sparkcdc.snapshot.keys import SortKey, key_sort_key

Place = tuple[int, int]  # (binlog file number, byte offset): the order of positions


@lru_cache(maxsize=1024)
def _file_number(file: str) -> int:
    return binlog_file_number(file)


def _place(position: BinlogPosition) -> Place:
    return (_file_number(position.file), position.pos)


@dataclass
class _Entry:
    start: KeyValue
    end: KeyValue
    hw_file: str
    hw_pos: int

    @property
    def hw(self) -> Place:
        return (_file_number(self.hw_file), self.hw_pos)


@dataclass
class _TableState:
    collation: str | None
    sort_key: SortKey
    first: _Entry | None = None  # the chunk (-inf, c1): it also holds NULL keys
    entries: list[_Entry] = field(default_factory=list)  # start is not None, sorted by start
    starts: list[Any] = field(default_factory=list)  # sort keys of entries' starts
    done: int = 0  # chunks completed (before merging)
    total: int | None = None  # chunks in the plan, once the plan is complete
    max_hw: Place = (0, 0)
    pure: bool = False

    def add(self, entry: _Entry) -> None:
        if entry.hw > self.max_hw:
            self.max_hw = entry.hw
        if entry.start is None:
            if self.first is not None:
                raise SnapshotError("the first chunk of a table was completed twice")
            self.first = entry
            return
        k = self.sort_key(entry.start)
        i = bisect_right(self.starts, k)
        if i > 0 and not self.starts[i - 1] < k:
            raise SnapshotError(f"chunk starting at {entry.start!r} was completed twice")
        self.starts.insert(i, k)
        self.entries.insert(i, entry)

    def find(self, key: KeyValue) -> _Entry | None:
        if key is None:
            return self.first
        k = self.sort_key(key)
        i = bisect_right(self.starts, k) - 1
        candidate = self.first if i < 0 else self.entries[i]
        if candidate is None:
            return None
        if candidate.end is None or k < self.sort_key(candidate.end):
            return candidate
        return None

    @property
    def all_done(self) -> bool:
        return self.total is not None and self.done >= self.total


class InterleavingFilter:
    """Per-table completed chunks with their HW; ``emit`` decides one binlog event."""

    def __init__(self) -> None:
        self._tables: dict[str, _TableState] = {}

    # -- building --------------------------------------------------------------------

    def track(self, table: str, collation: str | None) -> None:
        """Put ``table`` under snapshot (chunk key of this collation; None: not a string)."""
        if table not in self._tables:
            self._tables[table] = _TableState(collation, key_sort_key(collation))

    def set_total(self, table: str, total: int) -> None:
        """The table's plan is complete with ``total`` chunks."""
        self._state(table).total = total

    def complete(self, chunk: ChunkRange, hw: BinlogPosition) -> None:
        """Chunk ``chunk`` was read with high watermark ``hw`` in an earlier batch."""
        state = self._state(chunk.table)
        state.add(_Entry(chunk.start, chunk.end, hw.file, hw.pos))
        state.done += 1
        if chunk.end is None:
            state.total = chunk.index + 1 if state.total is None else state.total

    def _state(self, table: str) -> _TableState:
        state = self._tables.get(table)
        if state is None:
            raise SnapshotError(f"table {table} is not under snapshot (call track first)")
        return state

    # -- deciding --------------------------------------------------------------------

    def is_tracked(self, table: str) -> bool:
        state = self._tables.get(table)
        return state is not None and not state.pure

    def emit(self, table: str, key: KeyValue, position: BinlogPosition) -> bool:
        """True if a binlog event on ``key`` of ``table`` starting at ``position`` is emitted."""
        state = self._tables.get(table)
        if state is None or state.pure:
            return True
        place = _place(position)
        if state.all_done and place >= state.max_hw:
            return True
        entry = state.find(key)
        return entry is not None and place >= entry.hw

    def compact(self, position: BinlogPosition) -> None:
        """Forget what no event at or after ``position`` can tell apart.

        Adjacent completed chunks whose HW <= ``position`` merge into one; a table whose
        chunks are all done and whose max HW <= ``position`` becomes pure binlog.
        """
        place = _place(position)
        for state in self._tables.values():
            if state.pure:
                continue
            if state.all_done and state.max_hw <= place:
                state.pure = True
                state.first, state.entries, state.starts = None, [], []
                continue
            ordered = ([state.first] if state.first is not None else []) + state.entries
            merged: list[_Entry] = []
            for entry in ordered:
                prev = merged[-1] if merged else None
                if (
                    prev is not None
                    and prev.end is not None
                    and entry.start is not None
                    and state.sort_key(prev.end) == state.sort_key(entry.start)
                    and prev.hw <= place
                    and entry.hw <= place
                ):
                    later = prev if prev.hw >= entry.hw else entry
                    merged[-1] = _Entry(prev.start, entry.end, later.hw_file, later.hw_pos)
                else:
                    merged.append(entry)
            state.first = merged[0] if merged and merged[0].start is None else None
            state.entries = [e for e in merged if e.start is not None]
            state.starts = [state.sort_key(e.start) for e in state.entries]

    # -- offsets ---------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """A JSON-ready dict of primitives (goes into the offset)."""
        tables: dict[str, Any] = {}
        for name, s in self._tables.items():
            if s.pure:
                tables[name] = {"pure": True}
                continue
            ordered = ([s.first] if s.first is not None else []) + s.entries
            tables[name] = {
                "collation": s.collation,
                "done": s.done,
                "total": s.total,
                "chunks": [
                    [encode_key(e.start), encode_key(e.end), e.hw_file, e.hw_pos] for e in ordered
                ],
            }
        return {"tables": tables}

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> InterleavingFilter:
        out = cls()
        for name, t in data.get("tables", {}).items():
            if t.get("pure"):
                state = _TableState(None, key_sort_key(None), pure=True)
                out._tables[name] = state
                continue
            out.track(name, t.get("collation"))
            state = out._tables[name]
            for start, end, hw_file, hw_pos in t["chunks"]:
                state.add(_Entry(decode_key(start), decode_key(end), str(hw_file), int(hw_pos)))
            state.done = int(t["done"])
            state.total = None if t.get("total") is None else int(t["total"])
        return out
