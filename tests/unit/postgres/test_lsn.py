"""``Lsn``: parse/str and to_offset/from_offset round-trip, order follows the number."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import PositionError
from sparkcdc.model.dialect import Position
from sparkcdc.postgres.lsn import Lsn

lsns = st.integers(min_value=0, max_value=(1 << 64) - 1).map(Lsn)


def test_parse_reads_the_two_hexadecimal_halves() -> None:
    assert Lsn.parse("16/B374D848").value == (0x16 << 32) | 0xB374D848
    assert Lsn.parse("0/0") == Lsn(0)
    assert Lsn.parse("ffffffff/ffffffff") == Lsn((1 << 64) - 1)
    assert str(Lsn.parse("0/16b3748")) == "0/16B3748"


@pytest.mark.parametrize("text", ["", "16", "16/", "/1", "g/1", "1/2/3", "123456789/0", "-1/0"])
def test_parse_refuses_what_is_not_an_lsn(text: str) -> None:
    with pytest.raises(PositionError, match="is not an LSN"):
        Lsn.parse(text)


@pytest.mark.parametrize("value", [-1, 1 << 64])
def test_an_lsn_is_unsigned_64_bit(value: int) -> None:
    with pytest.raises(PositionError, match="unsigned 64-bit"):
        Lsn(value)


def test_from_offset_refuses_another_shape() -> None:
    with pytest.raises(PositionError, match="LSN offset"):
        Lsn.from_offset({"file": "mysql-bin.000001"})


@given(lsns)
def test_text_round_trips(lsn: Lsn) -> None:
    assert Lsn.parse(str(lsn)) == lsn


@given(lsns)
def test_offset_round_trips_through_json(lsn: Lsn) -> None:
    assert Lsn.from_offset(json.loads(json.dumps(lsn.to_offset()))) == lsn


@given(lsns, lsns)
def test_order_is_the_order_of_the_wal_position(a: Lsn, b: Lsn) -> None:
    assert (a < b) == (a.value < b.value)
    assert (a == b) == (str(a) == str(b))
    assert sorted([a, b]) == sorted([b, a])


seq_lsns = st.integers(min_value=0, max_value=(1 << 47) - 1).map(Lsn)
rows = st.integers(min_value=0, max_value=1 << 20)


@given(seq_lsns, rows, seq_lsns, rows)
def test_seq_orders_rows_by_commit_lsn_then_row(a: Lsn, i: int, b: Lsn, j: int) -> None:
    """Lsn is a Position: a row's seq follows (commit LSN, row index), the last row slot
    shared by the rows past it, and fits a signed 64-bit number."""
    assert 0 <= a.seq(i) < 1 << 63
    if (a.value, min(i, 65535)) < (b.value, min(j, 65535)):
        assert a.seq(i) < b.seq(j)
    assert a.seqs(i, 3) == [a.seq(i), a.seq(i + 1), a.seq(i + 2)]


def test_an_lsn_past_what_seq_holds_is_refused() -> None:
    with pytest.raises(PositionError, match="128 TiB"):
        Lsn(1 << 47).seq()


def test_lsn_satisfies_the_position_protocol() -> None:
    position: Position = Lsn(5)
    assert position.seq() == Lsn(5).seq() and position < Lsn(6) and position <= Lsn(5)
