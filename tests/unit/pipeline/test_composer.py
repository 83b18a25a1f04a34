from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.model.text import split_top_level
from sparkcdc.pipeline.composer import widest_type

# ------------------------------------------------------------------------ split_top_level


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", ["*"]),
        ("a, b ,c", ["a", "b", "c"]),
        ("*, UPPER(customer) AS customer_uc", ["*", "UPPER(customer) AS customer_uc"]),
        ("concat(a, ',', b) AS ab, x", ["concat(a, ',', b) AS ab", "x"]),
        ('concat(a, ",", b), x', ['concat(a, ",", b)', "x"]),
        ("`x,y`, z", ["`x,y`", "z"]),
        ("a AS `we``ird,c`, b", ["a AS `we``ird,c`", "b"]),  # doubled backquote
        ("'it''s, ok' AS s, b", ["'it''s, ok' AS s", "b"]),  # doubled single quote
        ("f(a, (b, c)), d", ["f(a, (b, c))", "d"]),
        ("CAST(a AS DECIMAL(10,2)) AS a, b", ["CAST(a AS DECIMAL(10,2)) AS a", "b"]),
        ("')', b", ["')'", "b"]),  # a parenthesis in a string does not nest
        ("'(', b", ["'('", "b"]),
        ("a,\n  b", ["a", "b"]),
        ("", []),
        (" , ,", []),  # empty items are dropped
    ],
)
def test_split_top_level(text: str, expected: list[str]) -> None:
    assert split_top_level(text) == expected


def test_split_top_level_respects_backslash_escaped_quotes() -> None:
    assert split_top_level(r"'it\'s, ok' AS s, b") == [r"'it\'s, ok' AS s", "b"]


identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
strings = st.text(alphabet=st.sampled_from('ab ,()`"'), max_size=6).map(lambda s: f"'{s}'")
quoted_names = st.text(alphabet=st.sampled_from("ab ,()'\""), min_size=1, max_size=6).map(
    lambda s: f"`{s}`"
)
expressions = st.recursive(
    identifiers | strings | quoted_names | st.integers(0, 99).map(str),
    lambda inner: (
        st.builds(
            lambda name, args: f"{name}({', '.join(args)})",
            identifiers,
            st.lists(inner, max_size=3),
        )
        | st.builds(lambda e, alias: f"{e} AS {alias}", inner, identifiers)
    ),
    max_leaves=8,
)


@given(st.lists(expressions, min_size=1, max_size=5), st.sampled_from([",", ", ", " ,\n  "]))
def test_split_top_level_returns_the_joined_items(items: list[str], separator: str) -> None:
    assert split_top_level(separator.join(items)) == items


# ----------------------------------------------------------------------------- widest_type


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("INT", "INT", "INT"),
        ("TINYINT", "SMALLINT", "SMALLINT"),
        ("SMALLINT", "INT", "INT"),
        ("INT", "BIGINT", "BIGINT"),
        ("TINYINT", "BIGINT", "BIGINT"),
        ("DECIMAL(10,2)", "INT", "DECIMAL(12,2)"),  # 10 integral digits of INT, scale 2
        ("DECIMAL(10,2)", "BIGINT", "DECIMAL(21,2)"),
        ("DECIMAL(5,0)", "TINYINT", "DECIMAL(5,0)"),
        ("DECIMAL(10,2)", "DECIMAL(8,4)", "DECIMAL(12,4)"),
        ("DECIMAL(38,30)", "BIGINT", "DECIMAL(38,30)"),  # precision is capped at 38
        ("FLOAT", "DOUBLE", "DOUBLE"),
        ("FLOAT", "INT", "DOUBLE"),
        ("DOUBLE", "DECIMAL(10,2)", "DOUBLE"),
        ("TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP"),
        ("DATE", "TIMESTAMP", "STRING"),
        ("BOOLEAN", "INT", "STRING"),
        ("BINARY", "STRING", "STRING"),
        ("FLOAT", "TIMESTAMP", "STRING"),
    ],
)
def test_widest_type(a: str, b: str, expected: str) -> None:
    assert widest_type(a, b) == expected
    assert widest_type(b, a) == expected


decimals = st.integers(1, 38).flatmap(
    lambda p: st.integers(0, p).map(lambda s: f"DECIMAL({p},{s})")
)
types = (
    st.sampled_from(
        [
            "TINYINT",
            "SMALLINT",
            "INT",
            "BIGINT",
            "FLOAT",
            "DOUBLE",
            "BOOLEAN",
            "DATE",
            "TIMESTAMP",
            "TIMESTAMP_NTZ",
            "STRING",
            "BINARY",
        ]
    )
    | decimals
)
_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)")
_DIGITS = {"TINYINT": (3, 0), "SMALLINT": (5, 0), "INT": (10, 0), "BIGINT": (19, 0)}


def exact(t: str) -> tuple[int, int] | None:
    """(precision, scale) of an exact numeric type."""
    m = _DECIMAL.fullmatch(t)
    return (int(m.group(1)), int(m.group(2))) if m else _DIGITS.get(t)


@given(types, types)
def test_widest_type_is_commutative(a: str, b: str) -> None:
    assert widest_type(a, b) == widest_type(b, a)


@given(types)
def test_widest_type_is_idempotent(a: str) -> None:
    assert widest_type(a, a) == a


@given(types, types, types)
def test_widest_type_is_associative(a: str, b: str, c: str) -> None:
    # shards merge in discovery order; the sink table's type must not depend on it
    assert widest_type(widest_type(a, b), c) == widest_type(a, widest_type(b, c))


@given(types, types)
def test_widest_type_absorbs_its_inputs(a: str, b: str) -> None:
    w = widest_type(a, b)
    assert widest_type(a, w) == w and widest_type(w, b) == w


@given(types, types)
def test_widest_of_exact_numerics_holds_both(a: str, b: str) -> None:
    ea, eb = exact(a), exact(b)
    w = widest_type(a, b)
    if ea is None or eb is None:
        return
    ew = exact(w)
    assert ew is not None, w
    precision, scale = ew
    assert 1 <= precision <= 38 and 0 <= scale <= precision
    assert scale == max(ea[1], eb[1])
    wanted = max(ea[0] - ea[1], eb[0] - eb[1]) + scale
    if wanted <= 38:  # else capped, as Spark's DecimalType.bounded does
        assert precision - scale >= max(ea[0] - ea[1], eb[0] - eb[1])
        assert precision == wanted or (a in _DIGITS and b in _DIGITS)
