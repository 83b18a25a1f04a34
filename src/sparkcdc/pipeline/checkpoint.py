"""A pipeline's checkpoint directory, and the identity its sinks record.

``<checkpoint>/`` holds Spark's checkpoint (``spark/``), the schema history (``schema/``), the
source's state (``source-state/``, unless the file sets ``state.location``) and
``status.json``. Spark's offset log decides whether the stream starts over: with no batch
planned in ``spark/offsets``, the run is a *new stream* (a first run, or a checkpoint that was
deleted to take a new snapshot), and the schema history and default source state left by an
earlier stream are set aside with it.

Each new stream gets a *run id*, kept in ``spark/sparkcdc-run-id`` beside the offset log it
belongs to. The sinks put it in every idempotency id they record (Delta's ``txnAppId``, the
Iceberg snapshot-summary key, the jdbc commit table's ``pipeline`` column), so batch ids
that start again at 0 in a new stream are never taken for batches an old stream already
wrote. A checkpoint made before run ids existed keeps its sinks' old ids (run id ``None``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from sparkcdc.locations import Location, as_location

RUN_ID_FILE = "sparkcdc-run-id"
SPARK_DIR = "spark"
SCHEMA_DIR = "schema"
SOURCE_STATE_DIR = "source-state"


@dataclass(frozen=True)
class CheckpointIdentity:
    """Which stream a checkpoint holds."""

    run_id: str | None  # None: a checkpoint from before run ids (sinks keep their old ids)
    new_stream: bool  # no batch planned yet: the stream (and its snapshot) starts over


def spark_checkpoint(checkpoint: str | Location) -> Location:
    return as_location(checkpoint) / SPARK_DIR


def has_planned_batches(checkpoint: str | Location) -> bool:
    """Whether Spark's offset log under the checkpoint names any batch."""
    offsets = spark_checkpoint(checkpoint) / "offsets"
    return any(name.isdigit() for name in offsets.children())


def logged_end(checkpoint: str | Location, batch: int) -> dict[str, Any] | None:
    """The source's end offset of ``batch`` as Spark's offset log under the checkpoint has
    it (Spark logs it before the batch runs); None when the log has no such batch."""
    text = (spark_checkpoint(checkpoint) / "offsets" / str(batch)).read_text()
    if text is None:
        return None
    lines = text.splitlines()  # v1, the batch's metadata, then one line per source
    return json.loads(lines[2]) if len(lines) > 2 else None


def run_id(checkpoint: str | Location) -> str | None:
    """The run id of the stream under ``checkpoint`` (None: none yet, or from before run ids)."""
    text = (spark_checkpoint(checkpoint) / RUN_ID_FILE).read_text()
    return (text.strip() or None) if text is not None else None


def open_checkpoint(
    checkpoint: str | Location, state_location: str | Location | None = None
) -> CheckpointIdentity:
    """The identity of the stream under ``checkpoint``, made (with a new run id) for a new
    stream, whose leftovers of an earlier stream under the checkpoint are removed: its
    schema history, and its source state when that lives in the checkpoint."""
    root = as_location(checkpoint)
    if has_planned_batches(root):
        return CheckpointIdentity(run_id(root), new_stream=False)
    # Spark's files, the schema history and the staged chunks below hold the stream's state
    # and rows: only this user may read them (Spark writes its own files with the umask's mode)
    root.make_dirs()
    owned = [root / SCHEMA_DIR]
    state = None if state_location is None else as_location(state_location)
    default_state = root / SOURCE_STATE_DIR
    if state is not None and state.uri.rstrip("/") == default_state.uri:
        owned.append(default_state)
    for directory in owned:
        directory.remove_tree()
    new_id = uuid.uuid4().hex
    (spark_checkpoint(root) / RUN_ID_FILE).write(new_id + "\n")
    return CheckpointIdentity(new_id, new_stream=True)
