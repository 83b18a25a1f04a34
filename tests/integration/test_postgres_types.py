"""Every type of the PostgreSQL → Spark mapping, value for value (issue 59, item 4).

Values are written through SQL, read from the replication stream with sparkcdc's client,
decoded into Arrow (``postgres.values``) and compared with what ``SELECT`` returns through
psycopg, the independent reader. Where psycopg has no Python value (dates of year 0 or
after 9999, ±infinity), the server computes the reference itself (days or microseconds
since the epoch). The database's own settings are made odd (German dates, SQL-standard
intervals, escaped bytea, a non-UTC zone): the replication connection must pin its own.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from sparkcdc.errors import SourceError
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import Insert, Relation
from sparkcdc.postgres.replication import (
    SESSION_SETTINGS,
    PostgresEndpoint,
    ReplicationConnection,
)
from sparkcdc.postgres.slots import drop_slot, ensure_publication, ensure_slot
from sparkcdc.postgres.transactions import Transaction
from sparkcdc.postgres.types import (
    BUILTIN_TYPES,
    DecimalHandlingMode,
    TypeCatalog,
)
from sparkcdc.postgres.values import RowsDecoder, ValueDecodeError
from sparkcdc_dev.devpostgres import DevPostgres

pytestmark = pytest.mark.integration

_names = itertools.count()


def days(e: str) -> str:
    """The server's days since 1970-01-01 of date ``e``; ±infinity as values.py maps it."""
    return (
        f"CASE WHEN {e} = 'infinity' THEN 2147483647 WHEN {e} = '-infinity' THEN -2147483647 "
        f"ELSE {e} - date '1970-01-01' END"
    )


def each_element(expression: str) -> str:
    """``expression`` of each element ``e`` of array ``v``, in order."""
    return (
        f"CASE WHEN v IS NOT NULL THEN ARRAY(SELECT {expression} "
        "FROM unnest(v) WITH ORDINALITY AS u(e, n) ORDER BY n) END"
    )


def micros(e: str) -> str:
    """The server's microseconds since the epoch of timestamp[tz] ``e``."""
    return (
        f"CASE WHEN {e} IS NULL THEN NULL "
        f"WHEN isfinite({e}) THEN (extract(epoch FROM {e}) * 1000000)::bigint "
        f"WHEN {e} > 'epoch' THEN 9223372036854775807 ELSE -9223372036854775807 END"
    )


def same(value: Any) -> Any:
    return value


def float4(value: Any) -> Any:
    """A real as the float32 Arrow holds (psycopg reads it into a double)."""
    if value is None or math.isnan(value):
        return "NaN" if value is not None else None
    return struct.unpack("f", struct.pack("f", value))[0]


