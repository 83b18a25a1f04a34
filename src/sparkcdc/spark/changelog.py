"""Change rows as Arrow record batches: the typed changelog and the envelope (DESIGN.md §4).

Typed changelog (one table): ``_op, _op_ts, _seq, _database, _table`` then the
table's columns. An update gives a ``-U`` row (before image) then a ``+U`` row.

Tables (several tables, typed; what pipelines read): ``_op, _op_ts, _seq, _database,
_table, _ddl, _text``, then one struct column per captured table (``<i>:<database>.<table>``)
holding its row image in typed fields (see :class:`TablesBuilder`).

Envelope (several tables): ``database, table, op, before, after, op_ts, seq,
schema_version, ddl`` with row images as JSON text; ``op`` is ``r``/``c``/``u``/``d``,
or ``ddl`` for a schema change (its statement in ``ddl``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from itertools import count, repeat
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.errors import SchemaChangedError, SourceError
from sparkcdc.model.changelog import DATABASE, OP, OP_TS, SEQ, TABLE, EnvelopeOp, RowKind
from sparkcdc.model.events import ImageColumns, RowChanges, RowsKind, SchemaChange
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import (
    Column,
    TableSchema,
    spark_decimal,
    time_text,
    value_converter,
)
from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.binlog.arrowrows import KernelRows
from sparkcdc.mysql.binlog.decoder import EventRows

BATCH_ROWS = 8192

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
ENVELOPE_DDL = (
    "`database` STRING, `table` STRING, `op` STRING, `before` STRING, `after` STRING, "
    "`op_ts` TIMESTAMP, `seq` BIGINT, `schema_version` INT, `ddl` STRING"
)

_SIMPLE_ARROW = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"),
}


def arrow_type(spark_ddl_type: str) -> pa.DataType:
    """The Arrow type Spark reads as the given Spark DDL type.

    >>> arrow_type("DECIMAL(20,0)")
    Decimal128Type(decimal128(20, 0))
    """
    decimal = spark_decimal(spark_ddl_type)
    if decimal:
        return pa.decimal128(*decimal)
    return _SIMPLE_ARROW[spark_ddl_type]


@dataclass(frozen=True)
class SnapshotRows:
    """The rows of one snapshot chunk (decoder-form values) and where they belong."""

    database: str
    table: str
    column_names: tuple[str, ...]
    rows: pa.Table
    seq: int  # the chunk's high watermark
    ddl: tuple[SchemaChange, ...] = ()  # DDL before the rows, not yet in the stream's binlog
    read_with: tuple[Column, ...] = ()  # the columns as the chunk was read (if known)


def record_batch(rows: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Transpose rows into one Arrow record batch of ``schema``."""
    columns = list(zip(*rows, strict=True))
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def spark_column(values: pa.Array, column: Column, target: pa.DataType) -> pa.Array:
    """Decoder-form Arrow values of ``column`` as the Arrow type Spark reads."""
    if values.type == target and column.spark_type == "STRING":
        return values  # text already (ENUM, SET, JSON read as text need no Python pass)
    if column.spark_type == "BOOLEAN" and pa.types.is_integer(values.type):
        return pc.not_equal(values, 0)
    convert = value_converter(column)
    if convert is None or column.spark_type.startswith("DECIMAL"):
        try:
            return values.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if convert is None:
        return pa.array(values.to_pylist(), type=target)
    return pa.array([None if v is None else convert(v) for v in values.to_pylist()], type=target)


def typed_ddl(schema: TableSchema) -> str:
    return f"{METADATA_DDL}, {schema.spark_ddl()}"


def _typed_arrow_schema(schema: TableSchema) -> pa.Schema:
    columns = [pa.field(c.name, arrow_type(c.spark_type)) for c in schema.columns]
    return pa.schema([*METADATA_FIELDS, *columns])


