"""Splitting a table into chunk-key ranges, lazily, with the plan persisted as it grows.

Chunk key (DESIGN.md §2): ``scan.incremental.snapshot.chunk.key-column`` if set, else the
first primary-key column. Two ways to cut, as Flink CDC 2.x:

- **arithmetic** ("even"): an integer chunk key that is the table's whole primary key,
  whose distribution factor ``(max - min + 1) / rowCount`` lies within
  ``[lower, upper]`` (default 0.05 .. 1000.0), is cut every
  ``max(1, int(factor * chunk_size))`` key values from ``min``. The plan is fully
  determined by ``(min, max, step)``, persisted once.
- **by query** (strings, UUIDs, composite keys by their first column, skewed or
  non-unique integers): the next chunk end after ``start`` is
  ``SELECT MAX(k) FROM (SELECT k FROM t WHERE k >= start ORDER BY k LIMIT size)``;
  if that equals ``start`` (``size`` duplicates of one value) the end moves on to the next
  distinct value ``SELECT MIN(k) FROM t WHERE k > start``; an end at or past the
  table's ``max`` (taken once, at planning start) closes the plan with ``[cn, +inf)``.
  Ends are computed on demand, a few chunks ahead of reading, never for the whole table.

The first chunk is ``(-inf, c1)`` and also holds NULL keys; the last is ``[cn, +inf)``
and also holds rows inserted above the old maximum. An empty table is one chunk
``(-inf, +inf)``.

Persistence, under ``<state>/<stream-id>/plan/<db>.<table>/``: ``meta.json`` (key column,
mode, bounds) then ``chunks-<first index>.json`` parts, each written first-writer-wins
before its chunks are handed out, so a replay or restart plans the very same chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sparkcdc.errors import ConfigError, SnapshotError, did_you_mean
from sparkcdc.model.dialect import Session, SourceDialect, SplitQueries
from sparkcdc.model.row_values import is_integer
from sparkcdc.model.schema import TableSchema
from sparkcdc.snapshot.chunks import ChunkRange, KeyValue, decode_key, encode_key
from sparkcdc.snapshot.keys import SortKey, key_sort_key, python_orders
from sparkcdc.snapshot.storage import StateStore

DEFAULT_CHUNK_SIZE = 8096
DEFAULT_FACTOR_LOWER = 0.05
DEFAULT_FACTOR_UPPER = 1000.0
CHUNK_KEY_OPTION = "scan.incremental.snapshot.chunk.key-column"
_PLAN_FORMAT = 1


def chunk_key_column(schema: TableSchema, configured: str | None = None) -> str:
    """The chunk key column of a table, or a ConfigError that says what to set.

    >>> from sparkcdc.model.schema import Column
    >>> s = TableSchema("app", "t", (Column.from_mysql("id", "int", "int", False),), ("id",))
    >>> chunk_key_column(s)
    'id'
    """
    names = schema.column_names
    if configured:
        if configured not in names:
            raise ConfigError(
                f"{CHUNK_KEY_OPTION} {configured!r} is not a column of {schema.qualified_name}"
                f" (columns: {', '.join(names)}).{did_you_mean(configured, names)}"
            )
        return configured
    if not schema.primary_key:
        raise ConfigError(
            f"table {schema.qualified_name} has no primary key, so sparkcdc cannot cut it into "
            f"chunks: set the option '{CHUNK_KEY_OPTION}' to an indexed column of it "
            f"(columns: {', '.join(names)}), or exclude the table from table-name"
        )
    return schema.primary_key[0]


@dataclass
class MemoryTable:
    """An in-memory table of chunk-key values implementing SplitQueries (for tests).

    >>> t = MemoryTable([3, 1, 2, None], key_sort_key(None))
    >>> t.bounds(), t.next_chunk_max(1, 2), t.min_above(2)
    ((1, 3), 2, 3)
    """

    keys: list[KeyValue]
    sort_key: SortKey
    _sorted: list[KeyValue] = field(init=False)

    def __post_init__(self) -> None:
        self._sorted = sorted((k for k in self.keys if k is not None), key=self.sort_key)

    def bounds(self) -> tuple[KeyValue, KeyValue] | None:
        return (self._sorted[0], self._sorted[-1]) if self._sorted else None

    def row_count(self) -> int:
        return len(self.keys)

    def next_chunk_max(self, start: KeyValue, size: int) -> KeyValue | None:
        s = self.sort_key(start)
        window = [k for k in self._sorted if self.sort_key(k) >= s][:size]
        return window[-1] if window else None

    def min_above(self, value: KeyValue) -> KeyValue | None:
        v = self.sort_key(value)
        return next((k for k in self._sorted if self.sort_key(k) > v), None)

    def compare(self, a: KeyValue, b: KeyValue) -> int:
        ka, kb = self.sort_key(a), self.sort_key(b)
        return -1 if ka < kb else int(kb < ka)


def _python_compare(sort_key: SortKey) -> Callable[[KeyValue, KeyValue], int]:
    def compare(a: KeyValue, b: KeyValue) -> int:
        ka, kb = sort_key(a), sort_key(b)
        return -1 if ka < kb else int(kb < ka)

    return compare


def all_chunks(splitter: ChunkSplitter, step: int = 64) -> list[ChunkRange]:
    """Every chunk of the table, planned now (``sparkcdc verify`` reads them all at once).

    >>> table = MemoryTable(list(range(10)), key_sort_key(None))
    >>> len(all_chunks(ChunkSplitter("a.t", table, chunk_size=4)))
    3
    """
    chunks: list[ChunkRange] = []
    while True:
        more = splitter.chunks(len(chunks), step)
        if not more:
            return chunks
        chunks.extend(more)


class ChunkSplitter:
    """The chunk plan of one table, computed lazily and persisted as it grows.

    >>> s = ChunkSplitter("app.t", MemoryTable(list(range(10)), key_sort_key(None)),
    ...                   chunk_size=4, integer_key=False)
    >>> [(c.start, c.end) for c in s.chunks(0, 10)]
    [(None, 3), (3, 6), (6, None)]
    """

    def __init__(
        self,
        table: str,
        queries: SplitQueries,
        *,
        key_column: str = "",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        integer_key: bool = False,
        unique_key: bool = True,
        factor_lower: float = DEFAULT_FACTOR_LOWER,
        factor_upper: float = DEFAULT_FACTOR_UPPER,
        store: StateStore | None = None,
        lookahead: int = 4,
        compare: Callable[[KeyValue, KeyValue], int] | None = None,
    ) -> None:
        if chunk_size < 1:
            raise SnapshotError(
                f"scan.incremental.snapshot.chunk.size must be >= 1, got {chunk_size}"
            )
        self.table = table
        self.key_column = key_column
        self._queries = queries
        self._compare = compare or queries.compare
        self._chunk_size = chunk_size
        self._arithmetic_ok = integer_key and unique_key
        self._lower, self._upper = factor_lower, factor_upper
        self._store = store
        self._lookahead = max(1, lookahead)
        self._plan: list[ChunkRange] = []
        self._complete = False
        self._meta: dict[str, Any] | None = None
        self._load()

    # -- public ----------------------------------------------------------------------

    @classmethod
    def for_table(
        cls,
        dialect: SourceDialect[Any],
        conn: Session,
        schema: TableSchema,
        *,
        chunk_key: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        factor_lower: float = DEFAULT_FACTOR_LOWER,
        factor_upper: float = DEFAULT_FACTOR_UPPER,
        store: StateStore | None = None,
    ) -> ChunkSplitter:
        """A splitter over a live table, asked on ``conn`` (a ``dialect.session``)."""
        key = chunk_key_column(schema, chunk_key)
        collation = conn.run(
            partial(dialect.key_collation, database=schema.database, table=schema.table, column=key)
        )
        queries = dialect.split_queries(conn, schema, key, collation)
        return cls.over(
            queries,
            schema,
            key,
            collation,
            chunk_size=chunk_size,
            factor_lower=factor_lower,
            factor_upper=factor_upper,
            store=store,
        )

    @classmethod
    def over(
        cls,
        queries: SplitQueries,
        schema: TableSchema,
        key_column: str,
        collation: str | None,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        factor_lower: float = DEFAULT_FACTOR_LOWER,
        factor_upper: float = DEFAULT_FACTOR_UPPER,
        store: StateStore | None = None,
    ) -> ChunkSplitter:
        """A splitter of ``schema``'s table by ``key_column`` (of ``collation``) whose
        questions ``queries`` answer."""
        column = next(c for c in schema.columns if c.name == key_column)
        return cls(
            schema.qualified_name,
            queries,
            key_column=key_column,
            chunk_size=chunk_size,
            integer_key=is_integer(column),
            unique_key=schema.primary_key == (key_column,),
            factor_lower=factor_lower,
            factor_upper=factor_upper,
            store=store,
            # the server compares values of a collation Python cannot order (keys.py)
            compare=_python_compare(key_sort_key(collation)) if python_orders(collation) else None,
        )

    @property
    def is_complete(self) -> bool:
        """True once the last chunk ``[cn, +inf)`` is planned."""
        return self._complete

    @property
    def planned(self) -> int:
        return len(self._plan)

    @property
    def mode(self) -> str:
        return str(self._ensure_meta()["mode"])

    def estimated_total(self) -> int:
        """Chunks in the plan: exact once complete or arithmetic, else an estimate."""
        meta = self._ensure_meta()
        if self._complete:
            return len(self._plan)
        if meta["mode"] == "even":
            lo, hi = int(decode_key(meta["min"])), int(decode_key(meta["max"]))
            step = int(meta["step"])
            return (hi - lo) // step + 1
        rows = int(meta.get("rows", 0))
        return max(len(self._plan) + 1, -(-rows // self._chunk_size))

    def chunk(self, index: int) -> ChunkRange | None:
        """Chunk number ``index`` of the plan (planning it if needed), None past the end."""
        self._ensure(index)
        return self._plan[index] if index < len(self._plan) else None

    def chunks(self, start_index: int, count: int) -> list[ChunkRange]:
        """Chunks ``start_index .. start_index + count - 1`` (fewer at the end of the plan)."""
        if count <= 0:
            return []
        self._ensure(start_index + count - 1)
        return self._plan[start_index : start_index + count]

    # -- planning --------------------------------------------------------------------

    def _ensure_meta(self) -> dict[str, Any]:
        if self._meta is not None:
            return self._meta
        bounds = self._queries.bounds()
        meta: dict[str, Any] = {"format": _PLAN_FORMAT, "key_column": self.key_column}
        if bounds is None:
            meta["mode"] = "empty"
        else:
            lo, hi = bounds
            rows = self._queries.row_count()
            meta.update(min=encode_key(lo), max=encode_key(hi), rows=rows)
            meta["mode"] = "query"
            if self._arithmetic_ok and isinstance(lo, int) and isinstance(hi, int) and rows > 0:
                factor = (hi - lo + 1) / rows
                if self._lower <= factor <= self._upper:
                    meta["mode"] = "even"
                    meta["step"] = max(1, int(factor * self._chunk_size))
        if self._store is not None:
            path = self._plan_path("meta.json")
            if not self._store.write_once(path, json.dumps(meta).encode()):
                stored = self._store.read(path)
                if stored is None:
                    raise SnapshotError(f"chunk plan {path} vanished while being written")
                meta = json.loads(stored)
        self._meta = meta
        return meta

    def _ensure(self, index: int) -> None:
        while index >= len(self._plan) and not self._complete:
            meta = self._ensure_meta()
            first = len(self._plan)
            want = max(index - first + 1, self._lookahead)
            if meta["mode"] == "empty":
                new, complete = [ChunkRange(self.table, 0, None, None)], True
            elif meta["mode"] == "even":
                new, complete = self._even(meta, first, want)
            else:
                new, complete = self._by_query(meta, first, want)
            if self._store is not None and meta["mode"] == "query":
                chunks = [c.to_offset() for c in new]
                part = {"first": first, "complete": complete, "chunks": chunks}
                path = self._plan_path(f"chunks-{first:08d}.json")
                if not self._store.write_once(path, json.dumps(part).encode()):
                    self._load()  # someone planned these already: theirs are the plan
                    continue
            self._plan.extend(new)
            self._complete = complete

    def _even(self, meta: dict[str, Any], first: int, want: int) -> tuple[list[ChunkRange], bool]:
        lo, hi, step = int(decode_key(meta["min"])), int(decode_key(meta["max"])), int(meta["step"])
        out: list[ChunkRange] = []
        for i in range(first, first + want):
            start = None if i == 0 else lo + i * step
            end = lo + (i + 1) * step
            if end > hi:
                out.append(ChunkRange(self.table, i, start, None))
                return out, True
            out.append(ChunkRange(self.table, i, start, end))
        return out, False

    def _by_query(
        self, meta: dict[str, Any], first: int, want: int
    ) -> tuple[list[ChunkRange], bool]:
        # bounds are compared by the server's order (``SplitQueries.compare``): a bound
        # Python took for greater than the previous one while the server has them equal
        # would make an empty chunk and plan it again forever
        cmp = self._compare
        hi = decode_key(meta["max"])
        start = self._plan[-1].end if self._plan else None
        previous = decode_key(meta["min"]) if start is None else start
        out: list[ChunkRange] = []
        for i in range(first, first + want):
            end = self._queries.next_chunk_max(previous, self._chunk_size)
            if end is not None and cmp(end, previous) == 0:
                end = self._queries.min_above(end)  # a run of duplicates: step past it
            if end is None or cmp(end, hi) >= 0:
                out.append(ChunkRange(self.table, i, start, None))
                return out, True
            out.append(ChunkRange(self.table, i, start, end))
            start = previous = end
        return out, False

    # -- persistence -----------------------------------------------------------------

    def _plan_path(self, name: str) -> str:
        assert self._store is not None
        return self._store.table_path("plan", self.table, name)

    def _load(self) -> None:
        if self._store is None:
            return
        raw = self._store.read(self._plan_path("meta.json"))
        if raw is None:
            return
        self._meta = json.loads(raw)
        self._plan, self._complete = [], False
        if self._meta["mode"] != "query":
            return  # empty / even plans follow from meta alone
        for name in self._store.list(self._store.table_path("plan", self.table)):
            if not name.startswith("chunks-"):
                continue
            data = self._store.read(self._plan_path(name))
            if data is None:
                continue
            part = json.loads(data)
            if int(part["first"]) != len(self._plan):
                raise SnapshotError(
                    f"chunk plan of {self.table} under {self._store.path('plan')} has a gap at "
                    f"part {name} (expected first chunk {len(self._plan)}); the state location "
                    "was edited by hand. Restore it or start the query from a new checkpoint"
                )
            self._plan.extend(ChunkRange.from_offset(c) for c in part["chunks"])
            self._complete = bool(part["complete"])
