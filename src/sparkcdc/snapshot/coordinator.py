"""Driver-side planning of the interleaved snapshot (DESIGN.md §2, "Interleaving").

The snapshot part of an offset is, per table, ``{"next": n, "prev": p, "total": t}``:
chunks ``0 .. n-1`` are read (or being read in the batch that ends at this offset),
chunks ``p .. n-1`` are the ones this offset's batch reads, and ``total`` is the number
of chunks once the plan is complete (None before). Batch ``k`` (offsets ``O_{k-1}`` →
``O_k``) reads the binlog ``[B_{k-1}, B_k)`` plus chunks ``O_{k-1}.next .. O_k.next - 1``.

For the binlog partition of batch ``k``, the chunks completed in an earlier batch are
``0 .. O_{k-1}.next - 1``. Those of batch ``k-1`` (``O_{k-1}.prev ..``) may have an HW
inside ``[B_{k-1}, B_k)``, so their HWs are read from the staged metadata; older ones have
an HW at or before ``B_{k-1}`` and are one merged entry. A table whose plan is complete,
all read, and none of it in batch ``k-1`` is pure binlog.

    >>> SnapshotProgress.from_offset({"next": 3, "prev": 1, "total": None}).next
    3
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import SnapshotError
from sparkcdc.model.dialect import Session, SourceDialect
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import TableSchema
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.filter import completed_chunks, filter_state, pure_table, tracked_table
from sparkcdc.snapshot.splitter import ChunkSplitter, chunk_key_column
from sparkcdc.snapshot.staging import ChunkStaging
from sparkcdc.snapshot.storage import StateStore

log = logging.getLogger(__name__)

# a batch takes up to 1/RUNT_SHARE more chunks than its budget when they are a table's last
RUNT_SHARE = 8


@dataclass(frozen=True)
class SnapshotProgress:
    """One table's place in the snapshot, as stored in an offset."""

    next: int = 0
    prev: int = 0
    total: int | None = None

    @property
    def read_all(self) -> bool:
        return self.total is not None and self.next >= self.total

    @property
    def pure_binlog(self) -> bool:
        """All chunks were read in batches before the one that ends at this offset's successor."""
        return self.read_all and self.prev >= self.next

    def to_offset(self) -> dict[str, Any]:
        return {"next": self.next, "prev": self.prev, "total": self.total}

    @classmethod
    def from_offset(cls, data: dict[str, Any]) -> SnapshotProgress:
        total = data.get("total")
        return cls(int(data["next"]), int(data["prev"]), None if total is None else int(total))


@dataclass(frozen=True)
class SnapshotSettings:
    chunk_size: int
    chunk_key_column: str | None
    chunks_per_batch: int  # 0: every remaining chunk in one batch
    factor_lower: float
    factor_upper: float