_ENVELOPE_SCHEMA = pa.schema(
    [
        pa.field("database", pa.string()),
        pa.field("table", pa.string()),
        pa.field("op", pa.string()),
        pa.field("before", pa.string()),
        pa.field("after", pa.string()),
        pa.field("op_ts", pa.timestamp("us", tz="UTC")),
        pa.field("seq", pa.int64()),
        pa.field("schema_version", pa.int32()),
        pa.field("ddl", pa.string()),
    ]
)


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
        self._compiled = _Compiled(shared_seq=False)
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
        pending = _Pending(len(self.schema.columns))
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

    def _kernel_batch(self, rows: _KernelBatch) -> pa.RecordBatch:
        n = len(rows.ops)
        meta = [
            rows.ops,
            rows.ts,
            rows.seqs,
            pa.repeat(pa.scalar(rows.database, pa.string()), n),
            pa.repeat(pa.scalar(rows.table, pa.string()), n),
        ]
        return pa.RecordBatch.from_arrays(meta + rows.columns, schema=self.arrow_schema)

    def _flush(self, rows: _Pending) -> pa.RecordBatch:
        meta = [rows.ops, rows.ts, rows.seqs, rows.databases, rows.tables]
        arrays = [
            pa.array(values, type=field.type)
            for values, field in zip([*meta, *rows.columns], self.arrow_schema, strict=True)
        ]
        rows.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


def row_images(change: RowChanges) -> tuple[list[Sequence[Any]], list[str]]:
    """The row images of one ROWS event in stream order, and the op of each: an update
    gives its before image (``-U``), then its after image (``+U``)."""
    n = len(change.rows)
    if change.kind is RowsKind.INSERT:
        images = [after for _, after in change.rows]
        ops = [RowKind.INSERT.value] * n
    elif change.kind is RowsKind.DELETE:
        images = [before for before, _ in change.rows]
        ops = [RowKind.DELETE.value] * n
    else:
        images = [image for pair in change.rows for image in pair]
        ops = [RowKind.UPDATE_BEFORE.value, RowKind.UPDATE_AFTER.value] * n
    if None in images:
        raise SourceError(
            f"a {change.kind.value} of {change.database}.{change.table} at binlog position "
            f"{change.position} lacks a row image the event kind must have"
        )
    return cast(list[Sequence[Any]], images), ops


# --------------------------------------------------------------------------- tables shape

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


def value_text(value: Any) -> str:
    """A decoded value as text, as the envelope's JSON images spell it (what
    ``pipeline.change_frames`` turns back into the value of any column type).

    >>> value_text(Decimal("1.50")), value_text(b"\\x00"), value_text(dt.timedelta(hours=-1))
    ('1.50', 'AA==', '-01:00:00')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return str(_json_default(value))


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
    column is (:func:`~sparkcdc.mysql.binlog.metadata_from_schema.same_storage`); every other
    value of the image (a column added or changed since the query started, a table that joined the
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
        self._compiled = _Compiled(shared_seq=True)

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
                [_op_ts(change.timestamp)],
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
        pending: dict[tuple[str, str], _Pending] = {}
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
                rows = pending[key] = _Pending(len(self._struct_fields(key)))
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

    def _kernel_batch(self, rows: _KernelBatch) -> pa.RecordBatch:
        n = len(rows.ops)
        return self._batch(
            (rows.database, rows.table),
            [rows.ops, rows.ts, rows.seqs, pa.nulls(n, pa.string())],
            rows.columns,
            pa.nulls(n, _TEXT_TYPE),
        )

    def _flush(self, key: tuple[str, str], rows: _Pending) -> pa.RecordBatch:
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


@dataclass(frozen=True)
class _KernelBatch:
    """Rows a kernel decoded: the builder's columns (in its order), the change-row
    metadata, and the table they belong to."""

    columns: list[pa.Array]
    ops: pa.Array
    ts: pa.Array
    seqs: pa.Array
    database: str
    table: str


@dataclass
class _Kernel:
    """A compiled decoder of one table shape into one builder's columns: ``slots[j]`` is
    the kernel output of the builder's column j (None: not in the images, NULL)."""

    rows: KernelRows
    slots: list[int | None]
    types: list[pa.DataType]
    database: str
    table: str

    def finish(self) -> _KernelBatch:
        """The rows added since the last finish, and start over."""
        *outputs, ops, ts, seqs = self.rows.finish()
        n = len(ops)
        columns = [
            pa.nulls(n, arrow) if slot is None else outputs[slot]
            for slot, arrow in zip(self.slots, self.types, strict=True)
        ]
        return _KernelBatch(columns, ops, ts, seqs, self.database, self.table)


