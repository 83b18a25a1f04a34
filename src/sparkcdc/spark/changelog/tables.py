"""The tables shape (several tables, typed; what pipelines read): ``_op, _op_ts, _seq,
_database, _table, _ddl, _text``, then one struct column per captured table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import repeat
from typing import Any

import pyarrow as pa

from sparkcdc.model.changelog import EnvelopeOp, RowKind
from sparkcdc.model.events import ImageColumns, RowChanges, RowsKind, SchemaChange
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import Column, TableSchema, value_converter
from sparkcdc.spark.changelog.arrow import BATCH_ROWS, arrow_type, spark_column
from sparkcdc.spark.changelog.compiled import Compiled, KernelBatch
from sparkcdc.spark.changelog.decoded import PendingRows, SnapshotRows, op_ts_micros, row_images
from sparkcdc.spark.changelog.text import value_text
from sparkcdc.spark.changelog.typed import METADATA_DDL, METADATA_FIELDS

TABLES_METADATA = (
    *METADATA_FIELDS,
    pa.field("_ddl", pa.string()),
    pa.field("_text", pa.map_(pa.string(), pa.string())),
)
TABLES_METADATA_DDL = (
    f"{METADATA_DDL}, `_ddl` STRING, `_text` MAP<STRING, STRING>"  # TABLES_METADATA's types
)
DDL_OP = EnvelopeOp.DDL.value  # ``_op`` of a schema-change row
_TEXT_TYPE = pa.map_(pa.string(), pa.string())


def table_column(index: int, database: str, table: str) -> str:
    """The name of a table's struct column in the tables shape: its place in the capture
    (names that differ only in case stay apart) and its qualified name (readable).

    >>> table_column(0, "app", "orders")
    '0:app.orders'
    """
    return f"{index}:{database}.{table}"


def carrier_type(column: Column) -> str:
    """The Spark type a column's values travel as in the tables shape: its own, except
    BOOLEAN (TINYINT(1), BIT(1)), which travels as its number, so a row written while the
    column was a TINYINT(4) keeps its 7 (the reader of the row decides by its schema)."""
    return "SMALLINT" if column.spark_type == "BOOLEAN" else column.spark_type


class _Layout:
    """Where each value of one TABLE_MAP's (or chunk's) images goes in the tables shape:
    ``typed[i]`` is the image position of the struct's field i (None: not in the image, or
    stored differently from the struct's column: it travels as text), ``text`` the image
    positions and names of the values that travel as text."""

    def __init__(
        self,
        fields: Sequence[Column],
        names: Sequence[str | None],
        same: Callable[[int, Column], bool],
    ) -> None:
        index = {n: i for i, n in enumerate(names) if n is not None}
        self.positions: list[int | None] = []  # the typed fields' image positions
        self.converters: list[Callable[[Any], Any] | None] = []
        typed_positions: set[int] = set()
        for column in fields:
            pos = index.get(column.name)
            if pos is not None and not same(pos, column):
                pos = None
            self.positions.append(pos)
            self.converters.append(None if pos is None else _carrier_converter(column))
            if pos is not None:
                typed_positions.add(pos)
        self.text = [
            (i, str(n)) for i, n in enumerate(names) if n is not None and i not in typed_positions
        ]

    def text_of(self, image: Sequence[Any]) -> list[tuple[str, str]] | None:
        if not self.text:
            return None
        return [(n, value_text(image[i])) for i, n in self.text if image[i] is not None]


def _carrier_converter(column: Column) -> Callable[[Any], Any] | None:
    if column.spark_type == "BOOLEAN":
        return int
    return value_converter(column)


class TablesBuilder:
    """Builds tables-shape record batches: any number of tables, each row's image in its
    table's struct column, typed.

    The structs have the captured tables' columns as the query read them at its start
    (``carrier_type``). A value goes into its struct field only when it is stored as that
    column is (:meth:`~sparkcdc.model.events.ImageColumns.same_storage`); every other value
    of the image (a column added or changed since the query started, a table that joined the
    query, a row written before a schema change) travels as text in ``_text`` under its
    column name, spelled as the envelope's JSON has it. Nothing is dropped and nothing
    converted by a guess: the reader of the row (the pipeline's change frames, which knows each
    row's schema from the DDL in the stream) takes each column from its field or its text.

    An update gives a ``-U`` row (before image) and a ``+U`` row (after) that share
    ``_seq``; schema changes are rows with ``_op = 'ddl'`` and the statement in ``_ddl``.
    """

    def __init__(self, schemas: Sequence[TableSchema]) -> None:
        self._schemas = tuple(schemas)
        self._structs: dict[tuple[str, str], tuple[int, TableSchema]] = {}
        fields = list(TABLES_METADATA)
        for index, schema in enumerate(schemas):
            self._structs[(schema.database, schema.table)] = (len(fields), schema)
            struct = pa.struct(
                [pa.field(c.name, arrow_type(carrier_type(c))) for c in schema.columns]
            )
            fields.append(pa.field(table_column(index, schema.database, schema.table), struct))
        self.arrow_schema = pa.schema(fields)
        self._layouts: dict[int, tuple[ImageColumns, _Layout]] = {}
        self._compiled = Compiled(shared_seq=True)

    def spark_ddl(self) -> str:
        tables = [
            f"{quote_spark(table_column(i, t.database, t.table))} STRUCT<"
            + ", ".join(f"{quote_spark(c.name)}: {carrier_type(c)}" for c in t.columns)
            + ">"
            for i, t in enumerate(self._schemas)
        ]
        return ", ".join([TABLES_METADATA_DDL, *tables])

    def _layout(self, change: RowChanges) -> _Layout:
        # the source shares one ImageColumns among the events of a table shape: one layout
        # per table and shape, not one per transaction
        image = change.columns
        cached = self._layouts.get(id(image))
        if cached is None or cached[0] is not image:
            entry = self._structs.get((change.database, change.table))
            columns = entry[1].columns if entry else ()
            layout = _Layout(columns, image.names, image.same_storage)
            cached = self._layouts[id(image)] = (image, layout)
        return cached[1]

    def _batch(
        self,
        key: tuple[str, str],
        meta: Sequence[Sequence[Any]],
        typed: Sequence[pa.Array] | None,
        text: pa.Array,
    ) -> pa.RecordBatch:
        """One table's rows: metadata columns (op, op_ts, seq, ddl), its struct's fields
        (``typed``), its ``_text``; every other table's struct NULL."""
        n = len(text)
        ops, ts, seqs, ddl = meta
        arrays: list[pa.Array] = [
            _array(ops, pa.string()),
            _array(ts, pa.timestamp("us", tz="UTC")),
            _array(seqs, pa.int64()),
            pa.repeat(pa.scalar(key[0], pa.string()), n),
            pa.repeat(pa.scalar(key[1], pa.string()), n),
            _array(ddl, pa.string()),
            text,
        ]
        entry = self._structs.get(key)
        for position in range(len(TABLES_METADATA), len(self.arrow_schema)):
            field = self.arrow_schema.field(position)
            if entry is not None and entry[0] == position and typed is not None:
                arrays.append(pa.StructArray.from_arrays(typed, fields=list(field.type)))
            else:
                arrays.append(pa.nulls(n, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _struct_fields(self, key: tuple[str, str]) -> list[pa.Field]:
        entry = self._structs.get(key)
        return list(self.arrow_schema.field(entry[0]).type) if entry else []

    def _ddl_batch(self, changes: Sequence[SchemaChange]) -> Iterator[pa.RecordBatch]:
        for change in changes:
            meta: list[list[Any]] = [
                [DDL_OP],
                [op_ts_micros(change.timestamp)],
                [change.seq],
                [change.statement],
            ]
            key = (change.database, change.table)
            yield self._batch(key, meta, None, pa.nulls(1, _TEXT_TYPE))

    def snapshot_batches(self, chunk: SnapshotRows) -> Iterator[pa.RecordBatch]:
        """A chunk's rows as ``+I`` with ``_seq`` = the chunk's high watermark; columnar:
        the staged Arrow columns are cast to the struct's types, and only values that
        travel as text (a column the chunk was read with in another shape) or have no Arrow
        cast (TIME, BIT(n), DECIMAL(p>38)) go through Python."""
        yield from self._ddl_batch(chunk.ddl)
        key = (chunk.database, chunk.table)
        entry = self._structs.get(key)
        columns = entry[1].columns if entry else ()
        read_with = {c.name: c for c in chunk.read_with} if chunk.read_with else None

        def same(pos: int, column: Column) -> bool:
            return read_with is None or read_with.get(chunk.column_names[pos]) == column

        layout = _Layout(columns, chunk.column_names, same)
        for batch in chunk.rows.to_batches(max_chunksize=BATCH_ROWS * 4):
            n = batch.num_rows
            if n == 0:
                continue
            typed = [
                pa.nulls(n, arrow_type(carrier_type(c)))
                if pos is None
                else _carrier_array(batch.column(pos), c)
                for pos, c in zip(layout.positions, columns, strict=True)
            ]
            text = _text_array(batch, layout.text, n)
            meta = [
                pa.repeat(pa.scalar(RowKind.INSERT.value, pa.string()), n),
                pa.nulls(n, pa.timestamp("us", tz="UTC")),
                pa.repeat(pa.scalar(chunk.seq, pa.int64()), n),
                pa.nulls(n, pa.string()),
            ]
            yield self._batch(key, meta, typed if entry else None, text)

    def batches(self, changes: Iterable[RowChanges | SchemaChange]) -> Iterator[pa.RecordBatch]:
        pending: dict[tuple[str, str], PendingRows] = {}
        for change in changes:
            if isinstance(change, SchemaChange):
                yield from self._ddl_batch([change])
                continue
            key = (change.database, change.table)
            layout = self._layout(change)
            kernel = self._compiled.kernel(change, False, partial(self._kernel_fields, key, layout))
            if kernel is not None:
                done, taken = self._compiled.add(change, kernel)
                yield from map(self._kernel_batch, done)
                if taken:
                    continue
            if self._compiled.holding is not None:
                yield self._kernel_batch(self._compiled.take())
            rows = pending.get(key)
            if rows is None:
                rows = pending[key] = PendingRows(len(self._struct_fields(key)))
            images, ops = row_images(change)
            seqs = change.position.seqs(change.first_row, len(change.rows))
            if change.kind is RowsKind.UPDATE:  # an update's two rows share its seq
                seqs = [seq for seq in seqs for _ in range(2)]
            rows.add(ops, change.timestamp * 1_000_000, seqs, images, layout)
            if layout.text:
                rows.text.extend(layout.text_of(image) for image in images)
            else:
                rows.text.extend(repeat(None, len(images)))
            if len(rows) >= BATCH_ROWS:
                yield self._flush(key, rows)
        for key, rows in pending.items():
            if len(rows):
                yield self._flush(key, rows)
        if self._compiled.holding is not None:
            yield self._kernel_batch(self._compiled.take())

    def _kernel_fields(
        self, key: tuple[str, str], layout: _Layout
    ) -> list[tuple[int | None, pa.DataType]] | None:
        if layout.text or key not in self._structs:
            return None  # values that travel as text: the Python path
        return [
            (pos, field.type)
            for pos, field in zip(layout.positions, self._struct_fields(key), strict=True)
        ]

    def _kernel_batch(self, rows: KernelBatch) -> pa.RecordBatch:
        n = len(rows.ops)
        return self._batch(
            (rows.database, rows.table),
            [rows.ops, rows.ts, rows.seqs, pa.nulls(n, pa.string())],
            rows.columns,
            pa.nulls(n, _TEXT_TYPE),
        )

    def _flush(self, key: tuple[str, str], rows: PendingRows) -> pa.RecordBatch:
        fields = self._struct_fields(key)
        typed = [
            pa.array(values, type=field.type)
            for values, field in zip(rows.columns, fields, strict=True)
        ]
        batch = self._batch(
            key,
            [rows.ops, rows.ts, rows.seqs, [None] * len(rows)],
            typed if fields else None,
            pa.array(rows.text, _TEXT_TYPE),
        )
        rows.clear()
        return batch


def _array(values: Any, arrow: pa.DataType) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, arrow)


def _carrier_array(values: pa.Array, column: Column) -> pa.Array:
    """Decoder-form Arrow values of ``column`` as its carrier type."""
    if column.spark_type == "BOOLEAN":
        return values.cast(pa.int16())
    return spark_column(values, column, arrow_type(column.spark_type))


def _text_array(batch: pa.RecordBatch, text: Sequence[tuple[int, str]], n: int) -> pa.Array:
    """The ``_text`` of a chunk's rows: NULL where every value is typed."""
    if not text:
        return pa.nulls(n, _TEXT_TYPE)
    columns = [(name, batch.column(pos).to_pylist()) for pos, name in text]
    maps = [
        [(name, value_text(values[i])) for name, values in columns if values[i] is not None]
        for i in range(n)
    ]
    return pa.array(maps, _TEXT_TYPE)
