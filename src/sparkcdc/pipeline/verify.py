"""``sparkcdc verify``: is every sink table equal to its source tables (routes and transforms
applied)? Lock-free, chunked, and tolerant of changes still in flight.

For each sink table both sides compute, per row, the canonical row text and hash of
:mod:`sparkcdc.pipeline.canonical`, and put the row in a bucket by a hash of its key:

1. **Buckets.** Per bucket, COUNT(*) and SUM(hash). The source side runs in the database:
   one plain SELECT per snapshot chunk (``snapshot/splitter.py``), ``GROUP BY bucket``,
   ``pipeline.parallelism`` at a time, no locks. A table with a transform (or a column the
   SQL form cannot produce) is read into Spark chunk by chunk and goes through the
   pipeline's own transform instead. The sink side is one Spark ``GROUP BY bucket``.
2. **In flight.** Each phase reads the source, records the binlog position, and reads the
   sink once the pipeline's committed offset has passed it (the pipeline must be running;
   waited for up to ``timeout_s``). Buckets that differ are drilled down: key and row hash
   of every row of those buckets on both sides give the keys that differ.
3. **Keys.** Those keys are read field by field: source, sink (once the pipeline caught
   up), source again. A key is reported when two looks in a row saw the same unchanged
   source row and the same other sink row: ``missing`` (in the source, not in the sink),
   ``extra`` (in the sink only), ``different`` (with the columns that differ). Keys the
   source keeps changing are ``unsettled`` after ``KEY_ROUNDS`` looks: in flight.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from sparkcdc.errors import ConfigError
from sparkcdc.locations import Location, as_location, session_hadoop_settings
from sparkcdc.model.changelog import METADATA_COLUMNS
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table, quote_spark
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.schema_change import SchemaChangeType, matches_kinds
from sparkcdc.pipeline import canonical as cn
from sparkcdc.pipeline.config import PipelineConfig, TransformRule
from sparkcdc.sinks.base import Sink, SinkColumn, SinkTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sparkcdc.mysql.protocol.connection import ConnectionSettings
    from sparkcdc.pipeline.composer import SourceTablePlan
    from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState

log = logging.getLogger(__name__)

ROWS_PER_BUCKET = 10_000
VERIFY_CHUNK_ROWS = 100_000
KEY_ROUNDS = 6
RESTART_GRACE_S = 10.0
KEY_TEXT, HASH, BUCKET = "_verify_key", "_verify_hash", "_verify_bucket"
_POLL_S = 0.5

Sums = dict[int, tuple[int, int]]  # bucket -> (rows, sum of row hashes)


@dataclass(frozen=True)
class Digest:
    """One row seen in the drill-down: its key's canonical values, hash, and (source side)
    its key as the database has it, to read it again by key."""

    key: tuple[str | None, ...]
    hash: int
    raw: tuple[Any, ...] | None = None
    source: int = 0  # which member table of the sink table (source side)


class Side(Protocol):
    """One side of the comparison of a sink table."""

    def buckets(self, n: int) -> Sums: ...

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]: ...

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]: ...


# ---------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Compared:
    """A sink column verify compares, and the source column (of the transformed frame) whose
    values the pipeline writes into it."""

    column: SinkColumn
    source: str
    # sink columns lenient kept when this one replaced them (a changed type gives a new
    # column ``<name>_<type>``): rows written before hold the value there, this one NULL
    older: tuple[SinkColumn, ...] = ()


@dataclass(frozen=True)
class ColumnPlan:
    """Which sink columns are compared, and how each side computes them."""

    table: SinkTable
    compared: tuple[Compared, ...]

    @classmethod
    def whole(cls, table: SinkTable) -> ColumnPlan:
        """Every column, fed by the source column of its name (no schema change yet)."""
        return cls(table, tuple(Compared(c, c.name) for c in table.columns))

    @property
    def names(self) -> list[str]:
        return [c.column.name for c in self.compared]

    @property
    def mapping(self) -> dict[str, str]:
        """Source column -> the sink column it is compared in."""
        return {c.source: c.column.name for c in self.compared}

    def spark_values(self, types: dict[str, str], *, older: bool = False) -> list[str]:
        """Canonical values over a frame of sink columns (``types``: its actual Spark types);
        ``older``: as lenient promises, a row's value is in the first of the column and the
        columns it replaced that is not NULL (the sink; the source side has no such rows)."""
        out = []
        for compared in self.compared:
            column = compared.column
            actual = types.get(column.name, column.spark_type)
            # a TIMESTAMP read back as TIMESTAMP_NTZ is its UTC wall time: same micros
            kind = actual if actual in ("TIMESTAMP", "TIMESTAMP_NTZ") else column.spark_type
            if not (older and compared.older):
                out.append(cn.spark_value(column.name, kind))
                continue
            chain = [column, *compared.older]
            value = ", ".join(
                f"TRY_CAST({quote_spark(c.name)} AS {column.spark_type})" for c in chain
            )
            out.append(cn.spark_value_of(f"COALESCE({value})", column.spark_type))
        return out

    def arrow_columns(self) -> list[str]:
        """The sink columns :meth:`arrow_values` reads."""
        return [c.name for compared in self.compared for c in (compared.column, *compared.older)]

    def arrow_fields(self, batch: pa.RecordBatch) -> list[pa.Array] | None:
        """The fields (``canonical.arrow_fields``) of a batch of :meth:`arrow_columns`, one
        array per compared column (older columns as in :meth:`spark_values`); None where a
        type has no Arrow form."""
        import pyarrow.compute as pc

        out = []
        for compared in self.compared:
            values = batch.column(compared.column.name)
            for older in compared.older:
                values = pc.coalesce(values, cn.arrow_cast(batch.column(older.name), values))
            texts = cn.arrow_texts(values, compared.column.spark_type)
            if texts is None:
                return None
            out.append(cn.arrow_fields(texts))
        return out

    def key_index(self) -> list[int]:
        names = self.names
        return [names.index(k) for k in self.table.primary_key]

    def mysql_values(self, schema: TableSchema) -> list[str] | None:
        """Canonical values over a source table, or None if one cannot be pushed down."""
        by_name: dict[str, Column] = {c.name: c for c in schema.columns}
        out = []
        for compared in self.compared:
            source = by_name.get(compared.source)
            if source is None:  # a member of a merged table without the column
                out.append("NULL")
                continue
            value = cn.mysql_value(source, compared.column.spark_type)
            if value is None:
                return None
            out.append(value)
        return out


def _pushable(rule: TransformRule | None) -> bool:
    return rule is None or (rule.projection is None and rule.filter is None)


# -------------------------------------------------------------------- source: MariaDB SQL


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
        from sparkcdc.mysql.protocol.connection import sql_connection
        from sparkcdc.snapshot.rowvalues import SESSION_TIME_ZONE_SQL

        conn = sql_connection(self.settings)
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        return conn

    def chunks(self) -> list[tuple[str, list[Any]]]:
        """WHERE clauses of the table's chunks (the snapshot's splitter, larger chunks)."""
        if self._chunks is None:
            from sparkcdc.snapshot.reader import chunk_where
            from sparkcdc.snapshot.splitter import ChunkSplitter, all_chunks

            with self._connect() as conn:
                splitter = ChunkSplitter.for_table(conn, self.schema, chunk_size=VERIFY_CHUNK_ROWS)
                ranges = all_chunks(splitter)
            self._chunks = [chunk_where(splitter.key_column, c) for c in ranges]
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


# --------------------------------------------------------------------------- Spark side


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


class UnionSide:
    """The source tables a sink table merges: the sink should hold their union."""

    def __init__(self, members: Sequence[Side]) -> None:
        self.members = members

    def buckets(self, n: int) -> Sums:
        sums: Sums = {}
        for member in self.members:
            for bucket, (rows, hashes) in member.buckets(n).items():
                was = sums.get(bucket, (0, 0))
                sums[bucket] = (was[0] + rows, was[1] + hashes)
        return sums

    def digests(self, n: int, buckets: set[int]) -> dict[str, Digest]:
        out: dict[str, Digest] = {}
        for member in self.members:
            out.update(member.digests(n, buckets))
        return out

    def fields(self, digests: dict[str, Digest]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for member in self.members:
            out.update(member.fields(digests))
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

    from sparkcdc.mysql.protocol.connection import sql_connection
    from sparkcdc.pipeline.composer import apply_transform, to_sink
    from sparkcdc.snapshot.reader import select_on
    from sparkcdc.snapshot.rowvalues import SESSION_TIME_ZONE_SQL
    from sparkcdc.snapshot.splitter import ChunkSplitter, all_chunks
    from sparkcdc.spark.changelog import SnapshotRows, TypedChangelogBuilder

    builder = TypedChangelogBuilder(schema)
    batches: list[pa.RecordBatch] = []
    with sql_connection(settings) as conn:
        with conn.cursor() as cur:
            cur.execute(SESSION_TIME_ZONE_SQL)
        splitter = ChunkSplitter.for_table(conn, schema, chunk_size=VERIFY_CHUNK_ROWS)
        for chunk in all_chunks(splitter):
            rows, _ = select_on(conn, schema, splitter.key_column, chunk)
            snapshot = SnapshotRows(schema.database, schema.table, schema.column_names, rows, 0)
            batches.extend(builder.snapshot_batches(snapshot))
    arrow = pa.Table.from_batches(batches, schema=builder.arrow_schema)
    changes = spark.createDataFrame(arrow)
    transformed = apply_transform(changes, rule, schema.column_names)
    return to_sink(transformed, plan.mapping, plan.table).drop(*METADATA_COLUMNS)


# ------------------------------------------------------------------------------ report


@dataclass
class TableReport:
    """What verify found for one sink table."""

    sink_table: str
    sources: tuple[str, ...]
    mode: str  # 'pushdown' (source aggregated in the database) or 'spark'
    sink_reader: str = "spark"  # 'spark', or the library that read it without Spark
    columns: int = 0  # sink columns compared
    # columns not compared, each {"column", "side": "sink" | "source", "why"}
    not_compared: list[dict[str, str]] = field(default_factory=list)
    position: str | None = None  # the source position of the first look
    source_rows: int = 0
    sink_rows: int = 0
    buckets: int = 0
    differing_buckets: int = 0  # at the first look (under live writes: rows in flight)
    rechecked: int = 0  # keys of those buckets read again, row by row
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    different: list[dict[str, Any]] = field(default_factory=list)
    # keys the source changed during each of the KEY_ROUNDS looks: in flight, not compared
    unsettled: list[dict[str, Any]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def text(self, max_keys: int) -> list[str]:
        """What was compared, at which position, and what was found (one line each)."""
        source = "aggregated in the database" if self.mode == "pushdown" else "read by Spark"
        at = f" at {self.position}" if self.position else ""
        lines = [
            f"{self.sink_table} <- {', '.join(self.sources)}: "
            + ("equal" if self.equal else "DIFFERENT"),
            f"  compared {self.source_rows} source row(s) read{at} with {self.sink_rows} sink "
            f"row(s) read once the pipeline had passed that position; {self.columns} "
            f"column(s); source {source}, sink read by {self.sink_reader}",
        ]
        for item in self.not_compared:
            where = "sink column" if item["side"] == "sink" else "source column"
            lines.append(f"  not compared: {where} {item['column']}: {item['why']}")
        if self.differing_buckets:
            settled = self.rechecked - len(self.unsettled)
            found = len(self.missing) + len(self.extra) + len(self.different)
            lines.append(
                f"  {self.differing_buckets}/{self.buckets} bucket(s) differed at that first "
                "look (rows written since the source was read, or differences); their "
                f"{self.rechecked} differing key(s) were read again on both sides after the "
                f"pipeline caught up: {found} of the {settled} that settled differ"
            )
        for kind in ("missing", "extra", "different", "unsettled"):
            keys: list[dict[str, Any]] = getattr(self, kind)
            if keys:
                shown = ", ".join(_key_text(k) for k in keys[:max_keys])
                more = f", ... ({len(keys) - max_keys} more)" if len(keys) > max_keys else ""
                why = (
                    " (the source changed them at every look: in flight, not compared)"
                    if kind == "unsettled"
                    else ""
                )
                lines.append(f"  {kind} {len(keys)}{why}: {shown}{more}")
        return lines

    def to_json(self, max_keys: int) -> dict[str, Any]:
        return {
            "sink_table": self.sink_table,
            "sources": list(self.sources),
            "mode": self.mode,
            "sink_reader": self.sink_reader,
            "equal": self.equal,
            "position": self.position,
            "columns": self.columns,
            "not_compared": self.not_compared,
            "rechecked": self.rechecked,
            "source_rows": self.source_rows,
            "sink_rows": self.sink_rows,
            "buckets": self.buckets,
            "differing_buckets": self.differing_buckets,
            "counts": {
                "missing": len(self.missing),
                "extra": len(self.extra),
                "different": len(self.different),
                "unsettled": len(self.unsettled),
            },
            "missing": self.missing[:max_keys],
            "extra": self.extra[:max_keys],
            "different": self.different[:max_keys],
            "unsettled": self.unsettled[:max_keys],
        }


@dataclass
class VerifyReport:
    """The whole answer: per sink table, and how in-flight changes were waited for."""

    tables: list[TableReport]
    position: str | None = None  # the source position after the source pass
    waited: list[str] = field(default_factory=list)  # what the waits for the pipeline said
    seconds: float = 0.0
    spark: str | None = None  # the Spark session verify used, if any: master and application

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def to_json(self, max_keys: int = 20) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "position": self.position,
            "waited": self.waited,
            "seconds": round(self.seconds, 3),
            "spark": self.spark,
            "tables": [t.to_json(max_keys) for t in self.tables],
        }

    def text(self, max_keys: int = 5) -> str:
        lines = []
        for t in self.tables:
            lines.extend(t.text(max_keys))
        lines.extend(f"note: {w}" for w in self.waited)
        if self.spark is not None:
            lines.append(f"note: Spark used: {self.spark}")
        lines.append(
            f"verify: {'EQUAL' if self.equal else 'DIFFERENCES FOUND'} in {self.seconds:.1f}s"
        )
        return "\n".join(lines)


def _key_text(found: dict[str, Any]) -> str:
    key = ", ".join(f"{k}={v}" for k, v in found["key"].items())
    columns = found.get("columns")
    return f"({key})" + (f" [{', '.join(columns)}]" if columns else "")


# ------------------------------------------------------------------------------ running


def wait_for_pipeline(
    checkpoint: str | Location, position: BinlogPosition, timeout_s: float
) -> str | None:
    """Wait until the pipeline's committed offset has passed ``position``; None when it has,
    else what stopped the wait (not running, or the timeout)."""
    from sparkcdc.pipeline.runner import STATUS_FILE, committed_offset, offset_caught_up

    deadline = time.monotonic() + timeout_s
    # a pipeline restarting (scheduled runs, a schema restart) is not running for a moment
    stopped_since: float | None = None
    while True:
        committed = committed_offset(checkpoint)
        if committed is not None and offset_caught_up(committed[1], position):
            return None
        status_file = as_location(checkpoint) / STATUS_FILE
        try:
            running = bool(json.loads(status_file.read_text() or "{}").get("running"))
        except (OSError, ValueError):
            running = False
        now = time.monotonic()
        stopped_since = None if running else (stopped_since or now)
        if stopped_since is not None and now - stopped_since >= min(RESTART_GRACE_S, timeout_s):
            got = "no committed batch" if committed is None else f"batch {committed[0]}"
            return (
                f"the pipeline is not running ({status_file} says so) and its committed "
                f"offset ({got}) has not reached source position {position}: differences "
                "may be changes it has not written yet; run it, then verify again"
            )
        if now > deadline:
            return (
                f"the pipeline's committed offset did not reach source position {position} "
                f"within {timeout_s:.0f}s: differences may be changes still in flight"
            )
        time.sleep(_POLL_S)


@dataclass
class TableCheck:
    """The comparison of one sink table, phase by phase (see the module docstring)."""

    plan: ColumnPlan
    source: Side
    sink: Side
    report: TableReport
    want: Sums = field(default_factory=dict)
    expected: dict[str, Digest] = field(default_factory=dict)
    suspects: dict[str, Digest] = field(default_factory=dict)
    source_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # per key, what the last look saw: (source fields, sink fields), None where absent
    seen: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def read_source_buckets(self) -> None:
        self.want = self.source.buckets(self.report.buckets)

    def read_sink_buckets(self) -> set[int]:
        have = self.sink.buckets(self.report.buckets)
        want = self.want
        self.report.source_rows = sum(r for r, _ in want.values())
        self.report.sink_rows = sum(r for r, _ in have.values())
        differing = {b for b in set(want) | set(have) if want.get(b) != have.get(b)}
        self.report.differing_buckets = len(differing)
        return differing

    def read_source_digests(self, buckets: set[int]) -> None:
        self.expected = self.source.digests(self.report.buckets, buckets)

    def read_sink_digests(self, buckets: set[int]) -> None:
        got = self.sink.digests(self.report.buckets, buckets)
        expected = self.expected
        suspects = {k: d for k, d in expected.items() if k not in got or got[k].hash != d.hash}
        suspects.update({k: d for k, d in got.items() if k not in expected})
        self.suspects = suspects
        self.report.rechecked = len(suspects)

    def read_source_fields(self) -> None:
        self.source_fields = self.source.fields(self.suspects)

    def read_sink_fields(self) -> None:
        """Classify the suspects. The sink (past the first source read) is compared with
        the source read before and again after it. A key is reported when two looks in a
        row saw the same source row, unchanged during each look, and the same other sink
        row; any other key is in flight and looked at again in the next round."""
        report = self.report
        sink_fields = self.sink.fields(self.suspects)
        after = self.source.fields(self.suspects)
        names, key_names = self.plan.names, self.plan.table.primary_key
        still: dict[str, Digest] = {}
        for key_text, digest in self.suspects.items():
            mine, theirs = self.source_fields.get(key_text), sink_fields.get(key_text)
            if mine == theirs and mine == after.get(key_text):
                self.seen.pop(key_text, None)
                continue  # equal (or gone on both sides) now
            seen, self.seen[key_text] = self.seen.get(key_text), (mine, theirs)
            if mine != after.get(key_text) or seen != (mine, theirs):
                # changed while looked at (or a change that came and went, or this first
                # look): compared again after the pipeline catches up once more
                still[key_text] = digest
                continue
            key = dict(zip(key_names, digest.key, strict=True))
            if theirs is None:
                report.missing.append({"key": key})
            elif mine is None:
                report.extra.append({"key": key})
            else:
                columns = [n for n, a, b in zip(names, mine, theirs, strict=True) if a != b]
                report.different.append({"key": key, "columns": columns})
        for kind in (report.missing, report.extra, report.different):
            kind.sort(key=lambda f: json.dumps(f["key"], default=str))
        self.suspects = still
        report.unsettled = [
            {"key": dict(zip(key_names, d.key, strict=True))} for d in still.values()
        ]


def compare(checks: Sequence[TableCheck], caught_up: Callable[[], str]) -> None:
    """Run the phases over every table together: each reads the sources, waits once for the
    pipeline to pass what they saw (``caught_up``: the source position waited for), then
    reads the sinks."""
    began = time.perf_counter()
    for check in checks:
        check.read_source_buckets()
    log.info("source buckets read in %.1fs", time.perf_counter() - began)
    position = caught_up()
    for check in checks:
        check.report.position = position
    began = time.perf_counter()
    differing = {id(c): c.read_sink_buckets() for c in checks}
    log.info("sink buckets read in %.1fs", time.perf_counter() - began)
    checks = [c for c in checks if differing[id(c)]]
    for check in checks:
        check.read_source_digests(differing[id(check)])
    if checks:
        caught_up()
    for check in checks:
        check.read_sink_digests(differing[id(check)])
    for _ in range(KEY_ROUNDS):  # a key written again meanwhile is looked at again
        checks = [c for c in checks if c.suspects]
        if not checks:
            return
        for check in checks:
            check.read_source_fields()
        caught_up()
        for check in checks:
            check.read_sink_fields()


def verify_pipeline(
    config: PipelineConfig,
    *,
    spark: Any = None,
    timeout_s: float = 300.0,
    tables: Iterable[str] | None = None,
    master: str | None = None,
    spark_log: str | None = None,
) -> VerifyReport:
    """Compare every sink table of ``config`` with its source tables, as the pipeline
    promises them (:func:`column_plan`).

    Spark is started only where it is needed: a transform in Spark SQL, a source column the
    database cannot compute, a sink without a reader of its own (``Sink.arrow_reader``).
    Then the session is verify's own (``<pipeline>-verify``) on ``master``, else local
    (never the pipeline's cluster, whose cores a running pipeline holds); ``spark``: use
    that one instead. ``spark_log``: the file a session verify starts logs to.

    >>> report = verify_pipeline(load_pipeline("p.yaml"))  # doctest: +SKIP
    >>> report.equal, report.to_json()["tables"][0]["counts"]  # doctest: +SKIP
    (False, {'missing': 1, 'extra': 0, 'different': 0})
    """
    from sparkcdc.pipeline.composer import needs_session, plan_pipeline
    from sparkcdc.pipeline.evolution.persistence import SchemaHistory
    from sparkcdc.pipeline.runner import server_position, source_settings
    from sparkcdc.sinks.base import Sink, runnable_sink_class
    from sparkcdc.spark.capture import plan_capture

    started = time.monotonic()
    log.info("verify of %s: planning", config.pipeline.name)
    cls = runnable_sink_class(config.sink.type)
    if cls.read_table is Sink.read_table:  # before connecting anywhere
        raise ConfigError(
            f"verify does not support the {config.sink.type} sink yet: it keeps no table to "
            "compare with the source"
        )
    options, settings = source_settings(config)
    capture = plan_capture(options)
    session = VerifySession(config, spark, master, spark_log)
    hadoop = session.hadoop()
    root = config.checkpoint_location(hadoop)
    history = SchemaHistory(root).states()
    saved = history[-1] if history else None
    needs = needs_session(config, capture.tables)
    plan = plan_pipeline(config, capture.tables, session.get() if needs else None)
    report = VerifyReport([])
    position: list[BinlogPosition] = []

    def caught_up() -> str:
        # once per phase: the pipeline must have passed the source position read last
        now = server_position(settings)
        if position and position[-1] == now:
            return str(now)
        position.append(now)
        report.position = str(now)
        note = wait_for_pipeline(root, now, timeout_s)
        if note is not None:
            report.waited.append(note)
        return str(now)

    wanted = set(tables) if tables is not None else None
    checks: list[TableCheck] = []
    try:
        for planned in plan.sink_tables:
            if wanted is not None and planned.name not in wanted:
                continue
            members = [s for s in plan.sources if s.sink_table == planned.name]
            state = saved.sinks.get(planned.name) if saved is not None else None
            columns, notes = column_plan(config, planned, state, history, members)
            sides: list[Side] = []
            mode = "pushdown"
            for index, member in enumerate(members):
                pushable = _pushable(member.transform)
                values = columns.mysql_values(member.schema) if pushable else None
                if values is not None and _same_key(member.schema, columns.table):
                    sides.append(
                        SqlSide(
                            settings,
                            member.schema,
                            values,
                            columns.key_index(),
                            config.pipeline.parallelism,
                            index,
                        )
                    )
                else:
                    mode = "spark"
                    schema, rule = member.schema, member.transform
                    read = partial(_transformed, session, settings, schema, rule, columns)
                    sides.append(SparkSide(read, columns))
            sink_side, reader = session.sink_side(columns, hadoop)
            rows = sum(_row_estimate(settings, m.schema) for m in members)
            buckets = max(1, rows // ROWS_PER_BUCKET)
            result = TableReport(
                columns.table.name,
                columns.table.sources,
                mode,
                sink_reader=reader,
                columns=len(columns.compared),
                not_compared=notes,
                buckets=buckets,
            )
            report.tables.append(result)
            checks.append(TableCheck(columns, UnionSide(sides), sink_side, result))
        compare(checks, caught_up)
    finally:
        session.close()
    report.spark = session.describe()
    report.seconds = time.monotonic() - started
    return report


def _transformed(
    session: VerifySession,
    settings: ConnectionSettings,
    schema: TableSchema,
    rule: TransformRule | None,
    plan: ColumnPlan,
) -> DataFrame:
    return transformed_source(session.get(), settings, schema, rule, plan)


class VerifySession:
    """verify's SparkSession and Spark sink, started at their first use (if any)."""

    def __init__(
        self, config: PipelineConfig, spark: Any, master: str | None, log_file: str | None
    ) -> None:
        self.config, self.master, self.log_file = config, master, log_file
        self._spark: SparkSession | None = spark
        self._sink: Sink | None = None
        self._used = False

    def hadoop(self) -> dict[str, str]:
        """The Hadoop settings sparkcdc's own files are read with (the session's, when one
        was given; else the file's ``spark.conf``: no session started for them)."""
        from sparkcdc.locations import hadoop_settings

        if self._spark is not None:
            return session_hadoop_settings(self._spark)
        return dict(hadoop_settings(self.config.pipeline.session_conf()))

    def get(self) -> SparkSession:
        if self._spark is None:
            if self.log_file is not None:
                log.info("Spark's own log: %s", self.log_file)
            self._spark = verify_session(self.config, self.master, self.log_file)
        self._used = True
        return self._spark

    def sink(self) -> Sink:
        from sparkcdc.sinks.base import SinkContext, runnable_sink_class

        if self._sink is None:
            cls = runnable_sink_class(self.config.sink.type)
            context = SinkContext(self.config.pipeline.name, self.config.checkpoint)
            self._sink = cls(self.config.sink, self.get(), context)
        return self._sink

    def sink_side(self, plan: ColumnPlan, hadoop: dict[str, str]) -> tuple[Side, str]:
        """The sink table's side, and what reads it: the sink's own reader without Spark
        where it has one and every compared type has an Arrow form, else Spark."""
        from sparkcdc.sinks.base import runnable_sink_class

        cls = runnable_sink_class(self.config.sink.type)
        reader = cls.arrow_reader(self.config.sink, plan.table, hadoop)
        if reader is not None:
            side = ArrowSide(reader, plan)
            if side.readable():
                return side, f"{self.config.sink.type}'s Arrow reader (no Spark)"
        read = partial(_sink_frame, self, plan.table)
        return SparkSide(read, plan, older=True), "Spark"

    def describe(self) -> str | None:
        """Where the session runs (None: verify used no Spark)."""
        if self._spark is None or not self._used:
            return None
        context = self._spark.sparkContext
        return f"master {context.master}, application {context.appName}"

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()


def _sink_frame(session: VerifySession, table: SinkTable) -> DataFrame:
    return session.sink().read_table(table)


def verify_session(
    config: PipelineConfig, master: str | None, log_file: str | None = None
) -> SparkSession:
    """verify's own session: application ``<pipeline>-verify``, on ``master``, else local
    with at most this machine's cores (the pipeline's master is not taken: on a cluster a
    running pipeline holds its cores, and verify would wait for them), the sink's and the
    file's Spark settings (its master aside)."""
    from sparkcdc.pipeline.runner import pipeline_conf
    from sparkcdc.spark.session import spark_session

    cores = max(1, min(config.pipeline.parallelism, os.cpu_count() or 1))
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
        **pipeline_conf(config),
    }
    return spark_session(
        f"{config.pipeline.name}-verify",
        master or f"local[{cores}]",
        connectors=True,
        conf=conf,
        log_file=log_file,
    )


