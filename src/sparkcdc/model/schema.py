"""Table schemas and the MySQL → Spark type mapping (as Flink CDC maps them).

| MySQL type                         | Spark type          | value                          |
|------------------------------------|---------------------|--------------------------------|
| TINYINT(1)                         | BOOLEAN             | 0 → false, else true (1)       |
| TINYINT                            | TINYINT             |                                |
| TINYINT UNSIGNED, SMALLINT         | SMALLINT            |                                |
| SMALLINT UNSIGNED, MEDIUMINT [U], INT | INT              |                                |
| INT UNSIGNED, BIGINT               | BIGINT              |                                |
| BIGINT UNSIGNED                    | DECIMAL(20,0)       |                                |
| FLOAT                              | FLOAT               |                                |
| DOUBLE, REAL                       | DOUBLE              |                                |
| DECIMAL(p,s), p <= 38              | DECIMAL(p,s)        |                                |
| DECIMAL(p,s), p > 38               | STRING              | plain decimal text             |
| BIT(1)                             | BOOLEAN             |                                |
| BIT(n), n > 1                      | BINARY              | big-endian, ceil(n/8) bytes    |
| YEAR                               | INT                 |                                |
| DATE                               | DATE                | zero date → NULL               |
| DATETIME(p)                        | TIMESTAMP_NTZ       | zero date → NULL               |
| TIMESTAMP(p)                       | TIMESTAMP           | an instant (UTC in the binlog) |
| TIME(p)                            | STRING              | '[-]HH:MM:SS[.f…]', p digits   |
| CHAR, VARCHAR, *TEXT               | STRING              |                                |
| BINARY, VARBINARY, *BLOB           | BINARY              |                                |
| ENUM, SET                          | STRING              | labels; SET joined by ','      |
| JSON                               | STRING              | JSON text                      |
| GEOMETRY and its subtypes          | BINARY              | 4-byte SRID + WKB              |
| UUID, INET4, INET6 (MariaDB)       | STRING              | the server's text form         |
| any other type                     | BINARY              | the bytes the binlog stores    |

(1) With the source option ``treat-tinyint1-as-boolean.enabled: false`` (Flink CDC's; default
true) TINYINT(1) stays a number: TINYINT, or SMALLINT when UNSIGNED.

Types of MariaDB's type plugins (UUID, INET4, INET6) are logged as binary STRING columns;
their decoder form is those bytes (snapshot text is parsed back to them), and the Spark
value is the text the server prints. A type sparkcdc does not know maps to BINARY rather
than stopping the stream: a column added mid-stream must never poison it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from sparkcdc.model.identifiers import quote_spark

Converter = Callable[[Any], Any]
log = logging.getLogger(__name__)

_INT_TYPES = {
    # data_type: (signed spark type, unsigned spark type)
    "tinyint": ("TINYINT", "SMALLINT"),
    "smallint": ("SMALLINT", "INT"),
    "mediumint": ("INT", "INT"),
    "int": ("INT", "BIGINT"),
    "integer": ("INT", "BIGINT"),
    "bigint": ("BIGINT", "DECIMAL(20,0)"),
}
# Types whose values are text (the binlog and SQL both give str); TIME maps to text too.
TEXT_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
)
_STRING_TYPES = TEXT_TYPES | {"time"}
GEOMETRY_TYPES = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    }
)
_BINARY_TYPES = {
    "binary",
    "varbinary",
    "tinyblob",
    "blob",
    "mediumblob",
    "longblob",
} | GEOMETRY_TYPES
_SIMPLE = {
    "float": "FLOAT",
    "double": "DOUBLE",
    "real": "DOUBLE",
    "year": "INT",
    "date": "DATE",
    "datetime": "TIMESTAMP_NTZ",
    "timestamp": "TIMESTAMP",
}
MAX_SPARK_DECIMAL_PRECISION = 38
# MariaDB type plugins whose binlog form is fixed-size binary and whose Spark form is text
PLUGIN_TEXT_TYPES = frozenset({"uuid", "inet4", "inet6"})


@dataclass(frozen=True)
class Column:
    """One source column: its MySQL definition and the Spark type it maps to."""

    name: str
    data_type: str  # information_schema DATA_TYPE, e.g. 'bigint'
    column_type: str  # information_schema COLUMN_TYPE, e.g. 'bigint(20) unsigned'
    nullable: bool
    spark_type: str  # Spark DDL type, e.g. 'DECIMAL(20,0)'
    # information_schema CHARACTER_SET_NAME of character columns when read from the server
    # (decodes rows of a binlog without column metadata); not part of the column's identity
    charset: str | None = field(default=None, compare=False)

    @classmethod
    def from_mysql(
        cls,
        name: str,
        data_type: str,
        column_type: str,
        nullable: bool,
        *,
        table: str = "",
        charset: str | None = None,
    ) -> Column:
        return cls(
            name,
            data_type.lower(),
            column_type.lower(),
            nullable,
            spark_type_for(data_type, column_type, where=f"{table}.{name}"),
            charset,
        )


@dataclass(frozen=True)
class TableSchema:
    """A table's columns (in ordinal order) and primary key column names."""

    database: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def spark_ddl(self) -> str:
        return ", ".join(f"{quote_spark(c.name)} {c.spark_type}" for c in self.columns)