class SnapshotCoordinator:
    """Plans chunks per batch and builds the binlog filter state (driver side)."""

    def __init__(
        self,
        dialect: SourceDialect[Any],
        conn: Session,
        schemas: tuple[TableSchema, ...],
        settings: SnapshotSettings,
        store: StateStore,
    ) -> None:
        # the splitters' queries between batches: opened again when the server drops it
        self._dialect, self._conn = dialect, conn
        self.schemas = {s.qualified_name: s for s in schemas}
        self.settings = settings
        self.store = store
        self.staging = ChunkStaging(store, dialect.position_from_offset)
        self._splitters: dict[str, ChunkSplitter] = {}
        self._collations: dict[str, str | None] = {}
        self._rows: dict[str, int] = {}  # snapshot rows of committed batches (this process)
        self._started: float | None = None

    def close(self) -> None:
        self._conn.close()

    def splitter(self, table: str) -> ChunkSplitter:
        splitter = self._splitters.get(table)
        if splitter is None:
            schema = self.schemas[table]
            splitter = ChunkSplitter.for_table(
                self._dialect,
                self._conn,
                schema,
                chunk_key=self.settings.chunk_key_column,
                chunk_size=self.settings.chunk_size,
                factor_lower=self.settings.factor_lower,
                factor_upper=self.settings.factor_upper,
                store=self.store,
            )
            self._splitters[table] = splitter
        return splitter

    def forget(self, table: str) -> None:
        """Drop what this process knows of ``table``'s chunk plan (its snapshot restarts)."""
        self._splitters.pop(table, None)
        self._collations.pop(table, None)

    def key_column(self, table: str) -> str:
        return chunk_key_column(self.schemas[table], self.settings.chunk_key_column)

    def collation(self, table: str) -> str | None:
        if table not in self._collations:
            schema = self.schemas[table]
            key = self.key_column(table)
            self._collations[table] = self._conn.run(
                lambda conn: self._dialect.key_collation(conn, schema.database, schema.table, key)
            )
        return self._collations[table]

    # -- offsets -----------------------------------------------------------------------

    def initial(self) -> dict[str, dict[str, Any]]:
        return {t: SnapshotProgress().to_offset() for t in self.schemas}

    def advance(
        self, current: dict[str, dict[str, Any]], chunks: int | None = None
    ) -> dict[str, dict[str, Any]]:
        """The snapshot part of the next offset: up to ``chunks`` more chunks (by default
        ``chunks_per_batch``; 0: every remaining chunk)."""
        budget = (self.settings.chunks_per_batch if chunks is None else chunks) or None
        out: dict[str, dict[str, Any]] = {}
        for table in self.schemas:
            progress = SnapshotProgress.from_offset(current.get(table, {"next": 0, "prev": 0}))
            take: list[ChunkRange] = []
            if not progress.read_all and budget is None:
                take = _all(self.splitter(table), progress)
            elif not progress.read_all and budget is not None and budget > 0:
                take = _within_budget(
                    self.splitter(table).chunks(progress.next, budget + budget // RUNT_SHARE),
                    budget,
                )
                budget -= len(take)
            nxt = progress.next + len(take)
            total = progress.total
            if total is None and take and take[-1].end is None:
                total = take[-1].index + 1
            if total is None and not take and self.splitter(table).is_complete:
                total = self.splitter(table).planned
            out[table] = SnapshotProgress(nxt, progress.next, total).to_offset()
        return out

    def chunks_between(self, table: str, start: int, end: int) -> list[ChunkRange]:
        return self.splitter(table).chunks(start, end - start)

    def last_high(self, snapshot: dict[str, dict[str, Any]]) -> BinlogPosition | None:
        """The latest HW among the chunks the batch that ends at ``snapshot`` read (None:
        it read none, or none is staged yet). The next batch's binlog must end at or past it
        (DESIGN.md §2.4: every chunk's HW is at or before the binlog end of the batch after
        its own, which ``filter_state`` and ``pure_binlog`` count on)."""
        return max(self.last_highs(snapshot), default=None)

    def last_highs(self, snapshot: dict[str, dict[str, Any]]) -> list[BinlogPosition]:
        """The HWs of the chunks the batch that ends at ``snapshot`` read (those staged):
        the only HWs the next batch's filter compares events with (older chunks' are at or
        before its start)."""
        highs = []
        for table in self.schemas:
            if table not in snapshot:
                continue
            progress = SnapshotProgress.from_offset(snapshot[table])
            for chunk in self.chunks_between(table, progress.prev, progress.next):
                meta = self.staging.metadata(chunk)
                if meta is not None:
                    highs.append(meta.high)
        return highs

    def read_as_of(
        self, snapshot: dict[str, dict[str, Any]], position: BinlogPosition | None
    ) -> bool:
        """Whether the offset's ``snapshot`` has every captured table's chunks read, those of
        its last batch with their HWs at or before ``position`` (None: wherever they are).

        Chunks of earlier batches have their HWs before the last batch's binlog end (it was
        planned after they were read, DESIGN.md §2); so with ``position`` that end, True
        means the rows read are the tables as of that end, and the binlog past it holds
        nothing a chunk has seen."""
        for table in self.schemas:
            raw = snapshot.get(table)
            if raw is None:
                return False
            progress = SnapshotProgress.from_offset(raw)
            if not progress.read_all:
                return False
            if position is None:
                continue
            # the last chunks read have the latest HWs: where the server moved, one of them
            # says so first (a metadata read each, a GET on an object store)
            for chunk in reversed(self.chunks_between(table, progress.prev, progress.next)):
                meta = self.staging.metadata(chunk)
                if meta is None or meta.high > position:
                    return False
        return True

    def filter_state(
        self,
        start: dict[str, dict[str, Any]],
        batch_start: BinlogPosition,
        place: Callable[[BinlogPosition], BinlogPosition] | None = None,
    ) -> dict[str, Any]:
        """The InterleavingFilter state for the binlog partition of the batch after ``start``.

        ``place`` maps a staged HW to the server the batch reads, when that is not the one
        the chunk was read on (a failover right after the snapshot's last chunks: the HW's
        GTID set placed on the new server, ``MySqlCdcStreamReader._high_on``); ``batch_start``
        is a place there already."""
        tables: dict[str, dict[str, Any]] = {}
        for table in self.schemas:
            # a table new to the stream (the pattern widened on restart) starts unread
            progress = SnapshotProgress.from_offset(start.get(table, {"next": 0, "prev": 0}))
            if progress.pure_binlog:
                tables[table] = pure_table()
                continue
            chunks: list[list[Any]] = []
            if progress.prev > 0:
                # chunks of batches before the last one: their HWs are at or before the
                # batch start, so one entry with the batch start as HW decides alike
                first_recent = self.splitter(table).chunk(progress.prev)
                end_key = None if first_recent is None else first_recent.start
                chunks.append(completed_chunks(None, end_key, batch_start, 0, progress.prev))
            for chunk in self.chunks_between(table, progress.prev, progress.next):
                meta = self.staging.metadata(chunk)
                if meta is None:
                    raise SnapshotError(
                        f"chunk {chunk.index} of {table} was read in the previous batch but has "
                        f"no staged metadata under {self.store.root}. Either the state "
                        "location is not shared: on a cluster, state.location must be "
                        "storage the driver and every executor see at the same path (an "
                        "object store such as s3a://..., or a filesystem every host mounts "
                        "alike), not a local disk; or it was changed or cleaned. Start the "
                        "query again with a new checkpoint"
                    )
                high = meta.high if place is None else place(meta.high)
                chunks.append(
                    completed_chunks(chunk.start, chunk.end, high, chunk.index, chunk.index + 1)
                )
            tables[table] = tracked_table(
                self.collation(table), progress.next, progress.total, chunks
            )
        return filter_state(tables)

    def release(self, end: dict[str, dict[str, Any]]) -> None:
        """Spark committed the batch that ends at ``end``: drop its staged rows.

        A table of ``end`` this stream no longer captures (its pattern was narrowed, or the
        table is gone from the server, while the query was stopped: a restarted query
        commits the batch its previous run planned) has no schema to find its chunks by:
        its staged rows stay under the state location. What happened to the table is for
        the binlog to say: a DROP DATABASE of its database stops the stream (a DROP TABLE
        of it no longer matches the capture and does not reach the stream)."""
        for table, raw in end.items():
            if table not in self.schemas:
                log.info(
                    "%s: in the committed offset but no longer captured; its staged "
                    "snapshot rows (if any) stay under %s",
                    table,
                    self.store.root,
                )
                continue
            progress = SnapshotProgress.from_offset(raw)
            for chunk in self.chunks_between(table, progress.prev, progress.next):
                meta = self.staging.metadata(chunk)
                if meta is not None:
                    self._rows[table] = self._rows.get(table, 0) + meta.row_count
                self.staging.release(chunk)
        if self._started is None:
            self._started = time.monotonic()

    def describe(self, offset: dict[str, dict[str, Any]]) -> str:
        parts = []
        for table, raw in offset.items():
            if table not in self.schemas:
                continue
            progress = SnapshotProgress.from_offset(raw)
            total = (
                progress.total
                if progress.total is not None
                else (
                    f"~{self.splitter(table).estimated_total()}" if not progress.read_all else "?"
                )
            )
            parts.append(f"{table} {progress.next}/{total} chunks")
        rows = sum(self._rows.values())
        if rows and self._started is not None:
            elapsed = max(time.monotonic() - self._started, 1e-3)
            parts.append(f"{rows} rows committed ({rows / elapsed:,.0f} rows/s)")
        return ", ".join(parts)


def _all(splitter: ChunkSplitter, progress: SnapshotProgress) -> list[ChunkRange]:
    out: list[ChunkRange] = []
    index = progress.next
    while True:
        chunk = splitter.chunk(index)
        if chunk is None:
            return out
        out.append(chunk)
        index += 1


def _within_budget(planned: list[ChunkRange], budget: int) -> list[ChunkRange]:
    """The chunks a batch takes of ``planned`` (up to ``budget + budget // RUNT_SHARE`` of a
    table's next chunks): ``budget`` of them, or all when they end the table. A batch costs
    seconds besides its rows (the sink's commit, planning); the table's last few chunks are
    worth less than a batch of their own.

    >>> planned = [ChunkRange("d.t", i, i, i + 1) for i in range(9)]
    >>> planned.append(ChunkRange("d.t", 9, 9, None))
    >>> len(_within_budget(planned, 8)), len(_within_budget(planned[:9], 8))
    (10, 8)
    """
    if planned and planned[-1].end is None:
        return planned
    return planned[:budget]
