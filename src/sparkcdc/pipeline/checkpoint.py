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
wrote.

The source's state belongs to one stream too (``claim_state``): ``state.location`` records
the run id and checkpoint of the stream it holds (``stream.json``). A new stream clears what
an earlier stream of its checkpoint left there (its offset, chunk plans and staged chunks are
places in another snapshot); a state location that holds the state of another checkpoint's
stream, or of another stream of this one, is refused (DESIGN.md §3.4).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import ConfigError
from sparkcdc.locations import Location, as_location, open_location
from sparkcdc.model.source_types import SOURCE_TYPES
from sparkcdc.model.text import redacted_uri

log = logging.getLogger(__name__)

RUN_ID_FILE = "sparkcdc-run-id"
SPARK_DIR = "spark"
SCHEMA_DIR = "schema"
SOURCE_STATE_DIR = "source-state"
STATE_OWNER_FILE = "stream.json"
WRITTEN_FILE = "sink-tables.json"
RESNAPSHOT_FILE = "resnapshot.json"  # pipeline/resnapshot.py
# what a source keeps under a state location (spark/source.py: stream_id, named by its
# format, the BatchHold, the SnapshotBatchRecord); nothing else there is sparkcdc's to remove
STATE_ENTRIES = (*(f"{name}_" for name in SOURCE_TYPES), "hold", "planned", STATE_OWNER_FILE)


@dataclass(frozen=True)
class CheckpointIdentity:
    """Which stream a checkpoint holds."""

    run_id: str
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
    """The run id of the stream under ``checkpoint`` (None: none yet)."""
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
        known = run_id(root)
        if known is None:
            raise ConfigError(
                f"the checkpoint {root} has planned batches but no run id "
                f"({SPARK_DIR}/{RUN_ID_FILE}): it was not written by this version of sparkcdc, "
                "and its sinks' idempotency ids cannot be told from another stream's. Delete "
                "the checkpoint to start the pipeline over (a new stream takes its snapshot "
                "again)"
            )
        return CheckpointIdentity(known, new_stream=False)
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
    for name in (WRITTEN_FILE, RESNAPSHOT_FILE):  # an earlier stream's sink tables
        leftover = root / name
        if leftover.exists():
            leftover.fs.delete_file(leftover.path)
    new_id = uuid.uuid4().hex
    (spark_checkpoint(root) / RUN_ID_FILE).write(new_id + "\n")
    return CheckpointIdentity(new_id, new_stream=True)


class WrittenTables:
    """The sink tables the checkpoint's stream has written rows to, kept in
    ``<checkpoint>/sink-tables.json``: one of them missing when a run starts was removed
    behind the pipeline's back (the runner refuses to create it again with only the newest
    changes in it). A new stream starts with none.

    >>> written = WrittenTables("/tmp/sparkcdc-doctest-written")
    >>> written.add(["app.orders"]); "app.orders" in written.names()
    True
    """

    def __init__(self, checkpoint: str | Location) -> None:
        self.path = as_location(checkpoint) / WRITTEN_FILE
        self._names: set[str] | None = None

    def names(self) -> set[str]:
        if self._names is None:
            text = self.path.read_text()
            self._names = set() if text is None else set(json.loads(text)["written"])
        return set(self._names)

    def add(self, names: Iterable[str]) -> None:
        """Record ``names`` as written (a file write only when one is new)."""
        known, new = self.names(), set(names)
        if new <= known:
            return
        self._names = known | new
        self.path.write(json.dumps({"written": sorted(self._names)}) + "\n")


def claim_state(
    state: str | Location,
    checkpoint: str | Location,
    identity: CheckpointIdentity,
    hadoop: Mapping[str, str] | None = None,
) -> None:
    """Make the source state under ``state`` the stream's of ``identity`` (the checkpoint's).

    The state location records its stream (``stream.json``: run id and checkpoint URI).
    - A new stream clears the state an earlier stream left (sparkcdc's entries only,
      ``STATE_ENTRIES``), saying so: that stream's offset, chunk plans and staged chunks
      are places in its snapshot, not in this one's. A state location whose record names
      another checkpoint that still holds that stream is refused: two pipelines would
      write over each other's state.
    - A stream that goes on needs its own record there: a location recorded for another
      stream is refused; one with no record (written before records existed) is taken.
    ``hadoop``: the settings that reach another recorded checkpoint (``open_location``).

    >>> claim_state("/tmp/sparkcdc-doctest-st", "/tmp/c", CheckpointIdentity("r1", True))
    >>> json.loads(open("/tmp/sparkcdc-doctest-st/stream.json").read())["run_id"]
    'r1'
    """
    root = as_location(state)
    mine = as_location(checkpoint)
    record = _read_owner(root / STATE_OWNER_FILE)
    owner_run = None if record is None else record.get("run_id")
    owner_checkpoint = None if record is None else str(record.get("checkpoint"))
    # a run id names one stream wherever its checkpoint is now (moved, or spelled another way)
    if record is not None and owner_run == identity.run_id:
        if owner_checkpoint != mine.uri:
            _write_owner(root, mine, identity)
        return
    if not identity.new_stream:
        if record is not None:
            raise ConfigError(
                f"state.location {root} holds the state of stream {owner_run} of the "
                f"checkpoint {_shown(owner_checkpoint)}, but the checkpoint {mine} goes on "
                f"with stream {identity.run_id}: its offsets are places in another snapshot "
                "than those staged chunks and plans. Give each pipeline a state.location of "
                "its own; to start this pipeline over, delete its checkpoint (a new stream "
                "clears the state it leaves)"
            )
        _write_owner(root, mine, identity)  # state written before the record existed
        return
    if record is not None and owner_checkpoint != mine.uri and owner_run is not None:
        other = open_location(owner_checkpoint or "", hadoop)
        if has_planned_batches(other) and run_id(other) == owner_run:
            raise ConfigError(
                f"state.location {root} holds the state of the pipeline whose checkpoint is "
                f"{_shown(owner_checkpoint)} (stream {owner_run}), which still exists: two "
                "pipelines would write over each other's offsets and staged chunks. Give "
                "this pipeline a state.location of its own, or, if that pipeline is over, "
                "delete its checkpoint"
            )
    cleared = [name for name in root.children() if name.startswith(STATE_ENTRIES)]
    if cleared:
        log.info(
            "state.location %s holds the state of an earlier stream (%s); the new stream "
            "of %s (run id %s) starts its snapshot over and clears it: %s",
            root,
            f"stream {owner_run} of {_shown(owner_checkpoint)}"
            if record is not None
            else "written before streams were recorded",
            mine,
            identity.run_id,
            ", ".join(cleared),
        )
    for name in cleared:
        entry = root / name
        if name == STATE_OWNER_FILE:
            entry.fs.delete_file(entry.path)
        else:
            entry.remove_tree()
    _write_owner(root, mine, identity)


def _read_owner(location: Location) -> dict[str, Any] | None:
    text = location.read_text()
    return None if text is None else dict(json.loads(text))


def _write_owner(root: Location, checkpoint: Location, identity: CheckpointIdentity) -> None:
    root.make_dirs()
    owner = {"run_id": identity.run_id, "checkpoint": checkpoint.uri}
    (root / STATE_OWNER_FILE).write(json.dumps(owner) + "\n")


def _shown(uri: str | None) -> str:
    return redacted_uri(uri or "?")
