"""``type: delta``: one Delta Lake table per sink table, kept equal to its source by MERGE.

Each batch's change frame is reduced to the last change per key (latest ``_seq`` wins) and
merged: keys whose last change deletes them are deleted, the others upserted. The MERGE runs
with Delta's idempotent-write settings (``txnAppId`` = pipeline, run id and table,
``txnVersion`` = batch id), so a batch Spark replays after a crash is skipped by the tables
that already have it: exactly-once per table. The run id (``SinkContext.writer_id``) is new
with every new checkpoint, so a new stream's batch ids are never taken for an old one's.

Rows of keys the table does not hold yet (snapshot rows, a batch of binlog inserts) come
through :meth:`DeltaSink.append`: a plain DataFrame append (no join with the table). Its
commit carries a mark in its ``userMetadata`` (``{"sparkcdc": <txnAppId>, "write":
"append", "batch": <batch id>}``; the MERGEs carry one too), and a replayed append is found
by reading the table's newest commits back to this writer's previous batch
(:meth:`DeltaSink.appended`; once per table and run: after that, and in a table the sink
created, from its own record), not by Delta's ``txnAppId``: Delta looks an appId up in the
table's whole state (a state reconstruction on every append), where the marks are a few
commit files away (DESIGN.md §6.1).

Tables the sink creates are readable by every Delta reader, delta-rs's Arrow reader and
polars' ``read_delta`` among them: deletion vectors stay off unless
``table.properties.delta.enableDeletionVectors: true`` asks for them (a MERGE that updates or
deletes a few rows of a file then marks them deleted instead of rewriting the file, but
delta-rs's ``to_pyarrow_table`` and polars refuse such a table). Their log is checkpointed
every 100 commits (``delta.checkpointInterval``), not Delta's 10.

Tables live under ``path`` (``<path>/<database>/<table>``, created when missing), or, without
``path``, in the session catalog as ``<database>.<table>``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import field_validator

from sparkcdc.errors import SinkError
from sparkcdc.files import uri_scheme
from sparkcdc.locations import (
    S3_SCHEMES,
    Location,
    open_location,
    s3_options,
    session_hadoop_settings,
    supported_location,
)
from sparkcdc.model.identifiers import path_segment, quote_spark
from sparkcdc.model.text import redacted_uri
from sparkcdc.sinks.base import (
    Sink,
    SinkColumn,
    SinkContext,
    SinkOptions,
    SinkTable,
    TableOptions,
    fill_statement,
    final_states,
    key_span,
    merge_statement,
    properties_text,
    read_spark_table,
    session_conf,
    sink_rows,
    spark_error_text,
    spark_type_name,
    sql_text,
    update_statement,
    value_frame,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


log = logging.getLogger(__name__)

# Deletion vectors off (said explicitly: a session's defaults may turn them on): a table
# with them needs reader 3 / writer 7 and the deletionVectors reader feature, which
# delta-rs's Arrow reader and polars refuse. A pipeline commits once per micro-batch;
# Delta's default checkpoint every 10 commits is written inside every tenth commit.
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "false", "delta.checkpointInterval": "100"}
# Delta refuses these characters in column names unless the table maps columns by name
_UNMAPPED_NAME_CHARACTERS = frozenset(" ,;{}()\n\t=")
COLUMN_MAPPING_PROPERTIES = {
    "delta.columnMapping.mode": "name",
    "delta.minReaderVersion": "2",
    "delta.minWriterVersion": "5",
}


class DeltaOptions(TableOptions):
    path: str | None = None  # base directory; None: tables in the session catalog

    @field_validator("path")
    @classmethod
    def _reachable(cls, value: str | None) -> str | None:
        return None if value is None else supported_location(value, "the Delta sink's path")


class DeltaSink(Sink):
    """Delta Lake tables, MERGE per batch, idempotent through txnAppId / txnVersion (MERGEs)
    and commit marks (appends)."""

    options_model = DeltaOptions
    guarantee = "exactly-once"
    appends = True
    short_first_batch = False  # a batch's MERGE reads the table (Sink.short_first_batch)
    concurrent_writes = True  # each table's commit on its own, its settings in its session
    _root: Location | None = None  # sink.path on its filesystem, opened at first use

    def __init__(self, options: SinkOptions, spark: SparkSession, context: SinkContext) -> None:
        super().__init__(options, spark, context)
        # per table this sink created or read the history of once: the newest batch this
        # writer appended (-1: none). Only this sink commits this writer's batches to it from
        # then on, so this answers appended() without reading the table's history again; a
        # table whose append failed is left to the history
        self._own_appends: dict[str, int] = {}

    @classmethod
    def spark_conf(cls, options: SinkOptions) -> dict[str, str]:
        """With ``path``, no table lives in Spark's catalog, but creating one by path sets up
        the catalog's default database, whose directory Spark makes in the working directory
        (``./spark-warehouse``) unless told otherwise: it goes to the temp directory instead
        (a user's ``spark.sql.warehouse.dir`` wins)."""
        assert isinstance(options, DeltaOptions)
        if options.path is None:
            return {}
        warehouse = os.path.join(tempfile.gettempdir(), f"sparkcdc-warehouse-{os.getuid()}")
        return {"spark.sql.warehouse.dir": warehouse}

    @property
    def _options(self) -> DeltaOptions:
        assert isinstance(self.options, DeltaOptions)
        return self.options

    def location(self, table: SinkTable) -> str | None:
        """The table's directory (path mode), else None (catalog mode)."""
        directory = self._directory(table)
        return None if directory is None else directory.uri

    def _directory(self, table: SinkTable) -> Location | None:
        """The table's directory on its filesystem (path mode), as Spark's Hadoop reaches it."""
        if self._options.path is None:
            return None
        if self._root is None:
            self._root = open_location(self._options.path, session_hadoop_settings(self.spark))
        directory = self._root
        # each dotted part one encoded segment: a table named '../../x' stays under sink.path
        for part in table.name.split("."):
            if part:
                directory = directory / path_segment(part)
        return directory

    @classmethod
    def arrow_reader(
        cls, options: SinkOptions, table: SinkTable, hadoop: Mapping[str, str]
    ) -> Callable[[Sequence[str]], Iterator[pa.RecordBatch]] | None:
        """delta-rs reads a table of ``path`` mode on a local filesystem or S3 (reached with
        the pipeline's S3A settings), deletion vectors applied (DataFusion's scan); a
        catalog's table, or one on another store: Spark."""
        assert isinstance(options, DeltaOptions)
        if options.path is None or importlib.util.find_spec("deltalake") is None:
            return None
        directory = open_location(options.path, hadoop)
        for part in table.name.split("."):
            if part:
                directory = directory / path_segment(part)
        uri, storage = directory.uri, None
        if not directory.is_local:
            parts = urlsplit(uri)
            if (uri_scheme(uri) or "").lower() not in S3_SCHEMES or parts.query:
                return None
            uri = "s3" + uri[len(uri_scheme(uri) or "") :]
            storage = delta_rs_s3(s3_options(parts.netloc, hadoop))

        def read(columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
            import deltalake
            import pyarrow as pa
            from deltalake.exceptions import DeltaError, TableNotFoundError

            try:
                delta = deltalake.DeltaTable(uri, storage_options=storage)
                names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
                query = deltalake.QueryBuilder().register("t", delta)
                rows = query.execute(f"SELECT {names} FROM t")
            except TableNotFoundError:
                raise SinkError(
                    f"delta sink: {table.name}: no Delta table at {directory}. Has the "
                    "pipeline run (sparkcdc run)?"
                ) from None
            except (DeltaError, OSError, ValueError) as exc:  # a store that refused, a bad key
                raise SinkError(
                    f"delta sink: {table.name}: delta-rs cannot read {directory}: "
                    f"{redacted_uri(str(exc))}. verify reads the table without Spark, with the "
                    "S3A settings of the pipeline file's spark.conf: check them there"
                ) from None
            yield from pa.RecordBatchReader.from_stream(rows)

        return read

    def identifier(self, table: SinkTable) -> str:
        """How Spark SQL names the table."""
        location = self.location(table)
        if location is not None:
            return f"delta.{quote_spark(location)}"
        return ".".join(quote_spark(p) for p in table.name.split("."))

    def open(self, tables: Sequence[SinkTable]) -> None:
        for create in self._creations(tables):
            create()

    def begin_open(self, tables: Sequence[SinkTable]) -> None:
        """The tables that exist are checked now; the absent ones are created in a thread
        (the first Delta command of a JVM is a large part of its start-up)."""
        self._create_in_background(self._creations(tables))

    def _creations(self, tables: Sequence[SinkTable]) -> list[Callable[[], None]]:
        """Open each table that exists (adopting an earlier session's in catalog mode); for
        each that does not, the call that creates it, which marks it :attr:`created` now."""
        creations: list[Callable[[], None]] = []
        for table in tables:
            directory = self._directory(table)
            with self._opening_errors(table, directory):
                if directory is not None:
                    directory.make_dirs(private=False)  # a lake others read
                elif table.namespace:
                    self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_spark(table.namespace)}")
                if self._exists(table) or (directory is None and self._adopt(table)):
                    continue
            creations.append(functools.partial(self._create, table, directory))
            self.created.add(table.name)
        return creations

    def _create(self, table: SinkTable, directory: Location | None) -> None:
        defaults = TABLE_PROPERTIES
        if any(_UNMAPPED_NAME_CHARACTERS.intersection(c) for c in table.column_names):
            defaults = {**TABLE_PROPERTIES, **COLUMN_MAPPING_PROPERTIES}
        properties = self._options.tblproperties(defaults)
        with self._opening_errors(table, directory):
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {self.identifier(table)} "
                f"({table.spark_ddl()}) USING delta TBLPROPERTIES ({properties})"
            )
        self._own_appends[table.name] = -1

    @contextlib.contextmanager
    def _opening_errors(self, table: SinkTable, directory: Location | None) -> Iterator[None]:
        """Errors of opening or creating ``table`` as SinkErrors that say where and why."""
        location = None if directory is None else directory.uri
        try:
            yield
        except OSError as exc:
            raise SinkError(
                f"delta sink: cannot create table directory {location}: {exc.strerror}. "
                "Check sink.path and its permissions"
            ) from None
        except Exception as exc:  # Spark's AnalysisException and friends
            raise SinkError(
                f"delta sink: cannot create or open table {table.name} at "
                f"{location or 'the session catalog'}: {spark_error_text(exc)}"
            ) from None

    def exists(self, table: SinkTable) -> bool:
        directory = self._directory(table)
        with self._opening_errors(table, directory):
            if directory is not None:
                return self._exists(table)
            namespace = table.namespace or "default"
            if not self.spark.catalog.databaseExists(namespace):
                # Spark's in-memory catalog forgets its databases too when a session ends:
                # an earlier run's table is where a database of that name puts it
                warehouse = str(self.spark.conf.get("spark.sql.warehouse.dir"))
                database = f"{warehouse.rstrip('/')}/{namespace.lower()}.db"
                return self._is_delta(self._managed_path(database, table))
            return self._exists(table) or self._adopt(table)

    def _exists(self, table: SinkTable) -> bool:
        """Whether the table is there already (its directory has a Delta log)."""
        directory = self._directory(table)
        if directory is not None:
            return (directory / "_delta_log").exists()
        return bool(self.spark.catalog.tableExists(self.identifier(table)))

    def _adopt(self, table: SinkTable) -> bool:
        """Catalog mode: register the Delta table an earlier run left at the table's
        default location, when this session's catalog does not know it (Spark's in-memory
        catalog forgets its tables when the session ends; their files stay, and creating
        the table again there fails). True when there was one."""
        namespace = table.namespace or "default"
        info = self.spark.sql(f"DESCRIBE DATABASE {quote_spark(namespace)}").collect()
        database_location = next((str(r[1]) for r in info if r[0] == "Location"), None)
        if not database_location:
            return False
        path = self._managed_path(database_location, table)
        if not self._is_delta(path):
            return False
        self.spark.sql(
            f"CREATE TABLE {self.identifier(table)} USING delta LOCATION {sql_text(path)}"
        )
        log.info(
            "delta sink: %s: registered the Delta table at %s in the session catalog (an "
            "earlier session's catalog had it; this one did not)",
            table.name,
            path,
        )
        return True

    def _managed_path(self, database_location: str, table: SinkTable) -> str:
        """Where Spark puts ``table`` as a managed table of a database at that location."""
        name = table.short_name
        if str(self.spark.conf.get("spark.sql.caseSensitive", "false")).lower() != "true":
            name = name.lower()  # as Spark names a managed table's directory
        return f"{database_location.rstrip('/')}/{name}"

    def _is_delta(self, path: str) -> bool:
        jvm = self.spark._jvm
        assert jvm is not None
        return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(self.spark._jsparkSession, path))

    def read_table(self, table: SinkTable) -> DataFrame:
        return self._table_frame(self.spark, table)

    def _table_frame(self, session: SparkSession, table: SinkTable) -> DataFrame:
        """The table read in ``session`` (a write's own session, see spark/concurrent.py)."""
        return read_spark_table(session, self.identifier(table), f"delta sink: {table.name}")

    def has_rows(self, table: SinkTable) -> bool:
        return bool(self.spark.sql(f"SELECT 1 FROM {self.identifier(table)} LIMIT 1").take(1))

    def write(
        self, table: SinkTable, changes: DataFrame, batch_id: int, *, size: int | None = None
    ) -> bool:
        """One MERGE; False when Delta skipped it (its txnVersion already committed)."""
        any_rows, span = key_span(changes, table)
        if not any_rows:  # e.g. a batch of snapshot inserts only: no empty commit
            return True
        session: SparkSession = changes.sparkSession
        final = final_states(changes, table.primary_key)
        view = f"sparkcdc_changes_{uuid.uuid4().hex}"
        final.createOrReplaceTempView(view)
        statement = merge_statement(self.identifier(table), view, table, span)
        # Delta records (appId, version) in the same commit and skips a version it has seen;
        # the mark is the one the appends' look back stops at (a MERGE needs Delta's table
        # state anyway, so its txnAppId costs nothing more); a userMetadata of the user's is
        # put back after
        settings = {
            "spark.databricks.delta.write.txnAppId": self.app_id(table),
            "spark.databricks.delta.write.txnVersion": str(batch_id),
            _USER_METADATA: self.mark(table, "merge", batch_id),
        }
        try:
            with session_conf(session, settings):
                # a MERGE Delta skips (its txnVersion seen) returns no metrics row
                written = bool(session.sql(statement).collect())
        except Exception as exc:
            raise SinkError(
                f"delta sink: MERGE into {table.name} failed for batch {batch_id}: "
                f"{spark_error_text(exc)}. Nothing of this batch is committed to that "
                "table; a restart replays it"
            ) from None
        finally:
            session.catalog.dropTempView(view)
        if not written:
            log.info(
                "delta sink: batch %d of %s skipped: this pipeline's stream committed it "
                "before (a replay after a crash)",
                batch_id,
                table.name,
            )
        return written

    def append(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        """A plain Delta append; False when this writer appended the batch before (a replay,
        :meth:`appended`). The commit carries the batch's mark."""
        if self.appended(table, rows, batch_id):
            log.info(
                "delta sink: the append of batch %d to %s skipped: this pipeline's stream "
                "committed it before (a replay after a crash)",
                batch_id,
                table.name,
            )
            return False
        location = self.location(table)
        writer = (
            sink_rows(rows, table)
            .write.format("delta")
            .mode("append")
            .option("userMetadata", self.mark(table, "append", batch_id))
        )
        try:
            if location is not None:
                writer.save(location)
            else:
                writer.saveAsTable(table.name)
        except Exception as exc:
            self._own_appends.pop(table.name, None)  # committed or not: the history knows
            raise SinkError(
                f"delta sink: appending the inserts of batch {batch_id} to {table.name} "
                f"failed: {spark_error_text(exc)}. Nothing of this append is committed; a "
                "restart replays it"
            ) from None
        if table.name in self._own_appends:
            self._own_appends[table.name] = batch_id
        return True

    def knows_appends(self, table: SinkTable) -> bool:
        # the append is one write; a table whose history this run has not read may need
        # the rows' keys looked up first (_holds_keys)
        return table.name in self._own_appends

    def mark(self, table: SinkTable, write: str, batch_id: int) -> str:
        """The ``userMetadata`` of this writer's ``write`` ("append", "merge") of a batch."""
        return json.dumps({"sparkcdc": self.app_id(table), "write": write, "batch": batch_id})

    def appended(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        """Whether this writer appended batch ``batch_id`` (or a later one) to ``table``.

        The table's commits are read newest first (``DESCRIBE HISTORY``, 16, then 8 times
        as many while undecided) until one carries this writer's mark: an append's of this
        batch or a later one (appended), or any of an earlier batch (not: batches commit in
        order, so this batch's would be newer). Others' commits and unmarked ones (ALTERs,
        OPTIMIZE) are passed over. Undecided at the table's first commit: not appended.
        Undecided where the history is cut short (Delta removed old commit files): the
        rows' keys are looked up in the table, which is exact for the rows an append takes
        (keys the table did not hold before the batch, so present only if this batch's
        append was committed).

        A table this sink created, or whose history it has read once, is answered from its
        own record of its appends, with no read: every commit this writer makes to it from
        then on is this sink's (a stream's batches run in order, one writer at a time), and
        no append of a later batch than the one decided can be in the table."""
        if table.name in self._own_appends:
            return batch_id <= self._own_appends[table.name]
        newest = self._appended_by_history(table, rows, batch_id)
        self._own_appends[table.name] = newest
        return batch_id <= newest

    def _appended_by_history(self, table: SinkTable, rows: DataFrame, batch_id: int) -> int:
        """The newest batch this writer appended to ``table`` as far as it matters to
        ``batch_id``: that batch or a later one when it was appended, ``batch_id - 1`` when
        not (see :meth:`appended`)."""
        session: SparkSession = rows.sparkSession
        app_id = self.app_id(table)
        not_appended = batch_id - 1
        limit = 16
        while True:
            try:
                commits = (
                    session.sql(f"DESCRIBE HISTORY {self.identifier(table)} LIMIT {limit}")
                    .select("version", "userMetadata")
                    .collect()
                )
            except Exception as exc:
                raise SinkError(
                    f"delta sink: cannot read the history of {table.name} for batch "
                    f"{batch_id}: {spark_error_text(exc)}"
                ) from None
            for commit in commits:  # newest first
                found = _mark_of(commit["userMetadata"], app_id)
                if found is None:
                    continue
                write, marked_batch = found
                if marked_batch < batch_id:
                    return not_appended
                if write == "append":
                    return marked_batch
            if len(commits) < limit:  # the whole history read
                if commits and int(commits[-1]["version"]) == 0:
                    return not_appended
                return batch_id if self._holds_keys(table, rows, batch_id) else not_appended
            limit *= 8

    def _holds_keys(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        """Whether the table holds any of ``rows``' keys (see :meth:`appended`)."""
        from pyspark.sql import functions as F

        keys = list(table.primary_key)
        columns = [F.col(quote_spark(k)) for k in keys]  # names as they are (dots, spaces)
        log.info(
            "delta sink: %s: its history does not say whether batch %d was appended; "
            "looking its keys up in the table",
            table.name,
            batch_id,
        )
        try:
            present = (
                sink_rows(rows, table)
                .select(*columns)
                .join(
                    self._table_frame(rows.sparkSession, table).select(*columns), keys, "left_semi"
                )
                .take(1)
            )
        except Exception as exc:
            raise SinkError(
                f"delta sink: cannot look up the keys of batch {batch_id} in {table.name}: "
                f"{spark_error_text(exc)}"
            ) from None
        return bool(present)

    # -------------------------------------------------------------- metadata applier

    def _columns(self, table: SinkTable) -> dict[str, str]:
        """The table's columns as Delta has them now: lower-cased name → name."""
        current = self.spark.sql(f"SELECT * FROM {self.identifier(table)} LIMIT 0")
        return {n.lower(): n for n in current.columns}

    def _alter(self, table: SinkTable, what: str, *statements: str) -> None:
        try:
            for statement in statements:
                self.spark.sql(f"ALTER TABLE {self.identifier(table)} {statement}")
        except Exception as exc:
            raise SinkError(
                f"delta sink: cannot {what} in {table.name}: {spark_error_text(exc)}"
            ) from None

    def _column_mapping(self) -> str:
        # renaming and dropping columns needs Delta's column mapping (name mode)
        return f"SET TBLPROPERTIES ({properties_text(COLUMN_MAPPING_PROPERTIES)})"

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        if column.name.lower() not in self._columns(table):
            self._alter(
                table,
                f"add column {column.name}",
                f"ADD COLUMNS ({quote_spark(column.name)} {column.spark_type})",
            )

    def drop_column(self, table: SinkTable, name: str) -> None:
        if name.lower() in self._columns(table):
            self._alter(
                table,
                f"drop column {name}",
                self._column_mapping(),
                f"DROP COLUMN {quote_spark(name)}",
            )

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        columns = self._columns(table)
        if old.lower() in columns and new.lower() not in columns:
            self._alter(
                table,
                f"rename column {old} to {new}",
                self._column_mapping(),
                f"RENAME COLUMN {quote_spark(old)} TO {quote_spark(new)}",
            )

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        current = self.spark.sql(f"SELECT * FROM {self.identifier(table)}")
        field = next((f for f in current.schema if f.name.lower() == name.lower()), None)
        if field is None or spark_type_name(field.dataType) == spark_type:
            return
        # Delta's in-place type widening makes a table delta-rs cannot read; a type change
        # is rare, so the table is rewritten with the column cast (its txn markers stay)
        from pyspark.sql import functions as F

        location = self.location(table)
        try:
            rewritten = current.select(
                *[
                    F.col(quote_spark(f.name)).cast(spark_type).alias(f.name)
                    if f.name == field.name
                    else F.col(quote_spark(f.name))
                    for f in current.schema
                ]
            )
            writer = rewritten.write.format("delta").mode("overwrite")
            writer = writer.option("overwriteSchema", "true")
            if location is not None:
                writer.save(location)
            else:
                writer.saveAsTable(table.name)
        except Exception as exc:
            raise SinkError(
                f"delta sink: cannot change the type of column {name} in {table.name} to "
                f"{spark_type}: {spark_error_text(exc)}"
            ) from None

    def fill_column(self, table: SinkTable, column: SinkColumn, value: Any) -> None:
        view = f"sparkcdc_fill_{uuid.uuid4().hex}"
        value_frame(self.spark, column, value).createOrReplaceTempView(view)
        self._merge(
            self.spark,
            table,
            f"fill column {column.name}",
            fill_statement(self.identifier(table), view, column.name),
            view,
        )

    def update_column(self, table: SinkTable, column: SinkColumn, rows: DataFrame) -> None:
        view = f"sparkcdc_fill_{uuid.uuid4().hex}"
        rows.createOrReplaceTempView(view)
        self._merge(
            rows.sparkSession,  # the view lives in the session of the frame
            table,
            f"update column {column.name}",
            update_statement(self.identifier(table), view, table, column.name),
            view,
        )

    def _merge(
        self, session: SparkSession, table: SinkTable, what: str, statement: str, view: str
    ) -> None:
        try:
            session.sql(statement)
        except Exception as exc:
            raise SinkError(
                f"delta sink: cannot {what} in {table.name}: {spark_error_text(exc)}"
            ) from None
        finally:
            session.catalog.dropTempView(view)

    def truncate_table(self, table: SinkTable) -> None:
        try:
            self.spark.sql(f"DELETE FROM {self.identifier(table)}")
        except Exception as exc:
            raise SinkError(
                f"delta sink: cannot truncate {table.name}: {spark_error_text(exc)}"
            ) from None

    def drop_table(self, table: SinkTable) -> None:
        directory = self._directory(table)
        try:
            if directory is None:
                self.spark.sql(f"DROP TABLE IF EXISTS {self.identifier(table)}")
            else:
                directory.remove_tree()
        except Exception as exc:
            raise SinkError(
                f"delta sink: cannot drop {table.name}: {spark_error_text(exc)}"
            ) from None

    def app_id(self, table: SinkTable) -> str:
        return f"sparkcdc:{self.context.writer_id}:{table.name}"


_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def _mark_of(metadata: str | None, app_id: str) -> tuple[str, int] | None:
    """``(write, batch id)`` of a commit's ``userMetadata`` when it is ``app_id``'s mark.

    >>> _mark_of('{"sparkcdc": "p:t", "write": "merge", "batch": 3}', "p:t")
    ('merge', 3)
    >>> _mark_of('{"sparkcdc": "q:t", "write": "merge", "batch": 3}', "p:t") is None
    True
    >>> _mark_of("nightly OPTIMIZE", "p:t") is None, _mark_of(None, "p:t") is None
    (True, True)
    """
    if metadata is None:
        return None
    try:
        mark = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(mark, dict) or mark.get("sparkcdc") != app_id:
        return None
    write, batch = mark.get("write"), mark.get("batch")
    if not isinstance(write, str) or not isinstance(batch, int):
        return None
    return write, batch


def delta_rs_s3(options: Mapping[str, Any]) -> dict[str, str]:
    """delta-rs's storage options for pyarrow ``S3FileSystem`` arguments (``s3_options``).

    >>> delta_rs_s3({"endpoint_override": "127.0.0.1:9000", "scheme": "http"})["AWS_ENDPOINT_URL"]
    'http://127.0.0.1:9000'
    """
    storage: dict[str, str] = {}
    if "endpoint_override" in options:
        scheme = options.get("scheme", "https")
        storage["AWS_ENDPOINT_URL"] = f"{scheme}://{options['endpoint_override']}"
    if options.get("scheme") == "http":
        storage["AWS_ALLOW_HTTP"] = "true"
    if "region" in options:
        storage["AWS_REGION"] = str(options["region"])
    elif "endpoint_override" in options:  # a store of one's own (MinIO) takes any region
        storage["AWS_REGION"] = "us-east-1"
    if options.get("force_virtual_addressing"):
        storage["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true"
    for key, name in (
        ("access_key", "AWS_ACCESS_KEY_ID"),
        ("secret_key", "AWS_SECRET_ACCESS_KEY"),
        ("session_token", "AWS_SESSION_TOKEN"),
    ):
        if key in options:
            storage[name] = str(options[key])
    if options.get("anonymous"):
        storage["AWS_SKIP_SIGNATURE"] = "true"
    return storage
