"""One run per checkpoint: the lease (pipeline/lease.py) on a real directory, with real
processes for the holders that died."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkcdc.errors import CheckpointInUseError
from sparkcdc.locations import open_location
from sparkcdc.pipeline import lease as lease_module
from sparkcdc.pipeline.lease import LEASE_DIR, CheckpointLease, Claim

TAKE = (
    "import sys, time; from sparkcdc.locations import open_location; "
    "from sparkcdc.pipeline.lease import CheckpointLease; "
    "CheckpointLease.take(open_location(sys.argv[1])); print('held', flush=True); time.sleep(600)"
)


def holder(checkpoint: Path) -> subprocess.Popen[str]:
    """Another process that takes the lease and holds it (until killed)."""
    process = subprocess.Popen(
        [sys.executable, "-c", TAKE, str(checkpoint)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_a_second_taker_is_refused_with_the_holder_and_a_released_lease_is_free(
    tmp_path: Path,
) -> None:
    checkpoint = open_location(str(tmp_path / "cp"))
    first = CheckpointLease.take(checkpoint)
    with pytest.raises(CheckpointInUseError) as info:
        CheckpointLease.take(checkpoint)
    message = str(info.value)
    assert "in use by another run" in message and f"pid {first.claim.pid} on host" in message
    assert "Stop that run first" in message
    assert len((checkpoint / LEASE_DIR).children()) == 1  # the refused claim was taken back
    first.release()
    CheckpointLease.take(checkpoint).release()


def test_a_live_holder_in_another_process_refuses_and_a_killed_one_frees_at_once(
    tmp_path: Path,
) -> None:
    checkpoint = open_location(str(tmp_path / "cp"))
    process = holder(tmp_path / "cp")
    try:
        with pytest.raises(CheckpointInUseError, match=f"pid {process.pid} on host"):
            CheckpointLease.take(checkpoint)
    finally:
        process.kill()  # SIGKILL: its claim stays behind
        process.wait()
    assert len((checkpoint / LEASE_DIR).children()) == 1
    taken = CheckpointLease.take(checkpoint)  # its process is gone: stale, removed
    assert (checkpoint / LEASE_DIR).children() == [f"claim-{taken.claim.id}.json"]
    taken.release()


def test_a_claim_of_another_host_holds_until_it_expires(tmp_path: Path) -> None:
    checkpoint = open_location(str(tmp_path / "cp"))
    (checkpoint / LEASE_DIR).make_dirs()
    now = time.time()
    other = Claim("far", 1, "another-host", None, now, now + 60)
    (checkpoint / LEASE_DIR / "claim-far.json").write(other.to_json())
    with pytest.raises(CheckpointInUseError, match="pid 1 on host another-host"):
        CheckpointLease.take(checkpoint)
    expired = Claim("far", 1, "another-host", None, now - 300, now - 1)
    (checkpoint / LEASE_DIR / "claim-far.json").write(expired.to_json())
    CheckpointLease.take(checkpoint).release()


def test_a_holder_whose_claim_was_taken_away_stops_and_renewal_extends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = open_location(str(tmp_path / "cp"))
    held = CheckpointLease.take(checkpoint)
    monkeypatch.setattr(lease_module, "RENEW_S", 0.0)
    before = held.claim.expires
    held.renew()
    file = checkpoint / LEASE_DIR / f"claim-{held.claim.id}.json"
    assert json.loads(file.read_text() or "{}")["expires"] >= before
    file.fs.delete_file(file.path)  # another run found it expired
    with pytest.raises(CheckpointInUseError, match="taken away"):
        held.renew()
