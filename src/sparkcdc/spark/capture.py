"""What a query captures: the tables matched by the options, their schemas, where reading starts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from sparkcdc.errors import ConfigError, SourceError
from sparkcdc.model.options import SNAPSHOT_MODES, ServerIdRange, SourceOptions
from sparkcdc.model.position import BinlogPosition, GtidSet
from sparkcdc.model.schema import TableSchema, with_tinyint1
from sparkcdc.mysql import catalog, server
from sparkcdc.mysql.binlog_range import read_range
from sparkcdc.mysql.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.validator import check_captured_databases
from sparkcdc.snapshot.splitter import chunk_key_column
from sparkcdc.spark.changelog import (
    ENVELOPE_DDL,
    Builder,
    EnvelopeBuilder,
    TablesBuilder,
    TypedChangelogBuilder,
    typed_ddl,
)
from sparkcdc.spark.offsets import is_captured


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


def connection_settings(options: SourceOptions) -> ConnectionSettings:
    return ConnectionSettings(
        host=options.hostname,
        port=options.port,
        user=options.username,
        password=options.password.get_secret_value(),
        connect_timeout_s=options.connect_timeout_s,
        read_timeout_s=max(options.heartbeat_interval_s * 3, 60.0),
        tls=options.tls_settings(),
        connect_max_retries=options.connect_max_retries,
    )


SCHEMA_READ_ATTEMPTS = 5


def load_schema(conn: Any, database: str, table: str, options: SourceOptions) -> TableSchema:
    """A captured table's schema, TINYINT(1) typed as the source options say."""
    schema = catalog.load_schema(conn, database, table)
    return with_tinyint1(schema, as_boolean=options.tinyint1_as_boolean)


def plan_capture(options: SourceOptions, settings: ConnectionSettings) -> CapturePlan:
    """The captured tables' schemas and the binlog position they hold at.

    The schemas are read between two positions; a DDL on a captured table between them
    would leave it unclear which side of it they were read on, so they are read again.
    """
    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        names = catalog.match_tables(conn, options.table_filter())
        check_captured_databases(conn, info, (db for db, _ in names))
        captured = frozenset(names)
        for _attempt in range(SCHEMA_READ_ATTEMPTS):
            before = server.current_position(conn, info, with_gtids=False)
            tables = tuple(load_schema(conn, db, t, options) for db, t in names)
            read_at = server.current_position(conn, info, with_gtids=False)
            racing = before < read_at and any(
                True
                for _ in read_range(
                    settings, ServerIdRange.parse(options.server_id, 1).pick(0), before,
                    read_at, partial(is_captured, captured), rows=False,
                )
            )  # fmt: skip
            if not racing:
                break
        else:
            raise SourceError(
                f"the captured tables' schemas changed during each of {SCHEMA_READ_ATTEMPTS} "
                "attempts to read them (DDL running in a loop?); start the query again later"
            )
        metadata = server.variables(conn, "binlog_row_metadata").get("binlog_row_metadata")
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
        read_at.seq(),
        json.dumps(read_at.to_offset()),
        metadata is not None and metadata.upper() == "FULL",
    )


def startup_position(options: SourceOptions, settings: ConnectionSettings) -> BinlogPosition:
    """Where a new query starts reading, by ``scan.startup.mode``."""
    mode = options.scan_startup_mode
    with sql_connection(settings) as conn:
        info = server.server_info(conn)
        if mode == "latest-offset":
            return server.current_position(conn, info)
        if mode == "earliest-offset":
            return server.earliest_position(conn, info)
        if mode == "specific-offset":
            gtids = (
                GtidSet.parse(options.specific_offset_gtid_set)
                if options.specific_offset_gtid_set
                else None
            )
            if options.specific_offset_file and options.specific_offset_pos is not None:
                return BinlogPosition(
                    options.specific_offset_file, options.specific_offset_pos, gtids
                )
            raise ConfigError(
                "scan.startup.specific-offset.gtid-set alone is not supported yet; give "
                "scan.startup.specific-offset.file and .pos as well"
            )
        if mode == "timestamp":
            assert options.startup_timestamp_millis is not None
            return server.position_for_timestamp(
                conn, settings, info, options.startup_timestamp_millis
            )
    raise ConfigError(
        f"scan.startup.mode={mode} is not available in this version; use latest-offset, "
        "earliest-offset, specific-offset or timestamp"
    )
