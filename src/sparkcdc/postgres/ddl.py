"""The schema change statements of the PostgreSQL change stream, read for the pipelines.

The stream carries no DDL: ``postgres/changes.py`` writes the difference of two Relation
messages as ``ALTER TABLE ... ADD COLUMN / DROP COLUMN / ALTER COLUMN ... TYPE`` and a
TRUNCATE message as ``TRUNCATE TABLE``, in the forms parsed here (DESIGN.md §10.3). Types
are named as ``pg_type`` does (``int4``, ``_text``, ``numeric(10,2)``, ``bit(3)``) and typed
as ``load_schema`` types them; a type the statement alone cannot type (an enum, a domain)
is a ``DdlParseError``, never a guess.
"""

from __future__ import annotations

import re
from typing import Any

from sparkcdc.errors import DdlParseError, SourceError
from sparkcdc.model.schema import Column
from sparkcdc.model.schema_change import (
    AddColumn,
    AlterColumnType,
    ColumnDefault,
    DefaultKind,
    DropColumn,
    SchemaChangeEvent,
    SchemaOf,
    SourceDdl,
    TableChange,
    TruncateTable,
)
from sparkcdc.postgres.types import (
    VARHDRSZ,
    DecimalHandlingMode,
    TypeCatalog,
    column_type,
)

_IDENT = r'"((?:[^"]|"")*)"'
_TABLE = rf"{_IDENT}\.{_IDENT}"
_ALTER = re.compile(
    rf"^ALTER TABLE {_TABLE} (?:(ADD COLUMN) {_IDENT} (.+)|(DROP COLUMN) {_IDENT}"
    rf"|(ALTER COLUMN) {_IDENT} TYPE (.+))$"
)
_TRUNCATE = re.compile(rf"^TRUNCATE TABLE {_TABLE}$")
_TYPE = re.compile(r"^(\w+)(?:\((\d+)(?:,(-?\d+))?\))?$")
# the rows an ADD COLUMN finds get its DEFAULT, which no Relation message carries: they
# are read back from the source (pipeline/evolution/fills.py)
_UNKNOWN_DEFAULT = ColumnDefault(DefaultKind.EXPRESSION)


def _name(quoted: str) -> str:
    return quoted.replace('""', '"')


class PostgresDdl(SourceDdl):
    """The PostgreSQL source's ``SourceDdl``.

    >>> [c.event for c in PostgresDdl().parse("public",
    ...     'ALTER TABLE "public"."t" DROP COLUMN "x"')]
    [DropColumn(name='x')]
    """

    def __init__(self, mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE) -> None:
        self.mode = mode
        self._catalog = TypeCatalog.builtin()
        self._oids = {t.name: oid for oid, t in self._catalog.types.items()}

    def parse(
        self, database: str, statement: str, schema_of: SchemaOf | None = None
    ) -> list[TableChange]:
        truncate = _TRUNCATE.match(statement)
        if truncate:
            return [TableChange(_name(truncate[1]), _name(truncate[2]), TruncateTable())]
        match = _ALTER.match(statement)
        if match is None:
            raise DdlParseError(
                f"{statement!r} is not a schema change statement of the PostgreSQL stream "
                "(ADD COLUMN, DROP COLUMN, ALTER COLUMN ... TYPE, TRUNCATE TABLE)"
            )
        schema, table = _name(match[1]), _name(match[2])
        where = f"{schema}.{table}"
        event: SchemaChangeEvent
        if match[3]:
            column = self._column(_name(match[4]), match[5], where)
            event = AddColumn(column, default=_UNKNOWN_DEFAULT)
        elif match[6]:
            event = DropColumn(_name(match[7]))
        else:
            event = AlterColumnType(self._column(_name(match[9]), match[10], where))
        return [TableChange(schema, table, event)]

    def _column(self, name: str, type_text: str, where: str) -> Column:
        """A column of ``type_text`` (``pg_type``'s name, with numeric's and bit's digits)."""
        typed = _TYPE.match(type_text.strip())
        oid = self._oids.get(typed[1]) if typed else None
        if typed is None or oid is None:
            raise DdlParseError(
                f"column {where}.{name} has type {type_text!r}, which the PostgreSQL stream's "
                "schema change does not type by itself (an enum, a domain, an extension's "
                "type): resnapshot the table (scan.resnapshot.tables) to take its new schema"
            )
        typmod = -1
        if typed[2] is not None and typed[1] == "numeric":
            typmod = ((int(typed[2]) << 16) | (int(typed[3] or 0) & 0x7FF)) + VARHDRSZ
        elif typed[2] is not None and typed[1] == "bit":
            typmod = int(typed[2])
        try:
            mapped = column_type(
                self._catalog, oid, typmod, where=f"{where}.{name}", mode=self.mode
            )
        except SourceError as error:
            raise DdlParseError(str(error)) from None
        # the Relation message says nothing of NOT NULL: nullable, as a sink column added
        # to rows that predate it must be
        return Column(name, typed[1], type_text.strip(), True, mapped.spark_type)

    def default_value(self, column: Column, literal: str) -> Any:
        """No literal DEFAULT reaches the pipeline from PostgreSQL's stream."""
        raise ValueError(f"the PostgreSQL stream carries no DEFAULT of {column.name}")
