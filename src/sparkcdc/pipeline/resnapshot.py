"""Copying one sink table again: a re-snapshot of its source tables, requested by
``sparkcdc run --resnapshot TABLE`` and kept in ``<checkpoint>/resnapshot.json`` until done.

A re-snapshot of a table is its chunks pending again (DESIGN.md §3.4; §2: newly added tables are
just more pending chunks): the runner asks the source for it (``scan.resnapshot.tables``),
the source plans the table's chunks from 0 in one batch and marks that batch's offset
(``spark/offsets.restarted``), and the runner empties the sink table when it writes that
very batch, before its rows (``before_batch``), then forgets the request. A run that stops
anywhere in between picks the request up again: until a logged offset shows the restart,
the next run asks the source again.

>>> requests = Resnapshots("/tmp/sparkcdc-doctest-resnapshot")
>>> requests.request(["app.orders"], after_batch=7); sorted(requests.pending())
['app.orders']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import ConfigError, did_you_mean
from sparkcdc.locations import Location, as_location
from sparkcdc.pipeline.checkpoint import RESNAPSHOT_FILE, logged_end, spark_checkpoint
from sparkcdc.pipeline.evolution.persistence import Divergences
from sparkcdc.sinks.base import Sink, SinkTable
from sparkcdc.spark.offsets import restarted

if TYPE_CHECKING:
    from sparkcdc.pipeline.config import PipelineConfig

log = logging.getLogger(__name__)

LOST_TABLE = "*"  # the Divergences entry of a whole sink table (pipeline/runner.py)


def last_logged(checkpoint: str | Location) -> tuple[int, dict[str, Any]]:
    """The newest batch Spark's offset log under ``checkpoint`` names and its source end
    offset (-1 and {} when none)."""
    offsets = spark_checkpoint(checkpoint) / "offsets"
    batches = sorted((int(n) for n in offsets.children() if n.isdigit()), reverse=True)
    for batch in batches:
        end = logged_end(checkpoint, batch)
        if end is not None:
            return batch, end
    return -1, {}


class Resnapshots:
    """The pending re-snapshots of a checkpoint's sink tables: per sink table, the newest
    batch logged when it was requested, and the batch that emptied it (once one did)."""

    def __init__(self, checkpoint: str | Location) -> None:
        self.root = as_location(checkpoint)
        self.path = self.root / RESNAPSHOT_FILE

    def pending(self) -> dict[str, dict[str, Any]]:
        text = self.path.read_text()
        return {} if text is None else dict(json.loads(text))

    def _save(self, entries: dict[str, dict[str, Any]]) -> None:
        if entries:
            self.path.write(json.dumps(entries, indent=1, sort_keys=True))
        elif self.path.exists():
            self.path.fs.delete_file(self.path.path)

    def request(self, names: Iterable[str], after_batch: int) -> None:
        entries = self.pending()
        for name in names:
            entries[name] = {"after": after_batch, "emptied": None}
        self._save(entries)

    def sources(self, tables: Sequence[SinkTable], done: Callable[[str], bool]) -> list[str]:
        """The source tables whose snapshot the source must start again: those of each
        pending sink table whose restart no logged offset shows yet. ``done(source)``: the
        source table's first snapshot is done. ConfigError: an unknown sink table, or one
        whose source is still in its first snapshot (nothing to copy again yet)."""
        by_name = {t.name: t for t in tables}
        wanted: list[str] = []
        for name, entry in sorted(self.pending().items()):
            table = by_name.get(name)
            if table is None:
                raise ConfigError(
                    f"--resnapshot {name}: the pipeline has no such sink table; its sink "
                    f"tables are {', '.join(sorted(by_name))}.{did_you_mean(name, by_name)}"
                )
            if self._restart_logged(table, int(entry["after"])):
                continue
            running = [s for s in table.sources if not done(s)]
            if running:
                raise ConfigError(
                    f"--resnapshot {name}: the first snapshot of {', '.join(running)} is still "
                    "running; the table is copied whole by it. Run without --resnapshot"
                )
            wanted.extend(table.sources)
        return wanted

    def _restart_logged(self, table: SinkTable, after: int) -> bool:
        offsets = spark_checkpoint(self.root) / "offsets"
        for batch in sorted(int(n) for n in offsets.children() if n.isdigit() and int(n) > after):
            snapshot = (logged_end(self.root, batch) or {}).get("snapshot") or {}
            if all(restarted(snapshot, s) for s in table.sources):
                return True
        return False

    def wrap(
        self, write: Callable[[Any, int], None], sink: Sink, tables: Sequence[SinkTable]
    ) -> Callable[[Any, int], None]:
        """``write`` (the batch function) with each pending sink table emptied before the
        batch that restarts its sources' snapshot is written, once (a replay of that batch
        after the empty finds its own rows, which the sink's idempotency keeps), and the
        request forgotten once the batch is written."""
        by_name = {t.name: t for t in tables}

        def run(frame: Any, batch_id: int) -> None:
            entries = self.pending()
            if not entries:
                write(frame, batch_id)
                return
            snapshot = (logged_end(self.root, batch_id) or {}).get("snapshot") or {}
            for name, entry in entries.items():
                table = by_name.get(name)
                if table is None or entry.get("emptied") is not None:
                    continue
                if all(restarted(snapshot, s) for s in table.sources):
                    log.info(
                        "batch %d: sink table %s emptied; its sources' snapshot starts again",
                        batch_id,
                        name,
                    )
                    sink.ready()  # a table this run creates (begin_open) exists by now
                    sink.truncate_table(table)
                    entry["emptied"] = batch_id
                    self._save(entries)
                    Divergences(self.root).forget(name, LOST_TABLE)
            write(frame, batch_id)
            left = {n: e for n, e in entries.items() if e.get("emptied") is None}
            if len(left) != len(entries):
                self._save(left)

        return run


def request_resnapshot(config: PipelineConfig, names: Iterable[str]) -> None:
    """Ask the pipeline's next run to copy the sink tables ``names`` again (``sparkcdc run
    --resnapshot``); the run checks the names against its sink tables."""
    checkpoint = config.checkpoint_location()
    Resnapshots(checkpoint).request(names, after_batch=last_logged(checkpoint)[0])
