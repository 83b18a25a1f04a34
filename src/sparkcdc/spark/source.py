"""The ``mysql-cdc`` PySpark streaming source (the only camelCase code is here).

Offsets are ``{"binlog": <BinlogPosition.to_offset()>}``, always on transaction
boundaries. Batch ``k`` reads ``[B_{k-1}, B_k)`` in one partition on an
executor; a replayed batch reads the same range and yields the same rows.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sparkcdc.errors import ConfigError
from sparkcdc.model.options import ServerIdRange, SourceOptions
from sparkcdc.model.position import BinlogPosition, GtidSet
from sparkcdc.model.schema import TableSchema
from sparkcdc.mysql import catalog, server
from sparkcdc.mysql.binlog_range import read_range
from sparkcdc.mysql.connection import ConnectionSettings, sql_connection
from sparkcdc.spark.changelog import (
    ENVELOPE_DDL,
    Builder,
    EnvelopeBuilder,
    TypedChangelogBuilder,
    typed_ddl,
)

log = logging.getLogger(__name__)

FORMAT_NAME = "mysql-cdc"


@dataclass(frozen=True)
class CapturePlan:
    """What one stream captures: its tables (with schemas) and its output shape."""

    tables: tuple[TableSchema, ...]

    @property
    def typed(self) -> bool:
        return len(self.tables) == 1

    def spark_ddl(self) -> str:
        return typed_ddl(self.tables[0]) if self.typed else ENVELOPE_DDL

    def builder(self) -> Builder:
        if self.typed:
            return TypedChangelogBuilder(self.tables[0])
        return EnvelopeBuilder(self.tables)

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
    )


def plan_capture(options: SourceOptions, settings: ConnectionSettings) -> CapturePlan:
    with sql_connection(settings) as conn:
        names = catalog.match_tables(conn, options.database_name, options.table_name)
        return CapturePlan(tuple(catalog.load_schema(conn, db, t) for db, t in names))


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


@dataclass(frozen=True)
class BinlogRangePartition(InputPartition):
    """One binlog range ``[start, end)`` of one batch; offsets as JSON text."""

    start: str
    end: str
    server_id: int


def _position(offset: dict[str, Any]) -> BinlogPosition:
    return BinlogPosition.from_offset(offset["binlog"])


def _offset(position: BinlogPosition) -> dict[str, Any]:
    return {"binlog": position.to_offset()}


class MySqlCdcStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions, plan: CapturePlan, server_ids: ServerIdRange):
        self.options = options
        self.plan = plan
        self.server_ids = server_ids
        self.settings = connection_settings(options)

    def initialOffset(self) -> dict[str, Any]:
        position = startup_position(self.options, self.settings)
        log.info("mysql-cdc: new query starts at %s (%s)", position, self.options.scan_startup_mode)
        return _offset(position)

    def latestOffset(self, *_args: Any) -> dict[str, Any]:
        # Spark 4.1 calls latestOffset(); 4.2+ may pass (start, limit).
        with sql_connection(self.settings) as conn:
            return _offset(server.current_position(conn, server.server_info(conn)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if not _position(start) < _position(end):
            return []
        return [BinlogRangePartition(json.dumps(start), json.dumps(end), self.server_ids.pick(0))]

    def read(self, partition: InputPartition) -> Any:
        assert isinstance(partition, BinlogRangePartition)
        start = _position(json.loads(partition.start))
        end = _position(json.loads(partition.end))
        changes = read_range(self.settings, partition.server_id, start, end, self.plan.includes)
        yield from self.plan.builder().batches(changes)

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        pass


class MySqlCdcDataSource(DataSource):
    """``spark.readStream.format("mysql-cdc")`` with Flink CDC's option names."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source_options = SourceOptions.from_options(dict(options))
        # resolved once: a random default id must stay the same for the whole query
        self.server_ids = ServerIdRange.parse(self.source_options.server_id)
        self._plan: CapturePlan | None = None

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    @property
    def plan(self) -> CapturePlan:
        if self._plan is None:
            settings = connection_settings(self.source_options)
            self._plan = plan_capture(self.source_options, settings)
        return self._plan

    def schema(self) -> str:
        return self.plan.spark_ddl()

    def streamReader(self, schema: Any) -> MySqlCdcStreamReader:
        from sparkcdc.mysql.validator import check_source

        settings = connection_settings(self.source_options)
        check_source(settings)
        return MySqlCdcStreamReader(self.source_options, self.plan, self.server_ids)