def nan_marked(value: Any) -> Any:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def each(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else [convert(v) for v in value]


def json_value(value: Any) -> Any:
    return None if value is None else json.loads(value)


@dataclass(frozen=True)
class Case:
    """A column type, SQL literals of it, and how both readers' values are compared.

    ``reference``: the SELECT expression of ``v`` psycopg reads; ``expected`` turns its
    value into the Arrow value's Python form; ``decoded`` turns the Arrow value (``raw``:
    the Arrow array's storage integers, for dates and timestamps) into the same form.
    """

    sql_type: str
    literals: tuple[str, ...]
    reference: str = "v"
    expected: Callable[[Any], Any] = same
    decoded: Callable[[Any], Any] = same
    raw: bool = False
    spark_type: str = ""
    mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE
    label: str = field(default="")

    @property
    def id(self) -> str:
        return self.label or self.sql_type


TEXT_LITERALS = (
    "'plain'",
    "''",
    "'unicode ☃ 𝄞 é'",
    "'quote '' and \\ backslash'",
    "E'line\\nbreak'",
)
CASES = [
    Case("boolean", ("true", "false"), spark_type="BOOLEAN"),
    Case("smallint", ("-32768", "32767", "0"), spark_type="SMALLINT"),
    Case("integer", ("-2147483648", "2147483647"), spark_type="INT"),
    Case("bigint", ("-9223372036854775808", "9223372036854775807"), spark_type="BIGINT"),
    Case("oid", ("0", "4294967295"), spark_type="BIGINT"),
    Case(
        "real",
        ("'NaN'", "'Infinity'", "'-Infinity'", "3.4028235e38", "-1.4e-45", "0.1"),
        expected=float4,
        decoded=nan_marked,
        spark_type="FLOAT",
    ),
    Case(
        "double precision",
        ("'NaN'", "'Infinity'", "'-Infinity'", "1.7976931348623157e308", "5e-324", "0.1"),
        expected=nan_marked,
        decoded=nan_marked,
        spark_type="DOUBLE",
    ),
    Case("numeric(10,2)", ("-99999999.99", "0.01", "12.5", "0"), spark_type="DECIMAL(10,2)"),
    Case("numeric(38,0)", ("-" + "9" * 38, "9" * 38), spark_type="DECIMAL(38,0)"),
    Case("numeric(2,-3)", ("99000", "-1500"), spark_type="DECIMAL(5,0)"),
    Case("numeric(3,5)", ("0.00999", "-0.00001"), spark_type="DECIMAL(5,5)"),
    Case(
        "numeric(40,2)",
        ("1" * 38 + ".25", "-0.5"),
        reference="v::text",
        spark_type="STRING",
    ),
    Case(
        "numeric",
        ("99999999999999999999.999999999999999999", "-1e-18", "123.456", "0"),
        spark_type="DECIMAL(38,18)",
    ),
    Case(
        "numeric",
        ("'NaN'", "'Infinity'", "'-Infinity'", "1e-30", "123456789012345678901234567890.5"),
        reference="v::text",
        spark_type="STRING",
        mode=DecimalHandlingMode.STRING,
        label="numeric-string",
    ),
    Case(
        "numeric",
        ("'NaN'", "'-Infinity'", "1.125", "1e-30"),
        expected=lambda v: nan_marked(None if v is None else float(v)),
        decoded=nan_marked,
        spark_type="DOUBLE",
        mode=DecimalHandlingMode.DOUBLE,
        label="numeric-double",
    ),
    Case("text", TEXT_LITERALS, spark_type="STRING"),
    Case("varchar(20)", ("'short'", "'☃☃☃'"), spark_type="STRING"),
    Case("char(5)", ("'ab'", "'abcde'", "'é'"), spark_type="STRING"),
    Case("name", ("'a_name'",), spark_type="STRING"),
    Case('"char"', ("'x'",), spark_type="STRING"),
    Case(
        "bytea",
        ("'\\x'", "'\\x00ff00'", "decode('00000000', 'hex')", "convert_to('☃', 'UTF8')"),
        spark_type="BINARY",
    ),
    Case(
        "date",
        (
            "'2024-02-29'",
            "'1970-01-01'",
            "'0001-01-01'",
            "'0044-03-15 BC'",
            "'5874897-12-31'",
            "'infinity'",
            "'-infinity'",
            "'1969-12-31'",
        ),
        reference=days("v"),
        raw=True,
        spark_type="DATE",
    ),
    Case("time", ("'00:00:00'", "'23:59:59.999999'", "'12:30'"), "v::text", spark_type="STRING"),
    Case("timetz", ("'12:30:00+05:30'", "'00:00:00-12'"), reference="v::text", spark_type="STRING"),
    Case(
        "timestamp",
        (
            "'2024-02-29 23:59:59.123456'",
            "'1970-01-01'",
            "'0044-03-15 12:00 BC'",
            "'294246-12-31 23:59:59.999999'",
            "'4713-01-01 00:00 BC'",
            "'1900-01-01 00:00:00.5'",
            "'infinity'",
            "'-infinity'",
        ),
        reference=micros("v"),
        raw=True,
        spark_type="TIMESTAMP_NTZ",
    ),
    Case(
        "timestamptz",
        (
            "'2024-02-29 23:59:59.123456+05:30'",
            "'1970-01-01 00:00:00+00'",
            "'1901-12-13 20:45:52 Asia/Kolkata'",
            "'0044-03-15 12:00:00+01 BC'",
            "'infinity'",
            "'-infinity'",
        ),
        reference=micros("v"),
        raw=True,
        spark_type="TIMESTAMP",
    ),
    Case(
        "interval",
        (
            "'1 year 2 mons 3 days 04:05:06.5'",
            "'0'",
            "'-1 day +02:00'",
            "'-3 mons -00:00:01'",
            "'178000000 years'",
            "'00:00:00.000001'",
        ),
        reference="v::text",
        spark_type="STRING",
    ),
    Case(
        "uuid",
        ("'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'"),
        expected=lambda v: None if v is None else str(v),
        spark_type="STRING",
    ),
    Case(
        "json",
        ('\'{"a": [1, 2.5, null], "b": "☃"}\'', "'[]'", "'\"x\"'", "'null'"),
        decoded=json_value,
        spark_type="STRING",
    ),
    Case(
        "jsonb",
        ('\'{"b": 1, "a": {"c": [true, false]}}\'', "'1e400'", "'{}'"),
        reference="v::text",
        spark_type="STRING",
    ),
    Case("xml", ("'<a x=\"1\">☃</a>'", "'text only'"), reference="v::text", spark_type="STRING"),
    Case(
        "inet",
        ("'192.168.0.1'", "'10.1.2.3/8'", "'::1'", "'2001:db8::ff00:42:8329/64'"),
        expected=lambda v: None if v is None else str(v),  # the output function's form
        spark_type="STRING",
    ),
    Case("cidr", ("'10.0.0.0/8'", "'2001:db8::/32'"), reference="v::text", spark_type="STRING"),
    Case("macaddr", ("'08:00:2b:01:02:03'",), reference="v::text", spark_type="STRING"),
    Case("macaddr8", ("'08:00:2b:01:02:03:04:05'",), reference="v::text", spark_type="STRING"),
    Case("money", ("12.34", "-92233720368547758.08"), reference="v::text", spark_type="STRING"),
    Case(
        "bit(1)",
        ("B'1'", "B'0'"),
        expected=lambda v: None if v is None else v == "1",
        spark_type="BOOLEAN",
    ),
    Case("bit(12)", ("B'101000000001'",), reference="v::text", spark_type="STRING"),
    Case(
        "bit varying(70)", ("B''", "B'1'", "B'0" + "1" * 69 + "'"), "v::text", spark_type="STRING"
    ),
    Case("mood", ("'ok'", "'so so, \"quoted\"'"), reference="v::text", spark_type="STRING"),
    Case("price", ("12.345", "-0.001"), spark_type="DECIMAL(7,3)"),
    Case("label", ("'a label'",), spark_type="STRING"),
    Case(
        "integer[]",
        ("'{}'", "'{1,NULL,-3}'", "ARRAY[2147483647]", "'{NULL}'"),
        spark_type="ARRAY<INT>",
    ),
    Case(
        "text[]",
        (
            "'{}'",
            "ARRAY['a,b', 'NULL', NULL, '', ' spaced ', '\"q\"', '\\', '☃', '{}']",
        ),
        spark_type="ARRAY<STRING>",
    ),
    Case("numeric(10,2)[]", ("'{1.5,NULL,-99999999.99}'",), spark_type="ARRAY<DECIMAL(10,2)>"),
    Case(
        "double precision[]",
        ("'{NaN,Infinity,-Infinity,0.5}'",),
        expected=each(nan_marked),
        decoded=each(nan_marked),
        spark_type="ARRAY<DOUBLE>",
    ),
    Case("boolean[]", ("'{t,f,NULL}'",), spark_type="ARRAY<BOOLEAN>"),
    Case("bytea[]", ("ARRAY['\\x00'::bytea, NULL, '\\x'::bytea]",), spark_type="ARRAY<BINARY>"),
    Case(
        "date[]",
        ("ARRAY['2024-01-31'::date, NULL, 'infinity', '0001-01-01 BC']",),
        reference=each_element(days("e")),
        raw=True,
        spark_type="ARRAY<DATE>",
    ),
    Case(
        "timestamptz[]",
        ("ARRAY['2024-01-31 10:00+02'::timestamptz, NULL, '-infinity']",),
        reference=each_element(micros("e")),
        raw=True,
        spark_type="ARRAY<TIMESTAMP>",
    ),
    Case(
        "uuid[]",
        ("ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, NULL]",),
        expected=each(lambda v: None if v is None else str(v)),
        spark_type="ARRAY<STRING>",
    ),
    Case(
        "jsonb[]",
        ("ARRAY['{\"a\": \"x,y\"}'::jsonb, '[1]', NULL]",),
        reference="v::text[]",
        spark_type="ARRAY<STRING>",
    ),
    Case(
        "mood[]",
        ("ARRAY['ok'::mood, NULL, 'so so, \"quoted\"']",),
        "v::text[]",
        spark_type="ARRAY<STRING>",
    ),
    Case(
        "price[]",
        ("ARRAY[1.5::price, NULL]",),
        reference="v::numeric(7,3)[]",
        spark_type="ARRAY<DECIMAL(7,3)>",
    ),
    Case(
        "interval[]",
        ("ARRAY['1 day'::interval, '-1 mon']",),
        "v::text[]",
        spark_type="ARRAY<STRING>",
    ),
]
# Odd defaults for the database: the replication connection must not read values in them.
ODD_SETTINGS = {
    "datestyle": "German, DMY",
    "intervalstyle": "sql_standard",
    "bytea_output": "escape",
    "timezone": "America/St_Johns",
    "extra_float_digits": "0",
}


def _table(index: int) -> str:
    return f"t{index}"


@pytest.fixture(scope="module")
def database(pg: DevPostgres) -> Iterator[tuple[str, PostgresEndpoint]]:
    name = f"pgtypes_{os.getpid()}_{next(_names)}_{uuid.uuid4().hex[:6]}"
    with pg.superuser_connection() as admin:
        admin.execute(f'CREATE DATABASE "{name}" OWNER "{pg.settings.user}"')
        for setting, value in ODD_SETTINGS.items():
            admin.execute(f"ALTER DATABASE \"{name}\" SET {setting} = '{value}'")
    s = pg.settings
    yield name, PostgresEndpoint(s.host, s.port, s.user, s.password, name)
    with pg.superuser_connection() as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@dataclass
class Stream:
    """The Inserts a stream gave, the tables' shapes, and the types they use."""

    inserts: list[Insert]
    relations: dict[int, Relation]
    catalog: TypeCatalog

    def column(
        self, table: str, mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE
    ) -> tuple[pa.Array, str]:
        """Column ``v`` of ``table``'s rows by ``id``, decoded, and its Spark type."""
        relation = next(r for r in self.relations.values() if r.name == table)
        decoder = RowsDecoder.for_relation(relation, self.catalog, mode)
        rows = sorted(
            (i.new for i in self.inserts if i.relation_oid == relation.oid),
            key=lambda row: int(str(row[0])),
        )
        return decoder.record_batch(rows).column(1), decoder.columns[1].spark_type


def read_stream(
    pg: DevPostgres,
    endpoint: PostgresEndpoint,
    tables: dict[str, str],
    rows: dict[str, tuple[str, ...]],
    setup: str = "",
) -> Stream:
    """Tables ``name: column type`` made (after ``setup``), ``rows`` (SQL literals of
    column v) inserted, and read back from a slot made for them."""
    slot = f"pgtypes_{next(_names)}"
    with pg.connection(endpoint.database) as sql:
        if setup:
            sql.execute(setup)
        for table, sql_type in tables.items():
            sql.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v {sql_type})")
    with ReplicationConnection.open(endpoint) as conn:
        ensure_slot(conn, slot)
        ensure_publication(conn, slot, [("public", table) for table in tables])
    try:
        with pg.connection(endpoint.database) as sql:
            start = confirmed(sql, slot)
            for table, literals in rows.items():
                values = ", ".join(f"({n}, {literal})" for n, literal in enumerate(literals))
                sql.execute(f"INSERT INTO {table} VALUES {values}")
            cursor = sql.execute("SELECT pg_logical_emit_message(false, 'pgtypes', 'end')::text")
            end = Lsn.parse(str(cursor.fetchone()[0]))  # type: ignore[index]
        with ReplicationConnection.open(endpoint) as conn:
            stream = conn.start_replication(slot, start, [slot])
            items = list(stream.transactions(end))
            relations = dict(stream.relations)
        with ReplicationConnection.open(endpoint) as conn:
            oids = {column.type_oid for r in relations.values() for column in r.columns}
            catalog = TypeCatalog.builtin().load(conn, oids)
            conn.query(f"DROP PUBLICATION {slot}")
    finally:
        with ReplicationConnection.open(endpoint) as conn:
            drop_slot(conn, slot)
    inserts = [
        change
        for item in items
        if isinstance(item, Transaction)
        for change in item.items
        if isinstance(change, Insert)
    ]
    return Stream(inserts, relations, catalog)


