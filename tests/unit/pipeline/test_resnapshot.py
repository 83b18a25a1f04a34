"""A sink table's re-snapshot: asked of the source until a logged offset shows the restart,
and the sink table emptied once, by the batch that restarts its sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import ConfigError, SourceError
from sparkcdc.pipeline.resnapshot import Resnapshots
from sparkcdc.sinks.base import SinkColumn, SinkTable
from sparkcdc.spark.offsets import check_successor

TABLE = SinkTable("app.t", (SinkColumn("id", "INT", nullable=False),), ("id",), ("app.t",))
DONE = {"next": 3, "prev": 3, "total": 3}
RESTART = {"next": 2, "prev": 0, "total": None, "restart": True}


def log_batch(checkpoint: Path, batch: int, snapshot: dict[str, Any]) -> None:
    """What Spark writes when it plans a batch: the source's end offset on the third line."""
    offsets = checkpoint / "spark" / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / str(batch)).write_text(f"v1\n{{}}\n{json.dumps({'snapshot': snapshot})}\n")


class Truncates:
    def __init__(self) -> None:
        self.emptied: list[str] = []

    def ready(self) -> None:
        pass

    def truncate_table(self, table: SinkTable) -> None:
        self.emptied.append(table.name)


def test_the_source_is_asked_until_an_offset_shows_the_restart(tmp_path: Path) -> None:
    log_batch(tmp_path, 4, {"app.t": DONE})
    requests = Resnapshots(str(tmp_path))
    requests.request(["app.t"], after_batch=4)
    assert requests.sources([TABLE], lambda s: True) == ["app.t"]
    log_batch(tmp_path, 5, {"app.t": RESTART})  # planned, not yet written
    assert requests.sources([TABLE], lambda s: True) == []
    assert "app.t" in requests.pending()


def test_unknown_or_still_snapshotting_tables_are_refused(tmp_path: Path) -> None:
    requests = Resnapshots(str(tmp_path))
    requests.request(["app.tt"], after_batch=-1)
    with pytest.raises(ConfigError, match=r"Did you mean 'app\.t'"):
        requests.sources([TABLE], lambda s: True)
    requests = Resnapshots(str(tmp_path / "other"))
    requests.request(["app.t"], after_batch=-1)
    with pytest.raises(ConfigError, match="still running"):
        requests.sources([TABLE], lambda s: False)


def test_the_restarting_batch_empties_the_sink_table_once(tmp_path: Path) -> None:
    requests = Resnapshots(str(tmp_path))
    requests.request(["app.t"], after_batch=4)
    log_batch(tmp_path, 5, {"app.t": DONE})
    log_batch(tmp_path, 6, {"app.t": RESTART})
    sink, batches = Truncates(), []
    run = requests.wrap(lambda frame, batch: batches.append(batch), sink, [TABLE])  # type: ignore[arg-type]
    run(None, 5)  # a batch of the old plan (a replay): the table stays
    assert sink.emptied == [] and "app.t" in requests.pending()
    run(None, 6)
    assert sink.emptied == ["app.t"] and batches == [5, 6]
    assert requests.pending() == {}
    run(None, 6)  # its replay: the sink's own idempotency keeps the rows
    assert sink.emptied == ["app.t"]


def test_an_offset_may_restart_a_tables_snapshot() -> None:
    check_successor({"snapshot": {"app.t": DONE}}, {"snapshot": {"app.t": RESTART}})
    with pytest.raises(SourceError, match="does not belong"):
        check_successor(
            {"snapshot": {"app.t": DONE}}, {"snapshot": {"app.t": dict(RESTART, restart=False)}}
        )
