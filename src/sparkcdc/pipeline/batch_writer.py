"""The ``foreachBatch`` function of a pipeline's query: each micro-batch is cached once, its
schema change rows handled first (``pipeline/evolution/``), then every touched sink table
written once, in its shape at the end of the batch, under the batch id (see
:mod:`sparkcdc.sinks.base`); columns added with values the binlog did not carry are filled
in afterwards.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import SinkError
from sparkcdc.model.changelog import DATABASE, OP, OP_TS, SEQ, TABLE, RowKind
from sparkcdc.model.dialect import SourceDialect
from sparkcdc.model.events import SchemaChange
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import Column as SchemaColumn
from sparkcdc.model.schema import TableSchema
from sparkcdc.pipeline.change_frames import ChangeColumns, source_changes, text_rows, to_sink
from sparkcdc.pipeline.config import TransformRule
from sparkcdc.pipeline.evolution.evolver import SchemaEvolver, Segment
from sparkcdc.pipeline.evolution.fills import ColumnFill
from sparkcdc.pipeline.evolution.persistence import Divergences, SchemaHistory
from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState
from sparkcdc.pipeline.routes import PipelinePlan, sink_frame
from sparkcdc.pipeline.transforms import apply_transform, passes_through
from sparkcdc.sinks.base import SinkTable, session_conf, spark_error_text
from sparkcdc.spark.changelog.tables import DDL_OP
from sparkcdc.spark.changelog.text import value_text
from sparkcdc.spark.concurrent import ConcurrentWrites

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


BatchListener = Callable[[int, dict[str, int]], None]


def initial_state(plan: PipelinePlan) -> SchemaState:
    """The schema state of a pipeline's first start: the catalog's schemas, fresh sink tables."""
    return SchemaState.start([s.schema for s in plan.sources], plan.sink_tables)


def described(
    table: SinkTable, segments: Sequence[Segment], rules: Mapping[str, TransformRule | None]
) -> SinkTable:
    """``table`` with each column's ``source`` set where one batch's rows (of ``segments``)
    all hold, in that column, a source column's values unchanged: every segment feeds the
    column from a column of its schema that its transform passes through, each of the same
    definition (type, nullability) and of the sink column's Spark type (else
    :func:`to_sink` casts). A column some segment does not feed (NULL there), computes, or
    feeds from a differently defined column stays undescribed.

    >>> from sparkcdc.model.schema import Column, TableSchema
    >>> from sparkcdc.sinks.base import SinkColumn
    >>> c = Column.from_mysql("at", "datetime", "datetime(3)", False)
    >>> schema = TableSchema("db", "t", (c,), ("at",))
    >>> table = SinkTable("db.t", (SinkColumn("at", c.spark_type),), ("at",), ("db.t",))
    >>> described(table, [Segment("db.t", None, None, schema, {"at": "at"})], {}).columns[0].source
    Column(name='at', data_type='datetime', column_type='datetime(3)', nullable=False, \
spark_type='TIMESTAMP_NTZ', charset=None)
    """
    found: dict[str, set[SchemaColumn | None]] = {c.name: set() for c in table.columns}
    for segment in segments:
        fed = {target: frame for frame, target in segment.mapping.items()}
        columns = {c.name: c for c in segment.schema.columns}
        rule = rules.get(segment.source)
        for name, kinds in found.items():
            frame = fed.get(name)
            column = None if frame is None else columns.get(frame)
            if frame is None or not passes_through(rule, [frame]):
                column = None
            kinds.add(column)
    sources = {
        name: next(iter(kinds)) if len(kinds) == 1 else None for name, kinds in found.items()
    }
    return replace(
        table,
        columns=tuple(
            replace(c, source=source)
            if (source := sources[c.name]) is not None and source.spark_type == c.spark_type
            else c
            for c in table.columns
        ),
    )


# what stops a one-pass append at a row that is not a snapshot row of the recorded table
_NOT_SNAPSHOT_ONLY = "sparkcdc: a row that is not a snapshot row of the batch's one table"

_COUNTS_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}


@dataclass(frozen=True)
class WriteRules:
    """How a pipeline's batches are written, as its file says and its sink allows."""

    behavior: str  # pipeline.schema-change-behavior
    # the source: its DDL statements read by its dialect, added columns read back from it
    source: SourceDialect[Any]
    # the sink table and transform of a table that joins the running pipeline
    router: Callable[[TableSchema], tuple[str, TransformRule | None]] | None = None
    # snapshot rows may be appended: the sink tables held no rows when the stream began
    append_snapshot: bool = False
    table_writes: int = 1  # the batch's sink tables written up to this many at once


