"""One run at a time per checkpoint: a lease in ``<checkpoint>/lease/`` (DESIGN.md §3.3).

A run that starts writes a claim of its own (``claim-<id>.json``: pid, host, process start,
when it started, until when it holds), then lists the claims. It holds the lease when its
own is the only live one it sees; otherwise it takes its claim back and stops with
``CheckpointInUseError``, naming the run that holds it. No rename or conditional write is
needed, so an object store (where neither is atomic) decides as a local disk does: if run A
saw no other claim, A's write came before its listing, and a run B that wrote after that
listing sees A's claim and yields. Two runs that see each other both yield (both retry).

A claim is stale, and removed by whoever finds it, when its process is gone (same host: no
such pid, or one started at another time, so a SIGKILLed run frees the checkpoint at once)
or when it expired: the holder renews it while it runs (``renew``), so a claim of a run on
another host that died ends ``LEASE_S`` after its last renewal. A holder that finds its
claim gone (taken as expired while it hung) stops.

    >>> Claim.parse(Claim.mine("c1", 100.0).to_json()).holder() == Claim.mine("c1", 100.0).holder()
    True
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Any

from sparkcdc.errors import CheckpointInUseError
from sparkcdc.locations import Location

LEASE_DIR = "lease"
LEASE_S = 120.0  # a claim not renewed for this long is stale
RENEW_S = 20.0  # how often a holder renews its claim


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (Linux ``/proc``), which tells a
    reused pid from the process that wrote a claim; None where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: there, so alive
    return started is None or _process_start(pid) in (None, started)


@dataclass(frozen=True)
class Claim:
    """A run's claim on the checkpoint."""

    id: str
    pid: int
    host: str
    process_start: str | None
    started: float  # epoch seconds
    expires: float

    @classmethod
    def mine(cls, claim_id: str, now: float) -> Claim:
        pid = os.getpid()
        return cls(claim_id, pid, socket.gethostname(), _process_start(pid), now, now + LEASE_S)

    @classmethod
    def parse(cls, text: str) -> Claim:
        data: dict[str, Any] = json.loads(text)
        return cls(
            str(data["id"]),
            int(data["pid"]),
            str(data["host"]),
            None if data.get("process_start") is None else str(data["process_start"]),
            float(data["started"]),
            float(data["expires"]),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def stale(self, now: float) -> bool:
        if self.expires < now:
            return True
        return self.host == socket.gethostname() and not _alive(self.pid, self.process_start)

    def holder(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"pid {self.pid} on host {self.host}, started {started}"


class CheckpointLease:
    """The lease of one run on ``checkpoint`` (``take`` it; ``release`` it at the end)."""

    def __init__(self, checkpoint: Location, claim: Claim) -> None:
        self.directory = checkpoint / LEASE_DIR
        self.claim = claim
        self._renewed = claim.started

    @property
    def _file(self) -> Location:
        return self.directory / f"claim-{self.claim.id}.json"

    @classmethod
    def take(cls, checkpoint: Location) -> CheckpointLease:
        """Hold ``checkpoint`` for this run, or raise ``CheckpointInUseError``."""
        lease = cls(checkpoint, Claim.mine(uuid.uuid4().hex, time.time()))
        lease.directory.make_dirs()
        lease._file.write(lease.claim.to_json(), sync=True)
        others = [c for c in lease._live_claims() if c.id != lease.claim.id]
        if others:
            lease.release()
            holder = min(others, key=lambda c: c.started)
            raise CheckpointInUseError(
                f"the checkpoint {checkpoint} is in use by another run of this pipeline "
                f"({holder.holder()}; its lease is {lease.directory / f'claim-{holder.id}.json'}"
                "). Two runs of one checkpoint would both write its offset log and its sink "
                "tables. Stop that run first (Ctrl-C or SIGTERM; a run that was killed frees "
                f"the checkpoint at once on this host, elsewhere {LEASE_S:.0f} s after it "
                "died), or give this run a checkpoint of its own (pipeline.checkpoint)"
            )
        return lease

    def _live_claims(self) -> list[Claim]:
        now = time.time()
        live = []
        for name in self.directory.children():
            if not (name.startswith("claim-") and name.endswith(".json")):
                continue
            text = (self.directory / name).read_text()
            if text is None:
                continue  # taken back meanwhile
            try:
                claim = Claim.parse(text)
            except (ValueError, KeyError, TypeError):
                continue  # not ours to judge: a claim being written elsewhere is whole
            if claim.id != self.claim.id and claim.stale(now):
                self._remove(self.directory / name)
                continue
            live.append(claim)
        return live

    def renew(self) -> None:
        """Push the claim's expiry on (every ``RENEW_S`` at most); raise
        ``CheckpointInUseError`` when the claim is gone, taken as stale by another run."""
        now = time.time()
        if now - self._renewed < RENEW_S:
            return
        if not self._file.exists():
            raise CheckpointInUseError(
                f"this run's lease on the checkpoint {self.directory} was taken away (not "
                f"renewed for {LEASE_S:.0f} s, the run hung or its storage did not answer) and "
                "another run may hold it now: this run stops. Start it again when no other "
                "run of the pipeline is running"
            )
        self.claim = replace(self.claim, expires=now + LEASE_S)
        self._file.write(self.claim.to_json())
        self._renewed = now

    def release(self) -> None:
        self._remove(self._file)

    @staticmethod
    def _remove(file: Location) -> None:
        try:
            file.fs.delete_file(file.path)
        except FileNotFoundError:
            pass
        except OSError:
            if file.exists():
                raise
