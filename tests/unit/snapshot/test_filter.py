from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcdc.errors import SnapshotError
from sparkcdc.model.position import BinlogPosition
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.filter import InterleavingFilter
from sparkcdc.snapshot.keys import in_range, key_sort_key

K = key_sort_key(None)


def pos(n: int) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{1 + n // 1000:06d}", n % 1000)


def brute_force(
    plan: list[ChunkRange], done: dict[int, int], total_known: bool, key: int | None, at: int
) -> bool:
    """The rule of DESIGN.md §2 by linear scan."""
    if total_known and len(done) == len(plan) and at >= max(done.values()):
        return True
    for chunk in plan:
        if in_range(key, chunk.start, chunk.end, K):
            return chunk.index in done and at >= done[chunk.index]
    return False


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ChunkRange], dict[int, int], int]:
    bounds = sorted(set(draw(st.lists(st.integers(-20, 20), max_size=6))))
    edges = [None, *bounds, None]
    plan = [ChunkRange("db.t", i, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    done_ids = draw(st.sets(st.sampled_from(range(len(plan)))))
    done = {i: draw(st.integers(0, 3000)) for i in done_ids}
    compact_at = draw(st.integers(0, 3000))
    return plan, done, compact_at


@settings(max_examples=400, deadline=None)
@given(
    scenarios(),
    st.lists(
        st.tuples(st.one_of(st.none(), st.integers(-25, 25)), st.integers(0, 4000)), max_size=30
    ),
)
def test_filter_agrees_with_brute_force(
    scenario: tuple[list[ChunkRange], dict[int, int], int], events: list[tuple[int | None, int]]
) -> None:
    plan, done, compact_at = scenario
    f = InterleavingFilter()
    f.track("db.t", None)
    for index, hw in done.items():
        f.complete(plan[index], pos(hw))
    total_known = plan[-1].index in done
    for key, at in events:
        assert f.emit("db.t", key, pos(at)) == brute_force(plan, done, total_known, key, at)
        assert f.emit("other.t", key, pos(at))
    # compaction at the batch start and a JSON round trip change no decision after it
    f.compact(pos(compact_at))
    g = InterleavingFilter.from_state(json.loads(json.dumps(f.to_state())))
    for key, at in events:
        if at >= compact_at:
            want = brute_force(plan, done, total_known, key, at)
            assert f.emit("db.t", key, pos(at)) == want
            assert g.emit("db.t", key, pos(at)) == want


def test_compaction_keeps_state_small_and_goes_pure() -> None:
    f = InterleavingFilter()
    f.track("db.t", None)
    edges = [None, *range(10, 1000, 10), None]
    plan = [ChunkRange("db.t", i, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    for c in plan[:-1]:
        f.complete(c, pos(100 + c.index))
    f.compact(pos(5000))
    chunks = f.to_state()["tables"]["db.t"]["chunks"]
    assert len(chunks) == 1  # 99 adjacent chunks behind the batch start merged
    assert not f.emit("db.t", 5000, pos(6000))  # the last chunk is not done yet
    f.complete(plan[-1], pos(7000))
    assert not f.emit("db.t", 5000, pos(6500))
    f.compact(pos(7000))
    assert f.to_state()["tables"]["db.t"] == {"pure": True}
    assert not f.is_tracked("db.t")
    assert f.emit("db.t", 5000, pos(7001))


def test_string_keys_use_the_collation() -> None:
    f = InterleavingFilter()
    f.track("db.s", "utf8mb4_bin")
    f.complete(ChunkRange("db.s", 1, "B", "d"), pos(10))
    assert f.emit("db.s", "B", pos(10))
    assert f.emit("db.s", "c  ", pos(10))
    assert not f.emit("db.s", "d", pos(10))
    assert not f.emit("db.s", "A", pos(10))  # below 'B' in code points
    g = InterleavingFilter.from_state(json.loads(json.dumps(f.to_state())))
    assert g.emit("db.s", "b", pos(10))


def test_a_chunk_completed_twice_is_an_error() -> None:
    f = InterleavingFilter()
    f.track("db.t", None)
    f.complete(ChunkRange("db.t", 0, None, 5), pos(10))
    with pytest.raises(SnapshotError, match="completed twice"):
        f.complete(ChunkRange("db.t", 0, None, 5), pos(11))
