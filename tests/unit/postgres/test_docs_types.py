"""docs/postgres.md's type table is the code's mapping: each row whose PostgreSQL type is
written as SQL (in backticks) maps, through ``column_type``, to the row's Spark type."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkcdc.postgres.types import BUILTIN_TYPES, TypeCatalog, column_type

DOCS = Path(__file__).resolve().parents[3] / "docs" / "postgres.md"
_ROW = re.compile(r"^\| `(?P<sql>[^`]+)` \| `(?P<spark>[^`]+)` \|", re.MULTILINE)
# SQL spellings of the built-in type names (pg_type.typname)
_NAMES = {
    "boolean": "bool",
    "smallint": "int2",
    "integer": "int4",
    "bigint": "int8",
    "real": "float4",
    "double precision": "float8",
    "varchar": "varchar",
    "char": "bpchar",
    '"char"': "char",
    "bit varying": "varbit",
}
_VARHDRSZ_TYPES = {"numeric", "bpchar", "varchar"}


def oid_and_typmod(sql: str) -> tuple[int, int]:
    """A column type as SQL writes it → (type OID, atttypmod), for the table's spellings."""
    array = sql.endswith("[]")
    match = re.fullmatch(r"(?P<name>[^(\[]+?)(?:\((?P<args>[-\d,]+)\))?", sql.removesuffix("[]"))
    assert match, sql
    name = _NAMES.get(match["name"], match["name"])
    args = [int(a) for a in match["args"].split(",")] if match["args"] else []
    typmod = -1
    if name == "numeric" and args:
        precision, scale = [*args, 0][:2]
        typmod = ((precision << 16) | (scale & 0x7FF)) + 4
    elif args:
        typmod = args[0] + (4 if name in _VARHDRSZ_TYPES else 0)
    return BUILTIN_TYPES[name][1 if array else 0], typmod


# the rows of the "Types" section (the page's other tables are not of types)
ROWS = _ROW.findall(DOCS.read_text().split("\n## Types\n", 1)[1].split("\n## ", 1)[0])


def test_the_table_has_its_rows() -> None:
    assert len(ROWS) > 30


@pytest.mark.parametrize(("sql", "spark"), ROWS, ids=[sql for sql, _ in ROWS])
def test_each_documented_type_maps_as_the_docs_say(sql: str, spark: str) -> None:
    type_oid, typmod = oid_and_typmod(sql)
    assert column_type(TypeCatalog.builtin(), type_oid, typmod, where="t.c").spark_type == spark


def test_every_built_in_type_of_the_mapping_is_documented() -> None:
    documented = {
        _NAMES.get(re.sub(r"\(.*|\[\]", "", sql), re.sub(r"\(.*|\[\]", "", sql)) for sql, _ in ROWS
    }
    assert documented >= set(BUILTIN_TYPES)
