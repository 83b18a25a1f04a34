"""PostgreSQL column types and the Spark / Arrow type each maps to (issue 59, item 4).

A Relation message gives each column's type OID and typmod. Built-in types have fixed
OIDs (``pg_type.dat`` in PostgreSQL's source); enums, domains and arrays of them are read
from ``pg_type`` into a ``TypeCatalog``. ``column_type`` is then a pure function of the
type, its typmod and the ``decimal.handling.mode`` (Debezium's names: ``precise`` by
default, ``double``, ``string``).

The mapping's table is docs/postgres.md (tests/unit/postgres/test_docs_types.py keeps the
two equal). In short: numbers as the like Spark numbers; numeric(p,s) as DECIMAL(p,s) and
numeric without scale as DECIMAL(38,18), exact or stopped; times of day, intervals (ISO
8601) and text-like types as STRING; timestamptz as TIMESTAMP (an instant), timestamp as
TIMESTAMP_NTZ, ±infinity as the Arrow type's max / min (as Debezium); enums as their
labels; domains as their base type; one-dimensional arrays as ARRAY<element>. Any other
type is refused with the column named, never read as a silent string.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol

import pyarrow as pa

from sparkcdc.errors import SourceError

# A typmod's offset for types whose typmod counts a varlena header (numeric, varchar, ...).
VARHDRSZ = 4
MAX_SPARK_DECIMAL_PRECISION = 38
# numeric without precision and scale, under decimal.handling.mode=precise (Flink CDC's).
UNCONSTRAINED_NUMERIC = (38, 18)


class DecimalHandlingMode(StrEnum):
    """Debezium's ``decimal.handling.mode``: how numeric values reach Spark."""

    PRECISE = "precise"
    DOUBLE = "double"
    STRING = "string"


class ValueKind(Enum):
    """How a column's text values are decoded (``values.decode_text_column``)."""

    BOOLEAN = "boolean"  # 't' / 'f'
    INTEGER = "integer"
    FLOAT = "float"  # 'NaN', 'Infinity' included
    DECIMAL = "decimal"
    NUMERIC_TEXT = "numeric_text"  # numeric as its plain text
    NUMERIC_DOUBLE = "numeric_double"
    TEXT = "text"  # the server's text as it is
    BYTEA = "bytea"  # '\x' hex
    DATE = "date"
    TIMESTAMP = "timestamp"  # no zone: a wall-clock time
    TIMESTAMPTZ = "timestamptz"  # with the session's offset: an instant
    BIT = "bit"  # bit(1): '0' / '1'
    ARRAY = "array"


# ------------------------------------------------------------------ the built-in types


@dataclass(frozen=True)
class PgType:
    """One ``pg_type`` row, as much as the mapping needs.

    ``category``: ``typtype`` for enums ('e') and domains ('d'), 'A' for arrays, else 'b'.
    ``element``: an array's element type OID; ``base``: a domain's base type OID and
    ``base_typmod`` its typmod.
    """

    oid: int
    name: str
    category: str = "b"
    element: int = 0
    base: int = 0
    base_typmod: int = -1


# name: (oid, array oid), from PostgreSQL's pg_type.dat (tests check them against pg_type)
BUILTIN_TYPES: dict[str, tuple[int, int]] = {
    "bool": (16, 1000),
    "bytea": (17, 1001),
    "char": (18, 1002),
    "name": (19, 1003),
    "int8": (20, 1016),
    "int2": (21, 1005),
    "int4": (23, 1007),
    "text": (25, 1009),
    "oid": (26, 1028),
    "json": (114, 199),
    "xml": (142, 143),
    "cidr": (650, 651),
    "float4": (700, 1021),
    "float8": (701, 1022),
    "macaddr8": (774, 775),
    "money": (790, 791),
    "macaddr": (829, 1040),
    "inet": (869, 1041),
    "bpchar": (1042, 1014),
    "varchar": (1043, 1015),
    "date": (1082, 1182),
    "time": (1083, 1183),
    "timestamp": (1114, 1115),
    "timestamptz": (1184, 1185),
    "interval": (1186, 1187),
    "timetz": (1266, 1270),
    "bit": (1560, 1561),
    "varbit": (1562, 1563),
    "numeric": (1700, 1231),
    "uuid": (2950, 2951),
    "jsonb": (3802, 3807),
}

