"""``type: iceberg``: one Apache Iceberg table per sink table, kept equal to its source by MERGE.

Option names follow Flink CDC's Iceberg pipeline sink::

    sink:
      type: iceberg
      catalog.properties.type: hadoop          # or jdbc
      catalog.properties.warehouse: /data/warehouse
      # catalog.properties.uri: jdbc:mariadb://db:3306/iceberg_catalog    (jdbc only)
      # catalog.properties.jdbc.user: iceberg                              (jdbc only)
      # catalog.properties.jdbc.password: ${ICEBERG_CATALOG_PASSWORD}
      # catalog.name: sparkcdc_iceberg         # the Spark catalog the tables are reached by
      # catalog.properties.<name>: ...         # any other Iceberg catalog property
      # catalog.properties.cache-enabled: true # default false: see CATALOG_DEFAULTS

The sink registers an Iceberg ``SparkCatalog`` under ``catalog.name`` and keeps the sink table
``app_db.orders`` in ``<catalog.name>.app_db.orders`` (a name without a database lands in the
``default`` namespace). Missing namespaces and tables are created, as format-version 2 tables
that write merge-on-read.

A ``hadoop`` catalog keeps everything, metadata included, under the warehouse (a local
directory or a ``file:`` / ``hdfs:`` / ... URI Hadoop can write). A ``jdbc`` catalog keeps the
table pointers in a database reached by ``catalog.properties.uri`` through a JDBC driver on
Spark's classpath: of those, the connector jars ship MariaDB's (``jdbc:mariadb://`` or
``jdbc:mysql://...?permitMysqlScheme``); SQLite and PostgreSQL drivers are not shipped (add the
jar to ``jars/lib`` to use one). Derby, which Spark bundles, does not work: Iceberg's queries
use ``LIMIT``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from sparkcdc.errors import SinkError
from sparkcdc.files import uri_scheme
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.sinks.base import (
    TABLE_PROPERTIES_PREFIX,
    Sink,
    SinkColumn,
    SinkOptions,
    SinkTable,
    TableOptions,
    fill_statement,
    final_states,
    gather_prefixed,
    key_span,
    merge_statement,
    read_spark_table,
    session_conf,
    sink_rows,
    update_statement,
    value_frame,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.dataframe import DataFrame

CATALOG_PROPERTIES = "catalog.properties."
DEFAULT_CATALOG = "sparkcdc_iceberg"
DEFAULT_NAMESPACE = "default"
SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
# Iceberg's Spark writer copies session settings with this prefix into the summary of the
# snapshot it commits (SparkWriteConf.extraSnapshotMetadata, MERGE included)
SNAPSHOT_PROPERTY_CONF = "spark.sql.iceberg.snapshot-property."
# the same per write, as a DataFrameWriterV2 option
SNAPSHOT_PROPERTY_OPTION = "snapshot-property."
log = logging.getLogger(__name__)
BATCH_PROPERTY = "sparkcdc.batch-id."
APPEND_PROPERTY = "sparkcdc.append-batch-id."  # apart: an append and a MERGE per batch

# Merge-on-read: a small MERGE writes its new rows plus a position-delete file instead of
# rewriting every data file it touches. Measured on local disk (200k rows in 4 files, 12
# batches of 55 changes at random keys): median MERGE 0.68 s merge-on-read vs 0.88 s
# copy-on-write, and copy-on-write grows with the size of the touched files. Reads pay for
# the delete files until compaction (rewrite_data_files / rewrite_position_delete_files).
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}

# The stream writes through the catalog of its own (cloned) session; with Iceberg's default
# table cache, the pipeline's session would read a table as it was up to 30 s before.
# Loading a table's metadata per statement is cheap next to a MERGE.
CATALOG_DEFAULTS = {"cache-enabled": "false"}

_CATALOG_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OWN_PROPERTIES = ("type", "warehouse", "uri")  # catalog.properties.* with fields of their own


class IcebergOptions(TableOptions):
    """The iceberg sink block; any other ``catalog.properties.<name>`` goes to the catalog."""

    # pipeline/config.py accepts any key with one of these prefixes
    passthrough_prefixes: ClassVar[frozenset[str]] = frozenset(
        {CATALOG_PROPERTIES, TABLE_PROPERTIES_PREFIX}
    )

    catalog_name: str = Field(DEFAULT_CATALOG, alias="catalog.name")
    catalog_type: Literal["hadoop", "jdbc"] = Field("hadoop", alias="catalog.properties.type")
    warehouse: str = Field(alias="catalog.properties.warehouse", min_length=1)
    uri: str | None = Field(None, alias="catalog.properties.uri")
    # 'catalog.properties.cache-enabled: false' arrives here as {'cache-enabled': 'false'}
    properties: dict[str, str] = Field(default_factory=dict, alias="catalog.properties")

    @model_validator(mode="before")
    @classmethod
    def _gather_properties(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return gather_prefixed(data, CATALOG_PROPERTIES, _OWN_PROPERTIES)

    @field_validator("catalog_name")
    @classmethod
    def _check_catalog_name(cls, value: str) -> str:
        if not _CATALOG_NAME_RE.match(value):
            raise ValueError(
                f"catalog.name {value!r} is not a plain identifier (letters, digits, '_', "
                "not starting with a digit)"
            )
        if value.lower() == "spark_catalog":
            raise ValueError(
                "catalog.name 'spark_catalog' is Spark's session catalog (Delta's here); "
                f"choose another name, e.g. {DEFAULT_CATALOG!r}"
            )
        return value

    @model_validator(mode="after")
    def _check_uri(self) -> IcebergOptions:
        if self.catalog_type == "jdbc":
            if not self.uri or not self.uri.startswith("jdbc:"):
                raise ValueError(
                    "a jdbc catalog needs catalog.properties.uri: the JDBC URL of the "
                    "database that keeps the catalog, e.g. jdbc:mariadb://db:3306/iceberg"
                )
        elif self.uri is not None:
            raise ValueError(
                "catalog.properties.uri is for catalog.properties.type 'jdbc'; a hadoop "
                "catalog keeps its metadata under the warehouse: remove the uri"
            )
        return self

    def warehouse_location(self) -> str:
        """The warehouse as the catalog gets it: a URI as written, a path made absolute."""
        if uri_scheme(self.warehouse):
            return self.warehouse
        return os.path.abspath(os.path.expanduser(self.warehouse))

    def local_warehouse(self) -> Path | None:
        """The warehouse directory when it is on the local file system, else None."""
        location = self.warehouse_location()
        if location.startswith("file:"):
            return Path(re.sub(r"^file:(//)?", "", location) or "/")
        return None if uri_scheme(location) else Path(location)

    def catalog_conf(self) -> dict[str, str]:
        """``spark.sql.catalog.<name>[.<property>]`` settings of the Iceberg catalog."""
        prefix = f"spark.sql.catalog.{self.catalog_name}"
        conf = {
            prefix: SPARK_CATALOG_CLASS,
            f"{prefix}.type": self.catalog_type,
            f"{prefix}.warehouse": self.warehouse_location(),
        }
        if self.uri is not None:
            conf[f"{prefix}.uri"] = self.uri
        for key, value in {**CATALOG_DEFAULTS, **self.properties}.items():
            conf[f"{prefix}.{key}"] = value
        return conf

    def redact(self, text: str) -> str:
        """``text`` without the catalog URI's credentials or the catalog password."""
        if self.uri:
            text = text.replace(self.uri, safe_uri(self.uri))
        for key, value in self.properties.items():
            if "password" in key.lower() and value:
                text = text.replace(value, "***")
        return text


