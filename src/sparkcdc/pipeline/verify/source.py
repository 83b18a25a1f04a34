"""The source side of verify: a source table's chunked checksums computed by the database
(aggregates pushed down), or its rows read chunk by chunk and transformed in Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.schema import TableSchema
from sparkcdc.pipeline import canonical as cn
from sparkcdc.pipeline.config import TransformRule
from sparkcdc.pipeline.verify.columns import ColumnPlan
from sparkcdc.pipeline.verify.compare import Digest, Sums

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sparkcdc.mysql.protocol.connection import ConnectionSettings
    from sparkcdc.snapshot.splitter import ChunkSplitter


VERIFY_CHUNK_ROWS = 100_000


class SqlSide:
    """A source table read in chunks by the database itself (aggregates pushed down)."""

    def __init__(
        self,
        settings: ConnectionSettings,
        schema: TableSchema,
        values: list[str],
        keys: list[int],
        parallelism: int,
        member: int = 0,
    ) -> None:
        self.settings, self.schema, self.member = settings, schema, member
        self.values, self.keys, self.parallelism = values, keys, parallelism
        # every statement runs with parameters (pymysql formats it with %)
        self.table = quote_mysql_table(schema.database, schema.table, pyformat=True)
        self.key_text = cn.mysql_row_text([values[i] for i in keys])
        self.hash = cn.mysql_hash(cn.mysql_row_text(values))
        self._chunks: list[tuple[str, list[Any]]] | None = None

    def _connect(self) -> Any:
        from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL
        from sparkcdc.mysql.protocol.connection import sql_connection

        conn = sql_connection(self.settings)
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        return conn

    def chunks(self) -> list[tuple[str, list[Any]]]:
        """WHERE clauses of the table's chunks (the snapshot's splitter, larger chunks)."""
        if self._chunks is None:
            from sparkcdc.mysql.chunks.select import chunk_where
            from sparkcdc.snapshot.splitter import all_chunks

            with self._connect() as conn:
                splitter = _splitter(conn, self.schema)
                ranges = all_chunks(splitter)
            self._chunks = [chunk_where(splitter.key_column, c.start, c.end) for c in ranges]
        return self._chunks

    def _each_chunk(self, sql: Callable[[str], str]) -> list[tuple[Any, ...]]:
        """``sql(where)`` run per chunk, ``parallelism`` chunks at a time (a function of the
        WHERE clause, not a format string: names may hold braces)."""

        def run(chunk: tuple[str, list[Any]]) -> list[tuple[Any, ...]]:
            where, params = chunk
            with self._connect() as conn, conn.cursor() as cur:
                cur.execute(sql(where), params)
                return list(cur.fetchall())

        with ThreadPoolExecutor(self.parallelism) as pool:
            return [row for rows in pool.map(run, self.chunks()) for row in rows]

    def buckets(self, n: int) -> Sums:
        def sql(where: str) -> str:
            return (
                f"SELECT b, COUNT(*), SUM(h) FROM (SELECT {cn.mysql_bucket(self.key_text, n)} "
                f"AS b, {self.hash} AS h FROM {self.table} {where}) AS r GROUP BY b"
            )

        sums: Sums = {}
        for bucket, count, total in self._each_chunk(sql):
            rows, hashes = sums.get(int(bucket), (0, 0))
            sums[int(bucket)] = (rows + int(count), hashes + int(total))
        return sums

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]:
        raw = [
            quote_mysql(self.schema.primary_key[i], pyformat=True) for i in range(len(self.keys))
        ]
        keys = [self.values[i] for i in self.keys]
        wanted = ", ".join(str(b) for b in sorted(buckets))

        def sql(where: str) -> str:
            return (
                f"SELECT * FROM (SELECT {self.key_text}, {self.hash}, "
                f"{cn.mysql_bucket(self.key_text, n)} AS b, {', '.join(keys)}, {', '.join(raw)} "
                f"FROM {self.table} {where}) AS r WHERE b IN ({wanted})"
            )

        width = len(keys)
        return {
            str(row[0]): Digest(
                tuple(row[3 : 3 + width]), int(row[1]), tuple(row[3 + width :]), self.member
            )
            for row in self._each_chunk(sql)
        }

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]:
        # a key only the sink has is looked up by its canonical values (exact for integer,
        # decimal, string and date keys)
        mine = [
            d.key if d.raw is None else d.raw
            for d in digests.values()
            if d.raw is None or d.source == self.member
        ]
        if not mine:
            return {}
        key = ", ".join(quote_mysql(k, pyformat=True) for k in self.schema.primary_key)
        row = "(" + ", ".join("%s" for _ in self.schema.primary_key) + ")"
        fields = ", ".join(cn.mysql_field(v) for v in self.values)
        out: dict[str, tuple[str, ...]] = {}
        with self._connect() as conn, conn.cursor() as cur:
            for start in range(0, len(mine), 500):
                part = mine[start : start + 500]
                cur.execute(
                    f"SELECT {self.key_text}, {fields} FROM {self.table} "
                    f"WHERE ({key}) IN ({', '.join(row for _ in part)})",
                    [v for raw in part for v in (raw or ())],
                )
                out.update({str(r[0]): tuple(str(v) for v in r[1:]) for r in cur.fetchall()})
        return out


def transformed_source(
    spark: SparkSession,
    settings: ConnectionSettings,
    schema: TableSchema,
    rule: TransformRule | None,
    plan: ColumnPlan,
) -> DataFrame:
    """A source table as the pipeline writes it into ``plan``'s sink table: its rows read
    with the snapshot's chunk reader, then the pipeline's own transform and cast to the sink
    shape (each compared column fed by its source column)."""
    import pyarrow as pa

    from sparkcdc.model.dialect import ChunkSelect
    from sparkcdc.mysql.chunks.select import select_on
    from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL
    from sparkcdc.mysql.protocol.connection import sql_connection
    from sparkcdc.pipeline.change_frames import to_sink
    from sparkcdc.pipeline.transforms import apply_transform
    from sparkcdc.snapshot.splitter import all_chunks
    from sparkcdc.spark.changelog.decoded import SnapshotRows
    from sparkcdc.spark.changelog.typed import TypedChangelogBuilder

    builder = TypedChangelogBuilder(schema)
    batches: list[pa.RecordBatch] = []
    with sql_connection(settings) as conn:
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        splitter = _splitter(conn, schema)
        for chunk in all_chunks(splitter):
            select = ChunkSelect(schema, splitter.key_column, chunk.start, chunk.end, chunk.index)
            rows, _ = select_on(conn, select)
            snapshot = SnapshotRows(schema.database, schema.table, schema.column_names, rows, 0)
            batches.extend(builder.snapshot_batches(snapshot))
    arrow = pa.Table.from_batches(batches, schema=builder.arrow_schema)
    changes = spark.createDataFrame(arrow)
    transformed = apply_transform(changes, rule, schema.column_names)
    return to_sink(transformed, plan.mapping, plan.table).drop(*METADATA_COLUMNS)


def _splitter(conn: Any, schema: TableSchema) -> ChunkSplitter:
    """The snapshot's splitter of the table (larger chunks) on the caller's open connection."""
    from sparkcdc.mysql.chunks.queries import SqlSplitQueries, column_collation
    from sparkcdc.mysql.protocol.connection import KeptConnection
    from sparkcdc.snapshot.splitter import ChunkSplitter, chunk_key_column

    key = chunk_key_column(schema)
    collation = column_collation(conn, schema.database, schema.table, key)
    queries = SqlSplitQueries(KeptConnection.over(conn), schema, key, collation)
    return ChunkSplitter.over(queries, schema, key, collation, chunk_size=VERIFY_CHUNK_ROWS)


def row_estimate(settings: ConnectionSettings, schema: TableSchema) -> int:
    from sparkcdc.mysql.protocol.connection import sql_connection

    with sql_connection(settings) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.database, schema.table),
        )
        row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0
