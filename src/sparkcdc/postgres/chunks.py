"""A snapshot chunk's SQL side on PostgreSQL (DESIGN.md §12.3): the watermarks, the
chunk SELECT decoded as the stream decodes (text into Arrow, ``postgres/values.py``), the
splitter's queries, and the backfill slot a chunk's ``[LW, HW)`` is read from.

A chunk key is one whose order Python reproduces exactly (``key_collation``): an integer
(``smallint``, ``integer``, ``bigint``), a ``uuid`` (the server compares its 16 bytes, as
Python compares its lower-case text), or ``text`` / ``varchar`` compared under
``COLLATE "C"`` in every split and chunk query (a UTF-8 database's byte order: code points,
``CODE_POINT_COLLATION``), whatever the column's own collation.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pyarrow as pa

from sparkcdc.errors import SchemaChangedError, SnapshotError
from sparkcdc.model.dialect import ChunkSelect
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.postgres.catalog import SqlRows, estimated_rows, quote_table
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import LogicalMessage
from sparkcdc.postgres.positions import watermark
from sparkcdc.postgres.replication import (
    PostgresEndpoint,
    ReplicationConnection,
    quote_identifier,
)
from sparkcdc.postgres.session import KeptSession
from sparkcdc.postgres.slots import PLUGIN
from sparkcdc.postgres.transactions import Transaction
from sparkcdc.postgres.types import ColumnType, DecimalHandlingMode, TypeCatalog, column_type
from sparkcdc.postgres.values import decode_text_column

# the chunk key types whose order Python reproduces exactly
INTEGER_KEYS = frozenset({"int2", "int4", "int8", "smallint", "integer", "bigint"})
UUID_KEYS = frozenset({"uuid"})
TEXT_KEYS = frozenset({"text", "varchar"})  # not bpchar: it compares without trailing spaces


def key_sql(column: Column) -> str:
    """The chunk key as the split and chunk queries compare it: text under "C".

    >>> key_sql(Column("k", "text", "text", False, "STRING"))
    '"k" COLLATE "C"'
    """
    quoted = quote_identifier(column.name)
    return f'{quoted} COLLATE "C"' if column.data_type in TEXT_KEYS else quoted


def key_column_of(schema: TableSchema, name: str) -> Column:
    return next(c for c in schema.columns if c.name == name)


_backfills = itertools.count()


class BackfillSlot:
    """A temporary logical slot on a replication connection of its own, created before a
    chunk's LW: a chunk's ``[LW, HW)`` is read from it while the stream's slot is read by
    the stream (one reader per slot). PostgreSQL drops it when the connection ends, a
    killed task's too."""

    def __init__(self, endpoint: PostgresEndpoint, prefix: str) -> None:
        self.name = f"{prefix}_bf_{os.getpid()}_{next(_backfills)}"[:63]
        self._conn = ReplicationConnection.open(endpoint)
        try:
            self._conn.query(
                f"CREATE_REPLICATION_SLOT {self.name} TEMPORARY LOGICAL {PLUGIN} NOEXPORT_SNAPSHOT"
            )
        except BaseException:
            self._conn.close()
            raise

    def transactions(self, start: Lsn, end: Lsn, publication: str) -> Iterator[Transaction]:
        """The transactions committed in ``[start, end)``; the slot is dropped after."""
        try:
            stream = self._conn.start_replication(self.name, start, [publication])
            for item in stream.transactions(end):
                if not isinstance(item, LogicalMessage):
                    yield item
        finally:
            self.close()

    def close(self) -> None:
        self._conn.close()


