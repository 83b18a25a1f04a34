"""The executor side of the ``mysql-cdc`` source: what a task reads for one partition.

A binlog partition reads its share of the batch's range through the source's dialect
(``RangeRead``), filtered by the snapshot's chunks while a snapshot runs; a chunk partition
loads its chunks as staged, or reads and stages them (adjacent ones together). Driver-side
planning is ``spark/source.py``'s; the partitions are ``spark/offsets.py``'s.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

from pyspark.sql.datasource import InputPartition

from sparkcdc.errors import SnapshotError, SourceError
from sparkcdc.model.dialect import RangeRead, SourceDialect
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.schema import schema_from_json
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.filter import InterleavingFilter
from sparkcdc.snapshot.interleave import filter_changes
from sparkcdc.snapshot.reader import ChunkRead, read_chunks, read_together
from sparkcdc.snapshot.staging import ChunkStaging, StagedChunk
from sparkcdc.snapshot.storage import StateStore
from sparkcdc.spark.capture import CapturePlan
from sparkcdc.spark.changelog.decoded import SnapshotRows
from sparkcdc.spark.offsets import (
    READ_GROUP_ROWS,
    BinlogRangePartition,
    ChunkPartition,
    offset_position,
)


def _refuse_ddl_of(
    changes: Iterable[RowChanges | SchemaChange], gone: frozenset[tuple[str, str]], table: str
) -> Iterator[RowChanges | SchemaChange]:
    """``changes`` of a typed stream, stopped at a DDL statement on a table it captured
    before it stopped and no longer captures (``gone``): its typed changelog holds one
    table's changes and has no row for it."""
    for change in changes:
        if isinstance(change, SchemaChange) and (change.database, change.table) in gone:
            raise SourceError(
                f"at {change.where} the statement {change.statement!r} changed "
                f"{change.database}.{change.table}, which this query captured when it last "
                "stopped and which has not existed since it started again (dropped or renamed "
                f"meanwhile). The query now captures only {table}, whose typed changelog has "
                "no room for another table's schema change (a DROP TABLE must reach the "
                "sink). Set changelog.shape=envelope (the shape changelog.shape=auto gave the "
                "query when it captured several tables) to go on from this checkpoint"
            )
        yield change


