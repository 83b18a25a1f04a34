"""The PostgreSQL type mapping and the text-value decoder, without a server (the values
against the real server are in tests/integration/test_postgres_types.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import SourceError
from sparkcdc.postgres.pgoutput import UNCHANGED_TOAST, Relation, RelationColumn, ReplicaIdentity
from sparkcdc.postgres.types import (
    BUILTIN_TYPES,
    DecimalHandlingMode,
    PgType,
    TypeCatalog,
    ValueKind,
    column_type,
    numeric_digits,
)
from sparkcdc.postgres.values import (
    RowsDecoder,
    ValueDecodeError,
    days_from_civil,
    decode_text_column,
    parse_array,
    timestamp_micros,
)

CATALOG = TypeCatalog.builtin()


def oid(name: str, *, array: bool = False) -> int:
    return BUILTIN_TYPES[name][1 if array else 0]


def numeric_typmod(precision: int, scale: int) -> int:
    return ((precision << 16) | (scale & 0x7FF)) + 4


def spark(type_oid: int, typmod: int = -1, mode: str = "precise") -> str:
    return column_type(
        CATALOG, type_oid, typmod, where="t.c", mode=DecimalHandlingMode(mode)
    ).spark_type


@pytest.mark.parametrize(
    ("typmod", "mode", "expected"),
    [
        (numeric_typmod(10, 2), "precise", "DECIMAL(10,2)"),
        (numeric_typmod(38, 38), "precise", "DECIMAL(38,38)"),
        (numeric_typmod(39, 2), "precise", "STRING"),
        (numeric_typmod(2, -3), "precise", "DECIMAL(5,0)"),
        (numeric_typmod(3, 5), "precise", "DECIMAL(5,5)"),
        (-1, "precise", "DECIMAL(38,18)"),
        (-1, "string", "STRING"),
        (numeric_typmod(10, 2), "string", "STRING"),
        (-1, "double", "DOUBLE"),
    ],
)
def test_numeric_maps_by_its_typmod_and_the_decimal_handling_mode(
    typmod: int, mode: str, expected: str
) -> None:
    assert spark(oid("numeric"), typmod, mode) == expected


def test_numeric_digits_reads_a_negative_scale() -> None:
    assert numeric_digits(numeric_typmod(2, -3)) == (2, -3)


def test_domains_enums_and_their_arrays_map_through_the_catalog() -> None:
    catalog = TypeCatalog(
        {
            **CATALOG.types,
            90001: PgType(
                90001, "price", "d", base=oid("numeric"), base_typmod=numeric_typmod(7, 3)
            ),
            90002: PgType(90002, "_price", "A", element=90001),
            90003: PgType(90003, "mood", "e"),
            90004: PgType(90004, "_mood", "A", element=90003),
            90005: PgType(90005, "point", "b"),
        }
    )
    assert column_type(catalog, 90002, -1, where="t.c").spark_type == "ARRAY<DECIMAL(7,3)>"
    assert column_type(catalog, 90004, -1, where="t.c").spark_type == "ARRAY<STRING>"
    with pytest.raises(SourceError, match=r"column t\.c has PostgreSQL type 'point'"):
        column_type(catalog, 90005, -1, where="t.c")
    with pytest.raises(SourceError, match=r"column t\.c has type OID 4242.*TypeCatalog\.load"):
        column_type(catalog, 4242, -1, where="t.c")


def test_bit_one_is_a_boolean_and_longer_bits_are_text() -> None:
    assert spark(oid("bit"), 1) == "BOOLEAN"
    assert spark(oid("bit"), 12) == "STRING"
    assert spark(oid("varbit"), 12) == "STRING"


def decode(type_oid: int, values: list[str | None], typmod: int = -1) -> list[object]:
    column = column_type(CATALOG, type_oid, typmod, where="t.c")
    return decode_text_column(values, column, "t.c").to_pylist()  # type: ignore[arg-type]


def test_timestamptz_offsets_are_applied_to_the_instant() -> None:
    got = decode(oid("timestamptz"), ["2024-01-01 05:30:00+05:30", "2023-12-31 20:00:00-04"])
    utc = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert [v.astimezone(dt.UTC) for v in got] == [utc, utc]  # type: ignore[union-attr]
    assert decode(oid("timestamptz"), ["1901-12-13 20:45:52+05:53:28"])[0] == dt.datetime(
        1901, 12, 13, 14, 52, 24, tzinfo=dt.UTC
    )


def test_a_text_form_other_than_the_pinned_one_is_refused() -> None:
    with pytest.raises(ValueDecodeError, match=r"t\.c: received '29\.02\.2024'.*DateStyle ISO"):
        decode(oid("date"), ["29.02.2024"])
    with pytest.raises(ValueDecodeError, match=r"received '\\\\000'.*bytea_output hex"):
        decode(oid("bytea"), ["\\000"])
    with pytest.raises(ValueDecodeError, match=r"expected a TIMESTAMP_NTZ value"):
        decode(oid("timestamp"), ["2024-01-01 00:00:00+00"])


def test_an_unchanged_toast_value_is_refused_never_decoded() -> None:
    column = column_type(CATALOG, oid("text"), -1, where="t.c")
    with pytest.raises(ValueDecodeError, match=r"t\.c: received UNCHANGED_TOAST.*last image"):
        decode_text_column(["a", UNCHANGED_TOAST], column, "t.c")


def test_integers_out_of_their_type_are_named() -> None:
    with pytest.raises(ValueDecodeError, match=r"t\.c: received '70000', expected a SMALLINT"):
        decode(oid("int2"), ["1", None, "70000"])


@pytest.mark.parametrize(
    ("text", "elements"),
    [
        ("{}", []),
        ('{NULL,null,"NULL"}', [None, None, "NULL"]),
        ('{"a,b","c\\"d","e\\\\f",""}', ["a,b", 'c"d', "e\\f", ""]),
        ("{☃,x}", ["☃", "x"]),
    ],
)
def test_parse_array_unquotes_elements(text: str, elements: list[str | None]) -> None:
    assert parse_array(text) == elements


@pytest.mark.parametrize("text", ["{{1},{2}}", "[0:1]={1,2}", "1,2", '{"a"b}'])
def test_parse_array_refuses_what_it_does_not_map(text: str) -> None:
    with pytest.raises(ValueError):
        parse_array(text)


def test_array_values_and_null_arrays_keep_their_places() -> None:
    got = decode(oid("int4", array=True), ["{1,NULL}", None, "{}", "{3}"])
    assert got == [[1, None], None, [], [3]]
    column = column_type(CATALOG, oid("int4", array=True), -1, where="t.c")
    assert column.kind is ValueKind.ARRAY
    assert column.arrow_type == pa.list_(pa.int32())


@given(st.dates())
def test_days_from_civil_agrees_with_python_dates(day: dt.date) -> None:
    assert days_from_civil(day.year, day.month, day.day) == (day - dt.date(1970, 1, 1)).days


def test_dates_before_year_one_count_year_zero() -> None:
    # 1 BC is year 0 (a leap year in the proleptic Gregorian calendar)
    column = column_type(CATALOG, oid("date"), -1, where="t.c")
    days = decode_text_column(["0001-12-31 BC", "0001-01-01"], column, "t.c").cast(pa.int32())
    assert days.to_pylist() == [-719163, -719162]
    assert days_from_civil(0, 3, 1) - days_from_civil(0, 2, 28) == 2


def render_array(elements: list[str | None]) -> str:
    """An array's text form as array_out writes it: elements quoted when they need it."""
    parts = []
    for element in elements:
        if element is None:
            parts.append("NULL")
        elif element == "" or element.upper() == "NULL" or any(c in element for c in '{}," \\'):
            parts.append('"' + element.replace("\\", "\\\\").replace('"', '\\"') + '"')
        else:
            parts.append(element)
    return "{" + ",".join(parts) + "}"


