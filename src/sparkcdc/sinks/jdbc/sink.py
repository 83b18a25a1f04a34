"""The jdbc sink: staging per Spark partition, one transaction per batch with its commit row."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from sparkcdc.errors import SinkError
from sparkcdc.model.changelog import DELETED
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.sinks.base import (
    Sink,
    SinkColumn,
    SinkContext,
    SinkOptions,
    SinkTable,
    final_states,
)
from sparkcdc.sinks.jdbc.dialect import (
    DRIVER_ERRORS,
    ROWS_PER_STATEMENT,
    Connection,
    Cursor,
    Dialect,
    chunks,
    open_cursor,
)
from sparkcdc.sinks.jdbc.mysql import MySqlDialect
from sparkcdc.sinks.jdbc.options import (
    Family,
    JdbcOptions,
    JdbcUrl,
)
from sparkcdc.sinks.jdbc.postgres import PostgresDialect
from sparkcdc.sinks.jdbc.types import (
    spark_value,
    target_type,
    utc_wall_time,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


STAGING_PREFIX = "sparkcdc_stage_"  # staging tables: <prefix><append|write>_<digest>
APPEND_WRITER_SUFFIX = "/append"  # commit-table rows of appends: <writer id>/append


def dialect_for(family: Family) -> Dialect:
    return MySqlDialect() if family == "mysql" else PostgresDialect()


@dataclass(frozen=True)
class _TablePlan:
    """The SQL of one sink table, prepared once."""

    target: str  # quoted, qualified target table (statements without parameters)
    display: str  # unquoted, for messages
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    converters: tuple[Callable[[Any], Any] | None, ...]


class JdbcSink(Sink):
    """Upserts the final state of every key of a batch into MySQL, MariaDB or PostgreSQL.

    Guarantee: exactly-once. A batch's upserts and deletes and the row of the commit table
    that records its batch id are written in one database transaction; a batch whose id is
    not above the recorded one is a replay and is skipped. So after any crash the target
    holds each batch either entirely or not at all, and a restart replays what is missing.
    """

    options_model = JdbcOptions
    guarantee = "exactly-once (rows and commit-table row in one transaction per batch)"
    appends = True

    def __init__(self, options: SinkOptions, spark: SparkSession, context: SinkContext) -> None:
        super().__init__(options, spark, context)
        assert isinstance(self.options, JdbcOptions)
        self.jdbc: JdbcOptions = self.options
        self.url = self.jdbc.target
        self._dialect = dialect_for(self.url.family)
        self._conn: Connection | None = None
        self._plans: dict[SinkTable, _TablePlan] = {}
        self._lock = threading.Lock()  # one connection: one transaction at a time

    # -- lifecycle -----------------------------------------------------------------------

    def open(self, tables: Sequence[SinkTable]) -> None:
        self._prepare_tables(tables, commit_table=True)

    def exists(self, table: SinkTable) -> bool:
        with self._lock:
            conn = self._connection()
            try:
                with open_cursor(conn) as cur:
                    found = self._existing_columns(cur, self.jdbc.namespace, table.short_name)
                conn.rollback()
            except DRIVER_ERRORS as exc:
                self._discard(conn)
                raise SinkError(
                    f"jdbc sink: cannot look up {self.jdbc.namespace}.{table.short_name} in "
                    f"{self.url}: {self._clean(exc)}"
                ) from None
        return found is not None

    def has_rows(self, table: SinkTable) -> bool:
        d = self._dialect
        # run without parameters: no '%' doubling
        ref = f"{d.ddl_ident(self.jdbc.namespace)}.{d.ddl_ident(table.short_name)}"
        with self._lock:
            conn = self._connection()
            try:
                with open_cursor(conn) as cur:
                    cur.execute(f"SELECT 1 FROM {ref} LIMIT 1")
                    found = cur.fetchone() is not None
                conn.rollback()
            except DRIVER_ERRORS as exc:
                self._discard(conn)
                raise SinkError(
                    f"jdbc sink: cannot read {ref} in {self.url}: {self._clean(exc)}"
                ) from None
        return found

    def write(
        self, table: SinkTable, changes: DataFrame, batch_id: int, *, size: int | None = None
    ) -> bool:
        if changes.isEmpty():  # e.g. a batch of snapshot inserts only: no staging table
            return True
        plan = self._plan(table)
        final = final_states(changes, table.primary_key)
        frame = final.select(*[quote_spark(c) for c in plan.columns], DELETED)
        return self._stage_and_apply(table, plan, frame, batch_id, append=False)

    def append(self, table: SinkTable, rows: DataFrame, batch_id: int) -> bool:
        from pyspark.sql import functions as F

        if rows.isEmpty():
            return True
        plan = self._plan(table)
        frame = rows.select(*[quote_spark(c) for c in plan.columns], F.lit(False).alias(DELETED))
        return self._stage_and_apply(table, plan, frame, batch_id, append=True)

    def _plan(self, table: SinkTable) -> _TablePlan:
        if table not in self._plans:  # a table not seen in open(), or its columns changed
            self._prepare_tables([table], commit_table=False)
        return self._plans[table]

    def _stage_and_apply(
        self, table: SinkTable, plan: _TablePlan, frame: DataFrame, batch_id: int, *, append: bool
    ) -> bool:
        """Load ``frame`` into the batch's staging table from Spark's tasks, then move it
        into the target in one transaction; False when the commit table had the batch."""
        writer = self.context.writer_id + (APPEND_WRITER_SUFFIX if append else "")
        inserts = "inserts, " if append else ""
        where = (
            f"batch {batch_id} of sink table {table.name} ({inserts}{plan.display} in {self.url})"
        )
        staging = self._staging_ref(writer, table, batch_id, append)
        try:
            try:
                with self._lock:  # a replay skips the Spark work too
                    committed = self._read_committed(table, writer, where)
                if committed is not None and committed >= batch_id:
                    self._log_skip(where, committed, batch_id)
                    return False
                # a staging table a crash left behind is dropped, then refilled from scratch
                self._staging_ddl(where, f"DROP TABLE IF EXISTS {staging}")
                create = self._dialect.create_staging(staging, plan.target, plan.columns)
                self._staging_ddl(where, create)
                rows = sum(self._load(frame, plan, staging, where))
            except SinkError as exc:
                raise SinkError(
                    f"{exc}. Nothing was committed for {where}; a restart of the pipeline "
                    "replays it"
                ) from None
            if rows == 0:
                return True
            with self._lock:
                return self._apply(table, plan, staging, batch_id, writer, where, append, rows)
        finally:
            with contextlib.suppress(SinkError):  # refilled by a replay if it stays
                self._staging_ddl(where, f"DROP TABLE IF EXISTS {staging}")

    def _staging_ref(self, writer: str, table: SinkTable, batch_id: int, append: bool) -> str:
        """The staging table of (writer, sink table, batch): the same name in a replay."""
        key = "\0".join((writer, table.name, str(batch_id)))
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        name = f"{STAGING_PREFIX}{'append' if append else 'write'}_{digest}"
        d = self._dialect
        return f"{d.ddl_ident(self.jdbc.namespace)}.{d.ddl_ident(name)}"

    def _staging_ddl(self, where: str, statement: str) -> None:
        with self._lock:
            self._transaction_at(
                where, "prepare its staging table", lambda cur: cur.execute(statement)
            )

    def _load(
        self, frame: DataFrame, plan: _TablePlan, staging: str, where: str
    ) -> tuple[int, ...]:
        """Load ``frame`` into ``staging`` from Spark's tasks, one connection per partition;
        the rows each partition loaded."""
        loader = _StagingLoader(
            self._dialect,
            self.url,
            self.jdbc.username,
            self.jdbc.password,
            staging,
            (*plan.columns, DELETED),
            (*plan.converters, None),
        )
        # the loader takes columns by position; Spark 4's mapInArrow fails on input column
        # names holding a backtick (INVALID_ATTRIBUTE_NAME_SYNTAX), so they go in unnamed
        positional = frame.toDF(*[f"_c{i}" for i in range(len(frame.columns))])
        try:
            counts = positional.mapInArrow(loader, "rows BIGINT").collect()
        except Exception as exc:  # the task's error, wrapped by Spark
            raise SinkError(
                f"jdbc sink: loading {where} into its staging table failed: "
                f"{self._clean(_task_error(exc))}"
            ) from None
        return tuple(int(r[0]) for r in counts)

    def read_table(self, table: SinkTable) -> DataFrame:
        """The target table's rows, read over the sink's own connection (the sink table's
        declared Spark types; a TIMESTAMP stored as a UTC wall time read back as UTC)."""
        d = self._dialect
        # run without parameters: no '%' doubling
        target = f"{d.ddl_ident(self.jdbc.namespace)}.{d.ddl_ident(table.short_name)}"
        names = ", ".join(d.ddl_ident(c) for c in table.column_names)
        with self._lock:
            conn = self._connection()
            cur = conn.cursor()
            try:
                cur.execute(f"SELECT {names} FROM {target}")
                rows = cur.fetchall()
                conn.commit()
            except DRIVER_ERRORS as exc:
                conn.rollback()
                raise SinkError(
                    f"jdbc sink: cannot read {target} in {self.url}: {self._clean(exc)}"
                ) from None
            finally:
                cur.close()
        readers = [spark_value(c.spark_type) for c in table.columns]
        values = [
            tuple(None if v is None else read(v) for read, v in zip(readers, row, strict=True))
            for row in rows
        ]
        return self.spark.createDataFrame(values, table.spark_ddl().replace(" NOT NULL", ""))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._discard(self._conn)

    def _prepare_tables(self, tables: Sequence[SinkTable], *, commit_table: bool) -> None:
        with self._lock:
            conn = self._connection()
            try:
                with open_cursor(conn) as cur:
                    if commit_table:
                        self._create_commit_table(cur)
                    plans = {table: self._prepare(cur, table) for table in tables}
                conn.commit()
            except DRIVER_ERRORS as exc:
                self._discard(conn)
                names = ", ".join(f"{self.jdbc.namespace}.{t.short_name}" for t in tables)
                raise SinkError(
                    f"jdbc sink: preparing the target tables ({names or 'commit table only'}) "
                    f"in {self.url} failed: {self._clean(exc)}"
                ) from None
            except BaseException:
                self._discard(conn)  # never leave a transaction open on the connection
                raise
            self._plans.update(plans)

    # -- the metadata applier ------------------------------------------------------------

    def _ddl(self, table: SinkTable, what: str, build: Callable[[Cursor, str], list[str]]) -> None:
        """Run the statements ``build(cursor, qualified target)`` returns, in a transaction
        where the database has transactional DDL (PostgreSQL)."""
        d = self._dialect
        target = f"{d.ddl_ident(self.jdbc.namespace)}.{d.ddl_ident(table.short_name)}"

        def run(cur: Cursor) -> None:
            for statement in build(cur, target):
                cur.execute(statement)

        self._transaction(table, what, run)

    def _has_columns(self, cur: Cursor, table: SinkTable) -> set[str]:
        existing = self._existing_columns(cur, self.jdbc.namespace, table.short_name) or []
        return {self._fold(c) for c in existing}

    def _fold(self, column: str) -> str:  # MySQL column names are case-insensitive
        return column.lower() if self._dialect.family == "mysql" else column

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        d = self._dialect
        kind = target_type(column.spark_type, d.family, where=f"{table.name}.{column.name}")

        def build(cur: Cursor, target: str) -> list[str]:
            if self._fold(column.name) in self._has_columns(cur, table):
                return []  # added before a crash: the change is idempotent
            return [f"ALTER TABLE {target} ADD COLUMN {d.ddl_ident(column.name)} {kind}"]

        self._ddl(table, f"add column {column.name}", build)

    def drop_column(self, table: SinkTable, name: str) -> None:
        def build(cur: Cursor, target: str) -> list[str]:
            if self._fold(name) not in self._has_columns(cur, table):
                return []
            return [f"ALTER TABLE {target} DROP COLUMN {self._dialect.ddl_ident(name)}"]

        self._ddl(table, f"drop column {name}", build)

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        d = self._dialect

        def build(cur: Cursor, target: str) -> list[str]:
            have = self._has_columns(cur, table)
            if self._fold(old) not in have or self._fold(new) in have:
                return []
            return [f"ALTER TABLE {target} RENAME COLUMN {d.ddl_ident(old)} TO {d.ddl_ident(new)}"]

        self._ddl(table, f"rename column {old} to {new}", build)

    def alter_column_type(self, table: SinkTable, name: str, spark_type: str) -> None:
        d = self._dialect
        key = name in table.primary_key
        kind = target_type(spark_type, d.family, key=key, where=f"{table.name}.{name}")
        column = d.ddl_ident(name)
        if d.family == "postgresql":
            change = f"ALTER COLUMN {column} TYPE {kind} USING {column}::{kind}"
        else:
            change = f"MODIFY COLUMN {column} {kind}{' NOT NULL' if key else ' NULL'}"
        self._ddl(
            table,
            f"change the type of column {name} to {spark_type}",
            lambda cur, target: [f"ALTER TABLE {target} {change}"],
        )

    def fill_column(self, table: SinkTable, column: SinkColumn, value: Any) -> None:
        d = self._dialect
        name = d.ident(column.name)
        convert = d.converter(column.spark_type)
        param = convert(value) if convert else value

        def run(cur: Cursor, target: str) -> None:
            cur.execute(f"UPDATE {target} SET {name} = %s WHERE {name} IS NULL", (param,))

        self._dml(table, f"fill column {column.name}", run)

    def update_column(self, table: SinkTable, column: SinkColumn, rows: DataFrame) -> None:
        d = self._dialect
        keys = table.primary_key
        arrow = rows.select(*[quote_spark(c) for c in (*keys, column.name)]).toArrow()
        if arrow.num_rows == 0:
            return
        types = {c.name: c.spark_type for c in table.columns}
        values = []
        for name in (column.name, *keys):
            convert = d.converter(types.get(name, column.spark_type))
            data = arrow.column(name).to_pylist()
            values.append([convert(v) for v in data] if convert else data)
        params = list(zip(*values, strict=True))
        where = " AND ".join(f"{d.ident(k)} = %s" for k in keys)

        def run(cur: Cursor, target: str) -> None:
            statement = f"UPDATE {target} SET {d.ident(column.name)} = %s WHERE {where}"
            for chunk in chunks(params, ROWS_PER_STATEMENT):
                cur.executemany(statement, chunk)

        self._dml(table, f"update column {column.name}", run)

    def _dml(self, table: SinkTable, what: str, run: Callable[[Cursor, str], None]) -> None:
        """``run(cursor, qualified target)`` in one transaction."""
        d = self._dialect
        target = f"{d.ident(self.jdbc.namespace)}.{d.ident(table.short_name)}"
        self._transaction(table, what, lambda cur: run(cur, target))

    def _transaction(self, table: SinkTable, what: str, run: Callable[[Cursor], None]) -> None:
        """``run(cursor)`` in one transaction on the sink's connection; a driver error is a
        SinkError naming ``what`` and the table, and the connection is discarded."""
        with self._lock:
            self._transaction_at(
                f"{self.jdbc.namespace}.{table.short_name} ({self.url})", what, run
            )

    def _transaction_at(self, where: str, what: str, run: Callable[[Cursor], Any]) -> None:
        """The body of :meth:`_transaction` (the caller holds the lock)."""
        conn = self._connection()
        try:
            with open_cursor(conn) as cur:
                run(cur)
            conn.commit()
        except DRIVER_ERRORS as exc:
            self._discard(conn)
            raise SinkError(f"jdbc sink: cannot {what} in {where}: {self._clean(exc)}") from None
        except BaseException:
            self._discard(conn)
            raise

    def truncate_table(self, table: SinkTable) -> None:
        self._ddl(table, "truncate the table", lambda cur, target: [f"DELETE FROM {target}"])

    def drop_table(self, table: SinkTable) -> None:
        self._ddl(table, "drop the table", lambda cur, target: [f"DROP TABLE IF EXISTS {target}"])
        self._plans = {t: p for t, p in self._plans.items() if t.name != table.name}

    # -- the transaction -----------------------------------------------------------------

    def _apply(
        self,
        table: SinkTable,
        plan: _TablePlan,
        staging: str,
        batch_id: int,
        writer: str,
        where: str,
        append: bool,
        rows: int,
    ) -> bool:
        """One transaction: staging → target and the commit-table row; False when the
        commit table shows the batch applied before (nothing is written)."""
        try:
            conn = self._connection()
        except SinkError as exc:
            raise SinkError(
                f"{exc}. Nothing was committed for {where}; a restart of the pipeline replays it"
            ) from None
        try:
            with open_cursor(conn) as cur:
                committed = self._committed_batch(cur, table, writer)
                if committed is not None and committed >= batch_id:
                    conn.rollback()
                    self._log_skip(where, committed, batch_id)
                    return False
                if append:
                    cur.execute(self._dialect.insert_from(plan.target, staging, plan.columns))
                else:
                    self._delete_rows(cur, plan, staging)
                    self._upsert_rows(cur, plan, staging)
                self._record_batch(cur, table, batch_id, writer)
        except DRIVER_ERRORS as exc:
            self._discard(conn)
            raise SinkError(
                f"jdbc sink: writing {where} failed: {self._clean(exc)}. Nothing was committed "
                "for this batch (its transaction was rolled back); a restart of the pipeline "
                "replays it"
            ) from None
        except BaseException:
            # never leave half a batch in an open transaction that a later COMMIT would
            # make durable
            self._discard(conn)
            raise
        try:
            conn.commit()
        except DRIVER_ERRORS as exc:
            self._discard(conn)
            raise SinkError(
                f"jdbc sink: the COMMIT of {where} failed: {self._clean(exc)}. The batch was "
                "committed entirely or not at all; a restart of the pipeline replays it and the "
                f"commit table {self.jdbc.commit_table} tells whether it is already applied "
                "(then it is skipped)"
            ) from None
        log.info("jdbc sink: %s applied: %d row(s) staged", where, rows)
        return True

    def _read_committed(self, table: SinkTable, writer: str, where: str) -> int | None:
        """The commit table's batch id of ``writer`` and ``table``, read in a short
        transaction of its own (the caller holds the lock)."""
        found: list[int | None] = []
        self._transaction_at(
            where,
            "read the commit table",
            lambda cur: found.append(self._committed_batch(cur, table, writer, lock=False)),
        )
        return found[0]

    def _committed_batch(
        self, cur: Cursor, table: SinkTable, writer: str, *, lock: bool = True
    ) -> int | None:
        commits = self._commit_table_ref()
        cur.execute(
            f"SELECT batch_id FROM {commits} WHERE pipeline = %s AND sink_table = %s"
            + (" FOR UPDATE" if lock else ""),
            (writer, table.name),
        )
        row = cur.fetchone()
        return None if row is None else int(row[0])

    def _delete_rows(self, cur: Cursor, plan: _TablePlan, staging: str) -> None:
        cur.execute(self._dialect.delete_from(plan.target, staging, plan.keys))

    def _upsert_rows(self, cur: Cursor, plan: _TablePlan, staging: str) -> None:
        cur.execute(self._dialect.upsert_from(plan.target, staging, plan.columns, plan.keys))

    def _record_batch(self, cur: Cursor, table: SinkTable, batch_id: int, writer: str) -> None:
        d = self._dialect
        commits = self._commit_table_ref()
        columns = ("pipeline", "sink_table", "batch_id", "committed_at")
        now = datetime.now(UTC)
        committed_at = utc_wall_time(now) if d.family == "mysql" else now
        cur.execute(
            d.upsert(commits, columns, columns[:2]), (writer, table.name, batch_id, committed_at)
        )

    def _log_skip(self, where: str, committed: int, batch_id: int) -> None:
        if committed == batch_id:
            log.info("jdbc sink: %s was already applied (a replay): skipped", where)
        else:
            log.warning(
                "jdbc sink: %s skipped: the commit table %s records batch %d for this "
                "pipeline's stream (pipeline = %r) and table already: another pipeline runs "
                "with the same name and checkpoint",
                where,
                self.jdbc.commit_table,
                committed,
                self.context.writer_id,
            )

    # -- tables --------------------------------------------------------------------------

    def _commit_table_ref(self) -> str:
        d = self._dialect
        return f"{d.ident(self.jdbc.namespace)}.{d.ident(self.jdbc.commit_table)}"

    def _create_commit_table(self, cur: Cursor) -> None:
        d = self._dialect
        if d.family == "postgresql" and self.jdbc.table_create:
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {d.ddl_ident(self.jdbc.namespace)}")
        ref = f"{d.ddl_ident(self.jdbc.namespace)}.{d.ddl_ident(self.jdbc.commit_table)}"
        # VARCHAR(255) keys: a MySQL key must be bounded (see MYSQL_KEY_TYPES)
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {ref} ("
            "pipeline VARCHAR(255) NOT NULL, sink_table VARCHAR(255) NOT NULL, "
            f"batch_id BIGINT NOT NULL, committed_at {d.timestamp_type()} NOT NULL, "
            f"PRIMARY KEY (pipeline, sink_table)){d.create_table_suffix()}"
        )

    def _prepare(self, cur: Cursor, table: SinkTable) -> _TablePlan:
        """Create the target table if missing (or check it fits) and build its SQL."""
        d = self._dialect
        namespace, name = self.jdbc.namespace, table.short_name
        display = f"{namespace}.{name}"
        if not table.primary_key:
            raise SinkError(
                f"jdbc sink: sink table {table.name} has no primary key; the sink upserts by "
                "key. Give the table a primary key (route / transform 'primary-keys')"
            )
        by_name = {c.name: c for c in table.columns}
        missing_keys = [k for k in table.primary_key if k not in by_name]
        if missing_keys:
            raise SinkError(
                f"jdbc sink: primary key column(s) {', '.join(missing_keys)} of sink table "
                f"{table.name} are not among its columns ({', '.join(by_name)})"
            )
        existing = self._existing_columns(cur, namespace, name)
        if existing is None:
            if not self.jdbc.table_create:
                raise SinkError(
                    f"jdbc sink: target table {display} does not exist in {self.url}; create "
                    "it, or set table.create: true to let the sink create it"
                )
            cur.execute(self._create_table_sql(table, namespace, name))
        else:
            self._check_existing(cur, table, namespace, name, existing)
        return _TablePlan(
            target=f"{d.ddl_ident(namespace)}.{d.ddl_ident(name)}",
            display=display,
            columns=table.column_names,
            keys=table.primary_key,
            converters=tuple(d.converter(c.spark_type) for c in table.columns),
        )

    def _create_table_sql(self, table: SinkTable, namespace: str, name: str) -> str:
        d = self._dialect
        keys = set(table.primary_key)

        def column(c: SinkColumn) -> str:
            kind = target_type(
                c.spark_type, d.family, key=c.name in keys, where=f"{table.name}.{c.name}"
            )
            null = " NOT NULL" if c.name in keys or not c.nullable else ""
            return f"{d.ddl_ident(c.name)} {kind}{null}"

        body = ", ".join(
            [column(c) for c in table.columns]
            + [f"PRIMARY KEY ({', '.join(d.ddl_ident(k) for k in table.primary_key)})"]
        )
        return (
            f"CREATE TABLE IF NOT EXISTS {d.ddl_ident(namespace)}.{d.ddl_ident(name)} "
            f"({body}){d.create_table_suffix()}"
        )

    def _existing_columns(self, cur: Cursor, namespace: str, name: str) -> list[str] | None:
        cur.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s",
            (namespace, name),
        )
        names = [str(r[0]) for r in cur.fetchall()]
        return names or None

    def _check_existing(
        self, cur: Cursor, table: SinkTable, namespace: str, name: str, existing: list[str]
    ) -> None:
        display = f"{namespace}.{name}"
        fold = self._fold
        have = {fold(c) for c in existing}
        missing = [c for c in table.column_names if fold(c) not in have]
        if missing:
            raise SinkError(
                f"jdbc sink: target table {display} in {self.url} lacks column(s) "
                f"{', '.join(missing)} of sink table {table.name}; add them (ALTER TABLE) or "
                "drop the target table to let the sink create it"
            )
        cur.execute(
            "SELECT k.column_name FROM information_schema.table_constraints t "
            "JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name "
            "AND k.table_schema = t.table_schema AND k.table_name = t.table_name "
            "WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_schema = %s "
            "AND t.table_name = %s",
            (namespace, name),
        )
        target_key = {fold(str(r[0])) for r in cur.fetchall()}
        if target_key != {fold(k) for k in table.primary_key}:
            raise SinkError(
                f"jdbc sink: target table {display} in {self.url} has primary key "
                f"({', '.join(sorted(target_key)) or 'none'}), but sink table {table.name} is "
                f"keyed by ({', '.join(table.primary_key)}); upserts need the same key. Change "
                "the target's primary key or drop the table to let the sink create it"
            )

    # -- connections ---------------------------------------------------------------------

    def _connection(self) -> Connection:
        password = self.jdbc.password.get_secret_value() if self.jdbc.password else None
        if self._conn is not None and not self._dialect.is_alive(self._conn):
            self._discard(self._conn)  # e.g. the server closed an idle connection
        try:
            if self._conn is None:
                self._conn = self._dialect.connect(self.url, self.jdbc.username, password)
        except DRIVER_ERRORS as exc:
            self._conn = None
            raise SinkError(
                f"jdbc sink: the target {self.url} is not reachable as user "
                f"{self.jdbc.username or '(none)'}: {self._clean(exc)}. Check that the server "
                "runs and listens on that host and port, that the database exists, and that "
                "'username' / 'password' are right and the user may connect"
            ) from None
        return self._conn

    def _discard(self, conn: Connection) -> None:
        """Roll back and drop a connection after an error (the next write reconnects)."""
        for action in (conn.rollback, conn.close):
            with contextlib.suppress(Exception):  # it may be broken already
                action()
        self._conn = None

    def _clean(self, exc: BaseException | str) -> str:
        """The driver's message, with the password blanked should it ever appear."""
        text = exc if isinstance(exc, str) else (str(exc).strip() or type(exc).__name__)
        if self.jdbc.password is not None:
            secret = self.jdbc.password.get_secret_value()
            if secret:
                text = text.replace(secret, "**********")
        return text


