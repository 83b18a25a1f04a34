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

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from sparkcdc.files import make_private_dirs, write_private

RUN_ID_FILE = "sparkcdc-run-id"
SPARK_DIR = "spark"
SCHEMA_DIR = "schema"
SOURCE_STATE_DIR = "source-state"


@dataclass(frozen=True)
class CheckpointIdentity:
    """Which stream a checkpoint holds."""

    run_id: str | None  # None: a checkpoint from before run ids (sinks keep their old ids)
    new_stream: bool  # no batch planned yet: the stream (and its snapshot) starts over


def spark_checkpoint(checkpoint: str) -> Path:
    return Path(checkpoint) / SPARK_DIR


def has_planned_batches(checkpoint: str) -> bool:
    """Whether Spark's offset log under the checkpoint names any batch."""
    offsets = spark_checkpoint(checkpoint) / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def run_id(checkpoint: str) -> str | None:
    """The run id of the stream under ``checkpoint`` (None: none yet, or from before run ids)."""
    path = spark_checkpoint(checkpoint) / RUN_ID_FILE
    return (path.read_text().strip() or None) if path.exists() else None


def open_checkpoint(checkpoint: str, state_location: str | None = None) -> CheckpointIdentity:
    """The identity of the stream under ``checkpoint``, made (with a new run id) for a new
    stream, whose leftovers of an earlier stream under the checkpoint are removed: its
    schema history, and its source state when that lives in the checkpoint."""
    if has_planned_batches(checkpoint):
        return CheckpointIdentity(run_id(checkpoint), new_stream=False)
    # Spark's files, the schema history and the staged chunks below hold the stream's state
    # and rows: only this user may read them (Spark writes its own files with the umask's mode)
    make_private_dirs(checkpoint)
    root = Path(checkpoint)
    owned = [root / SCHEMA_DIR]
    if state_location is not None and Path(state_location) == root / SOURCE_STATE_DIR:
        owned.append(root / SOURCE_STATE_DIR)
    for directory in owned:
        shutil.rmtree(directory, ignore_errors=True)
    new_id = uuid.uuid4().hex
    write_private(spark_checkpoint(checkpoint) / RUN_ID_FILE, new_id + "\n")
    return CheckpointIdentity(new_id, new_stream=True)
