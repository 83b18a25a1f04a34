"""The MySQL/MariaDB source behind the source interface (:mod:`sparkcdc.model.dialect`).

Positions are :class:`BinlogPosition`; the change stream is the binlog, read over a
replication connection with a server id of the stream's (claimed with named locks); the
server's end is ``SHOW MASTER STATUS`` (with its GTID state).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from sparkcdc.errors import ConfigError, SourceError
from sparkcdc.model.canonical import ChecksumTable
from sparkcdc.model.dialect import (
    CapturedSchemas,
    ChunkSelect,
    RangeRead,
    Session,
    SourceDialect,
)
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.options import ServerIdRange, SourceOptions
from sparkcdc.model.position import BinlogPosition, GtidSet
from sparkcdc.model.schema import Column, TableSchema, with_tinyint1
from sparkcdc.model.tables import TableFilter, TablePredicate
from sparkcdc.model.validation import ValidationIssue
from sparkcdc.mysql.admin import catalog, server, validator
from sparkcdc.mysql.admin.server_ids import ServerIdClaim
from sparkcdc.mysql.admin.validator import check_captured_databases, check_source
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.chunks import checksums, read_back, reads
from sparkcdc.mysql.chunks.key_ranks import ServerKeyRanking
from sparkcdc.mysql.chunks.queries import SqlSplitQueries, column_collation
from sparkcdc.mysql.ddl import schema_changes
from sparkcdc.mysql.ddl.schema_changes import MySqlDdl
from sparkcdc.mysql.ddl.table_names import with_shadows
from sparkcdc.mysql.protocol.connection import ConnectionSettings, KeptConnection, sql_connection
from sparkcdc.mysql.stream import positions
from sparkcdc.mysql.stream.binlog_range import Share, read_range, refuse_row_changing_ddl
from sparkcdc.mysql.stream.follower import BinlogFollower

SCHEMA_READ_ATTEMPTS = 5


def connection_settings(options: SourceOptions) -> ConnectionSettings:
    """How the source options reach the server.

    >>> from sparkcdc.model.options import SourceOptions
    >>> options = SourceOptions.from_options(
    ...     {"hostname": "db", "username": "u", "password": "p", "database-name": "app",
    ...      "scan.startup.mode": "latest-offset"})
    >>> connection_settings(options).endpoint
    'db:3306'
    """
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


def _in(tables: frozenset[tuple[str, str]], database: str, table: str) -> bool:
    return (database, table) in tables


def _captured_or(
    captured: TablePredicate, tables: frozenset[tuple[str, str]], database: str, table: str
) -> bool:
    return captured(database, table) or (database, table) in tables


class MySqlDialect(SourceDialect[BinlogPosition]):
    """The MySQL/MariaDB source: the binlog is its change stream."""

    type_name = "mysql-cdc"

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = connection_settings(options)

    def check_server(self) -> None:
        check_source(self.settings)

    def validate(self) -> list[ValidationIssue]:
        return validator.validate_source(self.settings)

    def tls_report(self) -> list[tuple[str, str]]:
        return validator.tls_report(self.settings)

    def server_name(self) -> str:
        endpoint: str = self.settings.endpoint
        return endpoint

    def session(self, database: str | None = None) -> KeptConnection:
        return KeptConnection.to(self.settings, database)

    def follower(self) -> BinlogFollower:
        return BinlogFollower(self.settings)

    def claim_readers(self, ids: ServerIdRange) -> ServerIdClaim:
        return ServerIdClaim.take(self.settings, ids)

    def match_tables(self, conn: Any, tables: TableFilter) -> list[tuple[str, str]]:
        return catalog.match_tables(conn, tables)

    def check_databases(self, conn: Any, databases: Iterable[str]) -> None:
        check_captured_databases(conn, server.server_info(conn), databases)

    def load_schema(self, conn: Any, database: str, table: str) -> TableSchema:
        schema = catalog.load_schema(conn, database, table)
        return with_tinyint1(schema, as_boolean=self.options.tinyint1_as_boolean)

    def unique_keys(self, conn: Any, database: str, table: str) -> list[tuple[str, ...]]:
        return catalog.unique_keys(conn, database, table)

    def shared_keys(
        self, conn: Any, database: str, table: str, columns: Sequence[str], limit: int
    ) -> list[tuple[Any, ...]]:
        listed = ", ".join(quote_mysql(c) for c in columns)
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT {listed}, COUNT(*) FROM {quote_mysql_table(database, table)} "
                f"GROUP BY {listed} HAVING COUNT(*) > 1 LIMIT {int(limit)}"
            )
            return [tuple(row) for row in cur.fetchall()]

    def estimated_rows(self, conn: Any, database: str, table: str) -> int:
        return catalog.estimated_rows(conn, database, table)

    def create_table_statement(self, schema: TableSchema) -> str:
        return schema_changes.create_table_statement(schema)

    def current_position(self, conn: Any) -> BinlogPosition:
        return server.current_position(conn, server.server_info(conn))

    def position_from_offset(self, offset: dict[str, Any]) -> BinlogPosition:
        return BinlogPosition.from_offset(offset)

    def capture_schemas(self, names: Sequence[tuple[str, str]]) -> CapturedSchemas[BinlogPosition]:
        # read between two positions: a DDL on one of them between those would leave it
        # unclear which side of it they were read on, so they are read again
        captured = frozenset(names)
        reader_id = ServerIdRange.parse(self.options.server_id, 1).pick(0)
        with sql_connection(self.settings) as conn:
            info = server.server_info(conn)
            for _attempt in range(SCHEMA_READ_ATTEMPTS):
                before = server.current_position(conn, info, with_gtids=False)
                tables = tuple(self.load_schema(conn, db, t) for db, t in names)
                read_at = server.current_position(conn, info, with_gtids=False)
                racing = before < read_at and any(
                    True
                    for _ in self.read_range(
                        RangeRead(before, read_at, reader_id, captured, rows=False)
                    )
                )
                if not racing:
                    break
            else:
                raise SourceError(
                    f"the captured tables' schemas changed during each of {SCHEMA_READ_ATTEMPTS} "
                    "attempts to read them (DDL running in a loop?); start the query again later"
                )
            metadata = server.variables(conn, "binlog_row_metadata").get("binlog_row_metadata")
        full = metadata is not None and metadata.upper() == "FULL"  # binlog_row_metadata
        return CapturedSchemas(tables, read_at, full)

    def startup_position(self) -> BinlogPosition:
        options = self.options
        mode = options.scan_startup_mode
        with sql_connection(self.settings) as conn:
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
                return positions.position_for_timestamp(
                    conn, self.settings, info, options.startup_timestamp_millis
                )
        raise ConfigError(
            f"scan.startup.mode={mode} is not available in this version; use latest-offset, "
            "earliest-offset, specific-offset or timestamp"
        )

    def schema_versions(
        self,
        start: BinlogPosition,
        read_at: BinlogPosition,
        tables: Sequence[TableSchema],
        reader_id: int,
        saved: str,
    ) -> str:
        """The captured tables' schema versions by position, for a server that logs rows
        without column metadata (``binlog_row_metadata`` not FULL).

        The DDL statements on captured tables between ``start`` and ``read_at`` (where the
        schemas were read) are found in the binlog. None: the read schema holds from
        ``start``. One: the version ``saved`` by the run that stopped at it holds before it,
        the read one after it. Two or more: the schema between them was never read; stop.
        Later DDL stops the run (read_range), and the next run learns its schema this way.
        """
        kept = TableVersions.from_json(json.loads(saved)) if saved else TableVersions({})
        ddl: dict[tuple[str, str], list[BinlogPosition]] = {}
        if start < read_at:
            captured = frozenset((t.database, t.table) for t in tables)
            for change in self.read_range(
                RangeRead(start, read_at, reader_id, captured, rows=False)
            ):
                assert isinstance(change, SchemaChange) and change.position is not None
                ddl.setdefault((change.database, change.table), []).append(change.position)
        versions: dict[tuple[str, str], list[tuple[int, TableSchema]]] = {}
        for schema in tables:
            key = (schema.database, schema.table)
            known = list(kept.versions.get(key, []))
            changes = ddl.get(key, [])
            if len(changes) > 1:
                raise SourceError(
                    f"table {schema.qualified_name} changed {len(changes)} times (at "
                    f"{changes[0]} and {changes[1]}) in the binlog this query has yet to read, "
                    "and the server logs rows without column metadata (binlog_row_metadata is "
                    "not FULL): the rows between those changes cannot be decoded exactly. "
                    "SET GLOBAL binlog_row_metadata='FULL' and take a new snapshot "
                    "(scan.startup.mode=initial with a new checkpoint and state.location)"
                )
            if changes:
                before = TableVersions({key: known}).at(*key, start.seq())
                if before is None:
                    raise SourceError(
                        f"table {schema.qualified_name} changed at {changes[0]} in the binlog "
                        "this query has yet to read, and the server logs rows without column "
                        "metadata (binlog_row_metadata is not FULL), but no schema of the "
                        "table before that change was kept (give the query a state.location, "
                        "which keeps them). SET GLOBAL binlog_row_metadata='FULL' and take a "
                        "new snapshot, or start from latest-offset"
                    )
                known = [*(v for v in known if v[0] < changes[0].seq()), (changes[0].seq(), schema)]
            elif not known or known[-1][1] != schema:
                known = [*known, (start.seq(), schema)]
            versions[key] = known
        return json.dumps(TableVersions(versions).to_json())

    def versions_with(self, versions: str, added: Sequence[TableSchema]) -> str:
        grown = TableVersions.from_json(json.loads(versions)).versions
        grown.update(TableVersions.of(added).versions)
        return json.dumps(TableVersions(grown).to_json())

    def read_range(self, spec: RangeRead[BinlogPosition]) -> Iterator[RowChanges | SchemaChange]:
        includes: TablePredicate = spec.captures
        ddl_of = partial(_captured_or, includes, spec.gone) if spec.gone else includes
        refuse = spec.refuse_row_changing_ddl
        changes = read_range(
            self.settings,
            spec.reader_id,
            spec.start,
            spec.end,
            includes,
            TableVersions.from_json(json.loads(spec.versions)) if spec.versions else None,
            rows=spec.rows,
            share=Share(spec.share, spec.shares),
            ddl_filter=partial(with_shadows, ddl_of) if spec.follow_copies else ddl_of,
            # a DROP DATABASE of captured tables drops their rows with no row image
            stop_database=spec.databases.__contains__ if refuse else None,
            stop_table=partial(_in, spec.gone) if refuse and spec.gone else None,
        )
        return refuse_row_changing_ddl(changes) if refuse else changes

    # -- the incremental snapshot -------------------------------------------------------

    def chunk_reader(self, conn: Any) -> reads.MySqlChunkReader:
        return reads.MySqlChunkReader(conn, self.settings)

    def split_queries(
        self, conn: Session, schema: TableSchema, key_column: str, collation: str | None
    ) -> SqlSplitQueries:
        if not isinstance(conn, KeptConnection):
            raise TypeError(f"the splitter's queries run on a session, got {type(conn).__name__}")
        return SqlSplitQueries(conn, schema, key_column, collation)

    def key_collation(self, conn: Any, database: str, table: str, column: str) -> str | None:
        return column_collation(conn, database, table, column)

    def key_ranking(self, conn: Any = None) -> ServerKeyRanking:
        return ServerKeyRanking(self.session() if conn is None else KeptConnection.over(conn))

    def read_backfill(
        self,
        schema: TableSchema,
        start: BinlogPosition,
        end: BinlogPosition,
        reader_id: int,
        settled: list[BinlogPosition],
    ) -> Iterator[RowChanges | SchemaChange]:
        return reads.read_backfill(self.settings, schema, start, end, reader_id, settled)

    # -- decoding the change stream ----------------------------------------------------

    def compiled_rows(self) -> bool:
        return arrowrows.compiled()

    # -- what the pipelines ask of the source -----------------------------------------

    def ddl(self) -> MySqlDdl:
        return MySqlDdl(tinyint1_as_boolean=self.options.tinyint1_as_boolean)

    def position_now(self) -> BinlogPosition:
        with sql_connection(self.settings) as conn:
            return server.current_position(conn, server.server_info(conn), with_gtids=False)

    def read_column(
        self, schema: TableSchema, keys: Sequence[Column], column: Column
    ) -> Iterator[list[tuple[Any, ...]]]:
        pages: Iterator[list[tuple[Any, ...]]]
        pages = read_back.read_column_pages(self.settings, schema, keys, column)
        return pages

    def canonical_value(self, column: Column, sink_type: str) -> str | None:
        return checksums.canonical_value(column, sink_type)

    def bucket_sums(
        self, conn: Any, table: ChecksumTable, chunk: ChunkSelect, buckets: int
    ) -> list[tuple[int, int, int]]:
        return checksums.bucket_sums(conn, table, chunk, buckets)

    def bucket_rows(
        self, conn: Any, table: ChecksumTable, chunk: ChunkSelect, buckets: int, wanted: set[int]
    ) -> list[tuple[Any, ...]]:
        return checksums.bucket_rows(conn, table, chunk, buckets, wanted)

    def row_fields(
        self, conn: Any, table: ChecksumTable, keys: Sequence[Sequence[Any]]
    ) -> dict[str, tuple[str, ...]]:
        return checksums.row_fields(conn, table, keys)
