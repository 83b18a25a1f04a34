from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import SnapshotError
from sparkcdc.snapshot.chunks import ChunkRange, decode_key, encode_key
from sparkcdc.snapshot.keys import (
    PaddedWeights,
    chunk_membership,
    in_range,
    is_pad_space,
    key_order,
    key_sort_key,
    python_orders,
)

key_values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.binary(),
    st.dates(),
    st.datetimes(),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.timedeltas(),
    st.floats(allow_nan=False),
)


@given(key_values)
def test_key_json_round_trip_is_lossless(value: object) -> None:
    back = decode_key(json.loads(json.dumps(encode_key(value))))
    assert back == value
    assert type(back) is type(value)
    if isinstance(value, Decimal):
        assert str(back) == str(value)  # scale kept


@given(key_values, key_values, st.integers(0, 10_000))
def test_chunk_range_round_trip(start: object, end: object, index: int) -> None:
    chunk = ChunkRange("db.t", index, start, end)
    assert ChunkRange.from_json(chunk.to_json()) == chunk


def test_unknown_key_type_is_a_clear_error() -> None:
    with pytest.raises(SnapshotError, match=r"chunk\.key-column"):
        encode_key(object())
    with pytest.raises(SnapshotError, match="unknown type tag"):
        decode_key(["nope", "1"])


def _padded_cmp(a: str, b: str) -> int:
    """Brute force PAD SPACE: pad the shorter with spaces, compare code points."""
    n = max(len(a), len(b))
    pa_, pb = a.ljust(n), b.ljust(n)
    return (pa_ > pb) - (pa_ < pb)


small_text = st.text(alphabet=" \t\x01abAB_é", max_size=6)


@given(small_text, small_text)
def test_pad_space_matches_brute_force(a: str, b: str) -> None:
    k = key_sort_key("utf8mb4_bin")
    want = _padded_cmp(a, b)
    ka, kb = k(a), k(b)
    assert (ka < kb) == (want < 0)
    assert (ka == kb) == (want == 0)
    assert (ka > kb) == (want > 0)
    if ka == kb:
        assert hash(ka) == hash(kb)


@given(st.lists(small_text, max_size=12))
def test_padded_weights_sort_is_a_total_order(values: list[str]) -> None:
    k = key_sort_key("utf8mb4_bin")
    by_key = sorted(values, key=k)
    by_cmp = sorted(values, key=functools.cmp_to_key(lambda a, b: k(a)._cmp(k(b))))
    assert [k(v) for v in by_key] == [k(v) for v in by_cmp]
    for x, y in itertools.pairwise(by_key):
        assert k(x) <= k(y)


@pytest.mark.parametrize(
    ("collation", "a", "b", "relation"),
    [
        ("utf8mb4_bin", "a ", "a", "="),
        ("utf8mb4_bin", "a\t", "a", "<"),
        ("utf8mb4_bin", "B", "a", "<"),
        ("utf8mb4_bin", "a", "A", ">"),
        ("utf8mb4_nopad_bin", "a ", "a", ">"),
        ("utf8mb4_0900_bin", "a ", "a", ">"),
        ("ascii_bin", "a ", "a", "="),
        (None, 10, 9, ">"),
        (None, b"\x00\xff", b"\x01", "<"),
    ],
)
def test_collation_examples(collation: str | None, a: object, b: object, relation: str) -> None:
    k = key_sort_key(collation)
    got = "<" if k(a) < k(b) else ">" if k(b) < k(a) else "="
    assert got == relation


def test_pad_space_names() -> None:
    assert is_pad_space("utf8mb4_bin")
    assert not is_pad_space("utf8mb4_general_nopad_ci")
    assert not is_pad_space("utf8mb4_0900_bin")
    assert isinstance(key_sort_key("utf8mb3_bin")("x"), PaddedWeights)


@pytest.mark.parametrize(
    "collation",
    [
        "utf8mb4_general_ci",
        "utf8mb4_unicode_ci",
        "utf8mb4_uca1400_ai_ci",
        "latin1_bin",
        "latin1_swedish_ci",
    ],
)
def test_collations_python_cannot_order_go_to_the_server(collation: str) -> None:
    assert not python_orders(collation)
    with pytest.raises(SnapshotError, match="only the server knows"):
        key_sort_key(collation)
    order = key_order(collation)  # no connection given: ranking says what is missing
    with pytest.raises(SnapshotError, match="no connection"):
        order.ranker(["a"]).ranks(["b"])


@given(
    st.lists(small_text, max_size=8),
    st.lists(st.one_of(st.none(), small_text), max_size=8),
    st.data(),
)
def test_membership_of_python_orders_is_in_range(
    bounds: list[str], keys: list[str | None], data: st.DataObject
) -> None:
    k = key_sort_key("utf8mb4_bin")
    ordered = sorted(bounds, key=k)
    start = data.draw(st.one_of(st.none(), st.sampled_from(ordered))) if ordered else None
    end = data.draw(st.one_of(st.none(), st.sampled_from(ordered))) if ordered else None
    got = chunk_membership(key_order("utf8mb4_bin"), start, end, keys)
    assert got == {key: in_range(key, start, end, k) for key in keys}


def test_in_range_null_goes_to_first_chunk_only() -> None:
    k = key_sort_key(None)
    assert in_range(None, None, 3, k)
    assert in_range(None, None, None, k)
    assert not in_range(None, 3, None, k)
    assert in_range(3, 3, 4, k) and not in_range(4, 3, 4, k)
