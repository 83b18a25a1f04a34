"""``<checkpoint>/status.json``, what ``sparkcdc status`` shows, kept current by each run;
and the offset the pipeline last committed.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sparkcdc.locations import (
    Location,
    as_location,
)
from sparkcdc.pipeline.checkpoint import (
    logged_end,
    spark_checkpoint,
)

STATUS_FILE = "status.json"


def write_status(checkpoint: str | Location, status: dict[str, Any]) -> None:
    (as_location(checkpoint) / STATUS_FILE).write(json.dumps(status, indent=1, default=str))


STATUS_MIN_INTERVAL_S = 5.0  # a run's status.json changes at most this often ...

STATUS_HEARTBEAT_S = 60.0  # ... and is written at least this often ("updated")


class StatusWriter:
    """A running pipeline's ``status.json``: written at once when it starts or stops
    running, when what it says changes (at most every ``STATUS_MIN_INTERVAL_S``), and every
    ``STATUS_HEARTBEAT_S`` (its ``updated`` tells a live run from a dead one). The run polls
    its query twice a second; writing on every poll made ~170,000 PUTs a day on an object
    store, each billed."""

    def __init__(self, checkpoint: str | Location) -> None:
        self.checkpoint = checkpoint
        self._said: dict[str, Any] | None = None  # the last written status, but "updated"
        self._at = 0.0

    def write(self, status: dict[str, Any]) -> bool:
        """Write ``status`` if it is due; whether it was."""
        said = {k: v for k, v in status.items() if k != "updated"}
        since = time.monotonic() - self._at
        due = (
            self._said is None
            or said.get("running") != self._said.get("running")
            or (said != self._said and since >= STATUS_MIN_INTERVAL_S)
            or since >= STATUS_HEARTBEAT_S
        )
        if due:
            write_status(self.checkpoint, status)
            self._said, self._at = said, time.monotonic()
        return due


def committed_offset(checkpoint: str | Location) -> tuple[int, dict[str, Any]] | None:
    """The newest batch Spark committed in ``<checkpoint>/spark`` and its source end offset."""
    root = spark_checkpoint(checkpoint)
    commits = sorted(
        (int(name) for name in (root / "commits").children() if name.isdigit()), reverse=True
    )
    for batch in commits:
        end = logged_end(checkpoint, batch)
        if end is not None:
            return batch, end
    return None