def schema_to_json(schema: TableSchema) -> dict[str, Any]:
    """A schema as JSON-ready data (staged chunks and the schema history keep it)."""
    return {
        "database": schema.database,
        "table": schema.table,
        "primary_key": list(schema.primary_key),
        "columns": [
            [c.name, c.data_type, c.column_type, c.nullable, c.spark_type]
            + ([c.charset] if c.charset is not None else [])
            for c in schema.columns
        ],
    }


def schema_from_json(data: dict[str, Any]) -> TableSchema:
    return TableSchema(
        str(data["database"]),
        str(data["table"]),
        tuple(
            Column(str(n), str(d), str(t), bool(nl), str(s), str(rest[0]) if rest else None)
            for n, d, t, nl, s, *rest in data["columns"]
        ),
        tuple(str(c) for c in data["primary_key"]),
    )


def spark_type_for(
    data_type: str, column_type: str, *, where: str = "", tinyint1_as_boolean: bool = True
) -> str:
    """The Spark DDL type of a MySQL column, as Flink CDC maps it.

    >>> spark_type_for("bigint", "bigint(20) unsigned")
    'DECIMAL(20,0)'
    >>> spark_type_for("tinyint", "tinyint(1)"), spark_type_for(
    ...     "tinyint", "tinyint(1)", tinyint1_as_boolean=False)
    ('BOOLEAN', 'TINYINT')
    """
    data_type = data_type.lower()
    column_type = column_type.lower()
    unsigned = "unsigned" in column_type
    if tinyint1_as_boolean and _is_tinyint1(data_type, column_type):
        return "BOOLEAN"
    if data_type in _INT_TYPES:
        return _INT_TYPES[data_type][1 if unsigned else 0]
    if data_type in ("decimal", "numeric"):
        precision, scale = decimal_digits(column_type)
        if precision > MAX_SPARK_DECIMAL_PRECISION:
            return "STRING"
        return f"DECIMAL({precision},{scale})"
    if data_type == "bit":
        return "BOOLEAN" if _length(column_type, 1) == 1 else "BINARY"
    if data_type in _SIMPLE:
        return _SIMPLE[data_type]
    if data_type in _STRING_TYPES:
        return "STRING"
    if data_type in PLUGIN_TEXT_TYPES:
        return "STRING"
    if data_type in _BINARY_TYPES:
        return "BINARY"
    log.warning(
        "column %s has type %r, which sparkcdc does not know: it is delivered as BINARY, the "
        "bytes the binlog stores",
        where or "?",
        column_type,
    )
    return "BINARY"


