"""SnapshotCoordinator.filter_state: the interleaving filter's state as production builds it.

The property test judges the filter the binlog partition really gets (the coordinator's
state, through a JSON round trip, read by ``InterleavingFilter.from_state``) against the
rule of DESIGN.md §2 written as a plain linear scan.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcdc.errors import SnapshotError
from sparkcdc.model.dialect import dialect_for
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.mysql.protocol.connection import KeptConnection
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.coordinator import SnapshotCoordinator, SnapshotProgress, SnapshotSettings
from sparkcdc.snapshot.filter import InterleavingFilter
from sparkcdc.snapshot.keys import key_sort_key
from sparkcdc.snapshot.reader import ChunkResult
from sparkcdc.snapshot.splitter import ChunkSplitter, MemoryTable
from sparkcdc.snapshot.storage import StateStore

# the splitter and collations are the memory table's: the source is never asked
NO_DIALECT = dialect_for(
    SourceOptions.from_options(
        {
            "hostname": "db",
            "username": "u",
            "password": "p",
            "database-name": "db",
            "scan.startup.mode": "latest-offset",
        }
    )
)
SCHEMA = TableSchema("db", "t", (Column("id", "int", "int(11)", False, "INT"),), ("id",))
SETTINGS = SnapshotSettings(
    chunk_size=2, chunk_key_column=None, chunks_per_batch=0, factor_lower=0.05, factor_upper=1000
)


def pos(n: int) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{1 + n // 1000:06d}", n % 1000)


class MemoryCoordinator(SnapshotCoordinator):
    """The coordinator over an in-memory table: no server to plan chunks or ask collations."""

    def __init__(self, keys: list[int], chunk_size: int, store: StateStore) -> None:
        super().__init__(NO_DIALECT, KeptConnection(_no_server), (SCHEMA,), SETTINGS, store)
        self.memory = memory_splitter(keys, chunk_size)

    def splitter(self, table: str) -> ChunkSplitter:
        assert table == "db.t"
        return self.memory

    def collation(self, table: str) -> str | None:
        return None

    def plan(self) -> list[ChunkRange]:
        return self.memory.chunks(0, 1000)

    def stage(self, chunk: ChunkRange, low: int, high: int) -> None:
        rows = pa.table({"id": pa.array([], pa.int32())})
        self.staging.stage(ChunkResult(chunk, SCHEMA, rows, pos(low), pos(high)))


def memory_splitter(keys: list[int], chunk_size: int) -> ChunkSplitter:
    """The chunk plan of a table holding ``keys``, as production's splitter cuts it."""
    return ChunkSplitter("db.t", MemoryTable(list(keys), key_sort_key(None)), chunk_size=chunk_size)


def _no_server() -> Any:
    raise AssertionError("the coordinator opened a connection")


def chunk_of(plan: list[ChunkRange], key: int | None) -> int:
    """The index of the chunk holding ``key`` (NULL: the first chunk), by linear scan."""
    if key is None:
        return 0
    for chunk in plan:
        if (chunk.start is None or chunk.start <= key) and (chunk.end is None or key < chunk.end):
            return chunk.index
    raise AssertionError(f"no chunk holds {key}")


@st.composite
def batches(draw: st.DrawFn) -> dict[str, Any]:
    """The offset a batch starts from, and the HWs of the chunks the previous batch read."""
    keys = sorted(draw(st.sets(st.integers(-20, 20), max_size=12)))
    chunk_size = draw(st.integers(1, 4))
    plan_size = len(memory_splitter(keys, chunk_size).chunks(0, 1000))
    nxt = draw(st.integers(0, plan_size))
    prev = draw(st.integers(0, nxt))
    # the offset knows the plan's size once its last chunk was taken; before that, maybe
    total_known = nxt == plan_size or draw(st.booleans())
    batch_start = draw(st.integers(0, 2000))
    # every chunk of the previous batch had its LW, so its HW, at or after the batch start
    highs = {i: batch_start + draw(st.integers(0, 1500)) for i in range(prev, nxt)}
    return {
        "keys": keys,
        "chunk_size": chunk_size,
        "offset": {"next": nxt, "prev": prev, "total": plan_size if total_known else None},
        "batch_start": batch_start,
        "highs": highs,
    }


