"""What a query captures: the tables matched by the options, their schemas, its output shape."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sparkcdc.errors import ConfigError
from sparkcdc.model.dialect import SourceDialect, dialect_for
from sparkcdc.model.options import SNAPSHOT_MODES, SourceOptions
from sparkcdc.model.schema import TableSchema
from sparkcdc.snapshot.splitter import chunk_key_column
from sparkcdc.spark.changelog.envelope import ENVELOPE_DDL, EnvelopeBuilder
from sparkcdc.spark.changelog.tables import TablesBuilder
from sparkcdc.spark.changelog.typed import TypedChangelogBuilder, typed_ddl

Builder = TypedChangelogBuilder | EnvelopeBuilder | TablesBuilder
"""What builds a stream's record batches, by its output shape."""


@dataclass(frozen=True)
class CapturePlan:
    """What one stream captures: its tables (with schemas) and its output shape."""

    tables: tuple[TableSchema, ...]
    shape: str = "auto"  # changelog.shape: auto (typed for one table) | typed | tables | envelope
    schema_seq: int = 0  # the binlog position (as seq) the schemas were read at
    # that position as an offset, and whether the server logs column metadata
    # (binlog_row_metadata=FULL); without it rows decode with the schema versions
    schema_offset: str = ""
    full_metadata: bool = True
    started_tables: int = 0  # how many of ``tables`` the query started with (0: all)

    @property
    def typed(self) -> bool:
        if self.shape == "auto":
            return len(self.tables) == 1
        return self.shape == "typed"

    def spark_ddl(self) -> str:
        if self.shape == "tables":
            return TablesBuilder(self.tables).spark_ddl()
        return typed_ddl(self.tables[0]) if self.typed else ENVELOPE_DDL

    def builder(self) -> Builder:
        if self.typed:
            return TypedChangelogBuilder(self.tables[0], self.schema_seq)
        if self.shape == "tables":
            # the tables the query started with: those that join later travel as text
            return TablesBuilder(self._started_with)
        return EnvelopeBuilder()

    @cached_property
    def _started_with(self) -> tuple[TableSchema, ...]:
        return self.tables[: self.started_tables] if self.started_tables else self.tables

    def includes(self, database: str, table: str) -> bool:
        return (database, table) in self._names

    @cached_property
    def _names(self) -> frozenset[tuple[str, str]]:
        return frozenset((t.database, t.table) for t in self.tables)


def plan_capture(options: SourceOptions, dialect: SourceDialect[Any] | None = None) -> CapturePlan:
    """The captured tables' schemas and the position they hold at, read through the
    source's dialect (the options' by default)."""
    dialect = dialect or dialect_for(options)
    session = dialect.session()
    try:

        def matched(conn: Any) -> list[tuple[str, str]]:
            names = dialect.match_tables(conn, options.table_filter())
            dialect.check_databases(conn, (db for db, _ in names))
            return names

        names = session.run(matched)
    finally:
        session.close()
    captured = dialect.capture_schemas(names)
    tables = captured.tables
    if options.scan_startup_mode in SNAPSHOT_MODES:  # every table can be cut into chunks
        for schema in tables:
            chunk_key_column(schema, options.chunk_key_column)
    if options.changelog_shape == "typed" and len(tables) != 1:
        raise ConfigError(
            f"changelog.shape=typed needs exactly one table, but the patterns match "
            f"{len(tables)}: {', '.join(t.qualified_name for t in tables[:10])}. Narrow the "
            "patterns or use changelog.shape=envelope"
        )
    return CapturePlan(
        tables,
        options.changelog_shape,
        captured.position.seq(),
        json.dumps(captured.position.to_offset()),
        captured.rows_carry_columns,
    )
