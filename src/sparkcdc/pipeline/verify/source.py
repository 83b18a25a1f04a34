"""The source side of verify: a source table's chunked checksums computed by the database
(aggregates pushed down), or its rows read chunk by chunk and transformed in Spark. The chunk
walk is here; each chunk's statements are the source dialect's (DESIGN.md §10.2).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from sparkcdc.model.canonical import ChecksumTable
from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.model.dialect import ChunkSelect, SourceDialect
from sparkcdc.model.schema import TableSchema
from sparkcdc.pipeline.config import TransformRule
from sparkcdc.pipeline.verify.columns import ColumnPlan
from sparkcdc.pipeline.verify.compare import Digest, Sums
from sparkcdc.snapshot.splitter import ChunkSplitter, all_chunks

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")
R = TypeVar("R")

VERIFY_CHUNK_ROWS = 100_000


class SqlSide:
    """A source table read in chunks by the database itself (aggregates pushed down)."""

    def __init__(
        self,
        source: SourceDialect[Any],
        table: ChecksumTable,
        parallelism: int,
        member: int = 0,
    ) -> None:
        self.source, self.table, self.member = source, table, member
        self.parallelism = parallelism
        self._chunks: list[ChunkSelect] | None = None

    def chunks(self) -> list[ChunkSelect]:
        """The table's chunks (the snapshot's splitter, larger chunks)."""
        if self._chunks is None:
            self._chunks = chunks_of(self.source, self.table.schema)
        return self._chunks

    def _each_chunk(self, query: Callable[[Any, ChunkSelect], list[R]]) -> list[R]:
        """``query(conn, chunk)`` run per chunk, ``parallelism`` chunks at a time."""

        def run(chunk: ChunkSelect) -> list[R]:
            return on_session(self.source, lambda conn: query(conn, chunk))

        with ThreadPoolExecutor(self.parallelism) as pool:
            return [row for rows in pool.map(run, self.chunks()) for row in rows]

    def buckets(self, n: int) -> Sums:
        def query(conn: Any, chunk: ChunkSelect) -> list[tuple[int, int, int]]:
            return self.source.bucket_sums(conn, self.table, chunk, n)

        sums: Sums = {}
        for bucket, count, total in self._each_chunk(query):
            rows, hashes = sums.get(bucket, (0, 0))
            sums[bucket] = (rows + count, hashes + total)
        return sums

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]:
        def query(conn: Any, chunk: ChunkSelect) -> list[tuple[Any, ...]]:
            return self.source.bucket_rows(conn, self.table, chunk, n, buckets)

        width = len(self.table.keys)
        return {
            str(row[0]): Digest(
                tuple(row[3 : 3 + width]), int(row[1]), tuple(row[3 + width :]), self.member
            )
            for row in self._each_chunk(query)
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
        return on_session(self.source, lambda conn: self.source.row_fields(conn, self.table, mine))


def on_session(source: SourceDialect[Any], work: Callable[[Any], T]) -> T:
    """``work`` on a session of its own to ``source`` (done again, whole, on a new
    connection where the server drops it: verify only reads)."""
    session = source.session()
    try:
        return session.run(work)
    finally:
        session.close()


def chunks_of(source: SourceDialect[Any], schema: TableSchema) -> list[ChunkSelect]:
    """Every chunk of ``schema``'s table as the snapshot's splitter cuts it (larger
    chunks), each read on the connection it is given (no reader of its own)."""
    session = source.session()
    try:
        splitter = ChunkSplitter.for_table(source, session, schema, chunk_size=VERIFY_CHUNK_ROWS)
        ranges = all_chunks(splitter)
    finally:
        session.close()
    skip = frozenset({"connectorx"})
    return [ChunkSelect(schema, splitter.key_column, c.start, c.end, c.index, skip) for c in ranges]


def transformed_source(
    spark: SparkSession,
    source: SourceDialect[Any],
    schema: TableSchema,
    rule: TransformRule | None,
    plan: ColumnPlan,
) -> DataFrame:
    """A source table as the pipeline writes it into ``plan``'s sink table: its rows read
    with the snapshot's chunk reader, then the pipeline's own transform and cast to the sink
    shape (each compared column fed by its source column)."""
    import pyarrow as pa

    from sparkcdc.pipeline.change_frames import to_sink
    from sparkcdc.pipeline.transforms import apply_transform
    from sparkcdc.spark.changelog.decoded import SnapshotRows
    from sparkcdc.spark.changelog.typed import TypedChangelogBuilder

    builder = TypedChangelogBuilder(schema)
    chunks = chunks_of(source, schema)

    def read(conn: Any) -> list[pa.RecordBatch]:
        reader = source.chunk_reader(conn)
        batches: list[pa.RecordBatch] = []
        for chunk in chunks:
            rows, _ = reader.select(chunk)
            snapshot = SnapshotRows(schema.database, schema.table, schema.column_names, rows, 0)
            batches.extend(builder.snapshot_batches(snapshot))
        return batches

    arrow = pa.Table.from_batches(on_session(source, read), schema=builder.arrow_schema)
    changes = spark.createDataFrame(arrow)
    transformed = apply_transform(changes, rule, schema.column_names)
    return to_sink(transformed, plan.mapping, plan.table).drop(*METADATA_COLUMNS)


def row_estimate(source: SourceDialect[Any], schema: TableSchema) -> int:
    return on_session(
        source, lambda conn: source.estimated_rows(conn, schema.database, schema.table)
    )
