from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.model.position import BinlogPosition
from sparkcdc.pipeline.runner import _offset_dict, lag_text, offset_caught_up

positions = st.builds(
    BinlogPosition,
    st.integers(1, 5).map(lambda n: f"mysql-bin.{n:06d}"),
    st.integers(4, 10_000),
)
progress = st.fixed_dictionaries(
    {"next": st.integers(0, 6), "prev": st.integers(0, 6), "total": st.none() | st.integers(0, 6)}
)
snapshots = st.dictionaries(st.sampled_from(["a.t1", "a.t2", "b.t3"]), progress, max_size=3)


def offset(position: BinlogPosition, snapshot: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"binlog": position.to_offset(), "snapshot": snapshot or {}}


AT = BinlogPosition("mysql-bin.000002", 500)


# --------------------------------------------------------------------- offset_caught_up


@pytest.mark.parametrize(
    ("snapshot", "binlog", "expected"),
    [
        ({}, AT, True),
        ({}, BinlogPosition("mysql-bin.000002", 499), False),
        ({}, BinlogPosition("mysql-bin.000003", 4), True),  # a later file beats any offset
        ({}, BinlogPosition("mysql-bin.000001", 9999), False),
        ({"a.t": {"next": 3, "prev": 3, "total": 3}}, AT, True),
        ({"a.t": {"next": 4, "prev": 3, "total": 3}}, AT, True),
        ({"a.t": {"next": 2, "prev": 2, "total": 3}}, AT, False),  # a chunk still to read
        ({"a.t": {"next": 3, "prev": 3, "total": None}}, AT, False),  # still splitting
        ({"a.t": {"next": 0, "prev": 0, "total": 0}}, AT, True),  # an empty table
        (
            {"a.t": {"next": 3, "prev": 3, "total": 3}, "a.u": {"next": 1, "prev": 1, "total": 2}},
            AT,
            False,
        ),
    ],
)
def test_caught_up_needs_every_chunk_and_the_target(
    snapshot: dict[str, Any], binlog: BinlogPosition, expected: bool
) -> None:
    assert offset_caught_up(offset(binlog, snapshot), AT) is expected


@pytest.mark.parametrize("value", [None, {}, {"snapshot": {}}])
def test_no_binlog_offset_is_never_caught_up(value: dict[str, Any] | None) -> None:
    assert offset_caught_up(value, AT) is False


def test_caught_up_with_null_snapshot_and_gtids() -> None:
    binlog = {"file": AT.file, "pos": AT.pos, "gtids": "0-1-5", "gtid_flavor": "mariadb"}
    assert offset_caught_up({"binlog": binlog, "snapshot": None}, AT) is True
    assert offset_caught_up({"binlog": binlog, "snapshot": None}, AT.with_gtids(None)) is True


def test_caught_up_reads_text_numbers() -> None:
    snapshot = {"a.t": {"next": "3", "prev": "2", "total": "3"}}
    assert offset_caught_up(offset(AT, snapshot), AT) is True
    snapshot = {"a.t": {"next": "2", "prev": "2", "total": "10"}}  # "2" < "10" as numbers
    assert offset_caught_up(offset(AT, snapshot), AT) is False


@given(positions, snapshots, positions)
def test_caught_up_is_all_chunks_read_and_binlog_past_target(
    position: BinlogPosition, snapshot: dict[str, Any], target: BinlogPosition
) -> None:
    chunks_done = all(p["total"] is not None and p["next"] >= p["total"] for p in snapshot.values())
    expected = chunks_done and position >= target
    value = offset(position, snapshot)
    assert offset_caught_up(value, target) is expected
    # the same through what query progress carries: JSON text or a Python repr
    assert offset_caught_up(_offset_dict(json.dumps(value)), target) is expected
    assert offset_caught_up(_offset_dict(repr(value)), target) is expected


# -------------------------------------------------------------------------- _offset_dict


def test_offset_dict_accepts_dict_json_and_python_repr() -> None:
    value = offset(AT, {"a.t": {"next": 1, "prev": 0, "total": None}})
    assert _offset_dict(value) is value
    assert _offset_dict(json.dumps(value)) == value
    assert _offset_dict(repr(value)) == value  # None, single quotes: not JSON
    assert "None" in repr(value)


@pytest.mark.parametrize("value", [None, 7, "", "[1, 2]", "{not json", "{'a': }", " x", "null"])
def test_offset_dict_gives_none_for_what_is_no_offset(value: Any) -> None:
    assert _offset_dict(value) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_offset_dict_round_trips_json_and_repr(value: dict[str, Any]) -> None:
    assert _offset_dict(json.dumps(value)) == value
    assert _offset_dict(repr(value)) == value


# ------------------------------------------------------------------------------ lag_text


@pytest.mark.parametrize(
    ("position", "server", "expected"),
    [
        (BinlogPosition("b.000002", 10), BinlogPosition("b.000002", 1_234_577), "1,234,567 bytes"),
        (BinlogPosition("b.000002", 10), BinlogPosition("b.000002", 10), "0 bytes"),
        (BinlogPosition("b.000002", 900), BinlogPosition("b.000002", 10), "0 bytes"),  # never < 0
        (
            BinlogPosition("b.000001", 900),
            BinlogPosition("b.000004", 10),
            "3 binlog file(s)",
        ),
    ],
)
def test_lag_text(position: BinlogPosition, server: BinlogPosition, expected: str) -> None:
    assert lag_text(position, server) == expected
