"""The schema state and the known divergences, kept in the checkpoint: ``schema/<n>.json``
after each batch that changed the state, ``divergences.json`` for ``sparkcdc status``."""

from __future__ import annotations

import json
from typing import Any

from sparkcdc.locations import Location, as_location
from sparkcdc.model.schema import schema_from_json, schema_to_json
from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState, SourceVersion
from sparkcdc.sinks.base import SinkColumn, SinkTable


def _table_json(table: SinkTable) -> dict[str, Any]:
    return {
        "name": table.name,
        "columns": [[c.name, c.spark_type, c.nullable] for c in table.columns],
        "primary_key": list(table.primary_key),
        "sources": list(table.sources),
    }


def _table_from_json(data: dict[str, Any]) -> SinkTable:
    return SinkTable(
        data["name"],
        tuple(SinkColumn(n, t, bool(null)) for n, t, null in data["columns"]),
        tuple(data["primary_key"]),
        tuple(data["sources"]),
    )


class SchemaHistory:
    """The schema state after each batch that changed it, under ``<checkpoint>/schema/``.

    File ``<n>.json`` is the state after batch ``n - 1`` (``0``: at the first start), written
    whole and renamed into place, so a crash leaves the previous file standing.
    """

    def __init__(self, checkpoint: str | Location) -> None:
        self.checkpoint = as_location(checkpoint)
        self.root = self.checkpoint / "schema"

    def _numbers(self) -> list[int]:
        names = (n.removesuffix(".json") for n in self.root.children() if n.endswith(".json"))
        return sorted(int(n) for n in names if n.isdigit())

    def latest(self) -> SchemaState | None:
        numbers = self._numbers()
        return self._load(numbers[-1]) if numbers else None

    def states(self) -> list[SchemaState]:
        """Every saved state, oldest first (``sparkcdc verify`` follows a column's sink
        columns through them)."""
        return [self._load(n) for n in self._numbers()]

    def before(self, batch_id: int) -> SchemaState | None:
        """The state a batch starts from: written by an earlier batch (or the first start)."""
        numbers = [n for n in self._numbers() if n <= batch_id]
        return self._load(numbers[-1]) if numbers else None

    def has(self, batch_id: int) -> bool:
        """Whether the state after ``batch_id`` was saved (the batch is being replayed)."""
        return (self.root / f"{batch_id + 1:012d}.json").exists()

    def save(self, batch_id: int, state: SchemaState) -> None:
        data = {
            "sources": {
                q: [
                    [
                        v.since,
                        None if v.schema is None else schema_to_json(v.schema),
                        v.mapping,
                        v.discarded,
                        v.batch,
                    ]
                    for v in versions
                ]
                for q, versions in state.sources.items()
            },
            "sinks": {
                name: {
                    "frame": _table_json(s.frame),
                    "table": _table_json(s.table),
                    "mapping": s.mapping,
                    "dropped": s.dropped,
                    "stale": s.stale,
                }
                for name, s in state.sinks.items()
            },
            "shadows": {q: [list(item) for item in items] for q, items in state.shadows.items()},
        }
        (self.root / f"{batch_id + 1:012d}.json").write(json.dumps(data, indent=1))

    def _load(self, number: int) -> SchemaState:
        text = (self.root / f"{number:012d}.json").read_text()
        if text is None:
            raise FileNotFoundError(f"schema history file {number:012d}.json in {self.root}")
        data = json.loads(text)
        return SchemaState(
            {
                q: [
                    SourceVersion(
                        int(since),
                        None if schema is None else schema_from_json(schema),
                        mapping,
                        bool(discarded),
                        int(batch),
                    )
                    for since, schema, mapping, discarded, batch in versions
                ]
                for q, versions in data["sources"].items()
            },
            {
                name: SinkTableState(
                    _table_from_json(s["frame"]),
                    _table_from_json(s["table"]),
                    dict(s["mapping"]),
                    bool(s["dropped"]),
                    # saved by a sparkcdc that did not record it: what happened is unknown
                    bool(s.get("stale", True)),
                )
                for name, s in data["sinks"].items()
            },
            {
                q: [(int(seq), str(db), str(text)) for seq, db, text in items]
                for q, items in data.get("shadows", {}).items()
            },
        )


class Divergences:
    """Sink columns known to differ from the source, with how to repair them, in
    ``<checkpoint>/divergences.json`` (``sparkcdc status`` shows them)."""

    def __init__(self, checkpoint: str | Location) -> None:
        self.path = as_location(checkpoint) / "divergences.json"

    def all(self) -> list[dict[str, Any]]:
        text = self.path.read_text()
        if text is None:
            return []
        data: list[dict[str, Any]] = json.loads(text)
        return data

    def record(self, sink_table: str, column: str, seq: int, message: str) -> None:
        entry = {"sink_table": sink_table, "column": column, "seq": seq, "message": message}
        known = [
            e
            for e in self.all()
            if (e["sink_table"], e["column"], e["seq"]) != (sink_table, column, seq)
        ]
        self.path.write(json.dumps([*known, entry], indent=1))

    def forget(self, sink_table: str, column: str) -> None:
        """Remove what was recorded of ``column`` of ``sink_table`` (it was repaired)."""
        entries = self.all()
        kept = [e for e in entries if (e["sink_table"], e["column"]) != (sink_table, column)]
        if len(kept) != len(entries):
            self.path.write(json.dumps(kept, indent=1))
