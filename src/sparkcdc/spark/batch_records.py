"""What the source and a pipeline's run tell each other through the query's
``state.location``: a request to plan no new batch (``BatchHold``), and the newest batch
planned when it reads one table's snapshot chunks alone (``SnapshotBatchRecord``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sparkcdc.snapshot.storage import StateStore


class BatchHold:
    """A request that the source plan no new batch, kept as a file under the query's
    ``state.location`` (``hold/requested``): while it is there, ``latestOffset`` answers
    with the offset Spark has, so the query idles between triggers.

    The pipeline runner sets it before it stops a query, and waits for the trigger in
    flight to end: ``query.stop()`` during a batch cancels the batch's Spark jobs, and the
    sink's writer then fails with an ``InterruptedException`` (a Java and a Python stack on
    the console) in a run that did nothing wrong. It clears the hold when it starts.

    >>> hold = BatchHold("/tmp/sparkcdc-doctest-hold")
    >>> hold.set(); hold.held
    True
    >>> hold.clear(); hold.held
    False
    """

    def __init__(self, state_location: str, hadoop: Mapping[str, str] | None = None) -> None:
        self.store = StateStore.open(state_location, "hold", hadoop)
        self.path = self.store.path("requested")

    @property
    def held(self) -> bool:
        return self.store.exists(self.path)

    def set(self) -> None:
        self.store.overwrite(self.path, b"")

    def clear(self) -> None:
        self.store.delete(self.path)


class SnapshotBatchRecord:
    """The source's word to a pipeline's batch writer on the newest batch it planned: when
    that batch reads snapshot chunks of one table and nothing else (no binlog range, and
    not a table that joined the running query, whose first chunk brings its CREATE TABLE),
    ``planned/snapshot-batch.json`` under the query's ``state.location`` names the table
    and the batch's end offset; otherwise there is no such file.

    Every row of such a batch is a snapshot row of that table unless a chunk brings a
    schema change made between the batch's planning and the chunk's read, which only the
    read finds; the writer checks each row for that as it writes (``BatchWriter``).

    >>> record = SnapshotBatchRecord("/tmp/sparkcdc-doctest-planned")
    >>> record.write({"binlog": {"file": "b.1", "pos": 4}}, "app.t")
    >>> record.read()
    ({'binlog': {'file': 'b.1', 'pos': 4}}, 'app.t')
    >>> record.clear(); record.read() is None
    True
    """

    def __init__(self, state_location: str, hadoop: Mapping[str, str] | None = None) -> None:
        self.store = StateStore.open(state_location, "planned", hadoop)
        self.path = self.store.path("snapshot-batch.json")

    def write(self, end: dict[str, Any], table: str) -> None:
        self.store.overwrite(self.path, json.dumps({"end": end, "table": table}).encode())

    def clear(self) -> None:
        self.store.delete(self.path)

    def read(self) -> tuple[dict[str, Any], str] | None:
        """The recorded batch's end offset and table (qualified name); None: no record."""
        raw = self.store.read(self.path)
        if raw is None:
            return None
        record = json.loads(raw)
        return record["end"], str(record["table"])