def with_tinyint1(schema: TableSchema, *, as_boolean: bool) -> TableSchema:
    """``schema`` with its TINYINT(1) columns typed as ``treat-tinyint1-as-boolean.enabled``
    says (schemas are read and parsed with the default, BOOLEAN)."""
    return replace(
        schema, columns=tuple(tinyint1_column(c, as_boolean=as_boolean) for c in schema.columns)
    )


def tinyint1_column(column: Column, *, as_boolean: bool) -> Column:
    """One column typed as ``treat-tinyint1-as-boolean.enabled`` says (others unchanged)."""
    if column.data_type != "tinyint":
        return column
    spark_type = spark_type_for("tinyint", column.column_type, tinyint1_as_boolean=as_boolean)
    return replace(column, spark_type=spark_type)


def _is_tinyint1(data_type: str, column_type: str) -> bool:
    return data_type == "tinyint" and re.match(r"tinyint\(1\)", column_type) is not None


_SPARK_DECIMAL_RE = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def spark_decimal(spark_type: str) -> tuple[int, int] | None:
    """Precision and scale of a Spark ``DECIMAL(p,s)`` type name; None for any other type.

    >>> spark_decimal("DECIMAL(20,0)"), spark_decimal("BIGINT")
    ((20, 0), None)
    """
    match = _SPARK_DECIMAL_RE.fullmatch(spark_type)
    return (int(match.group(1)), int(match.group(2))) if match else None


def decimal_digits(column_type: str) -> tuple[int, int]:
    """Precision and scale of a ``decimal(p,s)`` COLUMN_TYPE (MySQL's defaults 10, 0).

    >>> decimal_digits("decimal(12,3) unsigned")
    (12, 3)
    """
    match = re.search(r"\((\d+)(?:\s*,\s*(\d+))?\)", column_type)
    if not match:
        return 10, 0
    return int(match.group(1)), int(match.group(2) or 0)


def _length(column_type: str, default: int) -> int:
    match = re.search(r"\((\d+)\)", column_type)
    return int(match.group(1)) if match else default


# ------------------------------------------------------------------------- value conversion


def _to_bool(value: Any) -> bool:
    return bool(value)


def time_text(value: dt.timedelta, digits: int | None = None) -> str:
    """A TIME value as the server prints it: ``[-]HH:MM:SS``, then ``digits`` fraction
    digits (the column's precision, TIME(3) → ``.500``); without ``digits`` (the column is
    not known) a fraction of 6 digits when there is one.

    >>> time_text(dt.timedelta(hours=838, minutes=59, seconds=59), 6)
    '838:59:59.000000'
    >>> time_text(-dt.timedelta(seconds=1.5), 3), time_text(dt.timedelta(seconds=1.5))
    ('-00:00:01.500', '00:00:01.500000')
    """
    micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    if digits is None:
        return f"{text}.{frac:06d}" if frac else text
    return f"{text}.{frac:06d}"[: len(text) + 1 + digits] if digits else text


def _time_text_of(digits: int) -> Converter:
    return lambda value: time_text(value, digits)


def _decimal_text(value: Any) -> str:
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def _to_decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(value)


def fraction_digits(column_type: str) -> int:
    """The fraction digits of a TIME/DATETIME/TIMESTAMP column (``time(3)`` → 3; 0 when
    absent).

    >>> fraction_digits("time(3)"), fraction_digits("time")
    (3, 0)
    """
    return _length(column_type, 0)


def bit_width(column_type: str) -> int:
    """The n of ``bit(n)`` (1 when absent).

    >>> bit_width("bit(10)")
    10
    """
    return _length(column_type, 1)


def _bits_to_bytes(width: int) -> Converter:
    size = (width + 7) // 8

    def convert(value: Any) -> bytes:
        return value if isinstance(value, bytes) else int(value).to_bytes(size, "big")

    return convert