def confirmed(sql: Any, slot: str) -> Lsn:
    row = sql.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", [slot]
    ).fetchone()
    return Lsn.parse(row[0])


def reference_connection(pg: DevPostgres, database: str) -> psycopg.Connection[Any]:
    """psycopg as a user would read: the display settings sparkcdc documents its text in."""
    s = pg.settings
    options = " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS.items())
    return psycopg.connect(
        host=s.host,
        port=s.port,
        user=s.user,
        password=s.password,
        dbname=database,
        options=options,
        autocommit=True,
    )


@pytest.fixture(scope="module")
def stream(pg: DevPostgres, database: tuple[str, PostgresEndpoint]) -> Stream:
    _, endpoint = database
    return read_stream(
        pg,
        endpoint,
        {_table(i): case.sql_type for i, case in enumerate(CASES)},
        {_table(i): (*case.literals, "NULL") for i, case in enumerate(CASES)},
        setup=(
            "CREATE TYPE mood AS ENUM ('ok', 'so so, \"quoted\"');"
            "CREATE DOMAIN price AS numeric(7,3) CHECK (VALUE > -100);"
            "CREATE DOMAIN label AS varchar(20)"
        ),
    )


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case.id for case in CASES])
def test_each_type_decodes_as_select_reads_it(
    pg: DevPostgres, database: tuple[str, PostgresEndpoint], stream: Stream, index: int
) -> None:
    case = CASES[index]
    table = _table(index)
    array, spark_type = stream.column(table, case.mode)
    assert spark_type == case.spark_type
    with reference_connection(pg, database[0]) as sql:
        rows = sql.execute(f"SELECT {case.reference} FROM {table} ORDER BY id").fetchall()
    expected = [case.expected(row[0]) for row in rows]
    if case.raw:  # dates and timestamps as the integers Arrow stores
        storage = (
            pa.int32()
            if pa.types.is_date32(
                array.type.value_type if pa.types.is_list(array.type) else array.type
            )
            else pa.int64()
        )
        if pa.types.is_list(array.type):
            array = pa.ListArray.from_arrays(
                array.offsets, array.values.cast(storage), mask=array.is_null()
            )
        else:
            array = array.cast(storage)
    got = [case.decoded(value) for value in array.to_pylist()]
    assert got == expected
    assert len(got) == len(case.literals) + 1 and got[-1] is None