class IcebergSink(Sink):
    """Iceberg tables, one MERGE per batch and table, idempotent through the snapshot summary.

    Each batch's change frame is reduced to the last change per key (latest ``_seq`` wins)
    and merged: keys whose last change deletes them are deleted, the others upserted.

    Guarantee: exactly-once table state. Iceberg has no Delta-style transaction id, so the
    MERGE records ``sparkcdc.batch-id.<writer id>`` = batch id in the summary of the
    snapshot it commits (through the session setting
    ``spark.sql.iceberg.snapshot-property.<key>``), atomically with the rows. Before merging,
    the sink reads the highest such batch id among the table's current snapshot and its
    ancestors; a batch at or below it (one Spark replays after a crash) is skipped. Should the
    record be gone (its snapshot expired), replaying still leaves the table as it was: the
    MERGE writes per-key final states, and applying a batch's final states again changes no
    row; such a replay only adds one snapshot. The writer id is the pipeline's name and its
    checkpoint's run id, so a pipeline that starts over from a new checkpoint (batch ids from
    0 again) records under a key of its own and skips nothing an old stream wrote.

    Snapshot rows of keys the table does not hold yet are appended (``append``: no MERGE),
    recording ``sparkcdc.append-batch-id.<writer id>`` the same way, so that a replay skips
    an append and a MERGE of one batch each on its own record. Without the record (expired)
    a replayed append would add its rows a second time: expire snapshots older than the
    pipeline's last batch only (``expire_snapshots`` with ``retain_last`` >= 2 keeps it).
    """

    options_model = IcebergOptions
    guarantee = "exactly-once"
    appends = True
    short_first_batch = False  # a batch's MERGE reads the table (Sink.short_first_batch)

    @property
    def _options(self) -> IcebergOptions:
        assert isinstance(self.options, IcebergOptions)
        return self.options

    @classmethod
    def spark_conf(cls, options: SinkOptions) -> dict[str, str]:
        assert isinstance(options, IcebergOptions)
        return options.catalog_conf()

    @classmethod
    def check_runtime(cls) -> None:
        from sparkcdc.spark.connectors import require_iceberg_runtime

        require_iceberg_runtime()

    # -- names ------------------------------------------------------------------------

    def namespace(self, table: SinkTable) -> tuple[str, ...]:
        """The Iceberg namespace of a sink table (``default`` for a name without one)."""
        parts = tuple(p for p in table.namespace.split(".") if p)
        return parts or (DEFAULT_NAMESPACE,)

    def identifier(self, table: SinkTable) -> str:
        """How Spark SQL names the table: ``catalog.namespace.table``, quoted."""
        parts = (self._options.catalog_name, *self.namespace(table), table.short_name)
        return ".".join(quote_spark(p) for p in parts)

    @property
    def batch_property(self) -> str:
        """The snapshot-summary key that records the last batch this pipeline merged."""
        return BATCH_PROPERTY + self.context.writer_id

    # -- lifecycle --------------------------------------------------------------------

    def open(self, tables: Sequence[SinkTable]) -> None:
        options = self._options
        self._check_warehouse()
        # Spark loads a catalog plugin on its first use, so settings made now still count
        self._configure(self.spark)
        properties = options.tblproperties(TABLE_PROPERTIES)
        for table in tables:
            namespace = ".".join(
                quote_spark(p) for p in (options.catalog_name, *self.namespace(table))
            )
            try:
                self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
                if not self._listed(namespace, table):
                    self.spark.sql(
                        f"CREATE TABLE IF NOT EXISTS {self.identifier(table)} "
                        f"({table.spark_ddl()}) USING iceberg TBLPROPERTIES ({properties})"
                    )
                    self.created.add(table.name)
            except Exception as exc:  # AnalysisException, Py4JJavaError from the catalog
                raise SinkError(
                    f"iceberg sink: cannot create or open table {table.name} as "
                    f"{self.identifier(table)} in the {options.catalog_type} catalog "
                    f"{options.catalog_name!r} (warehouse {options.warehouse_location()}"
                    f"{', uri ' + safe_uri(options.uri) if options.uri else ''}): "
                    f"{options.redact(_reason(exc))}. {self._advice(exc)}"
                ) from None
            self._check_location(table)

    def exists(self, table: SinkTable) -> bool:
        options = self._options
        self._configure(self.spark)
        namespace = ".".join(quote_spark(p) for p in (options.catalog_name, *self.namespace(table)))
        with contextlib.suppress(Exception):  # not there, or a lookup the catalog refuses
            # a table the catalog loads is there (a listing can miss one: a hadoop catalog
            # lists a namespace with odd parts such as '/' under another directory)
            self.spark.sql(f"DESCRIBE TABLE {self.identifier(table)}").collect()
            return True
        try:
            return self._listed(namespace, table)
        except Exception as exc:  # the namespace is gone too (or the catalog does not answer)
            if "NAMESPACE_NOT_FOUND" in str(exc) or "NoSuchNamespace" in str(exc):
                return False
            raise SinkError(
                f"iceberg sink: cannot look up table {table.name} in the catalog "
                f"{options.catalog_name!r}: {options.redact(_reason(exc))}"
            ) from None

    def _listed(self, namespace: str, table: SinkTable) -> bool:
        """Whether the namespace lists the table, in any case (a catalog's table lookup may
        ask for views too, which a JDBC catalog without view support refuses)."""
        wanted = table.short_name.lower()
        listed = self.spark.sql(f"SHOW TABLES IN {namespace}").collect()
        return any(str(row["tableName"]).lower() == wanted for row in listed)

    def read_table(self, table: SinkTable) -> DataFrame:
        return read_spark_table(self.spark, self.identifier(table), f"iceberg sink: {table.name}")

    def has_rows(self, table: SinkTable) -> bool:
        return bool(self.spark.sql(f"SELECT 1 FROM {self.identifier(table)} LIMIT 1").take(1))

    def write(
        self, table: SinkTable, changes: DataFrame, batch_id: int, *, size: int | None = None
    ) -> bool:
        # the foreachBatch session: a clone made when the query started
        session: SparkSession = changes.sparkSession
        if self._applied(session, table, batch_id, self.batch_property, "batch"):
            return False
        any_rows, span = key_span(changes, table)
        if not any_rows:  # e.g. a batch of snapshot inserts only: no empty commit
            return True
        final = final_states(changes, table.primary_key)
        view = f"sparkcdc_changes_{uuid.uuid4().hex}"
        final.createOrReplaceTempView(view)
        statement = merge_statement(self.identifier(table), view, table, span)
        batch_conf = SNAPSHOT_PROPERTY_CONF + self.batch_property
        try:
            with session_conf(session, {batch_conf: str(batch_id)}):
                session.sql(statement)
        except Exception as exc:
            raise SinkError(
                f"iceberg sink: MERGE into {self.identifier(table)} failed for batch "
                f"{batch_id}: {self._options.redact(_reason(exc))}. Nothing of this batch is "
                "committed to that table; a restart replays it"
            ) from None
        finally:
            session.catalog.dropTempView(view)
        return True

    def append(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        """One Iceberg append (DataFrameWriterV2), its batch id in the snapshot summary."""
        session: SparkSession = rows.sparkSession
        if self._applied(session, table, batch_id, self.append_property, "append of batch"):
            return False
        writer = sink_rows(rows, table).writeTo(self.identifier(table))
        writer = writer.option(SNAPSHOT_PROPERTY_OPTION + self.append_property, str(batch_id))
        try:
            writer.append()
        except Exception as exc:
            raise SinkError(
                f"iceberg sink: appending the inserts of batch {batch_id} to "
                f"{self.identifier(table)} failed: {self._options.redact(_reason(exc))}. "
                "Nothing of this append is committed; a restart replays it"
            ) from None
        return True

    def knows_appends(self, table: SinkTable) -> bool:
        return True  # the snapshot summary tells a replay; the append is one write

    @property
    def append_property(self) -> str:
        """The snapshot-summary key that records the last batch this pipeline appended."""
        return APPEND_PROPERTY + self.context.writer_id

    def _applied(
        self, session: SparkSession, table: SinkTable, batch_id: int, key: str, what: str
    ) -> bool:
        """Whether the table's lineage records ``key`` at ``batch_id`` or later (logged)."""
        self._configure(session)
        try:
            applied = self.applied_batch(session, table, key)
        except Exception as exc:
            raise SinkError(
                f"iceberg sink: cannot read the snapshots of {self.identifier(table)} for "
                f"batch {batch_id}: {self._options.redact(_reason(exc))}"
            ) from None
        if applied is None or applied < batch_id:
            return False
        log.info(
            "iceberg sink: %s %d of %s skipped: this pipeline's stream committed it before "
            "(a replay after a crash)",
            what,
            batch_id,
            table.name,
        )
        return True

    def applied_batch(
        self, session: SparkSession, table: SinkTable, key: str | None = None
    ) -> int | None:
        """The highest batch id this pipeline committed to the table's current state (under
        ``key``; by default the MERGEs' :attr:`batch_property`)."""
        from pyspark.sql import functions as F

        ident = self.identifier(table)
        lineage = session.table(f"{ident}.history").where("is_current_ancestor")
        row = (
            session.table(f"{ident}.snapshots")
            .join(lineage, "snapshot_id")
            .select(F.max(F.col("summary").getItem(key or self.batch_property).cast("bigint")))
            .first()
        )
        return None if row is None or row[0] is None else int(row[0])

    # -- the metadata applier (Iceberg's schema update API, through Spark SQL) ---------

    def _fields(self, table: SinkTable) -> dict[str, Any]:
        schema = self.spark.sql(f"SELECT * FROM {self.identifier(table)} LIMIT 0").schema
        return {f.name.lower(): f for f in schema.fields}

    def _alter(
        self, table: SinkTable, what: str, statement: str, session: SparkSession | None = None
    ) -> None:
        """Run ``statement`` (on ``self.identifier(table)``), naming ``what`` if it fails."""
        session = session or self.spark
        self._configure(session)
        try:
            session.sql(statement)
        except Exception as exc:
            raise SinkError(
                f"iceberg sink: cannot {what} in {self.identifier(table)}: "
                f"{self._options.redact(_reason(exc))}"
            ) from None

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        if column.name.lower() not in self._fields(table):
            self._alter(
                table,
                f"add column {column.name}",
                f"ALTER TABLE {self.identifier(table)} ADD COLUMN {quote_spark(column.name)} "
                f"{column.spark_type}",
            )

    def drop_column(self, table: SinkTable, name: str) -> None:
        if name.lower() in self._fields(table):
            self._alter(
                table,
                f"drop column {name}",
                f"ALTER TABLE {self.identifier(table)} DROP COLUMN {quote_spark(name)}",
            )

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        fields = self._fields(table)
        if old.lower() in fields and new.lower() not in fields:
            self._alter(
                table,
                f"rename column {old} to {new}",
                f"ALTER TABLE {self.identifier(table)} RENAME COLUMN {quote_spark(old)} "
                f"TO {quote_spark(new)}",
            )

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        # Iceberg widens int → bigint, float → double and a decimal's precision; it refuses
        # anything else, and so does this sink
        self._alter(
            table,
            f"change the type of column {name} to {spark_type}",
            f"ALTER TABLE {self.identifier(table)} ALTER COLUMN {quote_spark(name)} "
            f"TYPE {spark_type}",
        )

    def fill_column(self, table: SinkTable, column: SinkColumn, value: Any) -> None:
        view = f"sparkcdc_fill_{uuid.uuid4().hex}"
        value_frame(self.spark, column, value).createOrReplaceTempView(view)
        try:
            statement = fill_statement(self.identifier(table), view, column.name)
            self._alter(table, f"fill column {column.name}", statement)
        finally:
            self.spark.catalog.dropTempView(view)

    def update_column(self, table: SinkTable, column: SinkColumn, rows: DataFrame) -> None:
        view = f"sparkcdc_fill_{uuid.uuid4().hex}"
        rows.createOrReplaceTempView(view)
        try:
            statement = update_statement(self.identifier(table), view, table, column.name)
            self._alter(table, f"update column {column.name}", statement, rows.sparkSession)
        finally:
            rows.sparkSession.catalog.dropTempView(view)

    def truncate_table(self, table: SinkTable) -> None:
        self._alter(table, "truncate the table", f"DELETE FROM {self.identifier(table)}")

    def drop_table(self, table: SinkTable) -> None:
        self._alter(table, "drop the table", f"DROP TABLE IF EXISTS {self.identifier(table)}")

    # -- helpers ----------------------------------------------------------------------

    def _configure(self, session: SparkSession) -> None:
        for key, value in self._options.catalog_conf().items():
            if session.conf.get(key, None) != value:
                session.conf.set(key, value)

    def _check_warehouse(self) -> None:
        """Fail now, saying what to do, when a local warehouse cannot be written."""
        options = self._options
        folder = options.local_warehouse()
        if folder is None:
            return  # a remote file system: its client judges when the namespace is created
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".sparkcdc-probe-"):
                pass
        except OSError as exc:
            raise SinkError(
                f"iceberg sink: cannot write to the warehouse {folder}: "
                f"{exc.strerror or exc}. Point catalog.properties.warehouse at a directory "
                "this process and Spark's executors can create and write"
            ) from None

    def _check_location(self, table: SinkTable) -> None:
        """Catch a catalog that this session loaded before with another warehouse."""
        options = self._options
        if options.catalog_type != "hadoop":
            return  # a jdbc catalog may keep a table anywhere
        rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {self.identifier(table)}").collect()
        location = next((r[1] for r in rows if r[0] == "Location"), None)
        expected = _strip_file_scheme(options.warehouse_location()).rstrip("/")
        if location is not None and not _strip_file_scheme(location).startswith(expected + "/"):
            raise SinkError(
                f"iceberg sink: table {self.identifier(table)} is at {location}, not under "
                f"the warehouse {expected}: this Spark session set up catalog "
                f"{options.catalog_name!r} earlier with another warehouse (Spark loads a "
                "catalog once per session). Use another catalog.name, or a new session"
            )

    def _advice(self, exc: BaseException) -> str:
        options = self._options
        text = _reason(exc)
        if any(e in text for e in _LINKAGE_ERRORS):
            # e.g. iceberg-spark-runtime-4.1 on Spark 4.2: "class ...SparkView can not
            # implement org.apache.spark.sql.connector.catalog.View" (a class there)
            return (
                f"Iceberg's Spark runtime on the classpath was built for another Spark line "
                f"than this session's (Spark {self.spark.version}). Iceberg publishes "
                "iceberg-spark-runtime for Spark up to 4.1: run the iceberg sink on PySpark "
                "4.1 with the jars jars/pom.xml pins for it (docs/install.md, 'Spark lines')"
            )
        if "No suitable driver" in text or (
            options.catalog_type == "jdbc" and "Failed to connect" in text
        ):
            return (
                "Check catalog.properties.uri, catalog.properties.jdbc.user / .jdbc.password "
                "and that the database is up; the JDBC driver must be on Spark's classpath "
                "(shipped: MariaDB's and PostgreSQL's, for jdbc:mariadb:// and jdbc:postgresql:// "
                "URLs)"
            )
        if options.catalog_type == "jdbc":
            return "Check the catalog database and catalog.properties.warehouse"
        return "Check catalog.properties.warehouse and that it can be written"


# the JVM's errors when a jar meets classes other than those it was compiled against
_LINKAGE_ERRORS = ("IncompatibleClassChangeError", "NoSuchMethodError", "AbstractMethodError")


def safe_uri(uri: str) -> str:
    """A URI without user info or query parameters (which may hold a password).

    >>> safe_uri("jdbc:mariadb://u:pw@db:3306/cat?password=pw")
    'jdbc:mariadb://db:3306/cat'
    """
    text = re.sub(r"//[^/@?]*@", "//", uri)
    return re.split(r"[?;]", text, maxsplit=1)[0]


def _strip_file_scheme(location: str) -> str:
    return re.sub(r"^file:(//)?", "", location)


def _reason(exc: BaseException) -> str:
    """The innermost Java cause of a py4j error, else the exception's first line."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        throwable = java
        while throwable.getCause() is not None:
            throwable = throwable.getCause()
        return f"{throwable.getClass().getSimpleName()}: {throwable.getMessage()}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
