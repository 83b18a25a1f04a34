from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcdc.model.row_values import arrow_schema
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.keys import in_range, key_order, key_sort_key
from sparkcdc.snapshot.reader import apply_backfill, merge_backfill

K = key_sort_key(None)
Row = tuple[Any, ...]


def workload(seed: int, n_initial: int, n_ops: int) -> tuple[dict[int, Row], list[Any], int]:
    """A random table and a consistent sequence of changes on it (full images)."""
    rng = random.Random(seed)
    table: dict[int, Row] = {}
    for _ in range(n_initial):
        k = rng.randint(0, 40)
        table[k] = (k, rng.randint(0, 9))
    events: list[tuple[dict[int, Row], list[tuple[Row | None, Row | None]]]] = []
    for _ in range(n_ops):
        before_state = dict(table)
        op = rng.random()
        changes: list[tuple[Row | None, Row | None]] = []
        for _ in range(rng.randint(1, 3)):  # multi-row events / transactions
            free = [k for k in range(41) if k not in table]
            if op < 0.3 and free:
                k = rng.choice(free)
                table[k] = (k, rng.randint(0, 9))
                changes.append((None, table[k]))
            elif op < 0.55 and table:
                k = rng.choice(sorted(table))
                new = (k, rng.randint(0, 9))
                changes.append((table[k], new))
                table[k] = new
            elif op < 0.8 and table and free:  # key-changing update
                k, k2 = rng.choice(sorted(table)), rng.choice(free)
                old = table.pop(k)
                table[k2] = (k2, old[1])
                changes.append((old, table[k2]))
            elif table:
                k = rng.choice(sorted(table))
                changes.append((table.pop(k), None))
        events.append((before_state, changes))
    return table, events, 0


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(0, 30),
    st.integers(0, 25),
    st.one_of(st.none(), st.integers(0, 40)),
    st.one_of(st.none(), st.integers(0, 40)),
    st.data(),
)
def test_backfill_gives_the_chunk_at_hw(
    seed: int, n_initial: int, n_ops: int, start: int | None, end: int | None, data: st.DataObject
) -> None:
    final, events, _ = workload(seed, n_initial, n_ops)
    states = [s for s, _ in events] + [final]
    # the SELECT saw the state after some prefix of [LW, HW) (any point in between)
    seen = data.draw(st.integers(0, len(events)))

    def chunk_rows(state: dict[int, Row]) -> dict[int, Row]:
        return {k: r for k, r in state.items() if in_range(k, start, end, K)}

    changes = [c for _, cs in events for c in cs]
    got = apply_backfill(
        chunk_rows(states[seen]), changes, lambda r: in_range(r[0], start, end, K), lambda r: r[0]
    )
    assert got == chunk_rows(final)  # brute force: the chunk of the table at HW

    # the Arrow merge gives the same rows
    schema = TableSchema(
        "db",
        "t",
        (Column.from_mysql("id", "int", "int", False), Column.from_mysql("v", "int", "int", True)),
        ("id",),
    )
    base_rows = list(chunk_rows(states[seen]).values())
    target = arrow_schema(schema.columns)
    base = pa.Table.from_pylist([{"id": r[0], "v": r[1]} for r in base_rows], schema=target)
    merged = merge_backfill(
        base, schema, changes, ChunkRange("db.t", 0, start, end), "id", key_order(None)
    )
    assert sorted(merged.to_pylist(), key=lambda r: r["id"]) == [
        {"id": r[0], "v": r[1]} for r in sorted(chunk_rows(final).values())
    ]


def test_apply_backfill_does_not_mutate_its_input() -> None:
    rows = {1: (1, "a")}
    apply_backfill(rows, [((1, "a"), None)], lambda r: True, lambda r: r[0])
    assert rows == {1: (1, "a")}