_SCALARS: dict[str, tuple[str, ValueKind]] = {
    "bool": ("BOOLEAN", ValueKind.BOOLEAN),
    "int2": ("SMALLINT", ValueKind.INTEGER),
    "int4": ("INT", ValueKind.INTEGER),
    "int8": ("BIGINT", ValueKind.INTEGER),
    "oid": ("BIGINT", ValueKind.INTEGER),
    "float4": ("FLOAT", ValueKind.FLOAT),
    "float8": ("DOUBLE", ValueKind.FLOAT),
    "bytea": ("BINARY", ValueKind.BYTEA),
    "date": ("DATE", ValueKind.DATE),
    "timestamp": ("TIMESTAMP_NTZ", ValueKind.TIMESTAMP),
    "timestamptz": ("TIMESTAMP", ValueKind.TIMESTAMPTZ),
}
_TEXT_TYPES = frozenset(
    {
        "text",
        "varchar",
        "bpchar",
        "name",
        "char",
        "time",
        "timetz",
        "interval",
        "uuid",
        "json",
        "jsonb",
        "xml",
        "inet",
        "cidr",
        "macaddr",
        "macaddr8",
        "money",
        "varbit",
    }
)

_ARROW: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"),
}


def builtin_types() -> dict[int, PgType]:
    """The built-in types of the mapping and their arrays, by OID."""
    found: dict[int, PgType] = {}
    for name, (oid, array_oid) in BUILTIN_TYPES.items():
        found[oid] = PgType(oid, name)
        found[array_oid] = PgType(array_oid, f"_{name}", "A", element=oid)
    return found


_BUILTIN = builtin_types()


# ------------------------------------------------------------------------- the catalog


class SqlRunner(Protocol):
    """What the catalog reads ``pg_type`` with (a ``ReplicationConnection`` will do)."""

    def query(self, command: str) -> list[tuple[str | None, ...]]: ...


@dataclass(frozen=True)
class TypeCatalog:
    """The types a stream's columns use: the built-in ones, and what ``pg_type`` says of
    the others (enums, domains, arrays of them)."""

    types: dict[int, PgType]

    @classmethod
    def builtin(cls) -> TypeCatalog:
        return cls(dict(_BUILTIN))

    def missing(self, oids: Iterable[int]) -> set[int]:
        """The OIDs this catalog does not know."""
        return {oid for oid in oids if oid not in self.types}

    def load(self, conn: SqlRunner, oids: Iterable[int]) -> TypeCatalog:
        """This catalog with the types ``oids`` (and their elements, bases) read from the
        server's ``pg_type``; a type the server does not have is left out."""
        types = dict(self.types)
        wanted = self.missing(oids)
        while wanted:
            listed = ",".join(str(int(oid)) for oid in sorted(wanted))
            rows = conn.query(
                "SELECT oid, typname, typtype, typcategory, typelem, typbasetype, typtypmod "
                f"FROM pg_catalog.pg_type WHERE oid IN ({listed})"
            )
            for oid, name, typtype, category, elem, base, typmod in rows:
                kind = "A" if category == "A" and elem != "0" else typtype or "b"
                types[int(oid or 0)] = PgType(
                    int(oid or 0),
                    name or "",
                    kind,
                    int(elem or 0),
                    int(base or 0),
                    int(typmod or -1),
                )
            wanted = {
                needed
                for row_type in (types[int(r[0] or 0)] for r in rows)
                for needed in (row_type.element, row_type.base)
                if needed and needed not in types
            }
        return TypeCatalog(types)


# ------------------------------------------------------------------------- the mapping


@dataclass(frozen=True)
class ColumnType:
    """A column's Spark type, the Arrow type Spark reads it as, and how to decode it."""

    spark_type: str  # Spark DDL, e.g. 'DECIMAL(10,2)', 'ARRAY<INT>'
    arrow_type: pa.DataType
    kind: ValueKind
    element: ColumnType | None = None  # an array's


