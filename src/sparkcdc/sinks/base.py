"""The one small interface every sink implements, and the registry that finds them by type.

A pipeline hands each sink, per micro-batch and per sink table, the *change frame*: a Spark
DataFrame in the typed-changelog shape (DESIGN.md §4) after route and transform::

    _op STRING        '+I' insert or snapshot row, '-U' / '+U' update before / after image,
                      '-D' delete (Flink's RowKind)
    _op_ts TIMESTAMP  when the change was written to the binlog; NULL for snapshot rows
    _seq BIGINT       orders all changes of one key; the '-U' and '+U' halves of one update
                      share their ``_seq`` ('-U' sorts first)
    _database STRING, _table STRING   the source table the row came from
    <the sink table's columns, in order>

A key-changing update arrives as '-U' of the old key and '+U' of the new key, so "the last
change of each key" (:func:`final_states`) is all an upserting sink needs. A sink writes one
batch idempotently per ``batch_id``: Spark replays the last batch after a crash.

Snapshot rows of keys no earlier batch wrote (DESIGN.md §6.1: a binlog event of a key whose chunk
is not read yet is dropped, so nothing wrote such a key before its chunk) need no MERGE or
upsert: a sink with ``appends = True`` gets them split off as *inserts*, through
:meth:`Sink.append`, before the batch's remaining changes go through :meth:`Sink.write`.
``append`` writes them as plain inserts, the way each system loads data fastest, and is
idempotent per (writer, table, batch id) on its own: a crash may fall between the append's
commit and the write's, so a replay must skip the append and still apply the write.

Adding a sink is adding one module with a :class:`Sink` subclass and a line in
:data:`SINK_TYPES`; it is imported only when a pipeline names its type.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sparkcdc.background import Background
from sparkcdc.errors import ConfigError, SinkError, did_you_mean
from sparkcdc.model.changelog import (
    DELETED,
    GONE_KINDS,
    OP,
    SEQ,
    SORTS_FIRST,
    RowKind,
    kind_rank,
)
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.model.schema import Column
from sparkcdc.model.schema_change import kinds_of_tag

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SINK_TYPES = {
    "console": "sparkcdc.sinks.console:ConsoleSink",
    "delta": "sparkcdc.sinks.delta:DeltaSink",
    "iceberg": "sparkcdc.sinks.iceberg:IcebergSink",
    "kafka": "sparkcdc.sinks.kafka:KafkaSink",
    "jdbc": "sparkcdc.sinks.jdbc:JdbcSink",
}


@dataclass(frozen=True)
class SinkColumn:
    """One column of a sink table: name, Spark DDL type, nullability.

    ``source``: for one batch's write, the source column whose values this column holds
    unchanged in every row of the batch (see ``pipeline.batch_writer.described``), else None.
    Formats that declare values by their MySQL type (the Kafka sink's Kafka Connect
    schemas: DATETIME(3) as milliseconds, NOT NULL as required) read it; nothing else does,
    and it is not part of the column's identity.
    """

    name: str
    spark_type: str
    nullable: bool = True
    source: Column | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SinkTable:
    """A table as the sink sees it: routed name, columns after transform, key, sources.

    ``name`` is the routed sink-table identifier, e.g. ``app_db.orders`` (by default the
    source table's own ``database.table``); ``sources`` the qualified source tables merged
    into it.
    """

    name: str
    columns: tuple[SinkColumn, ...]
    primary_key: tuple[str, ...]
    sources: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def key_columns(self) -> tuple[SinkColumn, ...]:
        """The primary key's columns, in the key's order."""
        by_name = {c.name: c for c in self.columns}
        return tuple(by_name[k] for k in self.primary_key)

    @property
    def namespace(self) -> str:
        """The part before the last dot ('' if none): database / schema / namespace."""
        return self.name.rpartition(".")[0]

    @property
    def short_name(self) -> str:
        return self.name.rpartition(".")[2]

    def spark_ddl(self) -> str:
        """``\\`id\\` BIGINT NOT NULL, ...`` for CREATE TABLE / createDataFrame."""
        return ", ".join(
            f"{quote_spark(c.name)} {c.spark_type}{'' if c.nullable else ' NOT NULL'}"
            for c in self.columns
        )


class SinkOptions(BaseModel):
    """Options every sink block has; each sink extends this with its own (Flink-style names)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    # key prefixes passed through as they are (e.g. kafka's 'properties.'): a pipeline file
    # may use any key that starts with one of them
    passthrough_prefixes: ClassVar[frozenset[str]] = frozenset()

    type: str
    name: str | None = None  # a display name, as Flink CDC's sink.name
    include_schema_changes: tuple[str, ...] | None = Field(None, alias="include.schema.changes")
    exclude_schema_changes: tuple[str, ...] = Field((), alias="exclude.schema.changes")

    @field_validator("include_schema_changes", "exclude_schema_changes")
    @classmethod
    def _known_tags(cls, tags: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for tag in tags or ():
            kinds_of_tag(tag)  # Flink CDC's vocabulary; raises with the closest tag
        return tags


@dataclass(frozen=True)
class SinkContext:
    """What a sink may need to know about the pipeline that runs it."""

    pipeline_name: str
    checkpoint: str  # the pipeline's checkpoint directory (the sink may keep state under it)
    run_id: str | None = None  # the checkpoint's stream (pipeline/checkpoint.py); None: none

    @property
    def writer_id(self) -> str:
        """Who writes, as idempotency ids record it: the pipeline's name and its stream's run
        id, so a new checkpoint's batch 0 is never taken for an old stream's batch 0."""
        if self.run_id is None:  # a sink that writes for no stream (verify only reads)
            return self.pipeline_name
        return f"{self.pipeline_name}@{self.run_id}"


class Sink(ABC):
    """Writes change frames of sink tables, idempotently per batch id.

    Lifecycle: ``open(tables)`` once before the stream starts (check the target is reachable
    and fail with what to do; create missing tables / topics), ``write(...)`` per batch and
    sink table, ``close()`` at the end.

    Idempotency ids a sink records name ``context.writer_id`` (pipeline and run id) and the
    batch id; ``write`` returns False only for a batch that id shows already applied.
    """

    options_model: ClassVar[type[SinkOptions]] = SinkOptions
    guarantee: ClassVar[str] = "exactly-once"  # documented per sink in README.md
    appends: ClassVar[bool] = False  # True: the pipeline hands snapshot inserts to append()
    # True: one batch's writes of different tables may run at once, each in threads of its
    # own and in a session of its own (a clone of the batch's: settings set there stay there)
    concurrent_writes: ClassVar[bool] = False
    # True: the pipeline's first batch reads a share of the batch budgets, so a backlog's
    # first rows reach the sink sooner, for a batch more (scan.first-batch.share, DESIGN.md
    # §2.4). False where a batch costs a pass over the sink table whatever its rows (a MERGE
    # reads the table for the batch's keys): there a batch more costs more than it gives
    short_first_batch: ClassVar[bool] = True

    def __init__(self, options: SinkOptions, spark: SparkSession, context: SinkContext) -> None:
        self.options = options
        self.spark = spark
        self.context = context
        # names of the tables ``open`` created: empty, no need to ask them for rows
        self.created: set[str] = set()
        self._opening: Background | None = None  # begin_open's creations

    @classmethod
    def spark_conf(cls, options: SinkOptions) -> dict[str, str]:
        """Spark settings this sink needs when the pipeline creates the session."""
        return {}

    @classmethod  # noqa: B027 - most sinks run on every Spark line
    def check_runtime(cls) -> None:
        """Raise ConfigError, saying what to do, where this Spark line cannot run the sink
        (before anything connects: ``validate``, ``run`` and ``verify`` stop alike)."""

    @classmethod
    def arrow_reader(
        cls, options: SinkOptions, table: SinkTable, hadoop: Mapping[str, str]
    ) -> Callable[[Sequence[str]], Iterator[pa.RecordBatch]] | None:
        """How to read ``table``'s columns as Arrow without Spark (``sparkcdc verify`` reads
        so where it can: no session to start), or None: read with Spark (``read_table``).
        ``hadoop``: the pipeline's Hadoop settings (an object store's endpoint, keys)."""
        return None

    @abstractmethod
    def open(self, tables: Sequence[SinkTable]) -> None: ...

    @abstractmethod
    def write(
        self, table: SinkTable, changes: DataFrame, batch_id: int, *, size: int | None = None
    ) -> bool:
        """Apply one batch's changes; False when this writer had applied the batch before
        (Spark replays the last batch after a crash) and nothing was written now.

        ``size``: at most how many changes ``changes`` holds (an update's two rows once),
        when the caller counted them; a sink may choose by it how to spread its work."""

    def append(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        """Insert one batch's snapshot rows of keys the table does not hold yet.

        ``rows`` has the change-frame shape, every row ``+I``. The pipeline calls it (only
        when ``appends`` is True) before :meth:`write` of the same batch, whose changes may
        then touch the same keys. Idempotent per (writer, table, ``batch_id``) apart from
        ``write``: a crash may come between the two commits, and the replay must then skip
        the append and still do the write. False when the append was applied before.

        All of ``rows`` are committed, or none: the pipeline may start an append that a
        check in ``rows`` stops midway (raising SinkError), and then write the batch
        another way.
        """
        raise NotImplementedError(
            f"the {self.options.type} sink sets appends = True but has no append()"
        )

    def knows_appends(self, table: SinkTable) -> bool:
        """Whether :meth:`append` to ``table`` writes ``rows`` with one Spark SQL action
        and reads them in no other (it tells a replay from its own record): the pipeline
        may then count the rows by an observation of that action (``DataFrame.observe``,
        whose result an action of its own would take first, or none at all would leave
        unset)."""
        return False

    def begin_open(self, tables: Sequence[SinkTable]) -> None:
        """:meth:`open`, before a new stream's first batch: a sink may leave the creation of
        tables it found absent to a thread (they are in :attr:`created` at once, and empty)
        while the stream starts and the batch reads the source. Nothing may touch them
        before :meth:`ready`. By default, :meth:`open` at once."""
        self.open(tables)

    def _create_in_background(self, creations: Sequence[Callable[[], None]]) -> None:
        """Run ``creations`` in order in a thread :meth:`ready` waits for; the first error
        stops them and is raised there."""

        def create_all() -> None:
            for create in creations:
                create()

        self._opening = Background(create_all, "sparkcdc-sink-open")

    def ready(self) -> None:
        """Wait until what :meth:`begin_open` left running is done; raise its error (once)."""
        if self._opening is not None:
            self._opening.wait()  # joins and raises once: a later wait returns

    def close(self) -> None:  # noqa: B027 - most sinks hold nothing open
        pass

    def exists(self, table: SinkTable) -> bool:
        """Whether the sink table is there (asked before :meth:`open` of a stream that goes
        on: a table it wrote that is gone was removed behind its back). A sink whose
        targets are made by writing to them (a topic, the console) says True."""
        return True

    def has_rows(self, table: SinkTable) -> bool:
        """Whether the sink table holds rows already (a new stream's snapshot would land on
        them). A sink that only appends (a topic, the console) has none to collide with.
        Not asked of tables in :attr:`created`."""
        return False

    def read_table(self, table: SinkTable) -> DataFrame:
        """The sink table's current rows as a DataFrame (``sparkcdc verify`` compares them
        with the source); a sink that keeps no table raises ConfigError."""
        raise ConfigError(
            f"verify does not support the {self.options.type} sink yet: it keeps no table "
            "to compare with the source"
        )

    # The metadata applier (DESIGN.md §5): called between batches' writes, each idempotent
    # (a column that already exists is not added again, one that is gone not dropped again).
    # ``table`` is the sink table as it was before the change. A sink that cannot make a
    # change raises SinkError saying why; schema.change.behavior decides what follows.

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        raise self._unsupported(f"add column {column.name}")

    def drop_column(self, table: SinkTable, name: str) -> None:
        raise self._unsupported(f"drop column {name}")

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        raise self._unsupported(f"rename column {old} to {new}")

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        raise self._unsupported(f"change the type of column {name} to {spark_type}")

    def truncate_table(self, table: SinkTable) -> None:
        raise self._unsupported(f"truncate {table.name}")

    def drop_table(self, table: SinkTable) -> None:
        raise self._unsupported(f"drop {table.name}")

    def create_table(self, table: SinkTable) -> None:
        self.open([table])

    # Filling an added column in the rows the sink table already has (the source filled them
    # with the column's DEFAULT or generation expression; see pipeline/evolution/fills.py). Both
    # are idempotent: a replayed batch may call them again.

    keeps_rows: ClassVar[bool] = True  # False: written messages cannot change (Kafka)

    def fill_column(self, table: SinkTable, column: SinkColumn, value: Any) -> None:
        """Set ``column`` to ``value`` (of the column's Spark type) in every row where it is
        NULL. Called only for a NOT NULL source column, whose rows are never NULL at the
        source: a NULL is a row that has not been filled."""
        raise self._unsupported(f"fill column {column.name}")

    def update_column(self, table: SinkTable, column: SinkColumn, rows: DataFrame) -> None:
        """Set ``column`` in the rows whose key is in ``rows`` (the key columns and
        ``column``) to the value there; keys the sink table lacks are not inserted."""
        raise self._unsupported(f"update column {column.name}")

    def _unsupported(self, what: str) -> SinkError:
        return SinkError(f"the {self.options.type} sink does not support schema changes ({what})")


class SchemalessSink(Sink):
    """A sink with no table schema to change (Kafka, console): every column change is
    accepted as it is, and the next rows simply carry the new shape. A truncate or drop of
    the source table cannot be undone in what was already written; it is logged. Nor can
    an added column be filled in messages already written: the pipeline warns instead."""

    keeps_rows = False

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        pass

    def drop_column(self, table: SinkTable, name: str) -> None:
        pass

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        pass

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        pass

    def truncate_table(self, table: SinkTable) -> None:
        log.warning("%s sink: %s was truncated at the source", self.options.type, table.name)

    def drop_table(self, table: SinkTable) -> None:
        log.warning("%s sink: %s was dropped at the source", self.options.type, table.name)


def sink_class(type_name: str, *, where: str = "sink.type") -> type[Sink]:
    """The Sink subclass registered for ``type_name`` (imported on first use).

    >>> sink_class("console").__name__
    'ConsoleSink'
    """
    target = SINK_TYPES.get(type_name)
    if target is None:
        raise ConfigError(
            f"{where}: unknown sink type {type_name!r}.{did_you_mean(type_name, SINK_TYPES)} "
            f"Valid types: {', '.join(sorted(SINK_TYPES))}"
        )
    module_name, _, class_name = target.partition(":")
    cls: type[Sink] = getattr(importlib.import_module(module_name), class_name)
    return cls


def runnable_sink_class(type_name: str) -> type[Sink]:
    """:func:`sink_class`, checked to run on the installed Spark line."""
    cls = sink_class(type_name)
    cls.check_runtime()
    return cls


def final_states(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """The last change of every key in the batch, with ``_deleted`` telling what it leaves.

    Latest ``_seq`` wins; within one ``_seq`` (an update's two halves) ``+U`` wins over
    ``-U``. A key whose last change is ``-D`` or ``-U`` (the old key of a key-changing
    update, or a row a transform filter lets out) no longer exists: ``_deleted`` is true.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*[F.col(quote_spark(k)) for k in key_columns]).orderBy(
        F.col(SEQ).desc(), kind_rank_column().desc()
    )
    return (
        changes.withColumn("_rn", F.row_number().over(window))
        .where(F.col("_rn") == 1)
        .drop("_rn")
        .withColumn(DELETED, F.col(OP).isin(*[kind.value for kind in GONE_KINDS]))
    )


def kind_rank_column() -> SparkColumn:
    """:func:`~sparkcdc.model.changelog.kind_rank` of each row's ``_op``, as a Spark column:
    order by ``_seq`` then this to put an update's ``-U`` before its ``+U``."""
    from pyspark.sql import functions as F

    first = F.col(OP) == SORTS_FIRST.value
    return F.when(first, kind_rank(SORTS_FIRST)).otherwise(kind_rank(RowKind.UPDATE_AFTER))


def key_span(changes: DataFrame, table: SinkTable) -> tuple[bool, str | None]:
    """Whether ``changes`` holds a row, and a condition on the target's rows alone that
    every row of the batch's keys meets: ``t.<first key column> BETWEEN <least> AND
    <greatest>`` of that column in ``changes`` (one aggregation). A MERGE given it in its
    ``ON`` reads only the target's files whose statistics overlap the range (Delta's and
    Iceberg's file skipping): a batch of recent keys does not scan a large table's key
    column whole. The bound is taken from the rows themselves, so it holds every key the
    batch matches on (a key matches only its equal); None when it could not be written
    as literals of the column's own type (a first key column that is not a whole number
    of at most 64 bits) or would exclude a match (a NULL key, which ``<=>`` matches)."""
    from pyspark.sql import functions as F

    first = table.primary_key[0]
    column = F.col(quote_spark(first))
    suffix = _LITERAL_SUFFIX.get(changes.schema[first].dataType.typeName())
    if suffix is None:
        return not changes.isEmpty(), None
    [(rows, nulls, least, greatest)] = changes.agg(
        F.count(F.lit(1)), F.count(F.when(column.isNull(), 1)), F.min(column), F.max(column)
    ).collect()
    if not rows or nulls:
        return bool(rows), None
    bounds = f"{int(least)}{suffix} AND {int(greatest)}{suffix}"
    return True, f"t.{quote_spark(first)} BETWEEN {bounds}"


# Spark SQL's literal of each whole-number type: a bound of the key column's own type
# compares without a cast around the column, which file skipping would not see through
_LITERAL_SUFFIX = {"byte": "Y", "short": "S", "integer": "", "long": "L"}


def merge_statement(
    target: str, source_view: str, table: SinkTable, span: str | None = None
) -> str:
    """``MERGE INTO`` applying :func:`final_states` rows (in ``source_view``) to ``target``:
    delete keys whose last change deletes them, update the others, insert new ones. ``span``:
    a condition on the target's rows that every matching row meets (:func:`key_span`)."""
    columns = table.column_names
    on = " AND ".join(f"t.{quote_spark(k)} <=> s.{quote_spark(k)}" for k in table.primary_key)
    if span is not None:
        on = f"{on} AND {span}"
    assignments = ", ".join(f"t.{quote_spark(c)} = s.{quote_spark(c)}" for c in columns)
    names = ", ".join(quote_spark(c) for c in columns)
    values = ", ".join(f"s.{quote_spark(c)}" for c in columns)
    return (
        f"MERGE INTO {target} t USING {source_view} s ON {on} "
        f"WHEN MATCHED AND s.{DELETED} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {assignments} "
        f"WHEN NOT MATCHED AND NOT s.{DELETED} THEN INSERT ({names}) VALUES ({values})"
    )


def sink_rows(frame: DataFrame, table: SinkTable) -> DataFrame:
    """The sink table's columns of a change frame, in order (metadata columns dropped)."""
    return frame.select(*[quote_spark(c) for c in table.column_names])


def fill_statement(target: str, value_view: str, column: str) -> str:
    """``MERGE INTO`` setting ``column`` to the one value in ``value_view`` (column ``v``)
    where it is NULL (Spark SQL; Delta's and Iceberg's UPDATE take no subquery)."""
    c = quote_spark(column)
    return (
        f"MERGE INTO {target} t USING {value_view} s ON t.{c} IS NULL "
        f"WHEN MATCHED THEN UPDATE SET t.{c} = s.v"
    )


def update_statement(target: str, rows_view: str, table: SinkTable, column: str) -> str:
    """``MERGE INTO`` setting ``column`` from ``rows_view`` in the rows of its keys only."""
    on = " AND ".join(f"t.{quote_spark(k)} <=> s.{quote_spark(k)}" for k in table.primary_key)
    c = quote_spark(column)
    return (
        f"MERGE INTO {target} t USING {rows_view} s ON {on} "
        f"WHEN MATCHED THEN UPDATE SET t.{c} = s.{c}"
    )


def value_frame(session: SparkSession, column: SinkColumn, value: Any) -> DataFrame:
    """One row, one column ``v`` of the column's type, holding ``value``."""
    return session.createDataFrame([(value,)], f"v {column.spark_type}")


def property_text(value: Any) -> str:
    """A YAML value as the text a Java client wants (``true``/``false`` for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def gather_prefixed(
    data: Mapping[str, Any], prefix: str, own: Iterable[str] = ()
) -> dict[str, Any]:
    """Pass-through options (``properties.linger.ms: 5``, or a mapping under ``properties``)
    gathered into one dict under ``prefix`` without its dot, as text; the keys in ``own``
    have fields of their own and stay ``prefix + key``. A flat key wins over the mapping.

    >>> gather_prefixed({"type": "kafka", "properties.acks": 1}, "properties.")
    {'type': 'kafka', 'properties': {'acks': '1'}}
    """
    field = prefix.rstrip(".")
    out: dict[str, Any] = {}
    gathered: dict[str, Any] = {}
    nested = data.get(field)
    if isinstance(nested, Mapping):
        gathered.update({str(k): v for k, v in nested.items()})
    for key, value in data.items():
        if key == field and isinstance(nested, Mapping):
            continue
        if isinstance(key, str) and key.startswith(prefix):
            gathered[key.removeprefix(prefix)] = value
        else:
            out[key] = value
    for name in own:
        if name in gathered:
            out[prefix + name] = gathered.pop(name)
    out[field] = {k: property_text(v) for k, v in gathered.items()}
    return out


TABLE_PROPERTIES_PREFIX = "table.properties."


class TableOptions(SinkOptions):
    """Options of a sink that creates lake tables: ``table.properties.<name>: value`` (Flink
    CDC's spelling) sets a table property of the tables it creates, over its defaults."""

    passthrough_prefixes: ClassVar[frozenset[str]] = frozenset({TABLE_PROPERTIES_PREFIX})

    table_properties: dict[str, str] = Field(default_factory=dict, alias="table.properties")

    @model_validator(mode="before")
    @classmethod
    def _gather_table_properties(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return gather_prefixed(data, TABLE_PROPERTIES_PREFIX)

    def tblproperties(self, defaults: Mapping[str, str]) -> str:
        """The TBLPROPERTIES clause of a table this sink creates: its ``defaults``, the
        file's ``table.properties.*`` over them."""
        return properties_text({**defaults, **self.table_properties})


def properties_text(properties: Mapping[str, str]) -> str:
    """Table properties as Spark SQL's TBLPROPERTIES lists them.

    >>> print(properties_text({"a.b": "1"}))
    'a.b' = '1'
    """
    return ", ".join(f"{sql_text(k)} = {sql_text(v)}" for k, v in properties.items())


def sql_text(value: str) -> str:
    """A Spark SQL string literal.

    >>> print(sql_text("it's"))
    'it\\'s'
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def read_spark_table(spark: SparkSession, identifier: str, what: str) -> DataFrame:
    """A table Spark SQL reaches by ``identifier`` (Delta, Iceberg), or a SinkError."""
    try:
        return spark.sql(f"SELECT * FROM {identifier}")
    except Exception as exc:  # AnalysisException: no such table
        raise SinkError(
            f"{what}: cannot read {identifier}: {spark_error_text(exc)}. Has the pipeline run "
            "(sparkcdc run)?"
        ) from None


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` in the session's conf while the block runs; what was there before (or
    nothing) after it, whatever happens in it."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def spark_error_text(exc: BaseException) -> str:
    """The first line that says what went wrong in a Spark / py4j error (not py4j's
    "An error occurred while calling o123.sql")."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def spark_type_name(data_type: Any) -> str:
    """A Spark data type as sink tables spell it (``INT``, ``DECIMAL(10,2)``, ...)."""
    text: str = data_type.simpleString().upper()
    return "INT" if text == "INTEGER" else text