def test_the_builtin_type_oids_are_the_servers(pg: DevPostgres) -> None:
    with pg.superuser_connection() as sql:
        rows = sql.execute(
            "SELECT typname, oid::int, typarray::int FROM pg_type WHERE typname = ANY(%s)",
            [list(BUILTIN_TYPES)],
        ).fetchall()
    assert {name: (oid, array) for name, oid, array in rows} == BUILTIN_TYPES


def test_values_a_column_cannot_hold_stop_with_the_column_named(
    pg: DevPostgres, database: tuple[str, PostgresEndpoint]
) -> None:
    stream = read_stream(
        pg,
        database[1],
        {
            "odd_nan": "numeric(5,2)",
            "odd_wide": "numeric",
            "odd_dims": "int[]",
            "odd_bounds": "int[]",
            "odd_late": "timestamp",
        },
        {
            "odd_nan": ("1.5", "'NaN'"),
            "odd_wide": ("1e-19",),
            "odd_dims": ("'{{1,2},{3,4}}'",),
            "odd_bounds": ("'[0:1]={1,2}'",),
            "odd_late": ("'294276-12-31 23:59:59'",),
        },
    )
    with pytest.raises(
        ValueDecodeError, match=r"public\.odd_nan\.v: received 'NaN'.*decimal\.handling\.mode"
    ):
        stream.column("odd_nan")
    with pytest.raises(
        ValueDecodeError, match=r"public\.odd_wide\.v: received '0\.0+1'.*does not fit"
    ):
        stream.column("odd_wide")
    with pytest.raises(ValueDecodeError, match=r"odd_dims\.v: .*multi-dimensional"):
        stream.column("odd_dims")
    with pytest.raises(ValueDecodeError, match=r"odd_bounds\.v: .*explicit bounds"):
        stream.column("odd_bounds")
    with pytest.raises(ValueDecodeError, match=r"odd_late\.v: received '294276-12-31.*294247"):
        stream.column("odd_late")
    assert stream.column("odd_wide", DecimalHandlingMode.STRING)[0].to_pylist() == [
        "0.0000000000000000001"
    ]


def test_a_type_outside_the_mapping_is_refused_naming_the_column(
    pg: DevPostgres, database: tuple[str, PostgresEndpoint]
) -> None:
    stream = read_stream(
        pg,
        database[1],
        {"odd_point": "point", "odd_range": "int4range"},
        {"odd_point": ("'(1,2)'",), "odd_range": ("'[1,5)'",)},
    )
    with pytest.raises(
        SourceError, match=r"odd_point\.v has PostgreSQL type 'point'.*docs/postgres\.md"
    ):
        stream.column("odd_point")
    with pytest.raises(SourceError, match=r"odd_range\.v has PostgreSQL type 'int4range'"):
        stream.column("odd_range")