@settings(max_examples=300, deadline=None)
@given(
    batches(),
    st.lists(
        st.tuples(st.one_of(st.none(), st.integers(-25, 25)), st.integers(0, 3000)), max_size=30
    ),
)
def test_filter_of_the_coordinators_state_agrees_with_the_rule(
    batch: dict[str, Any], events: list[tuple[int | None, int]]
) -> None:
    with tempfile.TemporaryDirectory(prefix="sparkcdc-coordinator-") as root:
        coordinator = MemoryCoordinator(
            batch["keys"], batch["chunk_size"], StateStore.open(root, "s")
        )
        plan = coordinator.plan()
        offset, highs = batch["offset"], batch["highs"]
        for index, high in highs.items():
            coordinator.stage(plan[index], batch["batch_start"], high)
        state = coordinator.filter_state({"db.t": offset}, pos(batch["batch_start"]))
    f = InterleavingFilter.from_state(json.loads(json.dumps(state)))
    for key, after in events:
        at = batch["batch_start"] + after  # the batch reads the binlog from its start on
        index = chunk_of(plan, key)
        # read in a batch before the previous one (HW before the batch start: every event
        # of the batch is after it), or in the previous batch and the event at/after its HW
        want = index < offset["prev"] or (index < offset["next"] and at >= highs[index])
        assert f.emit("db.t", key, pos(at)) == want, (key, at, index, state)
        assert f.emit("other.t", key, pos(at))