class PartitionReader:
    """What one task of a batch reads: a share of the binlog range, or snapshot chunks."""

    def __init__(
        self,
        options: SourceOptions,
        plan: CapturePlan,
        dialect: SourceDialect[Any],
        store: Callable[[], StateStore],
    ) -> None:
        self.options = options
        self.plan = plan
        self.dialect = dialect
        self.store = store  # opened where a chunk task stages: only snapshots keep state

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, ChunkPartition):
            yield from self._read_chunk(partition)
            return
        assert isinstance(partition, BinlogRangePartition)
        start = offset_position(json.loads(partition.start), self.dialect)
        end = offset_position(json.loads(partition.end), self.dialect)
        captured = frozenset((t.database, t.table) for t in self.plan.tables)
        if partition.tables:
            captured = frozenset((db, t) for db, t in json.loads(partition.tables))
        # the databases of the stream's tables: those it captures now, and those its start
        # offset names (a table whose database was dropped while the query was stopped is
        # in no plan)
        databases = {db for db, _ in captured}
        if partition.vanished:
            databases |= set(json.loads(partition.vanished))
        # tables the start offset names that no longer exist for the query: their DDL is
        # delivered (a DROP TABLE made while it was stopped), their rows cannot be
        gone = frozenset((db, t) for db, t in json.loads(partition.gone or "[]"))
        spec = RangeRead(
            start,
            end,
            partition.server_id,
            captured,
            gone,
            frozenset(databases),
            # a typed stream restarts at the cut-over's own RENAME and reads the new schema
            # then: the copies' statements would only restart it more often
            follow_copies=self.options.online_schema_changes and not self.plan.typed,
            refuse_row_changing_ddl=self.options.ddl_row_changes == "fail",
            versions=partition.versions,
            share=partition.share,
            shares=partition.shares,
            # a typed stream stops at each schema change and starts again with the schema
            # read then: its plan's schema is the table's at every range it reads; the
            # tables shape reads on past them: the schemas as of the range's start
            schemas=self.plan.tables
            if self.plan.typed
            else tuple(schema_from_json(s) for s in json.loads(partition.schemas or "[]")),
        )
        changes: Any = self.dialect.read_range(spec)
        if gone and self.plan.typed:
            changes = _refuse_ddl_of(changes, gone, self.plan.tables[0].qualified_name)
        if not partition.filter_state:
            yield from self.plan.builder().batches(changes)
            return
        # string chunk keys of collations only the server orders are ranked over SQL
        flt = InterleavingFilter.from_state(
            json.loads(partition.filter_state), self.dialect.key_ranking()
        )
        try:
            changes = filter_changes(changes, flt, json.loads(partition.key_columns))
            yield from self.plan.builder().batches(changes)
        finally:
            flt.close()

    def _read_chunk(self, partition: ChunkPartition) -> Any:
        with contextlib.ExitStack() as stack:
            yield from self._read_chunks(partition, stack)

    def _read_chunks(self, partition: ChunkPartition, stack: contextlib.ExitStack) -> Any:
        builder = self.plan.builder()
        for chunk, staged in self._staged_chunks(partition, stack):
            if staged.rows is None:
                raise SnapshotError(
                    f"chunk {chunk.index} of {chunk.table} was committed and released already, "
                    "yet Spark asks for it again: the checkpoint and state.location disagree; "
                    "start with a new checkpoint and state location"
                )
            schema = staged.meta.schema
            rows = SnapshotRows(
                schema.database,
                schema.table,
                schema.column_names,
                staged.rows,
                staged.meta.high.seq(),
                staged.meta.ddl,
                schema.columns,
            )
            yield from builder.snapshot_batches(rows)

    def _staged_chunks(
        self, partition: ChunkPartition, stack: contextlib.ExitStack
    ) -> Iterator[tuple[ChunkRange, StagedChunk]]:
        """The partition's chunks in order, each staged: loaded if it was, else read and
        staged. Adjacent chunks not staged yet are read together (``read_chunks``), up to
        ``READ_GROUP_ROWS`` rows' worth of chunks."""
        chunks = [ChunkRange.from_json(text) for text in partition.chunks]
        if not chunks:
            return
        staging = ChunkStaging(self.store(), self.dialect.position_from_offset)
        limit = max(1, READ_GROUP_ROWS // max(1, self.options.chunk_size))
        since = (
            offset_position(json.loads(partition.since), self.dialect) if partition.since else None
        )
        schema = (  # a partition's chunks are of one table
            schema_from_json(json.loads(partition.schema))
            if partition.schema
            else next(t for t in self.plan.tables if t.qualified_name == chunks[0].table)
        )
        # one SQL connection for the task's chunks, opened when needed; a group of chunks a
        # lost connection cut short is read again, whole, on a new one
        conn = self.dialect.session(schema.database)
        stack.callback(conn.close)
        group: list[ChunkRange] = []
        spec = ChunkRead(
            schema,
            partition.key_column,
            partition.collation,
            partition.server_id,
            since,
        )

        def read_group() -> Iterator[tuple[ChunkRange, StagedChunk]]:
            read = partial(read_chunks, self.dialect, spec, list(group))
            results = conn.run(lambda c: read(conn=c))
            group.clear()
            for result in results:
                if partition.schema and result.chunk.index == 0:
                    # a table that joined the running query: its CREATE TABLE (at the first
                    # chunk's low watermark) tells consumers its columns before its rows
                    create = SchemaChange.from_binlog(
                        schema.database,
                        schema.table,
                        self.dialect.create_table_statement(result.schema),
                        int(time.time()),
                        result.low,
                    )
                    result = replace(result, ddl=(*result.ddl, create))
                yield result.chunk, staging.stage(result)

        for chunk in chunks:
            staged = staging.load(chunk)
            joins = staged is None and (
                not group
                or (
                    len(group) < limit
                    and read_together(schema, partition.key_column, [*group, chunk])
                )
            )
            if not joins and group:
                yield from read_group()
            if staged is None:
                group.append(chunk)
            else:
                yield chunk, staged
        if group:
            yield from read_group()
