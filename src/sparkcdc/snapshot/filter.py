"""The interleaving filter of DESIGN.md §2: which binlog events of a snapshotting table to emit.

Batch k reads the binlog ``[B_{k-1}, B_k)`` beside up to N chunk reads. A binlog event of a
table under snapshot is emitted only if its key lies in a chunk **completed in an earlier
batch** and the event starts at or after that chunk's HW (the backfill of that chunk read
``[LW, HW)``: an event starting at HW was not committed when HW was taken). An event whose
key lies in a chunk not yet completed (planned or not) is dropped: that chunk's later
SELECT sees its effect. Tables not under snapshot are always emitted, and so are tables
whose every chunk is done once the position passed their largest HW ("pure binlog").

The driver builds the filter state for batch k (``SnapshotCoordinator.filter_state``, with
``filter_state`` / ``tracked_table`` / ``completed_chunks`` / ``pure_table`` below: the one
serialisation) from the chunks completed in batches < k: those of batches before k-1 have
an HW at or before ``B_{k-1}`` and make one entry; the executor's binlog partition reads it
with ``InterleavingFilter.from_state``. The state in the offset stays small.
Lookups are a binary search over each table's completed chunks sorted by start. Where
the chunk key is a string under a collation only the server orders (``keys.python_orders``)
the key's place among the known chunk bounds is the server's: ``prepare`` ranks a batch
of keys in one query, and entries are ordered by chunk index, never by comparing values.

>>> from sparkcdc.model.position import BinlogPosition as P
>>> chunk_0 = completed_chunks(None, 10, P("b.000001", 500), 0, 1)  # [-inf, 10) read, HW 500
>>> state = filter_state({"app.t": tracked_table(None, 1, None, [chunk_0])})
>>> f = InterleavingFilter.from_state(state)
>>> f.emit("app.t", 5, P("b.000001", 400)), f.emit("app.t", 5, P("b.000001", 500))
(False, True)
>>> f.emit("app.t", 10, P("b.000001", 900)), f.emit("other.t", 1, P("b.000001", 4))
(False, True)
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sparkcdc.errors import SnapshotError
from sparkcdc.model.dialect import KeyRanking
from sparkcdc.model.position import BinlogPosition, binlog_file_number
from sparkcdc.snapshot.chunks import KeyValue, decode_key, encode_key
from sparkcdc.snapshot.keys import KeyOrder, PythonKeyOrder, Ranker, key_order

Place = tuple[int, int]  # (binlog file number, byte offset): the order of positions


@lru_cache(maxsize=1024)
def _file_number(file: str) -> int:
    return binlog_file_number(file)


def _place(position: Any) -> Place:
    """Where a position is in its stream's order: a binlog position's file number and
    offset; another source's position by its ``seq()`` (an LSN's, ordered as the LSN)."""
    if isinstance(position, BinlogPosition):
        return (_file_number(position.file), position.pos)
    return (0, position.seq())


@dataclass
class _Entry:
    """Completed chunks ``lo .. hi-1`` of the plan (adjacent ones merge), with their HW.

    ``start`` is the plan's bound number ``lo`` (None when ``lo`` is 0), ``end`` its bound
    number ``hi`` (None: +inf). Bound numbers order bounds as the server does.
    """

    start: KeyValue
    end: KeyValue
    hw_file: str
    hw_pos: int
    lo: int
    hi: int

    @property
    def hw(self) -> Place:
        # no file: another source's HW, its place's offset (``_place``)
        return (_file_number(self.hw_file) if self.hw_file else 0, self.hw_pos)


@dataclass
class _TableState:
    collation: str | None
    order: KeyOrder
    entries: list[_Entry] = field(default_factory=list)  # sorted by lo, disjoint
    done: int = 0  # chunks completed (before merging)
    total: int | None = None  # chunks in the plan, once the plan is complete
    max_hw: Place = (0, 0)
    pure: bool = False
    # derived from entries (``_index``): the known bounds in plan order, each entry's
    # start and end as indexes into them, a ranker over them and ranks already asked for
    _starts: list[int] = field(default_factory=list)
    _ends: list[int] = field(default_factory=list)
    _bounds: list[KeyValue] = field(default_factory=list)
    _ranker: Ranker | None = None
    _ranks: dict[KeyValue, int] = field(default_factory=dict)
    _dirty: bool = False

    def add(self, entry: _Entry) -> None:
        if entry.hw > self.max_hw:
            self.max_hw = entry.hw
        los = [e.lo for e in self.entries]
        i = bisect_left(los, entry.lo)
        overlaps = (i > 0 and self.entries[i - 1].hi > entry.lo) or (
            i < len(self.entries) and self.entries[i].lo < entry.hi
        )
        if overlaps:
            raise SnapshotError(
                f"chunk {entry.lo} (from {entry.start!r}) was completed twice: the snapshot "
                "state is inconsistent; start the query from a new checkpoint"
            )
        self.entries.insert(i, entry)
        self._dirty = True

    def _index(self) -> None:
        """Rebuild the bound list, entry positions and the ranker from ``entries``."""
        self._dirty = False
        bounds: dict[int, KeyValue] = {}
        for e in self.entries:
            if e.start is not None:
                bounds[e.lo] = e.start
            if e.end is not None:
                bounds[e.hi] = e.end
        numbers = sorted(bounds)
        where = {n: i for i, n in enumerate(numbers)}
        self._bounds = [bounds[n] for n in numbers]
        self._starts = [-1 if e.start is None else where[e.lo] for e in self.entries]
        self._ends = [len(numbers) if e.end is None else where[e.hi] for e in self.entries]
        self._ranker = None
        self._ranks = {}

    def ranker(self) -> Ranker:
        if self._dirty:
            self._index()
        if self._ranker is None:
            self._ranker = self.order.ranker(self._bounds)
        return self._ranker

    def prepare(self, keys: Iterable[KeyValue]) -> None:
        ranker = self.ranker()  # first: a rebuilt index forgets the ranks
        wanted = [k for k in dict.fromkeys(keys) if k is not None and k not in self._ranks]
        if wanted:
            self._ranks.update(zip(wanted, ranker.ranks(wanted), strict=True))

    def find(self, key: KeyValue) -> _Entry | None:
        if self._dirty:
            self._index()
        if key is None:
            first = self.entries[0] if self.entries else None
            return first if first is not None and first.start is None else None
        rank = self._ranks.get(key)
        if rank is None:
            rank = self.ranker().ranks([key])[0]
            if not isinstance(self.order, PythonKeyOrder):
                self._ranks[key] = rank
        # the entry with the last start <= key (start index < rank), if key < its end
        i = bisect_left(self._starts, rank) - 1
        if i < 0:
            return None
        return self.entries[i] if rank <= self._ends[i] else None

    @property
    def all_done(self) -> bool:
        return self.total is not None and self.done >= self.total

    def passes_whole(self, position: Any) -> bool:
        """Every row of an event at ``position`` is emitted, whatever its key: the table is
        pure, or every chunk is done and the event starts at or after their largest HW."""
        return self.pure or (self.all_done and _place(position) >= self.max_hw)


class InterleavingFilter:
    """Per-table completed chunks with their HW; ``emit`` decides one binlog event.

    ``ranking``: the source's (``SourceDialect.key_ranking``), for string keys of
    collations only the server orders; ``close`` closes it.
    """

    def __init__(self, ranking: KeyRanking | None = None) -> None:
        self._tables: dict[str, _TableState] = {}
        self._ranking = ranking
        self._orders: dict[str | None, KeyOrder] = {}

    def _order(self, collation: str | None) -> KeyOrder:
        order = self._orders.get(collation)
        if order is None:
            order = self._orders[collation] = key_order(collation, self._ranking)
        return order

    def close(self) -> None:
        for order in self._orders.values():
            order.close()

    # -- building --------------------------------------------------------------------

    def track(self, table: str, collation: str | None) -> None:
        """Put ``table`` under snapshot (chunk key of this collation; None: not a string)."""
        if table not in self._tables:
            self._tables[table] = _TableState(collation, self._order(collation))

    # -- deciding --------------------------------------------------------------------

    def passes_whole(self, table: str, position: Any) -> bool:
        """True if every row of an event of ``table`` starting at ``position`` is emitted,
        whatever its key: the table is not under snapshot, or every chunk of it is done and
        the event starts at or after their largest HW. Such an event's rows need not be
        decoded to be judged (the first binlog batch after a snapshot is all such events)."""
        state = self._tables.get(table)
        return state is None or state.passes_whole(position)

    def needs_server(self, table: str, position: Any) -> bool:
        """Whether deciding an event of ``table`` at ``position`` ranks its key on the
        server (callers batch such keys through ``prepare``)."""
        state = self._tables.get(table)
        if state is None or isinstance(state.order, PythonKeyOrder):
            return False
        return not state.passes_whole(position)

    def prepare(self, table: str, keys: Iterable[KeyValue]) -> None:
        """Rank ``keys`` of ``table`` now, in one server round trip per few hundred."""
        state = self._tables.get(table)
        if state is not None and not state.pure:
            state.prepare(keys)

    def emit(self, table: str, key: KeyValue, position: Any) -> bool:
        """True if a binlog event on ``key`` of ``table`` starting at ``position`` is emitted."""
        state = self._tables.get(table)
        if state is None or state.passes_whole(position):
            return True
        entry = state.find(key)
        return entry is not None and _place(position) >= entry.hw

    # -- offsets ---------------------------------------------------------------------

    @classmethod
    def from_state(
        cls, data: dict[str, Any], ranking: KeyRanking | None = None
    ) -> InterleavingFilter:
        """The filter of a state built by ``filter_state`` (after a JSON round trip)."""
        out = cls(ranking)
        for name, t in data.get("tables", {}).items():
            if t.get("pure"):
                out._tables[name] = _TableState(None, out._order(None), pure=True)
                continue
            out.track(name, t.get("collation"))
            state = out._tables[name]
            for start, end, hw_file, hw_pos, lo, hi in t["chunks"]:
                state.add(
                    _Entry(
                        decode_key(start),
                        decode_key(end),
                        str(hw_file),
                        int(hw_pos),
                        int(lo),
                        int(hi),
                    )
                )
            state.done = int(t["done"])
            state.total = None if t.get("total") is None else int(t["total"])
        return out


# -- the filter state -------------------------------------------------------------------
# JSON-ready primitives (they travel in the binlog partition): ``{"tables": {name: table}}``,
# a table either ``{"pure": true}`` (every chunk done and the batch past their HWs: no
# lookup) or ``{"collation", "done", "total", "chunks"}``, where ``done`` counts the chunks
# completed, ``total`` is the plan's size once known (None before), and ``chunks`` lists
# ``[start, end, hw file, hw pos, lo, hi]``: completed chunks ``lo .. hi-1``, keys
# ``[start, end)`` (``encode_key``), read with that HW, in plan order and disjoint.


def completed_chunks(start: KeyValue, end: KeyValue, hw: Any, lo: int, hi: int) -> list[Any]:
    """The entry of completed chunks ``lo .. hi-1`` (keys ``[start, end)``) with HW ``hw``.

    >>> from sparkcdc.model.position import BinlogPosition as P
    >>> completed_chunks(None, 10, P("b.000001", 500), 0, 1)
    [None, ['int', '10'], 'b.000001', 500, 0, 1]
    """
    file, offset = (hw.file, hw.pos) if isinstance(hw, BinlogPosition) else ("", _place(hw)[1])
    return [encode_key(start), encode_key(end), file, offset, lo, hi]


def tracked_table(
    collation: str | None, done: int, total: int | None, chunks: list[list[Any]]
) -> dict[str, Any]:
    """A table under snapshot: ``done`` chunks completed of ``total`` (None: not known yet),
    ``chunks`` the ``completed_chunks`` entries in plan order."""
    return {"collation": collation, "done": done, "total": total, "chunks": chunks}


def pure_table() -> dict[str, Any]:
    """A table read whole before the batch: every binlog event of it is emitted."""
    return {"pure": True}


def filter_state(tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The filter state of ``tables`` (``tracked_table`` / ``pure_table`` by name)."""
    return {"tables": tables}
