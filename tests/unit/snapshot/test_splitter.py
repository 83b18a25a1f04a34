from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcdc.errors import ConfigError
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.keys import in_range, key_sort_key
from sparkcdc.snapshot.splitter import ChunkSplitter, MemoryTable, all_chunks, chunk_key_column
from sparkcdc.snapshot.storage import StateStore


class CountingTable(MemoryTable):
    """A MemoryTable that counts the split queries it answers."""

    def __init__(self, keys: list[Any], sort_key: Any) -> None:
        super().__init__(keys, sort_key)
        self.queries = 0

    def next_chunk_max(self, start: Any, size: int) -> Any:
        self.queries += 1
        return super().next_chunk_max(start, size)


def caseless(value: Any) -> Any:
    return key_sort_key("utf8mb4_bin")(value.casefold())


def plan(splitter: ChunkSplitter) -> list[ChunkRange]:
    return all_chunks(splitter, step=3)


def assert_covers_once(chunks: list[ChunkRange], keys: list[Any], sort_key: Any) -> None:
    assert chunks[0].start is None and chunks[-1].end is None
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for a, b in itertools.pairwise(chunks):
        assert a.end is not None and a.end == b.start  # contiguous
        assert sort_key(a.start) < sort_key(a.end) if a.start is not None else True
    for key in keys:
        owners = [c for c in chunks if in_range(key, c.start, c.end, sort_key)]
        assert len(owners) == 1, (key, owners)


int_keys = st.lists(st.one_of(st.integers(-50, 50), st.none()), max_size=60)


@settings(max_examples=300, deadline=None)
@given(int_keys, st.integers(1, 9), st.booleans(), st.booleans())
def test_integer_chunks_cover_every_key_exactly_once(
    keys: list[int | None], size: int, unique: bool, even_ok: bool
) -> None:
    if unique:
        keys = list(dict.fromkeys(keys))
    k = key_sort_key(None)
    splitter = ChunkSplitter(
        "db.t", MemoryTable(keys, k), chunk_size=size, integer_key=even_ok, unique_key=unique
    )
    chunks = plan(splitter)
    assert splitter.is_complete
    assert_covers_once(chunks, [*keys, -(10**9), 10**9], k)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.text(alphabet="aAbB é_\t", max_size=4), st.none()), max_size=40),
    st.integers(1, 6),
    st.sampled_from(["utf8mb4_bin", "utf8mb4_nopad_bin", "case-insensitive"]),
)
def test_string_chunks_cover_every_key_exactly_once(
    keys: list[str | None], size: int, collation: str
) -> None:
    # a case-insensitive model order stands in for the server's (ties between values)
    k = caseless if collation == "case-insensitive" else key_sort_key(collation)
    chunks = plan(ChunkSplitter("db.t", MemoryTable(keys, k), chunk_size=size))
    assert_covers_once(chunks, [*keys, "", "zzz"], k)


def test_duplicates_of_one_value_move_on_to_the_next_distinct_value() -> None:
    k = key_sort_key(None)
    keys = [1] * 10 + [2] * 10 + [3, 4, 5]
    chunks = plan(ChunkSplitter("db.t", MemoryTable(keys, k), chunk_size=4, unique_key=False))
    assert [(c.start, c.end) for c in chunks] == [(None, 2), (2, 3), (3, None)]


def test_query_splitting_is_lazy() -> None:
    table = CountingTable(list(range(10_000)), key_sort_key(None))
    splitter = ChunkSplitter("db.t", table, chunk_size=10, lookahead=4)
    first = splitter.chunks(0, 2)
    assert len(first) == 2 and table.queries <= 4
    assert not splitter.is_complete
    assert splitter.estimated_total() >= 900


def test_even_split_for_dense_integer_keys() -> None:
    k = key_sort_key(None)
    splitter = ChunkSplitter(
        "db.t", MemoryTable(list(range(1, 101)), k), chunk_size=25, integer_key=True
    )
    chunks = plan(splitter)
    assert splitter.mode == "even"
    assert [(c.start, c.end) for c in chunks] == [(None, 26), (26, 51), (51, 76), (76, None)]


def test_skewed_integer_keys_split_by_query() -> None:
    keys = [*list(range(100)), 10**12]
    splitter = ChunkSplitter(
        "db.t", MemoryTable(keys, key_sort_key(None)), chunk_size=10, integer_key=True
    )
    chunks = plan(splitter)
    assert splitter.mode == "query"
    assert 9 <= len(chunks) <= 12  # sized by rows, not by the huge gap


def test_empty_and_single_row_tables() -> None:
    k = key_sort_key(None)
    empty = plan(ChunkSplitter("db.t", MemoryTable([], k), integer_key=True))
    assert [(c.start, c.end) for c in empty] == [(None, None)]
    single = plan(ChunkSplitter("db.t", MemoryTable([7], k), integer_key=True))
    assert_covers_once(single, [7, 6, 8, None], k)
    only_nulls = plan(ChunkSplitter("db.t", MemoryTable([None, None], k)))
    assert [(c.start, c.end) for c in only_nulls] == [(None, None)]


def test_plan_is_persisted_and_replayed(tmp_path: Path) -> None:
    store = StateStore.open(str(tmp_path), "stream-1")
    k = key_sort_key(None)
    keys = list(range(0, 1000, 3))
    first = ChunkSplitter("db.t", MemoryTable(keys, k), chunk_size=7, store=store)
    head = first.chunks(0, 5)
    # the table changes; a restart must plan the very same chunks it already planned
    changed = MemoryTable(keys + list(range(1, 1000, 3)), k)
    again = ChunkSplitter("db.t", changed, chunk_size=7, store=store)
    assert again.chunks(0, 5) == head
    rest = plan(again)
    assert rest[:5] == head
    assert_covers_once(rest, changed.keys, k)
    files = sorted(p.name for p in (tmp_path / "stream-1" / "plan" / "db.t").iterdir())
    assert "meta.json" in files and any(f.startswith("chunks-") for f in files)
    # a third instance reads the complete plan without asking the table anything
    third = ChunkSplitter("db.t", CountingTable([], k), chunk_size=7, store=store)
    assert third.chunks(0, 10_000) == rest and third.is_complete


def test_even_plan_persists_its_bounds(tmp_path: Path) -> None:
    store = StateStore.open(str(tmp_path), "s")
    k = key_sort_key(None)
    a = plan(
        ChunkSplitter(
            "db.t", MemoryTable(list(range(100)), k), chunk_size=10, integer_key=True, store=store
        )
    )
    b = plan(
        ChunkSplitter(
            "db.t", MemoryTable(list(range(500)), k), chunk_size=10, integer_key=True, store=store
        )
    )
    assert a == b


def _schema(pk: tuple[str, ...]) -> TableSchema:
    cols = (
        Column.from_mysql("id", "int", "int", False),
        Column.from_mysql("v", "int", "int", True),
    )
    return TableSchema("app", "t", cols, pk)


def test_chunk_key_column_choice_and_errors() -> None:
    assert chunk_key_column(_schema(("id",))) == "id"
    assert chunk_key_column(_schema(()), "v") == "v"
    with pytest.raises(ConfigError, match=r"scan\.incremental\.snapshot\.chunk\.key-column"):
        chunk_key_column(_schema(()))
    with pytest.raises(ConfigError, match="Did you mean 'id'"):
        chunk_key_column(_schema(("id",)), "idd")