class PgChunkReader:
    """A task's chunk reads on one SQL connection (``ChunkReader``).

    LW is a watermark (``positions.watermark``), and the transactions in progress just
    after it are noted. A transaction whose commit record lies before LW may still be
    invisible for a moment (its commit is logged before it is made visible), so one of
    those the SELECT's snapshot does not see and that committed is ``unsettled``: the chunk
    is read again (DESIGN.md §12.3)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        mode: DecimalHandlingMode,
        open_backfill: Callable[[], None],
        close_backfill: Callable[[], None],
    ) -> None:
        self._conn, self._mode = conn, mode
        self._open_backfill, self._close_backfill = open_backfill, close_backfill
        self._low: Lsn | None = None
        self._running: list[str] = []
        self._unseen: list[str] = []

    def low(self) -> Lsn:
        self._open_backfill()  # before LW: the slot must hold it
        self._low = watermark(self._conn)
        rows = self._conn.execute(
            "SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) x"
        ).fetchall()
        self._running = [str(r[0]) for r in rows]
        return self._low

    def high(self) -> Lsn:
        high = watermark(self._conn)
        if self._low is not None and not self._low < high:
            self._close_backfill()  # nothing to backfill: the slot goes now
        return high

    def unsettled(self) -> list[str]:
        if not self._unseen:
            return []
        rows = self._conn.execute(
            "SELECT x::text FROM unnest(%s::xid8[]) x WHERE pg_xact_status(x) = 'committed'",
            [self._unseen],
        ).fetchall()
        return [f"xid {r[0]}" for r in rows]

    def select(self, spec: ChunkSelect) -> tuple[pa.Table, str]:
        schema = spec.schema
        types = column_types(self._conn, schema, self._mode)
        columns = ", ".join(f"{quote_identifier(c.name)}::text" for c in schema.columns)
        key = key_sql(key_column_of(schema, spec.key_column))
        where, args = chunk_condition(key, spec.start, spec.end)
        sql = f"SELECT {columns} FROM {quote_table(schema.database, schema.table)} WHERE {where}"
        with self._conn.transaction():
            # one snapshot for the rows and the look at the transactions running after LW
            self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            try:
                rows = self._conn.execute(sql, args).fetchall()
            except psycopg.errors.UndefinedTable:
                raise SnapshotError(
                    f"table {schema.qualified_name} is gone while chunk {spec.index} was read"
                ) from None
            except psycopg.errors.UndefinedColumn as error:
                raise SchemaChangedError(
                    f"table {schema.qualified_name} changed while chunk {spec.index} was read: "
                    f"{str(error).strip()}"
                ) from None
            unseen = self._conn.execute(
                "SELECT x::text FROM unnest(%s::xid8[]) x "
                "WHERE NOT pg_visible_in_snapshot(x, pg_current_snapshot())",
                [self._running],
            ).fetchall()
        self._unseen = [str(r[0]) for r in unseen]
        arrays = [
            decode_text_column(
                [row[i] for row in rows], mapped, f"{schema.qualified_name}.{column.name}"
            )
            for i, (column, mapped) in enumerate(zip(schema.columns, types, strict=True))
        ]
        target = pa.schema(
            pa.field(c.name, mapped.arrow_type)
            for c, mapped in zip(schema.columns, types, strict=True)
        )
        return pa.Table.from_arrays(arrays, schema=target), "text"


def chunk_condition(key: str, start: Any, end: Any) -> tuple[str, list[Any]]:
    """The WHERE of a chunk ``[start, end)`` of ``key`` (the first chunk holds the NULLs).

    >>> chunk_condition('"id"', None, 10)
    ('("id" IS NULL OR "id" < %s)', [10])
    >>> chunk_condition('"id"', 10, None)
    ('"id" >= %s', [10])
    """
    if start is None and end is None:
        return "TRUE", []
    if start is None:
        return f"({key} IS NULL OR {key} < %s)", [end]
    if end is None:
        return f"{key} >= %s", [start]
    return f"{key} >= %s AND {key} < %s", [start, end]


def column_types(
    conn: psycopg.Connection[Any], schema: TableSchema, mode: DecimalHandlingMode
) -> list[ColumnType]:
    """The table's columns typed as the stream types them (by type OID and typmod)."""
    rows = conn.execute(
        "SELECT a.attname, a.atttypid, a.atttypmod FROM pg_attribute a "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        [quote_table(schema.database, schema.table)],
    ).fetchall()
    if [str(r[0]) for r in rows] != list(schema.column_names):
        raise SchemaChangedError(
            f"table {schema.qualified_name} has columns {[r[0] for r in rows]} now, not "
            f"{list(schema.column_names)}: it changed while it was read"
        )
    catalog = TypeCatalog.builtin().load(SqlRows(conn), (int(r[1]) for r in rows))
    return [
        column_type(
            catalog, int(oid), int(typmod), where=f"{schema.qualified_name}.{name}", mode=mode
        )
        for name, oid, typmod in rows
    ]


class PgSplitQueries:
    """``SplitQueries`` of a chunk key over a kept session: values in the server's order of
    the key (``key_sql``), returned as Python orders them (integers; uuids and strings as
    text)."""

    def __init__(self, session: KeptSession, schema: TableSchema, key_column: str) -> None:
        self._session = session
        self._schema = schema
        self._table = quote_table(schema.database, schema.table)
        column = key_column_of(schema, key_column)
        self._key = key_sql(column)
        self._out = "k" if column.data_type in INTEGER_KEYS else "k::text"

    def _value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = self._session.run(lambda conn: conn.execute(sql, list(args)).fetchone())
        return None if row is None else row[0]

    def _first(self, where: str, order: str, args: Sequence[Any] = ()) -> Any:
        """The first key of the rows ``where`` in ``order`` (ASC/DESC), NULLs skipped."""
        return self._value(
            f"SELECT {self._out} FROM (SELECT {self._key} AS k FROM {self._table} "
            f"WHERE {self._key} IS NOT NULL AND {where} ORDER BY {self._key} {order} LIMIT 1) c",
            args,
        )

    def bounds(self) -> tuple[Any, Any] | None:
        low = self._first("TRUE", "ASC")
        if low is None:
            return None
        return low, self._first("TRUE", "DESC")

    def row_count(self) -> int:
        schema = self._schema
        estimate = self._session.run(
            lambda conn: estimated_rows(conn, schema.database, schema.table)
        )
        if estimate > 0:
            return int(estimate)
        return int(self._value(f"SELECT COUNT(*) FROM {self._table}") or 0)

    def next_chunk_max(self, start: Any, size: int) -> Any | None:
        return self._value(
            f"SELECT {self._out} FROM (SELECT {self._key} AS k FROM {self._table} "
            f"WHERE {self._key} >= %s ORDER BY {self._key} LIMIT {int(size)}) AS c "
            "ORDER BY k DESC LIMIT 1",
            [start],
        )

    def min_above(self, value: Any) -> Any | None:
        return self._first(f"{self._key} > %s", "ASC", [value])

    def compare(self, a: Any, b: Any) -> int:
        return int(a > b) - int(a < b)
