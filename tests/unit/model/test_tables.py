from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import ConfigError
from sparkcdc.model.tables import TableFilter, parse_table_patterns

# plain MySQL identifiers: no regex metacharacters, so a name is a pattern matching itself
names = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)


def pairs(text: str, option: str = "tables") -> list[tuple[str, str]]:
    return [(d.pattern, t.pattern) for d, t in parse_table_patterns(text, option=option)]


def table_filter(tables: str | None = None, exclude: str | None = None) -> TableFilter:
    return TableFilter.from_options(
        tables=tables, tables_exclude=exclude, database_name=None, table_name=".*"
    )


# ------------------------------------------------------------------ parse_table_patterns


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app_db.orders", [("app_db", "orders")]),
        (r"app_db.\.*", [("app_db", ".*")]),  # Flink CDC 3.x: '\.' in the table is regex '.'
        (r"app_db.\.*, shop.order_[0-9]+", [("app_db", ".*"), ("shop", "order_[0-9]+")]),
        ("a.b.c", [("a", "b.c")]),  # the first unescaped '.' separates
        (r"db\.x.t", [(r"db\.x", "t")]),  # an escaped '.' in the database stays a literal dot
        (r"a.t\.x", [("a", "t.x")]),
        ("  a.t ,, b.u , ", [("a", "t"), ("b", "u")]),  # blanks and empty items are skipped
    ],
)
def test_table_patterns_split_database_from_table(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert pairs(text) == expected


@pytest.mark.parametrize("text", ["", " ", " , ,"])
def test_empty_table_patterns_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^tables is empty; give at least one"):
        parse_table_patterns(text)


def test_pattern_without_database_names_the_option_and_the_item() -> None:
    with pytest.raises(ConfigError, match=r"^tables\.exclude: 'orders' has no database part"):
        parse_table_patterns("a.b, orders", option="tables.exclude")


@pytest.mark.parametrize(
    ("text", "which"), [("a(.t", "database pattern 'a\\('"), ("a.t[", "table pattern 't\\['")]
)
def test_bad_regex_says_which_part(text: str, which: str) -> None:
    with pytest.raises(ConfigError, match=rf"^tables: {which} is not a valid regular expression"):
        parse_table_patterns(text)


@given(st.lists(st.tuples(names, names), min_size=1, max_size=5))
def test_literal_names_round_trip(items: list[tuple[str, str]]) -> None:
    text = ", ".join(f"{d}.{t}" for d, t in items)
    assert pairs(text) == items


@given(names, names, names)
def test_escaped_dot_in_table_matches_any_character(database: str, head: str, tail: str) -> None:
    ((d, t),) = parse_table_patterns(rf"{database}.{head}\.{tail}")
    assert d.fullmatch(database)
    assert t.fullmatch(f"{head}.{tail}") and t.fullmatch(f"{head}x{tail}")
    assert not t.fullmatch(f"{head}{tail}")


# --------------------------------------------------------------------------- TableFilter


def test_tables_include_minus_exclude() -> None:
    f = table_filter(r"app.\.*, shop.orders", "app.tmp_.*")
    assert f.matches("app", "users")
    assert f.matches("shop", "orders")
    assert not f.matches("app", "tmp_1")  # excluded
    assert not f.matches("shop", "orders_2")  # regexes match the whole name
    assert not f.matches("xapp", "users")
    assert f.describe() == "app..*, shop.orders excluding app.tmp_.*"


def test_database_and_table_name_regexes() -> None:
    f = TableFilter.from_options(
        tables=None, tables_exclude=None, database_name="app|shop", table_name="o.*"
    )
    assert f.matches("app", "orders") and f.matches("shop", "o")
    assert not f.matches("app", "users")
    assert not f.matches("app2", "orders")
    assert f.exclude == ()


def test_tables_win_over_database_name() -> None:
    f = TableFilter.from_options(
        tables="a.t", tables_exclude=None, database_name="b", table_name=".*"
    )
    assert f.matches("a", "t") and not f.matches("b", "t")


def test_nothing_to_capture_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match=r"no tables to capture: set 'tables'.*'database-name'"):
        TableFilter.from_options(
            tables=None, tables_exclude=None, database_name=None, table_name=".*"
        )


def test_bad_exclude_names_its_option() -> None:
    with pytest.raises(ConfigError, match=r"^tables\.exclude: 'nodot' has no database part"):
        table_filter("a.t", "nodot")


def test_bad_table_name_regex_names_its_option() -> None:
    with pytest.raises(ConfigError, match=r"^table-name 'o\(' is not a valid regular"):
        TableFilter.from_options(
            tables=None, tables_exclude=None, database_name="app", table_name="o("
        )


@given(
    st.lists(st.tuples(names, names), min_size=1, max_size=4),
    st.lists(st.tuples(names, names), max_size=3),
    st.tuples(names, names),
)
def test_filter_is_include_minus_exclude(
    include: list[tuple[str, str]], exclude: list[tuple[str, str]], probe: tuple[str, str]
) -> None:
    f = table_filter(
        ",".join(f"{d}.{t}" for d, t in include),
        ",".join(f"{d}.{t}" for d, t in exclude) or None,
    )
    assert f.matches(*probe) == (probe in include and probe not in exclude)