class _Compiled:
    """The compiled path of a change-row builder (:mod:`sparkcdc.mysql.binlog.arrowrows`): one
    kernel per table shape, of which one holds rows at a time (``holding``), so rows leave
    in stream order. ``shared_seq``: an update's two rows share its ``_seq`` (the tables
    shape) rather than taking one each (the typed changelog)."""

    def __init__(self, shared_seq: bool) -> None:
        self.shared_seq = shared_seq
        self.holding: _Kernel | None = None
        self._kernels: arrowrows.ShapeKernels[_Kernel] = arrowrows.ShapeKernels()

    def kernel(
        self,
        change: RowChanges,
        variant: bool,
        fields: Callable[[], list[tuple[int | None, pa.DataType]] | None],
    ) -> _Kernel | None:
        """The kernel for ``change``'s table shape (and ``variant`` of the builder's
        layout), built the first time from ``fields()`` (per builder column: its image
        position and Arrow type; None: the Python path); None when the change takes the
        Python path."""
        return self._kernels.get(
            change, variant, lambda images: self._build(change, images, fields)
        )

    @staticmethod
    def _build(
        change: RowChanges,
        images: EventRows,
        fields: Callable[[], list[tuple[int | None, pa.DataType]] | None],
    ) -> _Kernel | None:
        if not arrowrows.compiled():
            return None
        wanted = fields()
        if wanted is None:
            return None
        present = [(pos, arrow) for pos, arrow in wanted if pos is not None]
        plan = arrowrows.plan(images.table.columns, present)
        if plan is None:
            return None
        outputs = count()
        slots = [None if pos is None else next(outputs) for pos, _ in wanted]
        return _Kernel(
            KernelRows(plan), slots, [arrow for _, arrow in wanted], change.database, change.table
        )

    def add(self, change: RowChanges, kernel: _Kernel) -> tuple[list[_KernelBatch], bool]:
        """Add ``change``'s rows to ``kernel``: the rows that must leave first (another
        shape's, or a full batch), and whether the kernel took the change. It does not take
        an event it cannot read exactly (the builder then decodes it in Python, which gives
        the value or the error)."""
        images = change.images
        assert isinstance(images, EventRows)
        args = (
            images,
            change.kind,
            change.timestamp * 1_000_000,
            change.position.seq(),
            change.first_row,
            self.shared_seq,
        )
        done: list[_KernelBatch] = []
        if not kernel.rows.add(*args):
            if not kernel.rows.rows:
                return done, False
            done.append(self.take())  # perhaps full (2 GiB of strings): again in a new batch
            if not kernel.rows.add(*args):
                return done, False
        if self.holding is not None and self.holding is not kernel:
            done.append(self.take())  # only the holding kernel has rows before these
        self.holding = kernel
        if kernel.rows.rows >= BATCH_ROWS:
            done.append(self.take())
        return done, True

    def take(self) -> _KernelBatch:
        """The rows the holding kernel has; nothing holds rows after."""
        kernel = self.holding
        assert kernel is not None
        self.holding = None
        return kernel.finish()