def _to_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def inet6_text(raw: bytes) -> str:
    """An INET6 value's text as MariaDB prints it (inet_ntop's rules: IPv4-mapped and
    IPv4-compatible addresses end in dotted quads).

    >>> inet6_text(bytes(10) + b"\\xff\\xff" + bytes([10, 0, 0, 1]))
    '::ffff:10.0.0.1'
    >>> inet6_text(bytes(15) + b"\\x01")
    '::1'
    """
    words = [raw[i] << 8 | raw[i + 1] for i in range(0, 16, 2)]
    best_base, best_len, base, length = -1, 0, -1, 0
    for i, word in enumerate(words):
        if word == 0:
            base, length = (i, 1) if length == 0 else (base, length + 1)
            if length > best_len:
                best_base, best_len = base, length
        else:
            length = 0
    if best_base == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xFFFF)):
        prefix = "::ffff:" if best_len == 5 else "::"
        return prefix + str(ipaddress.IPv4Address(raw[12:]))
    return str(ipaddress.IPv6Address(raw))


def _plugin_text(data_type: str) -> Converter:
    def convert(value: Any) -> str:
        if isinstance(value, str):
            return value
        raw = bytes(value)
        if data_type == "uuid":
            return str(uuid.UUID(bytes=raw))
        if data_type == "inet4":
            return str(ipaddress.IPv4Address(raw))
        return inet6_text(raw)

    return convert


def plugin_bytes(data_type: str, text: str) -> bytes:
    """The binlog (decoder) form of a UUID / INET4 / INET6 value from its SQL text.

    >>> plugin_bytes("inet4", "10.0.0.1").hex()
    '0a000001'
    """
    if data_type == "uuid":
        return uuid.UUID(text).bytes
    return ipaddress.ip_address(text).packed


def value_converter(column: Column) -> Converter | None:
    """How a decoded binlog value becomes the column's Spark value (None: as is).

    >>> value_converter(Column.from_mysql("t", "time", "time(3)", True))(dt.timedelta(hours=-1))
    '-01:00:00.000'
    """
    spark = column.spark_type
    data_type = column.data_type
    if spark == "BOOLEAN":
        return _to_bool
    if data_type in PLUGIN_TEXT_TYPES:
        return _plugin_text(data_type)
    if data_type == "time":  # spelled with the column's fraction digits, as the server does
        return _time_text_of(fraction_digits(column.column_type))
    if data_type == "bit":
        return _bits_to_bytes(_length(column.column_type, 1))
    if data_type in ("decimal", "numeric") and spark == "STRING":
        return _decimal_text
    if spark.startswith("DECIMAL"):
        return _to_decimal
    if spark == "STRING" and data_type in ("enum", "set", "json"):
        return _to_text
    return None


def create_table_sql(
    schema: TableSchema, quote: Callable[[str], str], quote_table: Callable[[str, str], str]
) -> str:
    """``CREATE TABLE`` of ``schema`` from its columns' own types, in the SQL whose identifiers
    ``quote`` and ``quote_table`` quote (each source's ``create_table_statement``).

    >>> create_table_sql(TableSchema("d", "t", (Column("id", "int", "int", False, "INT"),),
    ...     ("id",)), lambda n: f"[{n}]", lambda d, t: f"[{d}].[{t}]")
    'CREATE TABLE [d].[t] ([id] int NOT NULL, PRIMARY KEY ([id]))'
    """
    parts = [
        f"{quote(c.name)} {c.column_type}{'' if c.nullable else ' NOT NULL'}"
        for c in schema.columns
    ]
    if schema.primary_key:
        parts.append(f"PRIMARY KEY ({', '.join(quote(k) for k in schema.primary_key)})")
    return f"CREATE TABLE {quote_table(schema.database, schema.table)} ({', '.join(parts)})"
