"""First-writer-wins staging of corrected chunks: what makes a chunk read replayable.

Layout under ``<state>/<stream-id>/chunks/<db>.<table>/`` (the name encoded as one path
segment, ``StateStore.table_path``):

- ``<index>.arrow``: one Arrow IPC file holding the chunk's rows *and* its metadata
  (table, range, LW, HW, row count, the schema the rows were read with) in the schema's
  metadata, so one object is always self-consistent. Written with
  ``StateStore.write_once`` (temp file + ``os.link`` locally; see ``storage``): when two
  attempts of a task race, the first staged result is *the* result and the loser
  returns it instead of its own.
- ``<index>.meta.json``: the same metadata alone, written first-writer-wins right after;
  ``release`` (after Spark commits the batch) deletes the rows file and keeps this.

A replayed batch calls ``load`` and emits the staged rows instead of reading the database.

>>> staging = ChunkStaging(StateStore.open("/tmp/sparkcdc-doctest-state", "s"))  # doctest: +SKIP
>>> staged = staging.stage(result)                                                # doctest: +SKIP
>>> staging.load(result.chunk).high == staged.high                                # doctest: +SKIP
True
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkcdc.errors import SnapshotError
from sparkcdc.model.events import SchemaChange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import TableSchema, schema_from_json, schema_to_json
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.reader import ChunkResult
from sparkcdc.snapshot.storage import StateStore

_META_KEY = b"sparkcdc.chunk"


PositionDecoder = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class ChunkMeta:
    """What stays of a staged chunk: its range, watermarks, size and read schema."""

    chunk: ChunkRange
    low: Any  # the source's positions
    high: Any
    row_count: int
    schema: TableSchema
    ddl: tuple[SchemaChange, ...] = ()  # see ChunkResult.ddl

    def to_json(self) -> dict[str, Any]:
        return {
            "chunk": self.chunk.to_offset(),
            "low": self.low.to_offset(),
            "high": self.high.to_offset(),
            "row_count": self.row_count,
            "schema": schema_to_json(self.schema),
            "ddl": [_ddl_to_json(d) for d in self.ddl],
        }

    @classmethod
    def from_json(
        cls, data: dict[str, Any], decode: PositionDecoder = BinlogPosition.from_offset
    ) -> ChunkMeta:
        """``decode``: the source's positions from their offsets (``position_from_offset``)."""
        return cls(
            ChunkRange.from_offset(data["chunk"]),
            decode(data["low"]),
            decode(data["high"]),
            int(data["row_count"]),
            schema_from_json(data["schema"]),
            tuple(
                SchemaChange.from_binlog(db, table, text, int(ts), decode(position))
                for db, table, text, ts, position in data.get("ddl", [])
            ),
        )


def _ddl_to_json(change: SchemaChange) -> list[Any]:
    # a chunk carries statements read from the binlog: each has its time and position
    assert change.timestamp is not None and change.position is not None
    position = change.position.to_offset()
    return [change.database, change.table, change.statement, change.timestamp, position]


@dataclass(frozen=True)
class StagedChunk:
    """A staged chunk: metadata, and its rows unless released."""

    meta: ChunkMeta
    rows: pa.Table | None

    @property
    def high(self) -> Any:
        return self.meta.high


class ChunkStaging:
    """Stage, load and release corrected chunks under ``<state>/<stream-id>/chunks``."""

    def __init__(
        self, store: StateStore, decode: PositionDecoder = BinlogPosition.from_offset
    ) -> None:
        self.store = store
        self.decode = decode  # the source's positions from their offsets

    def _base(self, chunk: ChunkRange) -> str:
        return self.store.table_path("chunks", chunk.table, f"{chunk.index:06d}")

    def stage(self, result: ChunkResult) -> StagedChunk:
        """Stage ``result`` unless a result for the chunk is staged already; return the winner."""
        meta = ChunkMeta(
            result.chunk, result.low, result.high, result.row_count, result.schema, result.ddl
        )
        meta_bytes = json.dumps(meta.to_json(), ensure_ascii=False).encode()
        table = result.rows.replace_schema_metadata({_META_KEY: meta_bytes})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        base = self._base(result.chunk)
        if self.store.write_once(f"{base}.arrow", sink.getvalue().to_pybytes()):
            self.store.write_once(f"{base}.meta.json", meta_bytes)
            return StagedChunk(meta, result.rows)
        staged = self.load(result.chunk)
        if staged is None:
            raise SnapshotError(f"staged chunk {base}.arrow vanished while being staged")
        return staged

    def load(self, chunk: ChunkRange) -> StagedChunk | None:
        """The staged chunk (rows None once released), or None if never staged."""
        base = self._base(chunk)
        data = self.store.read(f"{base}.arrow")
        if data is None:
            meta = self.metadata(chunk)
            return None if meta is None else StagedChunk(meta, None)
        table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        raw = (table.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise SnapshotError(f"staged chunk {base}.arrow has no sparkcdc metadata")
        meta = ChunkMeta.from_json(json.loads(raw), self.decode)
        self.store.write_once(f"{base}.meta.json", raw)  # in case the stager died after .arrow
        return StagedChunk(meta, table.replace_schema_metadata(None))

    def metadata(self, chunk: ChunkRange) -> ChunkMeta | None:
        raw = self.store.read(f"{self._base(chunk)}.meta.json")
        return None if raw is None else ChunkMeta.from_json(json.loads(raw), self.decode)

    def release(self, chunk: ChunkRange) -> None:
        """Delete the staged rows (Spark committed the batch); keep the metadata."""
        base = self._base(chunk)
        if self.metadata(chunk) is None:
            staged = self.load(chunk)
            if staged is None:
                return
        self.store.delete(f"{base}.arrow")
