"""Quoting per SQL dialect and path segments of names, table-driven; the quoted forms are
checked by parsers of each dialect (sqlglot) reading the name back, not only by the text."""

from __future__ import annotations

import os
import re

import pytest
import sqlglot
from sqlglot import exp

from sparkcdc.model.identifiers import (
    name_of_path_segment,
    path_segment,
    quote_ansi,
    quote_mysql,
    quote_mysql_table,
    quote_spark,
)

NAMES = [
    "plain",
    "back`tick",
    "``",
    "quo'te",
    'dou"ble',
    "dot.ted",
    "sp ace",
    "ünï€ode",
    "../../x",
    "pct%s{where}",
    "semi;colon -- comment",
    "x`; DROP TABLE t; --",
]

QUOTED = [
    # (name, MySQL, Spark SQL, ANSI)
    ("plain", "`plain`", "`plain`", '"plain"'),
    ("back`tick", "`back``tick`", "`back``tick`", '"back`tick"'),
    ('dou"ble', '`dou"ble`', '`dou"ble`', '"dou""ble"'),
    ("x`; DROP TABLE t; --", "`x``; DROP TABLE t; --`", "`x``; DROP TABLE t; --`", None),
    ("100%", "`100%`", "`100%`", '"100%"'),
]


@pytest.mark.parametrize(("name", "mysql", "spark", "ansi"), QUOTED)
def test_quoted_forms(name: str, mysql: str, spark: str, ansi: str | None) -> None:
    assert quote_mysql(name) == mysql
    assert quote_spark(name) == spark
    if ansi is not None:
        assert quote_ansi(name) == ansi


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dialect", ["mysql", "spark", "postgres"])
def test_quoted_names_parse_back_as_one_identifier(name: str, dialect: str) -> None:
    quote = {"mysql": quote_mysql, "spark": quote_spark, "postgres": quote_ansi}[dialect]
    statement = sqlglot.parse_one(f"SELECT {quote(name)} FROM {quote(name)}", read=dialect)
    assert isinstance(statement, exp.Select)
    column = statement.expressions[0]
    assert isinstance(column, exp.Column) and column.name == name
    table = statement.find(exp.Table)
    assert isinstance(table, exp.Table) and table.name == name


@pytest.mark.parametrize("name", NAMES)
def test_pyformat_quoting_survives_parameter_formatting(name: str) -> None:
    # pymysql and psycopg run "statement % params" whenever parameters are given
    for quote in (quote_mysql, quote_ansi):
        assert quote(name, pyformat=True) % () == quote(name)
    assert (quote_mysql_table("d%b", name, pyformat=True) % ()) == quote_mysql_table("d%b", name)


SEGMENTS = [
    # plain names keep the paths earlier versions wrote (existing state keeps working)
    ("orders", "orders"),
    ("app.orders", "app.orders"),
    ("Orders_2-b$", "Orders_2-b$"),
    # everything else is escaped with ~XX per UTF-8 byte
    ("../../x", "~2E.~2F..~2Fx"),
    (".hidden", "~2Ehidden"),
    ("..", "~2E."),
    ("a/b\\c", "a~2Fb~5Cc"),
    ("sp ace", "sp~20ace"),
    ("100%", "100~25"),
    ("a~b", "a~7Eb"),
    ("é", "~C3~A9"),
    ("", "~"),
]


@pytest.mark.parametrize(("name", "segment"), SEGMENTS)
def test_path_segments(name: str, segment: str) -> None:
    assert path_segment(name) == segment
    assert name_of_path_segment(segment) == name


@pytest.mark.parametrize("name", [*NAMES, *(n for n, _ in SEGMENTS)])
def test_a_segment_is_one_safe_path_component(name: str) -> None:
    segment = path_segment(name)
    assert "/" not in segment and "\\" not in segment and "%" not in segment
    assert segment not in ("", ".", "..") and not segment.startswith(".")
    assert os.path.normpath(os.path.join("/state", segment)) == f"/state/{segment}"
    assert name_of_path_segment(segment) == name


def test_segments_of_different_names_differ() -> None:
    names = [*NAMES, *(n for n, _ in SEGMENTS), "~", "~7E", "a.b", "a~2Eb", "x" * 300, "x" * 301]
    segments = [path_segment(n) for n in names]
    assert len(set(segments)) == len(set(names))


def test_long_names_are_cut_with_a_digest_within_a_file_name() -> None:
    long_a, long_b = "é" * 64 + "a", "é" * 64 + "b"
    a, b = path_segment(long_a), path_segment(long_b)
    assert a != b
    assert len(a.encode()) <= 200 and "~~" in a
    assert not re.search(r"~[0-9A-F]?$", a.split("~~")[0])  # no escape cut in two
    with pytest.raises(ValueError, match="cannot be decoded"):
        name_of_path_segment(a)
