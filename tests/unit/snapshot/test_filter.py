from __future__ import annotations

import json

import pytest

from sparkcdc.errors import SnapshotError
from sparkcdc.model.position import BinlogPosition
from sparkcdc.snapshot.filter import (
    InterleavingFilter,
    completed_chunks,
    filter_state,
    pure_table,
    tracked_table,
)

# The filter against the rule of DESIGN.md §2 on the state production builds is the
# property test in test_coordinator.py.


def pos(n: int) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{1 + n // 1000:06d}", n % 1000)


def test_string_keys_use_the_collation() -> None:
    chunk = completed_chunks("B", "d", pos(10), 1, 2)
    state = filter_state({"db.s": tracked_table("utf8mb4_bin", 1, None, [chunk])})
    f = InterleavingFilter.from_state(json.loads(json.dumps(state)))
    assert f.emit("db.s", "B", pos(10))
    assert f.emit("db.s", "c  ", pos(10))
    assert f.emit("db.s", "b", pos(10))
    assert not f.emit("db.s", "B", pos(9))  # before the chunk's HW
    assert not f.emit("db.s", "d", pos(10))
    assert not f.emit("db.s", "A", pos(10))  # below 'B' in code points


def test_a_pure_table_emits_everything() -> None:
    f = InterleavingFilter.from_state(filter_state({"db.t": pure_table()}))
    assert f.passes_whole("db.t", pos(0))
    assert f.emit("db.t", 5, pos(0))


def test_a_table_read_whole_passes_once_past_its_last_hw() -> None:
    chunks = [completed_chunks(None, 5, pos(100), 0, 1), completed_chunks(5, None, pos(300), 1, 2)]
    f = InterleavingFilter.from_state(filter_state({"db.t": tracked_table(None, 2, 2, chunks)}))
    assert f.emit("db.t", 1, pos(100))
    assert not f.emit("db.t", 9, pos(299))
    assert f.emit("db.t", 9, pos(300))
    assert not f.needs_server("db.t", pos(300))


def test_a_chunk_completed_twice_is_an_error() -> None:
    chunk = completed_chunks(None, 5, pos(10), 0, 1)
    state = filter_state({"db.t": tracked_table(None, 1, None, [chunk, chunk])})
    with pytest.raises(SnapshotError, match="completed twice"):
        InterleavingFilter.from_state(state)
