"""Rows read to compare: a Spark frame (a sink table, or a transformed source table), or a
sink table read as Arrow without Spark (``Sink.arrow_reader``: delta-rs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from sparkcdc.pipeline import canonical as cn
from sparkcdc.pipeline.verify.columns import ColumnPlan
from sparkcdc.pipeline.verify.compare import Digest, Sums

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


KEY_TEXT, HASH, BUCKET = "_verify_key", "_verify_hash", "_verify_bucket"


class SparkSide:
    """Rows as a Spark DataFrame: the sink table, or a transformed source table."""

    def __init__(
        self, frame: Callable[[], DataFrame], plan: ColumnPlan, *, older: bool = False
    ) -> None:
        self._frame_of = frame
        self.plan = plan
        self.older = older  # the sink: lenient's older columns count (ColumnPlan.spark_values)

    def frame(self) -> DataFrame:
        """The rows as they are now (a Delta frame pins its table version: read again each
        time), each with its key text, row hash and canonical fields."""
        from pyspark.sql import functions as F

        from sparkcdc.sinks.base import spark_type_name

        rows = self._frame_of()
        types = {f.name: spark_type_name(f.dataType) for f in rows.schema.fields}
        values = self.plan.spark_values(types, older=self.older)
        keys = [values[i] for i in self.plan.key_index()]
        return rows.select(
            F.expr(cn.spark_row_text(keys)).alias(KEY_TEXT),
            F.expr(cn.spark_hash(cn.spark_row_text(values))).alias(HASH),
            *[F.expr(v).alias(f"_k{i}") for i, v in enumerate(keys)],
            *[F.expr(cn.spark_field(v)).alias(f"_f{i}") for i, v in enumerate(values)],
        )

    def buckets(self, n: int) -> Sums:
        from pyspark.sql import functions as F

        grouped = (
            self.frame()
            .groupBy(F.expr(cn.spark_bucket(KEY_TEXT, n)).alias(BUCKET))
            .agg(F.count("*"), F.sum(F.col(HASH).cast("DECIMAL(38,0)")))
        )
        return {int(b): (int(c), int(s)) for b, c, s in grouped.collect()}

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]:
        from pyspark.sql import functions as F

        width = len(self.plan.table.primary_key)
        rows = (
            self.frame()
            .where(F.expr(cn.spark_bucket(KEY_TEXT, n)).isin(sorted(buckets)))
            .select(KEY_TEXT, HASH, *[f"_k{i}" for i in range(width)])
            .collect()
        )
        return {r[0]: Digest(tuple(r[2:]), int(r[1])) for r in rows}

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]:
        from pyspark.sql import functions as F

        if not digests:
            return {}
        width = len(self.plan.compared)
        rows = (
            self.frame()
            .where(F.col(KEY_TEXT).isin(sorted(digests)))
            .select(KEY_TEXT, *[f"_f{i}" for i in range(width)])
            .collect()
        )
        return {r[0]: tuple(r[1:]) for r in rows}


class ArrowSide:
    """A sink table read as Arrow without Spark (``Sink.arrow_reader``: delta-rs), each
    row's canonical text computed in Python (``canonical.arrow_*``), one pass per phase."""

    def __init__(
        self, read: Callable[[Sequence[str]], Iterable[pa.RecordBatch]], plan: ColumnPlan
    ) -> None:
        self._read = read
        self.plan = plan

    def batches(self) -> Iterable[tuple[list[str], list[str], list[pa.Array]]]:
        """Per batch of the table as it is now: its rows' key texts, row texts and fields."""
        import pyarrow.compute as pc

        keys = self.plan.key_index()
        for batch in self._read(self.plan.arrow_columns()):
            fields = self.plan.arrow_fields(batch)
            if fields is None:
                raise ValueError("a column type without an Arrow form")
            key_texts = pc.binary_join_element_wise(*[fields[i] for i in keys], "")
            row_texts = pc.binary_join_element_wise(*fields, "")
            yield key_texts.to_pylist(), row_texts.to_pylist(), fields

    def readable(self) -> bool:
        """Whether every compared column's type has an Arrow form."""
        return all(cn.arrow_supported(c.column.spark_type) for c in self.plan.compared)

    def buckets(self, n: int) -> Sums:
        sums: Sums = {}
        for keys, texts, _ in self.batches():
            for key, text in zip(keys, texts, strict=True):
                bucket = cn.arrow_bucket(key, n)
                rows, hashes = sums.get(bucket, (0, 0))
                sums[bucket] = (rows + 1, hashes + cn.arrow_hash(text))
        return sums

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]:
        out: dict[str, Digest] = {}
        for keys, texts, fields in self.batches():
            for index, key in enumerate(keys):
                if cn.arrow_bucket(key, n) in buckets:
                    values = self._row(fields, index, self.plan.key_index())
                    out[key] = Digest(
                        tuple(_field_value(v) for v in values), cn.arrow_hash(texts[index])
                    )
        return out

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        if not digests:
            return out
        everything = range(len(self.plan.compared))
        for keys, _, fields in self.batches():
            for index, key in enumerate(keys):
                if key in digests:
                    out[key] = self._row(fields, index, everything)
        return out

    @staticmethod
    def _row(fields: list[pa.Array], index: int, columns: Iterable[int]) -> tuple[str, ...]:
        return tuple(str(fields[i][index].as_py()) for i in columns)


def _field_value(field: str) -> str | None:
    """A field's canonical text ('N': NULL; else after '<length>:')."""
    return None if field == "N" else field.partition(":")[2]
