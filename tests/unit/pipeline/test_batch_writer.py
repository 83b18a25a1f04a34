from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.text import split_top_level
from sparkcdc.pipeline.batch_writer import described
from sparkcdc.pipeline.config import TransformRule
from sparkcdc.pipeline.evolution.evolver import Segment
from sparkcdc.pipeline.routes import widest_type
from sparkcdc.sinks.base import SinkColumn, SinkTable

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


# ------------------------------------------------------------------------------ described

AT3 = Column.from_mysql("at", "datetime", "datetime(3)", False)
AT3_NULL = Column.from_mysql("at", "datetime", "datetime(3)", True)
AT6 = Column.from_mysql("at", "datetime", "datetime(6)", False)
ID = Column.from_mysql("id", "int", "int(11)", False)


def _segment(source: str, columns: tuple[Column, ...], mapping: dict[str, str]) -> Segment:
    database, table = source.split(".")
    return Segment(source, None, None, TableSchema(database, table, columns, ("id",)), mapping)


def _rule(projection: str) -> TransformRule:
    return TransformRule(**{"source-table": "db.a", "projection": projection})


SINK = SinkTable(
    "db.t", (SinkColumn("id", "INT", False), SinkColumn("at", "TIMESTAMP_NTZ")), ("id",), ()
)


@pytest.mark.parametrize(
    ("segments", "rules", "expected"),
    [
        # one source table, passed through: described by its column
        ([_segment("db.a", (ID, AT3), {"id": "id", "at": "at"})], {}, AT3),
        ([_segment("db.a", (ID, AT3), {"id": "id", "at": "at"})], {"db.a": _rule("*")}, AT3),
        # a projection that computes the column, or names another column as it
        (
            [_segment("db.a", (ID, AT3), {"id": "id", "at": "at"})],
            {"db.a": _rule("id, at + INTERVAL 1 DAY AS at")},
            None,
        ),
        # merged tables: one definition describes; two (nullability, precision) do not
        (
            [
                _segment("db.a", (ID, AT3), {"id": "id", "at": "at"}),
                _segment("db.b", (ID, AT3), {"id": "id", "at": "at"}),
            ],
            {},
            AT3,
        ),
        (
            [
                _segment("db.a", (ID, AT3), {"id": "id", "at": "at"}),
                _segment("db.b", (ID, AT3_NULL), {"id": "id", "at": "at"}),
            ],
            {},
            None,
        ),
        (
            [
                _segment("db.a", (ID, AT3), {"id": "id", "at": "at"}),
                _segment("db.a", (ID, AT6), {"id": "id", "at": "at"}),  # a type change
            ],
            {},
            None,
        ),
        # a segment (rows before an ADD COLUMN) that does not feed the column: NULL there
        (
            [
                _segment("db.a", (ID,), {"id": "id"}),
                _segment("db.a", (ID, AT3), {"id": "id", "at": "at"}),
            ],
            {},
            None,
        ),
        # fed from another column (lenient kept a renamed column): not this one's values
        ([_segment("db.a", (ID, AT3), {"id": "id"})], {}, None),
    ],
)
def test_described_names_the_source_column_every_row_holds(
    segments: list[Segment], rules: dict[str, TransformRule], expected: Column | None
) -> None:
    assert described(SINK, segments, rules).columns[1].source == expected


def test_described_leaves_a_column_of_another_spark_type_undescribed() -> None:
    # the sink kept STRING (ignore / an excluded change): to_sink casts, values may differ
    sink = SinkTable(
        "db.t", (SinkColumn("id", "INT", False), SinkColumn("at", "STRING")), ("id",), ()
    )
    segment = _segment("db.a", (ID, AT3), {"id": "id", "at": "at"})
    assert described(sink, [segment], {}).columns[1].source is None
    assert described(sink, [segment], {}).columns[0].source == ID
