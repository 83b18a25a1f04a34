"""The consistency oracle of DESIGN.md §8.

Replays a typed changelog (``_op``, ``_seq`` and the table's columns) into a dict
keyed by primary key, and checks the changelog itself: no ``-U``/``-D`` for a key
that is not present, no ``+I`` for a key that is present, every ``-U`` followed
by its ``+U``, and ``_seq`` non-decreasing per key.

    >>> rows = [{"_op": "+I", "_seq": 1, "id": 1, "v": "a"},
    ...         {"_op": "-U", "_seq": 2, "id": 1, "v": "a"},
    ...         {"_op": "+U", "_seq": 3, "id": 1, "v": "b"}]
    >>> replay(rows, ["id"]).state
    {(1,): {'id': 1, 'v': 'b'}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.model.changelog import METADATA_COLUMNS, OP, SEQ, RowKind


@dataclass
class Replay:
    state: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    rows: int = 0


def replay(changelog: Iterable[Mapping[str, Any]], key_columns: Sequence[str]) -> Replay:
    """Apply a changelog in order; collect every violation of the changelog rules."""
    result = Replay()
    last_seq: dict[tuple[Any, ...], int] = {}
    pending_before: tuple[Any, ...] | None = None
    for row in changelog:
        result.rows += 1
        op = row[OP]
        key = tuple(row[c] for c in key_columns)
        image = {k: v for k, v in row.items() if k not in METADATA_COLUMNS}
        seq = row[SEQ]
        if key in last_seq and seq < last_seq[key]:
            result.violations.append(f"seq went back for key {key}: {last_seq[key]} -> {seq}")
        last_seq[key] = seq
        if pending_before is not None and op != RowKind.UPDATE_AFTER:
            result.violations.append(f"-U of key {pending_before} not followed by +U")
            pending_before = None
        if op == RowKind.INSERT:
            if key in result.state:
                result.violations.append(f"+I of key {key} that is already present (seq {seq})")
            result.state[key] = image
        elif op == RowKind.UPDATE_BEFORE:
            if key not in result.state:
                result.violations.append(f"-U of key {key} that is not present (seq {seq})")
            elif result.state[key] != image:
                result.violations.append(f"-U image of key {key} differs from its last state")
            result.state.pop(key, None)
            pending_before = key
        elif op == RowKind.UPDATE_AFTER:
            if pending_before is None:
                result.violations.append(f"+U of key {key} without a -U before it (seq {seq})")
            pending_before = None
            if key in result.state:
                result.violations.append(f"+U of key {key} that is already present (seq {seq})")
            result.state[key] = image
        elif op == RowKind.DELETE:
            if key not in result.state:
                result.violations.append(f"-D of key {key} that is not present (seq {seq})")
            elif result.state[key] != image:
                result.violations.append(f"-D image of key {key} differs from its last state")
            result.state.pop(key, None)
        else:
            result.violations.append(f"unknown _op {op!r}")
    if pending_before is not None:
        result.violations.append(f"-U of key {pending_before} not followed by +U")
    return result


def compare(
    replayed: Mapping[tuple[Any, ...], Mapping[str, Any]],
    source: Mapping[tuple[Any, ...], Mapping[str, Any]],
) -> list[str]:
    """Differences between the replayed state and the source table (empty when equal)."""
    problems = []
    for key in sorted(set(source) - set(replayed), key=repr)[:20]:
        problems.append(f"missing key {key}")
    for key in sorted(set(replayed) - set(source), key=repr)[:20]:
        problems.append(f"extra key {key}")
    for key in sorted(set(replayed) & set(source), key=repr):
        if dict(replayed[key]) != dict(source[key]):
            problems.append(
                f"key {key}: changelog {dict(replayed[key])} != source {dict(source[key])}"
            )
            if len(problems) > 40:
                break
    return problems
