"""Column metadata a TABLE_MAP lacks, taken from the schema history — checked, never guessed.

With ``binlog_row_metadata=FULL`` a TABLE_MAP names every column and carries its
signedness, character set and ENUM/SET labels. With ``MINIMAL`` (MySQL 8.0's default) it
lacks names and labels; with MariaDB's ``NO_LOG`` (its default) and on MySQL 5.7 it has
none of them: an ``INT UNSIGNED`` 3000000000 would decode as -1294967296, an ENUM as its
index, text as bytes. Those rows are decoded with the table's schema at their position
instead (:class:`TableVersions`: the schema read from the server, and the binlog position
from which each version holds), and every fact the TABLE_MAP does carry (column count, type
codes, lengths, signedness or character sets where present) must agree with it, or the
stream stops: a disagreement means the schema history does not describe these rows.

>>> from sparkcdc.model.schema import Column, TableSchema
>>> column = Column.from_mysql("n", "int", "int(10) unsigned", False)
>>> schema = TableSchema("app", "t", (column,), ("n",))
>>> versions = TableVersions({("app", "t"): [(0, schema)]})
>>> versions.at("app", "t", 100).columns[0].name
'n'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from sparkcdc.errors import SourceError
from sparkcdc.model.events import ImageColumns
from sparkcdc.model.schema import (
    GEOMETRY_TYPES,
    PLUGIN_TEXT_TYPES,
    Column,
    TableSchema,
    bit_width,
    decimal_digits,
    schema_from_json,
    schema_to_json,
)
from sparkcdc.mysql.binlog.charsets import (
    BINARY_COLLATION,
    charset_for_collation,
    collation_for_charset,
    is_known_collation,
)
from sparkcdc.mysql.binlog.decoded_events import ColumnInfo
from sparkcdc.mysql.protocol.constants import CHARACTER_TYPES, NUMERIC_TYPES, ColumnType

# information_schema DATA_TYPE values each TABLE_MAP type code may stand for
_TYPE_FAMILIES: dict[ColumnType, frozenset[str]] = {
    ColumnType.TINY: frozenset({"tinyint", "bool", "boolean"}),
    ColumnType.SHORT: frozenset({"smallint"}),
    ColumnType.INT24: frozenset({"mediumint"}),
    ColumnType.LONG: frozenset({"int", "integer"}),
    ColumnType.LONGLONG: frozenset({"bigint"}),
    ColumnType.FLOAT: frozenset({"float"}),
    ColumnType.DOUBLE: frozenset({"double", "real", "double precision"}),
    ColumnType.NEWDECIMAL: frozenset({"decimal", "numeric"}),
    ColumnType.DECIMAL: frozenset({"decimal", "numeric"}),
    ColumnType.YEAR: frozenset({"year"}),
    ColumnType.DATE: frozenset({"date"}),
    ColumnType.NEWDATE: frozenset({"date"}),
    ColumnType.TIME: frozenset({"time"}),
    ColumnType.TIME2: frozenset({"time"}),
    ColumnType.DATETIME: frozenset({"datetime"}),
    ColumnType.DATETIME2: frozenset({"datetime"}),
    ColumnType.TIMESTAMP: frozenset({"timestamp"}),
    ColumnType.TIMESTAMP2: frozenset({"timestamp"}),
    ColumnType.BIT: frozenset({"bit"}),
    ColumnType.ENUM: frozenset({"enum"}),
    ColumnType.SET: frozenset({"set"}),
    ColumnType.JSON: frozenset({"json"}),
    ColumnType.VARCHAR: frozenset({"varchar", "varbinary"}),
    ColumnType.VAR_STRING: frozenset({"varchar", "varbinary"}),
    # MariaDB logs its UUID / INET4 / INET6 plugin types as binary CHAR
    ColumnType.STRING: frozenset({"char", "binary", "uuid", "inet4", "inet6"}),
    ColumnType.BLOB: frozenset(
        [
            "tinytext",
            "text",
            "mediumtext",
            "longtext",
            "json",
            "tinyblob",
            "blob",
            "mediumblob",
            "longblob",
        ]
    ),
    ColumnType.GEOMETRY: GEOMETRY_TYPES,
}
_CHARACTER = CHARACTER_TYPES | {ColumnType.ENUM, ColumnType.SET}
_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'")
_FIX = (
    "SET GLOBAL binlog_row_metadata='FULL' (MySQL >= 8.0.1, MariaDB >= 10.5) so the binlog "
    "describes its own rows"
)


def labels(column_type: str) -> tuple[str, ...]:
    """The labels of an ``enum(...)`` / ``set(...)`` COLUMN_TYPE, unquoted.

    >>> labels("enum('a','it''s','x,y')")
    ('a', "it's", 'x,y')
    """
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(m.group(1).replace("''", "'").replace("\\\\", "\\") for m in _LABEL.finditer(body))


# the character types whose values are bytes, not text (binary collation)
_BYTES_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def same_storage(info: ColumnInfo, column: Column) -> bool:
    """Whether a TABLE_MAP column stores its values exactly as ``column`` does: same type
    family, signedness, DECIMAL precision and scale, BIT width, and bytes-or-text, with the
    labels of an ENUM / SET known. Then a value decoded with ``info`` is a value of
    ``column``; otherwise (a row written before a schema change, or metadata the TABLE_MAP
    lacks) it is not, and must be carried by its own decoded form.

    >>> from sparkcdc.mysql.protocol.constants import ColumnType
    >>> info = ColumnInfo("n", ColumnType.LONG, 0, True, False, None, None, None)
    >>> same_storage(info, Column.from_mysql("n", "int", "int(11)", True))
    True
    >>> same_storage(info, Column.from_mysql("n", "bigint", "bigint(20)", True))
    False
    """
    family = _TYPE_FAMILIES.get(info.type)
    data_type = column.data_type.lower()
    column_type = column.column_type.lower()
    if family is None or data_type not in family:
        return False
    if info.type in NUMERIC_TYPES and info.unsigned != ("unsigned" in column_type):
        return False
    if info.type is ColumnType.NEWDECIMAL:
        precision, scale = decimal_digits(column_type)
        return info.meta == (precision << 8 | scale)
    if info.type is ColumnType.BIT:
        return (info.meta >> 8) * 8 + (info.meta & 0xFF) == bit_width(column_type)
    if info.type is ColumnType.ENUM:
        return info.enum_values is not None
    if info.type is ColumnType.SET:
        return info.set_values is not None
    if info.type in CHARACTER_TYPES and info.type is not ColumnType.GEOMETRY:
        if info.charset is None:
            return False
        binary = data_type in _BYTES_TYPES or data_type in PLUGIN_TEXT_TYPES
        return (info.charset == BINARY_COLLATION) == binary
    return True


def _same_storage_at(columns: tuple[ColumnInfo, ...], position: int, column: Column) -> bool:
    return same_storage(columns[position], column)


def image_columns(columns: tuple[ColumnInfo, ...]) -> ImageColumns:
    """The model's description of the row images a TABLE_MAP with ``columns`` lays out:
    their names and :func:`same_storage` by image position.

    >>> from sparkcdc.mysql.protocol.constants import ColumnType
    >>> info = ColumnInfo("n", ColumnType.LONG, 0, True, False, None, None, None)
    >>> image = image_columns((info,))
    >>> image.names, image.same_storage(0, Column.from_mysql("n", "int", "int(11)", True))
    (('n',), True)
    """
    return ImageColumns(tuple(c.name for c in columns), partial(_same_storage_at, columns))


def complete_columns(
    columns: tuple[ColumnInfo, ...], schema: TableSchema, where: str
) -> tuple[ColumnInfo, ...]:
    """``columns`` of a TABLE_MAP with what it lacks filled in from ``schema``.

    Raises SourceError when the TABLE_MAP and the schema disagree on anything the TABLE_MAP
    does say: the schema is then not the one these rows were written with.
    """
    if len(columns) != len(schema.columns):
        counts = f"the binlog has {len(columns)} columns, the schema {len(schema.columns)}"
        raise _disagree(where, schema, counts)
    out = []
    for info, column in zip(columns, schema.columns, strict=True):
        family = _TYPE_FAMILIES.get(info.type)
        if family is not None and column.data_type not in family:
            raise _disagree(
                where,
                schema,
                f"column {column.name!r} is {column.column_type} in the schema but the binlog "
                f"logs a {info.type.name} there",
            )
        if info.name is not None and info.name != column.name:
            names = f"the binlog names {info.name!r} where the schema has {column.name!r}"
            raise _disagree(where, schema, names)
        unsigned = "unsigned" in column.column_type
        if info.type in NUMERIC_TYPES and info.unsigned and not unsigned:
            raise _disagree(where, schema, f"column {column.name!r} is unsigned in the binlog only")
        charset = info.charset
        if info.type in _CHARACTER and (charset is None or _unknown_collation(info)):
            charset = _schema_collation(info, column, schema, where)
        elif info.type in _CHARACTER and column.charset is not None:
            logged = charset_for_collation(charset) if charset is not None else None
            if logged is not None and logged != column.charset and charset != BINARY_COLLATION:
                raise _disagree(
                    where,
                    schema,
                    f"column {column.name!r} is {column.charset} in the schema, {logged} in "
                    "the binlog",
                )
        if info.unsigned is None:  # no SIGNEDNESS block: the schema says
            signedness = info.type in NUMERIC_TYPES and unsigned
        else:
            signedness = info.unsigned or (info.type in NUMERIC_TYPES and unsigned)
        out.append(
            replace(
                info,
                name=column.name,
                unsigned=signedness,
                charset=charset,
                enum_values=info.enum_values
                or (labels(column.column_type) if info.type is ColumnType.ENUM else None),
                set_values=info.set_values
                or (labels(column.column_type) if info.type is ColumnType.SET else None),
            )
        )
    return tuple(out)


def _schema_collation(
    info: ColumnInfo, column: Column, schema: TableSchema, where: str
) -> int | None:
    """A collation id of ``column``'s character set as the schema names it, for a text
    column the TABLE_MAP leaves without one (or with one sparkcdc does not know).

    Raises SourceError when the schema's character set is not one sparkcdc can decode:
    the text would otherwise be decoded by a guess.
    """
    if not column.charset:
        if info.charset is None:
            return BINARY_COLLATION  # no charset in the schema: a binary string
        named = "no character set"
    else:
        collation = collation_for_charset(column.charset)
        if collation is not None:
            return collation
        named = f"character set {column.charset}"
    logged = "" if info.charset is None else f" (the binlog names collation id {info.charset})"
    raise SourceError(
        f"column {column.name!r} of {schema.qualified_name} has {named} in the schema{logged} "
        f"at binlog position {where}, and sparkcdc has no decoder for it, so its text cannot "
        "be read without guessing. Convert the column to a character set sparkcdc reads "
        "(utf8mb4, latin1 and the other server character sets), or leave the table out of "
        "the capture"
    )


def _disagree(where: str, schema: TableSchema, what: str) -> SourceError:
    return SourceError(
        f"the rows of {schema.qualified_name} at binlog position {where} do not match the "
        f"schema sparkcdc holds for that position ({what}). The binlog leaves out what "
        "decoding the rows needs (column metadata: binlog_row_metadata is not FULL; or a "
        "collation sparkcdc does not know), so rows are decoded with the schema history, and "
        "this one does not describe them: a schema change the stream has not seen. Restart "
        f"the query; if this repeats, {_FIX} and take a new snapshot"
    )


def is_incomplete(columns: Iterable[ColumnInfo]) -> bool:
    """True when a TABLE_MAP lacks what decoding its rows needs: column names
    (``binlog_row_metadata`` is not FULL), the signedness of a numeric column (names but no
    SIGNEDNESS block), or the character set of a text column whose collation id sparkcdc
    does not know. The schema supplies them (:func:`complete_columns`).
    """
    return any(c.name is None or c.unsigned is None or _unknown_collation(c) for c in columns)


def missing_metadata(columns: Iterable[ColumnInfo]) -> str:
    """What an incomplete TABLE_MAP lacks, in words, for an error message.

    >>> from sparkcdc.mysql.protocol.constants import ColumnType
    >>> missing_metadata((ColumnInfo("n", ColumnType.VARCHAR, 80, True, False, 4000, None, None),))
    'a text column with collation id 4000, which sparkcdc does not know'
    """
    if any(c.name is None for c in columns):
        return "no column metadata (binlog_row_metadata is not FULL)"
    unsigned = [c.name or "" for c in columns if c.unsigned is None]
    if unsigned:
        return (
            "column names but no signedness of its numeric columns "
            f"({', '.join(unsigned)}: no SIGNEDNESS block)"
        )
    unknown = {c.charset for c in columns if _unknown_collation(c)}
    ids = ", ".join(str(i) for i in sorted(i for i in unknown if i is not None))
    return f"a text column with collation id {ids}, which sparkcdc does not know"


def _unknown_collation(info: ColumnInfo) -> bool:
    return (
        info.type in _CHARACTER
        and info.charset is not None
        and not is_known_collation(info.charset)
    )


@dataclass(frozen=True)
class TableVersions:
    """Per table, the schema versions of a stream and the binlog position (as ``seq``) from
    which each holds, in order. ``at`` gives the version of a position."""

    versions: dict[tuple[str, str], list[tuple[int, TableSchema]]]

    def at(self, database: str, table: str, seq: int) -> TableSchema | None:
        """The version holding at ``seq`` (the last one starting at or before it)."""
        found = None
        for start, schema in self.versions.get((database, table), ()):
            if start > seq:
                break
            found = schema
        return found

    def starts(self, database: str, table: str) -> frozenset[int]:
        """Where versions of the table start: the positions of the DDL the stream knows."""
        return frozenset(s for s, _ in self.versions.get((database, table), ()))

    def to_json(self) -> list[Any]:
        return [
            [db, t, [[s, schema_to_json(schema)] for s, schema in entries]]
            for (db, t), entries in self.versions.items()
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> TableVersions:
        return cls(
            {
                (str(db), str(t)): [(int(s), schema_from_json(raw)) for s, raw in entries]
                for db, t, entries in data
            }
        )

    @classmethod
    def of(cls, schemas: Iterable[TableSchema], start: int = -1) -> TableVersions:
        """One version per table, holding from ``start`` (by default from the beginning)."""
        return cls({(s.database, s.table): [(start, s)] for s in schemas})


__all__ = [
    "Column",
    "TableVersions",
    "complete_columns",
    "image_columns",
    "is_incomplete",
    "labels",
    "missing_metadata",
    "same_storage",
]
