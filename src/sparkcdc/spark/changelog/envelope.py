"""The envelope (several tables): ``database, table, op, before, after, op_ts, seq,
schema_version, ddl`` with row images as JSON text; ``op`` is ``r``/``c``/``u``/``d``, or
``ddl`` for a schema change (its statement in ``ddl``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from sparkcdc.errors import SourceError
from sparkcdc.model.changelog import EnvelopeOp
from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.spark.changelog.arrow import BATCH_ROWS, record_batch
from sparkcdc.spark.changelog.decoded import SnapshotRows, op_ts_micros
from sparkcdc.spark.changelog.text import image_json

ENVELOPE_DDL = (
    "`database` STRING, `table` STRING, `op` STRING, `before` STRING, `after` STRING, "
    "`op_ts` TIMESTAMP, `seq` BIGINT, `schema_version` INT, `ddl` STRING"
)

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
            op_ts_micros(change.timestamp),
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
