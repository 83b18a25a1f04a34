"""How a batch's snapshot chunks become Spark tasks (spark/source.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.spark.offsets import MAX_CHUNKS_PER_TASK, spread, tasks_per_table


@given(st.integers(0, 500), st.integers(1, 40))
def test_spread_cuts_items_into_consecutive_even_runs(n: int, parts: int) -> None:
    parts = min(parts, n) or (1 if n else 0)
    items = list(range(n))
    runs = spread(items, parts)
    assert len(runs) == parts
    assert [x for run in runs for x in run] == items
    sizes = [len(run) for run in runs]
    assert not sizes or max(sizes) - min(sizes) <= 1


@given(st.lists(st.integers(0, 2000), min_size=1, max_size=8), st.integers(1, 64))
def test_default_spread_follows_the_parallelism(counts: list[int], parallelism: int) -> None:
    tasks = tasks_per_table(counts, parallelism, None)
    for n, t in zip(counts, tasks, strict=True):
        assert (t == 0) == (n == 0)
        assert t <= n  # never an empty task
        if t:
            assert -(-n // t) <= MAX_CHUNKS_PER_TASK or t == n
    busy = [n for n in counts if n]
    if busy:  # as many tasks as cores where the chunks allow, not one per few chunks
        assert sum(tasks) >= min(parallelism, sum(busy)) // 2
        assert sum(tasks) <= max(parallelism, len(busy)) + len(busy) + sum(
            -(-n // MAX_CHUNKS_PER_TASK) for n in busy
        )


def test_one_table_gets_one_task_per_core() -> None:
    assert tasks_per_table([248], 2, None) == [2]
    assert tasks_per_table([3], 8, None) == [3]
    assert tasks_per_table([10_000], 2, None) == [-(-10_000 // MAX_CHUNKS_PER_TASK)]


def test_a_set_chunks_per_partition_fixes_the_task_size() -> None:
    assert tasks_per_table([248, 5, 0], 2, 16) == [16, 1, 0]