# ------------------------------------------------------------------ what is compared


def column_plan(
    config: PipelineConfig,
    planned: SinkTable,
    state: SinkTableState | None,
    history: Sequence[SchemaState],
    members: Sequence[SourceTablePlan],
) -> tuple[ColumnPlan, list[dict[str, str]]]:
    """The sink columns verify compares, as the pipeline promises them, and the columns it
    does not compare, each with why.

    ``state``: the sink table as the pipeline left it (its schema history), None before any
    schema change (``planned``, whole). A sink column no source column feeds any more is
    not compared: lenient (or an excluded ``drop.column``) keeps it with the values it had
    and NULL in rows written since, and the source has no values to compare with. A sink
    column that lenient made for a changed type (``<name>_<type>``) is compared with the
    source column, its value read from it, else (rows written before the change) from the
    column it replaced. A source column that did not reach the sink (an excluded change,
    ``ignore``, a transform's projection) is listed.
    """
    notes: list[dict[str, str]] = []
    frame = planned if state is None else state.frame
    for member in members:
        rule = member.transform
        if rule is None or rule.projection is None:
            continue
        for name in member.schema.column_names:
            if name not in frame.column_names:
                why = f"not in the transform's projection of {member.schema.qualified_name}"
                notes.append({"column": name, "side": "source", "why": why})
    if state is None:
        return ColumnPlan.whole(planned), notes
    table, mapping = state.table, state.mapping
    by_name = {c.name: c for c in table.columns}
    fed = {sink: source for source, sink in mapping.items() if sink in by_name}
    older: dict[str, list[SinkColumn]] = {}
    for earlier in reversed(history):  # newest first: the column replaced last comes first
        was = earlier.sinks.get(table.name)
        for source, sink in (was.mapping if was is not None else {}).items():
            now = mapping.get(source)
            if now is None or sink in (now, *fed) or sink not in by_name:
                continue
            chain = older.setdefault(now, [])
            if by_name[sink] not in chain:
                chain.append(by_name[sink])
    compared = tuple(
        Compared(c, fed[c.name], tuple(older.get(c.name, ())))
        for c in table.columns
        if c.name in fed
    )
    used = set(fed) | {c.name for chain in older.values() for c in chain}
    for column in table.columns:
        if column.name not in used:
            notes.append({"column": column.name, "side": "sink", "why": _why_kept(config)})
    for column in state.frame.columns:
        if mapping.get(column.name) not in by_name:
            why = _not_applied(config, SchemaChangeType.ADD_COLUMN) or "the sink did not take it"
            notes.append(
                {"column": column.name, "side": "source", "why": f"not in the sink: {why}"}
            )
    return ColumnPlan(table, compared), notes


