"""The comparison of a sink table with its source tables, phase by phase: bucket sums, the
digests of differing buckets, the fields of suspect keys; and the wait for the pipeline to
pass the source position each phase read.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparkcdc.locations import Location, as_location
from sparkcdc.pipeline.progress import StreamOffsets, offset_caught_up
from sparkcdc.pipeline.verify.columns import ColumnPlan
from sparkcdc.pipeline.verify.report import TableReport

log = logging.getLogger(__name__)


KEY_ROUNDS = 6

RESTART_GRACE_S = 10.0

_POLL_S = 0.5

Sums = dict[int, tuple[int, int]]  # bucket -> (rows, sum of row hashes)


@dataclass(frozen=True)
class Digest:
    """One row seen in the drill-down: its key's canonical values, hash, and (source side)
    its key as the database has it, to read it again by key."""

    key: tuple[str | None, ...]
    hash: int
    raw: tuple[Any, ...] | None = None
    source: int = 0  # which member table of the sink table (source side)


class Side(Protocol):
    """One side of the comparison of a sink table."""

    def buckets(self, n: int) -> Sums: ...

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]: ...

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]: ...


class UnionSide:
    """The source tables a sink table merges: the sink should hold their union."""

    def __init__(self, members: Sequence[Side]) -> None:
        self.members = members

    def buckets(self, n: int) -> Sums:
        sums: Sums = {}
        for member in self.members:
            for bucket, (rows, hashes) in member.buckets(n).items():
                was = sums.get(bucket, (0, 0))
                sums[bucket] = (was[0] + rows, was[1] + hashes)
        return sums

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]:
        out: dict[str, Digest] = {}
        for member in self.members:
            out.update(member.digests(n, buckets))
        return out

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for member in self.members:
            out.update(member.fields(digests))
        return out


def wait_for_pipeline(
    checkpoint: str | Location, position: Any, timeout_s: float, stream: StreamOffsets
) -> str | None:
    """Wait until the pipeline's committed offset has passed ``position`` (a source position
    its offsets hold as ``stream`` says); None when it has, else what stopped the wait (not
    running, or the timeout)."""
    from sparkcdc.pipeline.status import STATUS_FILE, committed_offset

    deadline = time.monotonic() + timeout_s
    # a pipeline restarting (scheduled runs, a schema restart) is not running for a moment
    stopped_since: float | None = None
    while True:
        committed = committed_offset(checkpoint)
        if committed is not None and offset_caught_up(committed[1], position, stream):
            return None
        status_file = as_location(checkpoint) / STATUS_FILE
        try:
            running = bool(json.loads(status_file.read_text() or "{}").get("running"))
        except (OSError, ValueError):
            running = False
        now = time.monotonic()
        stopped_since = None if running else (stopped_since or now)
        if stopped_since is not None and now - stopped_since >= min(RESTART_GRACE_S, timeout_s):
            got = "no committed batch" if committed is None else f"batch {committed[0]}"
            return (
                f"the pipeline is not running ({status_file} says so) and its committed "
                f"offset ({got}) has not reached source position {position}: differences "
                "may be changes it has not written yet; run it, then verify again"
            )
        if now > deadline:
            return (
                f"the pipeline's committed offset did not reach source position {position} "
                f"within {timeout_s:.0f}s: differences may be changes still in flight"
            )
        time.sleep(_POLL_S)


@dataclass
class TableCheck:
    """The comparison of one sink table, phase by phase (see the module docstring)."""

    plan: ColumnPlan
    source: Side
    sink: Side
    report: TableReport
    want: Sums = field(default_factory=dict)
    expected: dict[str, Digest] = field(default_factory=dict)
    suspects: dict[str, Digest] = field(default_factory=dict)
    source_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # per key, what the last look saw: (source fields, sink fields), None where absent
    seen: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def read_source_buckets(self) -> None:
        self.want = self.source.buckets(self.report.buckets)

    def read_sink_buckets(self) -> set[int]:
        have = self.sink.buckets(self.report.buckets)
        want = self.want
        self.report.source_rows = sum(r for r, _ in want.values())
        self.report.sink_rows = sum(r for r, _ in have.values())
        differing = {b for b in set(want) | set(have) if want.get(b) != have.get(b)}
        self.report.differing_buckets = len(differing)
        return differing

    def read_source_digests(self, buckets: set[int]) -> None:
        self.expected = self.source.digests(self.report.buckets, buckets)

    def read_sink_digests(self, buckets: set[int]) -> None:
        got = self.sink.digests(self.report.buckets, buckets)
        expected = self.expected
        suspects = {k: d for k, d in expected.items() if k not in got or got[k].hash != d.hash}
        suspects.update({k: d for k, d in got.items() if k not in expected})
        self.suspects = suspects
        self.report.rechecked = len(suspects)

    def read_source_fields(self) -> None:
        self.source_fields = self.source.fields(self.suspects)

    def read_sink_fields(self) -> None:
        """Classify the suspects. The sink (past the first source read) is compared with
        the source read before and again after it. A key is reported when two looks in a
        row saw the same source row, unchanged during each look, and the same other sink
        row; any other key is in flight and looked at again in the next round."""
        report = self.report
        sink_fields = self.sink.fields(self.suspects)
        after = self.source.fields(self.suspects)
        names, key_names = self.plan.names, self.plan.table.primary_key
        still: dict[str, Digest] = {}
        for key_text, digest in self.suspects.items():
            mine, theirs = self.source_fields.get(key_text), sink_fields.get(key_text)
            if mine == theirs and mine == after.get(key_text):
                self.seen.pop(key_text, None)
                continue  # equal (or gone on both sides) now
            seen, self.seen[key_text] = self.seen.get(key_text), (mine, theirs)
            if mine != after.get(key_text) or seen != (mine, theirs):
                # changed while looked at (or a change that came and went, or this first
                # look): compared again after the pipeline catches up once more
                still[key_text] = digest
                continue
            key = dict(zip(key_names, digest.key, strict=True))
            if theirs is None:
                report.missing.append({"key": key})
            elif mine is None:
                report.extra.append({"key": key})
            else:
                columns = [n for n, a, b in zip(names, mine, theirs, strict=True) if a != b]
                report.different.append({"key": key, "columns": columns})
        for kind in (report.missing, report.extra, report.different):
            kind.sort(key=lambda f: json.dumps(f["key"], default=str))
        self.suspects = still
        report.unsettled = [
            {"key": dict(zip(key_names, d.key, strict=True))} for d in still.values()
        ]


def compare(checks: Sequence[TableCheck], caught_up: Callable[[], str]) -> None:
    """Run the phases over every table together: each reads the sources, waits once for the
    pipeline to pass what they saw (``caught_up``: the source position waited for), then
    reads the sinks."""
    began = time.perf_counter()
    for check in checks:
        check.read_source_buckets()
    log.info("source buckets read in %.1fs", time.perf_counter() - began)
    position = caught_up()
    for check in checks:
        check.report.position = position
    began = time.perf_counter()
    differing = {id(c): c.read_sink_buckets() for c in checks}
    log.info("sink buckets read in %.1fs", time.perf_counter() - began)
    checks = [c for c in checks if differing[id(c)]]
    for check in checks:
        check.read_source_digests(differing[id(check)])
    if checks:
        caught_up()
    for check in checks:
        check.read_sink_digests(differing[id(check)])
    for _ in range(KEY_ROUNDS):  # a key written again meanwhile is looked at again
        checks = [c for c in checks if c.suspects]
        if not checks:
            return
        for check in checks:
            check.read_source_fields()
        caught_up()
        for check in checks:
            check.read_sink_fields()