class BatchWriter:
    """The ``foreachBatch`` function: one tables-shape batch → every touched sink table.

    Schema change rows are handled first (:class:`~.evolution.evolver.SchemaEvolver`:
    the sink's tables are changed, the rows cut into segments by schema); then each touched
    sink table is written once, in its shape at the end of the batch.
    """

    def __init__(
        self,
        plan: PipelinePlan,
        sink: Any,
        rules: WriteRules,
        listener: BatchListener | None = None,
        history: SchemaHistory | None = None,
        snapshot_batch: Callable[[int], str | None] | None = None,
    ) -> None:
        self.plan = plan
        # the batch's sink tables written up to this many at once (spark/concurrent.py)
        self.writes = ConcurrentWrites(rules.table_writes)
        # the table whose snapshot chunks alone a batch reads, as the source planned it
        self.snapshot_batch = snapshot_batch
        # snapshot rows may be appended: the sink tables held no rows when the stream began
        self.append_snapshot = rules.append_snapshot
        self.source = rules.source  # added columns are read back from there
        self.sink = sink
        self.listener = listener
        self.history = history
        self._state = initial_state(plan)
        self.event_lag_s: float | None = None  # of the last batch with binlog changes
        self._state_batch: int | None = None  # the batch self._state is the end of
        self._rules = {s.schema.qualified_name: s.transform for s in plan.sources}
        self._source_schemas = {s.schema.qualified_name: s.schema for s in plan.sources}
        self._spark: SparkSession | None = None
        self._change_columns: dict[tuple[Any, ...], ChangeColumns] = {}  # source_changes'
        members: dict[str, tuple[str, ...]] = {
            t.name: tuple(s.schema.qualified_name for s in plan.sources_of(t))
            for t in plan.sink_tables
        }
        self.router = rules.router
        self.evolver = SchemaEvolver(
            sink,
            rules.behavior,
            self._frame,
            members,
            self._route if rules.router else None,
            ddl=rules.source.ddl(),
            online_schema_changes=plan.online_schema_changes,
        )

    def close(self) -> None:
        """Ends the threads of the table writes (each batch's writes ended with it)."""
        self.writes.close()

    def _route(self, schema: TableSchema) -> str:
        """Sink table of a table that joined the running pipeline (its transform kept)."""
        assert self.router is not None
        sink_table, rule = self.router(schema)
        self._rules[schema.qualified_name] = rule
        return sink_table

    def _frame(self, name: str, schemas: Sequence[TableSchema]) -> SinkTable:
        assert self._spark is not None
        return sink_frame(
            self._spark, name, [(s, self._rules.get(s.qualified_name)) for s in schemas]
        )

    def state_before(self, batch_id: int) -> SchemaState:
        if self._state_batch is not None and self._state_batch == batch_id - 1:
            return self._state
        saved = self.history.before(batch_id) if self.history is not None else None
        if saved is None:
            return self._state
        # tables captured since the state was saved (the pattern now matches more)
        start = initial_state(self.plan)
        for source, versions in start.sources.items():
            saved.sources.setdefault(source, versions)
        for name, sink_state in start.sinks.items():
            saved.sinks.setdefault(name, sink_state)
        return saved

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self._spark = batch.sparkSession
        began = time.perf_counter()
        alone = self.snapshot_batch(batch_id) if self.snapshot_batch is not None else None
        if alone is not None and self._write_snapshot_batch(batch, batch_id, alone, began):
            return
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            # changes per table: an update's two halves count once. A few rows, so one
            # task sums them up, and Spark's adaptive execution has nothing to adapt (it made
            # this three jobs, not one: 0.2 s of a 1.5 s batch at 1,000 changes/s here)
            with session_conf(self._spark, _COUNTS_CONF):
                counts = (
                    batch.groupBy(DATABASE, TABLE, F.col(OP) == DDL_OP)
                    .agg(
                        F.count(F.when(F.col(OP) != RowKind.UPDATE_BEFORE.value, 1)),
                        F.max(OP_TS),
                        F.count(F.when(F.col(OP_TS).isNull(), 1)),  # snapshot rows
                        # binlog updates and deletes
                        F.count(
                            F.when(
                                F.col(OP_TS).isNotNull() & (F.col(OP) != RowKind.INSERT.value), 1
                            )
                        ),
                    )
                    .collect()
                )
            timings = [f"read {time.perf_counter() - began:.2f}s"]
            self.sink.ready()  # tables it creates while the first batch reads
            touched: set[str] = set()
            rows: dict[str, int] = {}
            has_ddl = False
            newest = [t for *_, t, _, _ in counts if t is not None]
            snapshotted: set[str] = set()  # tables with snapshot rows in this batch
            changed: set[str] = set()  # tables with binlog updates or deletes in this batch
            for database, table, is_ddl, count, _, snapshot_rows, changes in counts:
                qualified = f"{database}.{table}"
                if is_ddl:
                    has_ddl = True
                    continue
                touched.add(qualified)
                rows[qualified] = rows.get(qualified, 0) + int(count)
                if snapshot_rows:
                    snapshotted.add(qualified)
                if changes:
                    changed.add(qualified)
            ddl = (
                [
                    SchemaChange(r[DATABASE], r[TABLE], r["_ddl"], int(r[SEQ]))
                    for r in batch.where(F.col(OP) == DDL_OP)
                    .select(DATABASE, TABLE, SEQ, "_ddl")
                    .collect()
                ]
                if has_ddl
                else []
            )
            # a replayed batch whose schema work was done (and saved) before its writes must
            # not truncate or drop again what those writes left
            replay = self.history is not None and self.history.has(batch_id)
            plan = self.evolver.plan(
                self.state_before(batch_id), ddl, batch_id=batch_id, replay=replay
            )
            if plan.changed and self.history is not None:
                self.history.save(batch_id, plan.state)
            writes: list[Callable[[DataFrame], tuple[bool, str]]] = []
            written_sources: list[set[str]] = []  # each write's source tables
            for name, segments in plan.segments.items():
                fed = [s for s in segments if s.source in touched]
                sink_state = plan.state.sinks[name]
                if not fed or sink_state.dropped:
                    continue
                sources = {s.source for s in fed}
                written_sources.append(sources)
                writes.append(
                    functools.partial(
                        self._write_sink_table,
                        name=name,
                        fed=fed,
                        sink_state=sink_state,
                        batch_id=batch_id,
                        snapshot_rows=bool(sources & snapshotted),
                        binlog_changes=bool(sources & changed),
                        size=sum(rows[s] for s in sources),
                    )
                )
            skipped: set[str] = set()
            results = self.writes.run(batch, writes)
            for sources, (written, timing) in zip(written_sources, results, strict=True):
                if not written:
                    skipped.update(sources)  # applied before: not counted
                timings.append(timing)
            for fill in plan.fills:
                started = time.perf_counter()
                self._fill(fill, plan.state)
                timings.append(f"fill {fill.target.name} {time.perf_counter() - started:.2f}s")
            log.debug("batch %d: %s", batch_id, ", ".join(timings))
            if newest:  # Flink CDC's emit event-time lag: written now, committed then
                self.event_lag_s = max(0.0, time.time() - max(newest).timestamp())
            self._state, self._state_batch = plan.state, batch_id
            if self.listener is not None:  # the change rows the sink took in this batch
                self.listener(batch_id, {t: n for t, n in rows.items() if t not in skipped})
        finally:
            batch.unpersist()

    def _write_snapshot_batch(
        self, batch: DataFrame, batch_id: int, source: str, began: float
    ) -> bool:
        """Append a batch the source planned as snapshot chunks of ``source`` alone in one
        pass over the source's rows: no cache, no counts job before the write (DESIGN.md
        §6.2). True when the batch was written so (or skipped as a replay); False when it
        must be written the general way: the table's rows are not plain appends here, or
        the batch held a row that is not a snapshot row of ``source`` (a schema change a
        chunk brought), which stops the append before it commits."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        schema = self._source_schemas.get(source)
        if schema is None:
            return False
        replay = self.history is not None and self.history.has(batch_id)
        plan = self.evolver.plan(self.state_before(batch_id), [], batch_id=batch_id, replay=replay)
        fed = [(n, s) for n, ss in plan.segments.items() for s in ss if s.source == source]
        if plan.changed or plan.fills or len(fed) != 1:
            return False
        name, segment = fed[0]
        sink_state = plan.state.sinks[name]
        table = described(sink_state.table, [segment], self._rules)
        self.sink.ready()
        if (
            sink_state.dropped
            or sink_state.stale
            or not self._appendable(table)
            or not self.sink.knows_appends(table)
        ):
            return False
        snapshot_row = (
            (F.col(OP) == RowKind.INSERT.value)
            & F.col(OP_TS).isNull()
            & (F.col(DATABASE) == schema.database)
            & (F.col(TABLE) == schema.table)
        )
        checked = batch.where(
            F.when(snapshot_row, F.lit(True)).otherwise(F.raise_error(F.lit(_NOT_SNAPSHOT_ONLY)))
        )
        observation = Observation(f"sparkcdc-batch-{batch_id}")
        rows = checked.observe(observation, F.count(F.lit(1)).alias("rows"))
        try:
            appended = self.sink.append(
                table, self._segment_frame(rows, segment, sink_state.table), batch_id
            )
        except SinkError as exc:
            log.info(
                "batch %d: the one-pass append of %s's snapshot chunks stopped (%s); the batch "
                "is written the general way",
                batch_id,
                source,
                exc,
            )
            return False
        counted = {source: int(observation.get["rows"])} if appended else {}
        log.debug("batch %d: one pass, %s %.2fs", batch_id, name, time.perf_counter() - began)
        self._state, self._state_batch = plan.state, batch_id
        if self.listener is not None:
            self.listener(batch_id, counted)
        return True

    def _write_sink_table(
        self,
        batch: DataFrame,
        *,
        name: str,
        fed: Sequence[Segment],
        sink_state: SinkTableState,
        batch_id: int,
        snapshot_rows: bool,
        binlog_changes: bool,
        size: int,
    ) -> tuple[bool, str]:
        """Write the changes ``fed`` segments of ``batch`` give sink table ``name``:
        whether they were written now (not a replay), and a timing."""
        started = time.perf_counter()
        frames = [self._segment_frame(batch, s, sink_state.table) for s in fed]
        changes = functools.reduce(lambda a, b: a.unionByName(b), frames)
        table = described(sink_state.table, fed, self._rules)
        inserts = not sink_state.stale and self._appendable(table)
        written = self._write(
            table, changes, batch_id, inserts, snapshot_rows, binlog_changes, size
        )
        return written, f"{name} {time.perf_counter() - started:.2f}s"

    def _write(
        self,
        table: SinkTable,
        changes: DataFrame,
        batch_id: int,
        inserts: bool,
        snapshot_rows: bool,
        binlog_changes: bool,
        size: int,
    ) -> bool:
        """Write one sink table's changes of the batch (``size`` of them at most); False
        when the sink had applied them before (a replay).

        With ``inserts`` (the sink table holds exactly the rows the stream gave it, see
        :meth:`_appendable`) every ``+I`` inserts a key the table does not hold: a snapshot
        row's key no earlier batch wrote (DESIGN.md §2), a binlog insert's key the source
        did not have just before, so neither had the sink table. A batch of inserts alone
        (no binlog update or delete: no key occurs twice) is appended whole; otherwise its
        snapshot rows are appended and its binlog rows upserted after them."""
        from pyspark.sql import functions as F

        if not inserts or (binlog_changes and not snapshot_rows):
            return bool(self.sink.write(table, changes, batch_id, size=size))
        if not binlog_changes:
            return bool(self.sink.append(table, changes, batch_id))
        appended = self.sink.append(table, changes.where(F.col(OP_TS).isNull()), batch_id)
        binlog = changes.where(F.col(OP_TS).isNotNull())
        written = self.sink.write(table, binlog, batch_id, size=size)
        return bool(appended or written)

    def _appendable(self, table: SinkTable) -> bool:
        """Whether the inserts of ``table`` may be plain inserts, its keys never looked up:
        the sink takes appends, the stream began on empty sink tables, the table has one
        source (merged shards may share keys), and its key is that source's primary key,
        passed through as it is (a computed key may repeat). The caller checks too that
        nothing emptied or replaced the source table without the sink table following
        (:attr:`SinkTableState.stale`)."""
        if not (self.append_snapshot and self.sink.appends):
            return False
        if len(table.sources) != 1:
            return False
        source = self._source_schemas.get(table.sources[0])
        if source is None or tuple(table.primary_key) != tuple(source.primary_key):
            return False
        return passes_through(self._rules.get(table.sources[0]), table.primary_key)

    def _segment_frame(self, batch: DataFrame, segment: Segment, table: SinkTable) -> DataFrame:
        from pyspark.sql import functions as F

        rows = batch
        if segment.lo is not None:
            rows = rows.where(F.col(SEQ) >= segment.lo)
        if segment.hi is not None:
            rows = rows.where(F.col(SEQ) < segment.hi)
        schema = segment.schema
        frame = apply_transform(
            source_changes(rows, schema, self._change_columns),
            self._rules.get(segment.source),
            schema.column_names,
        )
        return to_sink(frame, segment.mapping, table)

    def _fill(self, fill: ColumnFill, state: SchemaState) -> None:
        """Give the rows the sink table had before ``fill``'s column was added the value
        the source gave them (module docstring of :mod:`sparkcdc.pipeline.evolution.fills`)."""
        table = state.sinks[fill.sink_table].table
        if not self.sink.keeps_rows:
            log.warning(
                "%s sink, %s: messages written before it carry no %s, and rows not changed "
                "since hold a value at the source; consumers that materialize %s hold NULL "
                "for them until those rows change",
                self.sink.options.type,
                fill.describe(),
                fill.target.name,
                table.name,
            )
            return
        if fill.constant:
            assert fill.default.literal is not None
            try:
                decoded = self.evolver.ddl.default_value(fill.column, fill.default.literal)
            except ValueError:
                pass
            else:
                value = self._typed_values(fill, [], [(decoded,)])[0][0]
                self.sink.fill_column(table, fill.target, value)
                log.info("%s: filled in %s with its DEFAULT", fill.describe(), table.name)
                return
        self._read_back(fill, table, state)

    def _typed_values(
        self, fill: ColumnFill, keys: Sequence[SchemaColumn], rows: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...]]:
        """Decoder-form rows (``keys`` then the column) as the Spark values the stream gives
        (the same text and cast a binlog row's text values go through)."""
        frame = self._typed_frame(fill, keys, rows)
        return [tuple(r) for r in frame.collect()]

    def _typed_frame(
        self, fill: ColumnFill, keys: Sequence[SchemaColumn], rows: Sequence[Sequence[Any]]
    ) -> DataFrame:
        database, _, name = fill.source.partition(".")
        columns = (*keys, fill.column)
        names = [c.name for c in columns]
        texts = [
            {n: value_text(v) for n, v in zip(names, r, strict=True) if v is not None} for r in rows
        ]
        frame = text_rows(
            self.sink.spark,
            [(RowKind.INSERT.value, None, 0, database, name, None, t) for t in texts],
        )
        schema = TableSchema(database, name, tuple(columns), tuple(c.name for c in keys))
        return source_changes(frame, schema).select(*[quote_spark(n) for n in names])

    def _read_back(self, fill: ColumnFill, table: SinkTable, state: SchemaState) -> None:
        """Read the column back from the source, by key, and set it in the sink rows of
        those keys (rows the sink lacks are not inserted)."""
        from pyspark.sql import functions as F

        from sparkcdc.errors import SparkCdcError

        mapping = {t: f for f, t in state.sinks[fill.sink_table].mapping.items()}
        schema = state.schema(fill.source)
        by_name = {c.name: c for c in schema.columns} if schema is not None else {}
        keys = [by_name.get(mapping.get(k, "")) for k in table.primary_key]
        try:
            if schema is None:
                raise SparkCdcError(f"table {fill.source} was renamed or dropped since")
            if fill.column.name not in by_name:
                raise SparkCdcError(f"{fill.source} has no column {fill.column.name} any more")
            if any(k is None for k in keys):
                raise SparkCdcError(
                    "the sink table's key columns are not columns of the source table (a "
                    "transform renames or computes them)"
                )
            key_columns = [k for k in keys if k is not None]
            done = 0
            pages = self.source.read_column(schema, key_columns, fill.column)
            for rows in pages:
                frame = self._typed_frame(fill, key_columns, rows)
                frame = frame.select(
                    *[
                        F.col(quote_spark(c.name)).alias(k)
                        for c, k in zip(key_columns, table.primary_key, strict=True)
                    ],
                    F.col(quote_spark(fill.column.name))
                    .try_cast(fill.target.spark_type)
                    .alias(fill.target.name),
                )
                self.sink.update_column(table, fill.target, frame)
                done += len(rows)
        except SparkCdcError as exc:
            self._diverged(fill, table, str(exc))
            return
        except Exception as exc:  # the source's SQL errors: the table or column is gone
            self._diverged(fill, table, spark_error_text(exc) or repr(exc))
            return
        log.info(
            "%s: %d row(s) read back from the source into %s", fill.describe(), done, table.name
        )

    def _diverged(self, fill: ColumnFill, table: SinkTable, reason: str) -> None:
        message = (
            f"sink table {table.name}, column {fill.target.name}: {fill.describe()}; it "
            f"cannot be read back from the source ({reason}). Rows that existed before that "
            "change and have not changed since hold NULL there, while the source gave them "
            "a value. To repair: set the column in the sink from the source table by key, "
            "or load the table again (drop the sink table and start the pipeline from a new "
            "checkpoint)"
        )
        log.warning("%s", message)
        if self.history is not None:
            Divergences(self.history.checkpoint).record(
                table.name, fill.target.name, fill.seq, message
            )