def test_filter_state_merges_older_chunks_and_reads_the_staged_hws(tmp_path: Any) -> None:
    coordinator = MemoryCoordinator(list(range(1, 13)), 2, StateStore.open(str(tmp_path), "s"))
    plan = coordinator.plan()
    # a chunk of two keys ends at its second: (-inf, 2), then one key per chunk
    assert [(c.start, c.end) for c in plan[:5]] == [(None, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    coordinator.stage(plan[3], 2040, 2100)
    coordinator.stage(plan[4], 2050, 2300)
    state = coordinator.filter_state({"db.t": {"next": 5, "prev": 3}}, pos(2040))
    assert state == {
        "tables": {
            "db.t": {
                "collation": None,
                "done": 5,
                "total": None,
                "chunks": [
                    [None, ["int", "4"], "mysql-bin.000003", 40, 0, 3],  # 0..2 as one
                    [["int", "4"], ["int", "5"], "mysql-bin.000003", 100, 3, 4],
                    [["int", "5"], ["int", "6"], "mysql-bin.000003", 300, 4, 5],
                ],
            }
        }
    }


def test_filter_state_places_the_last_batchs_hws_on_the_server_read(tmp_path: Any) -> None:
    """After a failover the batch start is a place on the new server already; the staged
    HWs (places on the old one) go through ``place``, the merged older entry does not."""
    coordinator = MemoryCoordinator(list(range(1, 13)), 2, StateStore.open(str(tmp_path), "s"))
    plan = coordinator.plan()
    coordinator.stage(plan[3], 2040, 2100)
    coordinator.stage(plan[4], 2050, 5300)
    snapshot = {"db.t": {"next": 5, "prev": 3}}
    assert coordinator.last_highs(snapshot) == [pos(2100), pos(5300)]
    placed = {pos(2100): pos(70), pos(5300): pos(90)}
    state = coordinator.filter_state(snapshot, pos(40), placed.__getitem__)
    assert [c[2:4] for c in state["tables"]["db.t"]["chunks"]] == [
        ["mysql-bin.000001", 40],  # chunks 0..2: the batch start
        ["mysql-bin.000001", 70],
        ["mysql-bin.000001", 90],
    ]


def test_filter_state_of_a_table_read_whole_before_the_batch_is_pure(tmp_path: Any) -> None:
    coordinator = MemoryCoordinator([1, 2, 3], 2, StateStore.open(str(tmp_path), "s"))
    state = coordinator.filter_state({"db.t": {"next": 2, "prev": 2, "total": 2}}, pos(10))
    assert state == {"tables": {"db.t": {"pure": True}}}
    # read whole, but its last chunks in the previous batch: still looked up
    coordinator.stage(coordinator.plan()[1], 5, 20)
    state = coordinator.filter_state({"db.t": {"next": 2, "prev": 1, "total": 2}}, pos(10))
    chunks = state["tables"]["db.t"]["chunks"]
    assert chunks == [
        [None, ["int", "2"], "mysql-bin.000001", 10, 0, 1],
        [["int", "2"], None, "mysql-bin.000001", 20, 1, 2],
    ]


def test_read_as_of_asks_every_chunk_read_and_the_last_ones_hws_at_the_end(
    tmp_path: Any,
) -> None:
    coordinator = MemoryCoordinator([1, 2, 3, 4], 2, StateStore.open(str(tmp_path), "s"))
    plan = coordinator.plan()
    assert len(plan) == 3
    coordinator.stage(plan[1], 10, 10)
    coordinator.stage(plan[2], 10, 12)  # the server moved while it was read
    last = {"db.t": {"next": 3, "prev": 1, "total": 3}}
    assert not coordinator.read_as_of(last, pos(10))
    assert coordinator.read_as_of(last, pos(12))
    assert coordinator.read_as_of(last, None)  # snapshot mode: no binlog to read
    # a chunk left, the plan's size not known yet, or a table the offset does not name
    assert not coordinator.read_as_of({"db.t": {"next": 2, "prev": 1, "total": 3}}, pos(12))
    assert not coordinator.read_as_of({"db.t": {"next": 3, "prev": 1}}, None)
    assert not coordinator.read_as_of({}, None)
    # read whole in batches before: nothing to look up
    assert coordinator.read_as_of({"db.t": {"next": 3, "prev": 3, "total": 3}}, pos(0))
    # its last chunks' metadata gone (state.location cleaned): not known to be read by then
    coordinator.store.delete(coordinator.store.table_path("chunks", "db.t", "000001.meta.json"))
    assert not coordinator.read_as_of(last, pos(12))


def test_filter_state_of_a_table_new_to_the_offset_has_nothing_read(tmp_path: Any) -> None:
    coordinator = MemoryCoordinator([1, 2, 3], 2, StateStore.open(str(tmp_path), "s"))
    state = coordinator.filter_state({}, pos(10))
    assert state == {
        "tables": {"db.t": {"collation": None, "done": 0, "total": None, "chunks": []}}
    }
    assert not InterleavingFilter.from_state(state).emit("db.t", 1, pos(11))


def test_filter_state_without_staged_metadata_is_an_error(tmp_path: Any) -> None:
    coordinator = MemoryCoordinator([1, 2, 3], 2, StateStore.open(str(tmp_path), "s"))
    with pytest.raises(SnapshotError) as caught:
        coordinator.filter_state({"db.t": {"next": 1, "prev": 0}}, pos(10))
    message = " ".join(str(caught.value).split())
    assert "chunk 0 of db.t was read in the previous batch" in message
    # the cause on a cluster: the executor staged it on its own disk
    assert "state.location must be storage the driver and every executor see" in message


def test_release_of_an_offset_naming_a_table_no_longer_captured(tmp_path: Any) -> None:
    """A restarted query commits the batch its last run planned; a table of that offset the
    stream no longer captures (pattern narrowed, or the table dropped while stopped) is
    passed over, and the captured ones are released (before: a KeyError in commitSource)."""
    coordinator = MemoryCoordinator([1, 2, 3, 4], 2, StateStore.open(str(tmp_path), "s"))
    plan = coordinator.plan()
    for chunk in plan:
        coordinator.stage(chunk, 1, 2)
    done = len(plan)
    end = {"db.t": {"next": done, "prev": 0, "total": done}, "db.gone": {"next": 1, "prev": 0}}
    coordinator.release(end)
    staged = [coordinator.staging.load(chunk) for chunk in plan]
    assert all(s is not None and s.rows is None for s in staged)  # staged, rows dropped
    assert "db.gone" not in coordinator.describe(end)


@pytest.mark.parametrize(
    ("chunks", "budget", "batches"),
    [
        (9, 8, [9]),  # the last chunk is within 1/8 of 8: no batch of its own
        (10, 8, [8, 2]),  # the last 2 are not
        (125, 123, [125]),  # the bench table, 123 chunks a batch by default (up to 138)
        (139, 123, [123, 16]),
        (8, 8, [8]),
        (9, 4, [4, 4, 1]),  # 1/8 of 4 is no chunk
        (10, 4, [4, 4, 2]),
    ],
)
def test_a_batch_takes_the_tables_last_few_chunks_with_it(
    tmp_path: Any, chunks: int, budget: int, batches: list[int]
) -> None:
    """Each batch costs seconds besides its rows: the last chunks of a table that fit in
    1/8 more than the budget go with the batch before, never into a batch of their own;
    every chunk is taken once, in order."""
    coordinator = MemoryCoordinator(list(range(chunks + 1)), 2, StateStore.open(str(tmp_path), "s"))
    assert len(coordinator.plan()) == chunks
    offset = coordinator.initial()
    taken = []
    while not read_all(offset):
        before = offset["db.t"]["next"]
        offset = coordinator.advance(offset, budget)
        taken.append(offset["db.t"]["next"] - before)
    assert taken == batches
    assert offset["db.t"]["total"] == chunks


def read_all(offset: dict[str, Any]) -> bool:
    return SnapshotProgress.from_offset(offset["db.t"]).read_all