class _Pending:
    """Rows not yet in a record batch, column by column."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.clear()

    def clear(self) -> None:
        self.ops: list[str] = []
        self.ts: list[int] = []
        self.seqs: list[int] = []
        self.databases: list[str] = []  # the typed changelog's
        self.tables: list[str] = []
        self.text: list[list[tuple[str, str]] | None] = []  # the tables shape's
        self.columns: list[list[Any]] = [[] for _ in range(self.width)]

    def __len__(self) -> int:
        return len(self.ops)

    def add(
        self,
        ops: Sequence[str],
        ts: int,
        seqs: Sequence[int],
        images: Sequence[Sequence[Any]],
        layout: _ImageMapper | _Layout,
    ) -> None:
        """One event's rows: ``images`` (table-map order) go to the columns as ``layout``
        places and converts them, a column at a time (no Python call per row)."""
        n = len(images)
        if not n:
            return
        self.ops.extend(ops)
        self.ts.extend(repeat(ts, n))
        self.seqs.extend(seqs)
        by_position = list(zip(*images, strict=True))
        for values, pos, convert in zip(
            self.columns, layout.positions, layout.converters, strict=True
        ):
            if pos is None:
                values.extend(repeat(None, n))
            elif convert is None:
                values.extend(by_position[pos])
            else:
                values.extend([None if v is None else convert(v) for v in by_position[pos]])

    def name(self, database: str, table: str, n: int) -> None:
        self.databases.extend(repeat(database, n))
        self.tables.extend(repeat(table, n))


def _op_ts(timestamp: int | None) -> int | None:
    """Event time (seconds since the epoch) as ``op_ts`` microseconds; NULL if unknown."""
    return None if timestamp is None else timestamp * 1_000_000


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


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return time_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def image_json(names: Sequence[str], image: Sequence[Any]) -> str:
    """A row image as JSON text (decimals as strings, bytes as base64, times ISO).

    >>> image_json(["id", "price"], [1, Decimal("9.50")])
    '{"id":1,"price":"9.50"}'
    """
    return json.dumps(
        dict(zip(names, image, strict=True)),
        default=_json_default,
        separators=(",", ":"),
        ensure_ascii=False,
    )


_ENVELOPE_OPS = {
    RowsKind.INSERT: EnvelopeOp.CREATE,
    RowsKind.UPDATE: EnvelopeOp.UPDATE,
    RowsKind.DELETE: EnvelopeOp.DELETE,
}


class EnvelopeBuilder:
    """Builds envelope record batches for any number of tables."""

    arrow_schema = _ENVELOPE_SCHEMA

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str], int] = {}

    def snapshot_batches(self, chunk: SnapshotRows) -> Iterator[pa.RecordBatch]:
        """A chunk's rows as ``op = 'r'`` with ``seq`` = the chunk's high watermark."""
        if chunk.ddl:
            yield record_batch([self._ddl_row(d) for d in chunk.ddl], self.arrow_schema)
        names = [str(n) for n in chunk.column_names]
        op = EnvelopeOp.READ.value
        for batch in chunk.rows.to_batches(BATCH_ROWS):
            columns = [c.to_pylist() for c in batch.columns]
            rows = [
                (
                    chunk.database,
                    chunk.table,
                    op,
                    None,
                    image_json(names, image),
                    None,
                    chunk.seq,
                    0,
                    None,
                )
                for image in zip(*columns, strict=True)
            ]
            if rows:
                yield record_batch(rows, self.arrow_schema)

    def _ddl_row(self, change: SchemaChange) -> tuple[Any, ...]:
        key = (change.database, change.table)
        version = self._versions[key] = self._versions.get(key, 0) + 1
        return (
            change.database,
            change.table,
            EnvelopeOp.DDL.value,
            None,
            None,
            _op_ts(change.timestamp),
            change.seq,
            version,
            change.statement,
        )

    def _column_names(self, change: RowChanges) -> Sequence[str]:
        names = change.columns.names
        if any(n is None for n in names):  # read_range names them or stops: never reached
            raise SourceError(f"the TABLE_MAP of {change.database}.{change.table} names no columns")
        return names  # type: ignore[return-value]

    def batches(self, changes: Iterable[RowChanges | SchemaChange]) -> Iterator[pa.RecordBatch]:
        rows: list[tuple[Any, ...]] = []
        for change in changes:
            if isinstance(change, SchemaChange):
                rows.append(self._ddl_row(change))
                continue
            ts = change.timestamp * 1_000_000
            version = self._versions.get((change.database, change.table), 0)
            names = self._column_names(change)
            op = _ENVELOPE_OPS[change.kind].value
            for index, (before, after) in enumerate(change.rows):
                rows.append(
                    (
                        change.database,
                        change.table,
                        op,
                        None if before is None else image_json(names, before),
                        None if after is None else image_json(names, after),
                        ts,
                        change.position.seq(change.first_row + index),
                        version,
                        None,
                    )
                )
            if len(rows) >= BATCH_ROWS:
                yield record_batch(rows, self.arrow_schema)
                rows = []
        if rows:
            yield record_batch(rows, self.arrow_schema)


Builder = TypedChangelogBuilder | EnvelopeBuilder | TablesBuilder