def _not_applied(config: PipelineConfig, kind: SchemaChangeType) -> str | None:
    """Why the pipeline does not apply a schema change of ``kind`` to the sink (None: it
    does)."""
    behavior = config.pipeline.schema_change_behavior
    if behavior == "ignore":
        return "schema.change.behavior is ignore"
    include = config.sink.include_schema_changes
    if include is not None and not matches_kinds(kind, include):
        return f"{kind.value} is not in the sink's include.schema.changes"
    if matches_kinds(kind, config.sink.exclude_schema_changes):
        return f"{kind.value} is in the sink's exclude.schema.changes"
    return None


def _why_kept(config: PipelineConfig) -> str:
    why = _not_applied(config, SchemaChangeType.DROP_COLUMN)
    if why is None:
        why = f"schema.change.behavior {config.pipeline.schema_change_behavior} keeps it"
    return (
        f"its source column was dropped or renamed, and {why}: rows keep the values they "
        "had, rows written since hold NULL; the source has nothing to compare them with"
    )


def _same_key(schema: TableSchema, table: SinkTable) -> bool:
    # the SQL side reads rows again by the source key, which must be the sink's
    return tuple(schema.primary_key) == tuple(table.primary_key)


def _row_estimate(settings: ConnectionSettings, schema: TableSchema) -> int:
    from sparkcdc.mysql.protocol.connection import sql_connection

    with sql_connection(settings) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.database, schema.table),
        )
        row = cur.fetchone()
    return int(row[0]) if row and row[0] is not None else 0
