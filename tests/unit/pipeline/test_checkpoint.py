"""A checkpoint's identity: a new run id for every new stream, the same one across restarts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.checkpoint import (
    RUN_ID_FILE,
    STATE_OWNER_FILE,
    CheckpointIdentity,
    WrittenTables,
    claim_state,
    open_checkpoint,
)
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


def test_a_checkpoint_with_batches_but_no_run_id_is_refused(tmp_path: Path) -> None:
    """Its sinks' idempotency ids would be the pipeline's name alone, which a new stream's
    batch ids cannot be told from: the run stops and says to delete the checkpoint."""
    checkpoint = tmp_path / "ckpt"
    plan_batch(checkpoint, 3)
    with pytest.raises(ConfigError, match=r"no run id \(spark/sparkcdc-run-id\).*Delete"):
        open_checkpoint(str(checkpoint))
    assert not (checkpoint / "spark" / RUN_ID_FILE).exists()
    assert SinkContext("p", str(checkpoint), "abc").writer_id == "p@abc"


def old_stream_state(state: Path) -> None:
    """What an earlier stream's source left under a state location, and a user's file."""
    for entry in ("mysql-cdc_db_3306/offsets", "planned", "hold"):
        (state / entry).mkdir(parents=True)
        (state / entry / "x.json").write_text("{}")
    (state / "notes.txt").write_text("mine")


def test_a_new_stream_clears_the_state_an_earlier_stream_left(tmp_path: Path) -> None:
    state, checkpoint = tmp_path / "state", tmp_path / "ckpt"
    old_stream_state(state)
    identity = open_checkpoint(str(checkpoint), str(state))
    claim_state(str(state), str(checkpoint), identity)
    assert sorted(p.name for p in state.iterdir()) == ["notes.txt", STATE_OWNER_FILE]
    plan_batch(checkpoint, 0)
    old_stream_state(state)  # the stream's own state, as it runs
    claim_state(str(state), str(checkpoint), open_checkpoint(str(checkpoint), str(state)))
    assert (state / "mysql-cdc_db_3306" / "offsets" / "x.json").exists()  # kept: its own

    shutil.rmtree(checkpoint)  # a new stream of the same checkpoint
    claim_state(str(state), str(checkpoint), open_checkpoint(str(checkpoint), str(state)))
    assert not (state / "mysql-cdc_db_3306").exists()


def test_a_stream_that_goes_on_refuses_another_streams_state(tmp_path: Path) -> None:
    state, checkpoint = tmp_path / "state", tmp_path / "ckpt"
    claim_state(str(state), str(checkpoint), CheckpointIdentity("first", new_stream=True))
    with pytest.raises(ConfigError, match="holds the state of stream first"):
        claim_state(str(state), str(checkpoint), CheckpointIdentity("second", new_stream=False))


def test_state_of_a_stream_from_before_records_is_taken_on(tmp_path: Path) -> None:
    state, checkpoint = tmp_path / "state", tmp_path / "ckpt"
    old_stream_state(state)
    claim_state(str(state), str(checkpoint), CheckpointIdentity("r", new_stream=False))
    assert (state / "mysql-cdc_db_3306" / "offsets" / "x.json").exists()
    assert '"run_id": "r"' in (state / STATE_OWNER_FILE).read_text()


def test_a_state_location_another_pipeline_holds_is_refused(tmp_path: Path) -> None:
    state, first, second = tmp_path / "state", tmp_path / "first", tmp_path / "second"
    claim_state(str(state), str(first), open_checkpoint(str(first), str(state)))
    plan_batch(first, 0)
    with pytest.raises(ConfigError, match=r"a state\.location of its own"):
        claim_state(str(state), str(second), open_checkpoint(str(second), str(state)))
    shutil.rmtree(first)  # that pipeline is over: its state is the new stream's to clear
    claim_state(str(state), str(second), open_checkpoint(str(second), str(state)))
    assert str(second) in (state / STATE_OWNER_FILE).read_text()


def test_the_sink_tables_written_are_kept_until_a_new_stream(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    open_checkpoint(str(checkpoint))
    WrittenTables(str(checkpoint)).add(name for name in ["app.a", "app.b"])
    WrittenTables(str(checkpoint)).add(iter(["app.a"]))
    assert WrittenTables(str(checkpoint)).names() == {"app.a", "app.b"}
    plan_batch(checkpoint, 0)
    open_checkpoint(str(checkpoint))
    assert WrittenTables(str(checkpoint)).names() == {"app.a", "app.b"}
    shutil.rmtree(checkpoint / "spark")  # a new stream
    open_checkpoint(str(checkpoint))
    assert WrittenTables(str(checkpoint)).names() == set()


def test_a_stream_whose_checkpoint_moved_keeps_its_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    claim_state(str(state), str(tmp_path / "old"), CheckpointIdentity("r", new_stream=True))
    (state / "mysql-cdc_db_3306").mkdir()
    claim_state(str(state), str(tmp_path / "new"), CheckpointIdentity("r", new_stream=False))
    assert (state / "mysql-cdc_db_3306").exists()
    assert str(tmp_path / "new") in (state / STATE_OWNER_FILE).read_text()