@given(st.lists(st.none() | st.text(alphabet=st.characters(blacklist_characters="\0"))))
def test_parse_array_reads_back_what_array_out_writes(elements: list[str | None]) -> None:
    assert parse_array(render_array(elements)) == elements


def pg_timestamp(moment: dt.datetime, offset_minutes: int | None) -> str:
    """A timestamp as PostgreSQL's ISO output writes it (fraction trimmed, offset +HH[:MM])."""
    text = f"{moment.year:04d}-" + moment.strftime("%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    if offset_minutes is not None:
        sign = "+" if offset_minutes >= 0 else "-"
        hours, minutes = divmod(abs(offset_minutes), 60)
        text += f"{sign}{hours:02d}" + (f":{minutes:02d}" if minutes else "")
    return text


@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
            st.none() | st.integers(min_value=-15 * 60, max_value=15 * 60),
        ),
        max_size=20,
    ),
    st.sampled_from(["infinity", "-infinity", "0044-03-15 12:00:00 BC", "12345-01-01 00:00:00"]),
)
def test_arrows_cast_and_the_python_parser_agree_on_timestamps(
    moments: list[tuple[dt.datetime, int | None]], rare: str
) -> None:
    for with_zone, name in ((True, "timestamptz"), (False, "timestamp")):
        texts: list[str | None] = [
            pg_timestamp(moment, (offset or 0) if with_zone else None) for moment, offset in moments
        ]
        rare_text = rare + ("+00" if with_zone and "BC" not in rare and "inf" not in rare else "")
        rare_text = rare_text.replace(" BC", "+00 BC") if with_zone else rare_text
        texts[len(texts) // 2 : len(texts) // 2] = [rare_text, None]
        column = column_type(CATALOG, oid(name), -1, where="t.c")
        decoded = decode_text_column(texts, column, "t.c").cast(pa.int64()).to_pylist()
        assert decoded == [
            None if text is None else timestamp_micros(text, with_zone=with_zone) for text in texts
        ]


def test_rows_decode_into_a_record_batch_of_the_relations_columns() -> None:
    relation = Relation(
        None,
        16384,
        "public",
        "items",
        ReplicaIdentity.DEFAULT,
        (
            RelationColumn("id", oid("int8"), -1, True),
            RelationColumn("price", oid("numeric"), numeric_typmod(10, 2), False),
            RelationColumn("tags", oid("text", array=True), -1, False),
        ),
    )
    decoder = RowsDecoder.for_relation(relation, CATALOG)
    batch = decoder.record_batch([("1", "9.50", '{a,"b c"}'), ("2", None, None)])
    assert batch.schema.names == ["id", "price", "tags"]
    assert batch.to_pylist() == [
        {"id": 1, "price": Decimal("9.50"), "tags": ["a", "b c"]},
        {"id": 2, "price": None, "tags": None},
    ]
    with pytest.raises(ValueDecodeError, match=r"public\.items\.price: received 'NaN'"):
        decoder.record_batch([("3", "NaN", None)])
    with pytest.raises(ValueDecodeError, match=r"a row of public\.items has 2 values, expected 3"):
        decoder.record_batch([("3", "1")])
