"""A checkpoint's identity: a new run id for every new stream, the same one across restarts."""

from __future__ import annotations

from pathlib import Path

from sparkcdc.pipeline.checkpoint import RUN_ID_FILE, open_checkpoint
from sparkcdc.sinks.base import SinkContext


def plan_batch(checkpoint: Path, batch: int) -> None:
    """What Spark writes when it plans a batch."""
    offsets = checkpoint / "spark" / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / str(batch)).write_text("v1\n{}\n{}\n")


def test_a_restart_keeps_the_run_id_and_a_new_stream_gets_another(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    first = open_checkpoint(str(checkpoint))
    assert first.new_stream and first.run_id
    plan_batch(checkpoint, 0)
    restart = open_checkpoint(str(checkpoint))
    assert restart == type(first)(first.run_id, new_stream=False)

    (checkpoint / "spark" / "offsets" / "0").unlink()  # e.g. the spark/ part deleted
    again = open_checkpoint(str(checkpoint))
    assert again.new_stream and again.run_id not in (None, first.run_id)


def test_a_new_stream_sets_aside_what_an_earlier_one_left(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    for part in ("schema", "source-state", "elsewhere"):
        (checkpoint / part).mkdir(parents=True)
        (checkpoint / part / "x.json").write_text("{}")
    open_checkpoint(str(checkpoint), str(checkpoint / "source-state"))
    assert not (checkpoint / "schema").exists()
    assert not (checkpoint / "source-state").exists()
    assert (checkpoint / "elsewhere" / "x.json").exists()


def test_a_state_location_outside_the_checkpoint_is_never_touched(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "x.json").write_text("{}")
    open_checkpoint(str(tmp_path / "ckpt"), str(state))
    assert (state / "x.json").exists()


def test_a_checkpoint_from_before_run_ids_keeps_the_old_writer_id(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    plan_batch(checkpoint, 3)
    identity = open_checkpoint(str(checkpoint))
    assert identity.run_id is None and not identity.new_stream
    assert not (checkpoint / "spark" / RUN_ID_FILE).exists()
    assert SinkContext("p", str(checkpoint), identity.run_id).writer_id == "p"
    assert SinkContext("p", str(checkpoint), "abc").writer_id == "p@abc"
