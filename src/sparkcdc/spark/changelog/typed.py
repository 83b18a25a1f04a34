"""The typed changelog (one table): ``_op, _op_ts, _seq, _database, _table``, then the
table's columns; an update gives a ``-U`` row (before image), then a ``+U`` row."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial

import pyarrow as pa

from sparkcdc.errors import SchemaChangedError, SourceError
from sparkcdc.model.changelog import DATABASE, OP, OP_TS, SEQ, TABLE, RowKind
from sparkcdc.model.events import ImageColumns, RowChanges, SchemaChange
from sparkcdc.model.schema import TableSchema, value_converter
from sparkcdc.spark.changelog.arrow import BATCH_ROWS, arrow_type, spark_column
from sparkcdc.spark.changelog.compiled import Compiled, KernelBatch
from sparkcdc.spark.changelog.decoded import PendingRows, SnapshotRows, row_images

METADATA_FIELDS = (
    pa.field(OP, pa.string()),
    pa.field(OP_TS, pa.timestamp("us", tz="UTC")),
    pa.field(SEQ, pa.int64()),
    pa.field(DATABASE, pa.string()),
    pa.field(TABLE, pa.string()),
)
METADATA_DDL = (  # METADATA_FIELDS' types
    f"`{OP}` STRING, `{OP_TS}` TIMESTAMP, `{SEQ}` BIGINT, `{DATABASE}` STRING, `{TABLE}` STRING"
)


def typed_ddl(schema: TableSchema) -> str:
    return f"{METADATA_DDL}, {schema.spark_ddl()}"


def _typed_arrow_schema(schema: TableSchema) -> pa.Schema:
    columns = [pa.field(c.name, arrow_type(c.spark_type)) for c in schema.columns]
    return pa.schema([*METADATA_FIELDS, *columns])


class _ImageMapper:
    """Turns a binlog row image (table-map column order) into the schema's column order.

    Columns are matched by name: the range reader gives every TABLE_MAP its names (from
    the binlog, or the schema versions when it lacks them). A column the stream's schema lacks is
    left out of images written before the schema was read (``older``: the column was
    dropped since); after that it means a change the stream did not see as DDL: stop, with
    what to do (the restart picks the new schema up).
    """

    def __init__(self, schema: TableSchema, names: Sequence[str | None], older: bool) -> None:
        wanted = schema.column_names
        index = {n: i for i, n in enumerate(names)}
        extra = [n for n in names if n not in set(wanted)]
        if extra and not older:
            raise SourceError(
                f"table {schema.qualified_name} changed while streaming: the binlog at "
                f"this point has column(s) {extra} that the stream's schema "
                f"{list(wanted)} lacks. Restart the query to stream with the new schema "
                "(sparkcdc run restarts it by itself)."
            )
        self.positions: list[int | None] = [index.get(n) for n in wanted]
        self.converters = [value_converter(c) for c in schema.columns]


class TypedChangelogBuilder:
    """Builds typed-changelog record batches for one table.

    A typed stream has one fixed schema, so a schema change on its table after the schema
    was read (``schema_seq``) stops it with a message naming the statement and its position;
    the restarted query reads the new schema and goes on from its checkpoint. Statements
    before ``schema_seq`` (a replay after that restart) are already in the schema.
    """

    def __init__(self, schema: TableSchema, schema_seq: int = 0) -> None:
        self.schema = schema
        self.schema_seq = schema_seq
        self.arrow_schema = _typed_arrow_schema(schema)
        self._mappers: dict[tuple[int, bool], tuple[ImageColumns, _ImageMapper]] = {}
        self._compiled = Compiled(shared_seq=False)
        self._types = [arrow_type(c.spark_type) for c in schema.columns]

    def _mapper(self, columns: ImageColumns, older: bool) -> _ImageMapper:
        # one mapper per table shape (the source shares one ImageColumns among its events)
        key = (id(columns), older)
        cached = self._mappers.get(key)
        if cached is None or cached[0] is not columns:
            cached = (columns, _ImageMapper(self.schema, columns.names, older))
            self._mappers[key] = cached
        return cached[1]

    def _schema_change(self, change: SchemaChange) -> None:
        if change.seq < self.schema_seq:
            return
        raise SchemaChangedError(
            f"table {self.schema.qualified_name} changed at {change.where}: "
            f"{change.statement!r}. A typed stream's columns are fixed when it starts. Restart the "
            "query (same checkpoint) to go on with the new schema, or read the table through "
            "a pipeline (sparkcdc run), whose sinks follow schema changes"
        )

    def snapshot_batches(self, chunk: SnapshotRows) -> Iterator[pa.RecordBatch]:
        """A chunk's rows as ``+I`` with ``_seq`` = the chunk's high watermark.

        Columnar: the staged Arrow columns are cast to the Spark types; only values
        with no Arrow cast (TIME, BIT(n), DECIMAL(p>38)) go through Python.
        """
        for change in chunk.ddl:
            self._schema_change(change)
        by_name = {name: i for i, name in enumerate(chunk.column_names)}
        for batch in chunk.rows.to_batches(max_chunksize=BATCH_ROWS * 4):
            n = batch.num_rows
            if n == 0:
                continue
            arrays: list[pa.Array] = [
                pa.repeat(pa.scalar(RowKind.INSERT.value, pa.string()), n),
                pa.nulls(n, pa.timestamp("us", tz="UTC")),
                pa.repeat(pa.scalar(chunk.seq, pa.int64()), n),
                pa.repeat(pa.scalar(chunk.database, pa.string()), n),
                pa.repeat(pa.scalar(chunk.table, pa.string()), n),
            ]
            for column in self.schema.columns:
                index = by_name.get(column.name)
                target = arrow_type(column.spark_type)
                if index is None:  # a column the chunk was read without
                    arrays.append(pa.nulls(n, target))
                else:
                    arrays.append(spark_column(batch.column(index), column, target))
            yield pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def batches(self, changes: Iterable[RowChanges | SchemaChange]) -> Iterator[pa.RecordBatch]:
        pending = PendingRows(len(self.schema.columns))
        compiled = self._compiled
        for change in changes:
            if isinstance(change, SchemaChange):
                self._schema_change(change)
                continue
            older = change.position.seq() < self.schema_seq
            mapper = self._mapper(change.columns, older)
            kernel = compiled.kernel(change, older, partial(self._kernel_fields, change, mapper))
            if kernel is not None:
                if len(pending):  # rows stay in stream order
                    yield self._flush(pending)
                done, taken = compiled.add(change, kernel)
                yield from map(self._kernel_batch, done)
                if taken:
                    continue
            if compiled.holding is not None:
                yield self._kernel_batch(compiled.take())
            images, ops = row_images(change)
            # each image its own seq: an update's +U orders after its -U
            seqs = change.position.seqs(change.first_row, len(images))
            pending.add(ops, change.timestamp * 1_000_000, seqs, images, mapper)
            pending.name(change.database, change.table, len(images))
            if len(pending) >= BATCH_ROWS:
                yield self._flush(pending)
        if len(pending):
            yield self._flush(pending)
        if compiled.holding is not None:
            yield self._kernel_batch(compiled.take())

    def _kernel_fields(
        self, change: RowChanges, mapper: _ImageMapper
    ) -> list[tuple[int | None, pa.DataType]] | None:
        fields: list[tuple[int | None, pa.DataType]] = []
        for pos, column, arrow in zip(
            mapper.positions, self.schema.columns, self._types, strict=True
        ):
            if pos is not None and not change.columns.same_storage(pos, column):
                return None  # a row written before a schema change: the Python path
            fields.append((pos, arrow))
        return fields

    def _kernel_batch(self, rows: KernelBatch) -> pa.RecordBatch:
        n = len(rows.ops)
        meta = [
            rows.ops,
            rows.ts,
            rows.seqs,
            pa.repeat(pa.scalar(rows.database, pa.string()), n),
            pa.repeat(pa.scalar(rows.table, pa.string()), n),
        ]
        return pa.RecordBatch.from_arrays(meta + rows.columns, schema=self.arrow_schema)

    def _flush(self, rows: PendingRows) -> pa.RecordBatch:
        meta = [rows.ops, rows.ts, rows.seqs, rows.databases, rows.tables]
        arrays = [
            pa.array(values, type=field.type)
            for values, field in zip([*meta, *rows.columns], self.arrow_schema, strict=True)
        ]
        rows.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
