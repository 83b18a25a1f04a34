"""The chunk splitter's questions of a table (Flink CDC's ``queryMinMax``,
``queryNextChunkMax``) in MySQL's SQL, values in the binlog decoder's form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.schema import TableSchema
from sparkcdc.mysql.admin.catalog import estimated_rows
from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL, sql_converter, to_sql_param
from sparkcdc.mysql.protocol.connection import KeptConnection

KeyValue = Any


class SqlSplitQueries:
    """SplitQueries over a SQL connection (values in the binlog decoder's form). Every query
    only reads, so one a dropped connection cut short is asked again on a new one where the
    connection is a kept one that opens again (the coordinator's)."""

    def __init__(
        self,
        conn: KeptConnection,
        schema: TableSchema,
        key_column: str,
        collation: str | None = None,
    ) -> None:
        self._conn = conn
        self._collation = collation
        # every statement runs with parameters (pymysql then formats it with %)
        self._table = quote_mysql_table(schema.database, schema.table, pyformat=True)
        self._key = quote_mysql(key_column, pyformat=True)
        self._db, self._name = schema.database, schema.table
        column = next(c for c in schema.columns if c.name == key_column)
        self._convert = sql_converter(column)
        conn.session(SESSION_TIME_ZONE_SQL)

    def _row(self, sql: str, args: Sequence[Any] = ()) -> Any:
        def query(conn: Any) -> Any:
            with conn.cursor() as cur:
                cur.execute(sql, tuple(to_sql_param(a) for a in args))
                return cur.fetchone()

        return self._conn.run(query)

    def _value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = self._row(sql, args)
        value = row[0] if row else None
        if value is not None and self._convert is not None:
            value = self._convert(value)
        return value

    def bounds(self) -> tuple[KeyValue, KeyValue] | None:
        row = self._row(f"SELECT MIN({self._key}), MAX({self._key}) FROM {self._table}")
        if row is None or row[0] is None:
            return None
        lo, hi = row
        if self._convert is not None:
            lo, hi = self._convert(lo), self._convert(hi)
        return lo, hi

    def row_count(self) -> int:
        estimate = self._conn.run(lambda conn: estimated_rows(conn, self._db, self._name))
        if estimate > 0:
            return estimate
        # statistics not gathered yet (fresh table): count
        return int(self._value(f"SELECT COUNT(*) FROM {self._table}") or 0)

    def next_chunk_max(self, start: KeyValue, size: int) -> KeyValue | None:
        return self._value(
            f"SELECT MAX(k) FROM (SELECT {self._key} AS k FROM {self._table} "
            f"WHERE {self._key} >= %s ORDER BY {self._key} LIMIT {int(size)}) AS c",
            (start,),
        )

    def min_above(self, value: KeyValue) -> KeyValue | None:
        return self._value(
            f"SELECT MIN({self._key}) FROM {self._table} WHERE {self._key} > %s", (value,)
        )

    def compare(self, a: KeyValue, b: KeyValue) -> int:
        """By the server, under the key's collation (the splitter compares keys Python
        orders exactly itself)."""
        value = "%s"
        if self._collation is not None:
            charset = self._collation.lower().split("_", 1)[0]
            value = f"CONVERT(%s USING {charset}) COLLATE {self._collation}"
        row = self._row(f"SELECT ({value} > {value}) - ({value} < {value})", (a, b, a, b))
        return int(row[0])


def column_collation(conn: Any, database: str, table: str, column: str) -> str | None:
    """``information_schema.COLUMNS.COLLATION_NAME`` of a column (None: not a string)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND COLUMN_NAME = %s",
            (database, table, column),
        )
        row = cur.fetchone()
    if not row or row[0] is None:
        return None
    value = row[0]
    return value.decode() if isinstance(value, bytes) else str(value)
