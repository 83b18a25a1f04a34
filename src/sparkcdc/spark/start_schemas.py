"""The captured tables' schemas at each place a batch may start, for a change stream that
carries no DDL (PostgreSQL's WAL: DESIGN.md §12.2).

Such a stream tells a schema change only as a table's new column list at its next row
change, so the reader of a range compares each table's first columns with the schemas as
of the range's start (``RangeRead.schemas``). The follower reads those schemas together
with each end it observes (``StreamFollower.schemas_of``); every range ends at such an end
(or where the previous one did), so the next range's start has them. They are kept under
``state.location`` too: a run restarted from its checkpoint starts where the last one
ended, and a column added while no run was reading is told to the sink.
"""

from __future__ import annotations

import json
from typing import Any

from sparkcdc.model.schema import TableSchema, schema_to_json
from sparkcdc.snapshot.storage import StateStore

_FILE = ("schema", "at-ends.json")


def _key(position: Any) -> str:
    return json.dumps(position.to_offset(), sort_keys=True)


class StartSchemas:
    """Schemas (their JSON) by stream position, the ones not yet behind the committed end."""

    def __init__(self, store: StateStore | None) -> None:
        self._store = store
        self._at: dict[str, list[dict[str, Any]]] = {}
        if store is not None:
            raw = store.read(store.path(*_FILE))
            if raw is not None:
                self._at = json.loads(raw)

    def note(self, position: Any, schemas: tuple[TableSchema, ...] | None) -> None:
        """``schemas`` hold at ``position`` (None: the stream carries its DDL: nothing)."""
        if schemas is None or _key(position) in self._at:
            return
        self._at[_key(position)] = [schema_to_json(s) for s in schemas]
        self._save()

    def at(self, position: Any) -> str:
        """The schemas (JSON) as of ``position``; "" when none were kept there."""
        found = self._at.get(_key(position))
        return json.dumps(found) if found is not None else ""

    def release(self, committed: Any, position_of: Any) -> None:
        """Forget the places before ``committed``: no batch starts there any more."""
        kept = {k: v for k, v in self._at.items() if not position_of(json.loads(k)) < committed}
        if len(kept) != len(self._at):
            self._at = kept
            self._save()

    def _save(self) -> None:
        if self._store is not None:
            self._store.overwrite(self._store.path(*_FILE), json.dumps(self._at).encode())