@dataclass(frozen=True)
class _StagingLoader:
    """A ``mapInArrow`` function: loads the rows of one Spark partition into the staging
    table over a connection of its own and yields their count. It travels to the executors
    pickled; the password stays a SecretStr on the way."""

    dialect: Dialect
    url: JdbcUrl
    user: str | None
    password: SecretStr | None
    staging: str
    columns: tuple[str, ...]
    converters: tuple[Callable[[Any], Any] | None, ...]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        counted = [0]

        def rows() -> Iterator[tuple[Any, ...]]:
            for batch in batches:
                counted[0] += batch.num_rows
                yield from _arrow_rows(batch, self.converters)

        pending = rows()
        first = next(pending, None)
        if first is not None:  # an empty partition opens no connection
            self._load(itertools.chain([first], pending))
        yield pa.RecordBatch.from_pydict({"rows": [counted[0]]}, pa.schema([("rows", pa.int64())]))

    def _load(self, rows: Iterator[tuple[Any, ...]]) -> None:
        password = self.password.get_secret_value() if self.password else None
        try:
            conn = self.dialect.connect(self.url, self.user, password)
            try:
                self.dialect.load(conn, self.staging, self.columns, rows)
                conn.commit()
            finally:
                conn.close()
        except DRIVER_ERRORS as exc:  # as text: a driver's exception may not pickle
            text = str(exc).strip() or type(exc).__name__
            if password:
                text = text.replace(password, "**********")
            raise SinkError(f"{type(exc).__name__}: {text}") from None


def _arrow_rows(
    arrow: pa.RecordBatch | pa.Table, converters: Sequence[Callable[[Any], Any] | None]
) -> Iterator[tuple[Any, ...]]:
    """The rows of ``arrow`` as tuples, each column through its converter (if any)."""
    columns = []
    for i, convert in enumerate(converters):
        values = arrow.column(i).to_pylist()
        columns.append([convert(v) for v in values] if convert else values)
    return zip(*columns, strict=True)


def _task_error(exc: BaseException) -> str:
    """The message a Spark task's Python error ended with (Spark wraps it in a traceback)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    marked = [line for line in lines if "SinkError: " in line]
    if marked:
        return marked[-1].split("SinkError: ", 1)[1]
    return lines[-1] if lines else type(exc).__name__