def numeric_digits(typmod: int) -> tuple[int, int] | None:
    """numeric's (precision, scale) from its typmod; None without them.

    >>> numeric_digits(((10 << 16) | 2) + 4), numeric_digits(-1)
    ((10, 2), None)
    """
    if typmod < VARHDRSZ:
        return None
    packed = typmod - VARHDRSZ
    # the scale is 11 bits, signed since PostgreSQL 15 (numeric(2,-3))
    return (packed >> 16) & 0xFFFF, ((packed & 0x7FF) ^ 1024) - 1024


def _decimal(precision: int, scale: int) -> ColumnType:
    return ColumnType(
        f"DECIMAL({precision},{scale})", pa.decimal128(precision, scale), ValueKind.DECIMAL
    )


def _simple(spark_type: str, kind: ValueKind) -> ColumnType:
    return ColumnType(spark_type, _ARROW[spark_type], kind)


def _numeric(typmod: int, mode: DecimalHandlingMode) -> ColumnType:
    if mode is DecimalHandlingMode.DOUBLE:
        return _simple("DOUBLE", ValueKind.NUMERIC_DOUBLE)
    if mode is DecimalHandlingMode.STRING:
        return _simple("STRING", ValueKind.NUMERIC_TEXT)
    digits = numeric_digits(typmod)
    if digits is None:
        return _decimal(*UNCONSTRAINED_NUMERIC)
    precision, scale = digits
    if scale < 0:
        precision, scale = precision - scale, 0
    precision = max(precision, scale)
    if precision > MAX_SPARK_DECIMAL_PRECISION:
        return _simple("STRING", ValueKind.NUMERIC_TEXT)
    return _decimal(precision, scale)


def column_type(
    catalog: TypeCatalog,
    type_oid: int,
    typmod: int,
    *,
    where: str,
    mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE,
) -> ColumnType:
    """The Spark type of a column of type ``type_oid`` with ``typmod`` (``where``: the
    column, for the error of a type the mapping does not have).

    >>> column_type(TypeCatalog.builtin(), 1700, ((12 << 16) | 3) + 4, where="t.c").spark_type
    'DECIMAL(12,3)'
    >>> column_type(TypeCatalog.builtin(), 1007, -1, where="t.c").spark_type
    'ARRAY<INT>'
    """
    found = catalog.types.get(type_oid)
    if found is None:
        raise SourceError(
            f"column {where} has type OID {type_oid}, which the type catalog does not hold: "
            "load the stream's types first (TypeCatalog.load with the Relation's type OIDs)"
        )
    if found.category == "d":  # a domain: its base type, with the domain's typmod
        return column_type(catalog, found.base, found.base_typmod, where=where, mode=mode)
    if found.category == "e":
        return _simple("STRING", ValueKind.TEXT)
    if found.category == "A":
        element = column_type(catalog, found.element, typmod, where=where, mode=mode)
        if element.kind is ValueKind.ARRAY:
            raise SourceError(f"column {where}: an array of arrays is not a PostgreSQL type")
        return ColumnType(
            f"ARRAY<{element.spark_type}>", pa.list_(element.arrow_type), ValueKind.ARRAY, element
        )
    if found.name == "numeric":
        return _numeric(typmod, mode)
    if found.name == "bit" and typmod in (1, -1):  # bit without a length is bit(1)
        return _simple("BOOLEAN", ValueKind.BIT)
    if found.name in _SCALARS:
        return _simple(*_SCALARS[found.name])
    if found.name in _TEXT_TYPES or found.name == "bit":
        return _simple("STRING", ValueKind.TEXT)
    raise SourceError(
        f"column {where} has PostgreSQL type {found.name!r} (OID {type_oid}), which the "
        "PostgreSQL source does not map to a Spark type: leave the column out of the "
        "capture, or change it to a mapped type (see docs/postgres.md; casting it to text "
        f"keeps every value: ALTER TABLE ... ALTER COLUMN ... TYPE text USING ...::text)"
    )
