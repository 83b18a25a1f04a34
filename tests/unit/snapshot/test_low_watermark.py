"""A model check of the chunk read's low-watermark rule over commit/binlog interleavings.

Transactions are written to the binlog in order and committed later, in binlog order
(MariaDB's commit_ordered). A chunk read takes LW, opens the SELECT's read view, takes
HW, and backfills the binlog [LW, HW) onto the SELECT with ``apply_backfill``. The rule
under test: LW = the end of the committed prefix of the binlog (what
``binlog_snapshot_position`` reports) gives the state at HW for every interleaving;
LW = the end of the binlog (SHOW MASTER STATUS) does not.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcdc.snapshot.reader import apply_backfill

Row = tuple[int, int]
Txn = list[tuple[Row | None, Row | None]]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Txn], list[str], int, int, int]:
    """Transactions on keys 0..3 with full images, and a schedule of steps: each ``w``
    writes the next transaction to the binlog, each ``c`` commits the oldest written one;
    the read's LW, SELECT and HW happen after steps ``a <= b <= c``."""
    state: dict[int, Row] = {}
    txns: list[Txn] = []
    for n in range(draw(st.integers(1, 6))):
        txn: Txn = []
        for _ in range(draw(st.integers(1, 3))):
            key = draw(st.integers(0, 3))
            old = state.get(key)
            if old is not None and draw(st.booleans()):
                txn.append((old, None))
                del state[key]
            else:
                new = (key, n)
                txn.append((old, new))
                state[key] = new
        txns.append(txn)
    writes = ["w"] * len(txns)
    schedule: list[str] = []
    written = committed = 0
    while committed < len(txns):
        can_write = written < len(txns)
        can_commit = committed < written
        if can_write and (not can_commit or draw(st.booleans())):
            schedule.append("w")
            written += 1
        else:
            schedule.append("c")
            committed += 1
    assert schedule.count("w") == len(writes)
    steps = sorted(draw(st.lists(st.integers(0, len(schedule)), min_size=3, max_size=3)))
    return txns, schedule, steps[0], steps[1], steps[2]


def replay(txns: list[Txn], upto: int) -> dict[int, Row]:
    state: dict[int, Row] = {}
    for txn in txns[:upto]:
        for before, after in txn:
            if before is not None:
                state.pop(before[0], None)
            if after is not None:
                state[after[0]] = after
    return state


def chunk_read(
    txns: list[Txn], schedule: list[str], lw_at: int, select_at: int, hw_at: int, safe: bool
) -> tuple[dict[int, Row], dict[int, Row]]:
    """(the chunk the read yields, the table's state at its HW), in transaction counts."""

    def counts(step: int) -> tuple[int, int]:
        done = schedule[:step]
        return done.count("w"), done.count("c")

    written, committed = counts(lw_at)
    low = committed if safe else written  # binlog_snapshot_position vs SHOW MASTER STATUS
    seen = replay(txns, counts(select_at)[1])  # the read view: committed transactions
    high = counts(hw_at)[0]
    changes = [c for txn in txns[low:high] for c in txn]
    got = apply_backfill(seen, changes, lambda row: True, lambda row: row[0])
    return got, replay(txns, high)


@settings(max_examples=500, deadline=None)
@given(histories())
def test_lw_at_the_committed_prefix_is_exact(
    history: tuple[list[Txn], list[str], int, int, int],
) -> None:
    got, want = chunk_read(*history, safe=True)
    assert got == want


def test_lw_at_the_binlog_end_loses_a_written_uncommitted_transaction() -> None:
    txns: list[Txn] = [[(None, (1, 0))]]
    schedule = ["w", "c"]  # written, then committed after the SELECT
    got, want = chunk_read(txns, schedule, 1, 1, 2, safe=False)
    assert got != want  # the row of key 1 is lost: the gap the safe LW closes
    assert chunk_read(txns, schedule, 1, 1, 2, safe=True)[0] == want
