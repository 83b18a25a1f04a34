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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparkcdc.errors import ConfigError, SnapshotError, did_you_mean
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.schema import TableSchema
from sparkcdc.mysql.admin.catalog import estimated_rows
from sparkcdc.mysql.protocol.connection import KeptConnection
from sparkcdc.snapshot.chunks import ChunkRange, KeyValue, decode_key, encode_key
from sparkcdc.snapshot.keys import SortKey, charset_of, key_sort_key, python_orders
from sparkcdc.snapshot.rowvalues import (
    SESSION_TIME_ZONE_SQL,
    is_integer,
    sql_converter,
    to_sql_param,
)
from sparkcdc.snapshot.storage import StateStore

DEFAULT_CHUNK_SIZE = 8096
DEFAULT_FACTOR_LOWER = 0.05
DEFAULT_FACTOR_UPPER = 1000.0
CHUNK_KEY_OPTION = "scan.incremental.snapshot.chunk.key-column"
_PLAN_FORMAT = 1


class SplitQueries(Protocol):
    """What the splitter asks of a table (SQL in production, a list in property tests)."""

    def bounds(self) -> tuple[KeyValue, KeyValue] | None:
        """``(MIN(k), MAX(k))`` over non-NULL keys, or None if there are none."""

    def row_count(self) -> int:
        """The number of rows (an estimate is fine: it only picks the splitting method)."""

    def next_chunk_max(self, start: KeyValue, size: int) -> KeyValue | None:
        """MAX of the first ``size`` keys ``>= start`` in key order, None if none."""

    def min_above(self, value: KeyValue) -> KeyValue | None:
        """The smallest key ``> value``, None if none."""

    def compare(self, a: KeyValue, b: KeyValue) -> int:
        """-1, 0 or 1 as ``a`` is below, equal to or above ``b`` in the server's order."""


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


class SqlSplitQueries:
    """SplitQueries over a SQL connection (values in the binlog decoder's form). Every query
    only reads, so one a dropped connection cut short is asked again on a new one where the
    connection is a kept one that opens again (the coordinator's)."""

    def __init__(
        self,
        conn: KeptConnection,
        schema: TableSchema,
        key_column: str,
        collation: str | None = None,
    ) -> None:
        self._conn = conn
        # the server compares values of a collation Python cannot order (keys.py)
        self._collation = None if python_orders(collation) else collation
        self._sort_key = key_sort_key(None if self._collation else collation)
        # every statement runs with parameters (pymysql then formats it with %)
        self._table = quote_mysql_table(schema.database, schema.table, pyformat=True)
        self._key = quote_mysql(key_column, pyformat=True)
        self._db, self._name = schema.database, schema.table
        column = next(c for c in schema.columns if c.name == key_column)
        self._convert = sql_converter(column)
        conn.session(SESSION_TIME_ZONE_SQL)

    def _row(self, sql: str, args: Sequence[Any] = ()) -> Any:
        def query(conn: Any) -> Any:
            with conn.cursor() as cur:
                cur.execute(sql, tuple(to_sql_param(a) for a in args))
                return cur.fetchone()

        return self._conn.run(query)

    def _value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = self._row(sql, args)
        value = row[0] if row else None
        if value is not None and self._convert is not None:
            value = self._convert(value)
        return value

    def bounds(self) -> tuple[KeyValue, KeyValue] | None:
        row = self._row(f"SELECT MIN({self._key}), MAX({self._key}) FROM {self._table}")
        if row is None or row[0] is None:
            return None
        lo, hi = row
        if self._convert is not None:
            lo, hi = self._convert(lo), self._convert(hi)
        return lo, hi

    def row_count(self) -> int:
        estimate = self._conn.run(lambda conn: estimated_rows(conn, self._db, self._name))
        if estimate > 0:
            return estimate
        # statistics not gathered yet (fresh table): count
        return int(self._value(f"SELECT COUNT(*) FROM {self._table}") or 0)

    def next_chunk_max(self, start: KeyValue, size: int) -> KeyValue | None:
        return self._value(
            f"SELECT MAX(k) FROM (SELECT {self._key} AS k FROM {self._table} "
            f"WHERE {self._key} >= %s ORDER BY {self._key} LIMIT {int(size)}) AS c",
            (start,),
        )

    def min_above(self, value: KeyValue) -> KeyValue | None:
        return self._value(
            f"SELECT MIN({self._key}) FROM {self._table} WHERE {self._key} > %s", (value,)
        )

    def compare(self, a: KeyValue, b: KeyValue) -> int:
        if self._collation is None:
            ka, kb = self._sort_key(a), self._sort_key(b)
            return -1 if ka < kb else int(kb < ka)
        value = f"CONVERT(%s USING {charset_of(self._collation)}) COLLATE {self._collation}"
        row = self._row(f"SELECT ({value} > {value}) - ({value} < {value})", (a, b, a, b))
        return int(row[0])


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


def column_collation(conn: Any, database: str, table: str, column: str) -> str | None:
    """``information_schema.COLUMNS.COLLATION_NAME`` of a column (None: not a string)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND COLUMN_NAME = %s",
            (database, table, column),
        )
        row = cur.fetchone()
    if not row or row[0] is None:
        return None
    value = row[0]
    return value.decode() if isinstance(value, bytes) else str(value)


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
    ) -> None:
        if chunk_size < 1:
            raise SnapshotError(
                f"scan.incremental.snapshot.chunk.size must be >= 1, got {chunk_size}"
            )
        self.table = table
        self.key_column = key_column
        self._queries = queries
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
        conn: Any,
        schema: TableSchema,
        *,
        chunk_key: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        factor_lower: float = DEFAULT_FACTOR_LOWER,
        factor_upper: float = DEFAULT_FACTOR_UPPER,
        store: StateStore | None = None,
    ) -> ChunkSplitter:
        """A splitter over a live table (``conn``: a pymysql connection, or a kept one that
        is opened again when the server drops it)."""
        kept = conn if isinstance(conn, KeptConnection) else KeptConnection.over(conn)
        key = chunk_key_column(schema, chunk_key)
        column = next(c for c in schema.columns if c.name == key)
        collation = kept.run(lambda c: column_collation(c, schema.database, schema.table, key))
        return cls(
            schema.qualified_name,
            SqlSplitQueries(kept, schema, key, collation),
            key_column=key,
            chunk_size=chunk_size,
            integer_key=is_integer(column),
            unique_key=schema.primary_key == (key,),
            factor_lower=factor_lower,
            factor_upper=factor_upper,
            store=store,
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
        cmp = self._queries.compare
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
