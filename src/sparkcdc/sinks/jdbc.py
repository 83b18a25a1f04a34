"""``type: jdbc``: keeps tables in MySQL, MariaDB or PostgreSQL up to date with the source.

Option names follow Flink's JDBC connector::

    sink:
      type: jdbc
      url: jdbc:postgresql://db.example.com:5432/analytics   # or jdbc:mysql:// / jdbc:mariadb://
      username: cdc
      password: ${PG_PASSWORD}
      schema: public                  # PostgreSQL only; MySQL's target is the url's database
      table.create: true              # create missing tables from the sink table's columns
      sink.commit-table: sparkcdc_commits

Every sink table lands in a target table of its short name (``app_db.orders`` → ``orders``).
Per batch the sink collects the last change of every key (:func:`final_states`) to the driver
and applies it in one transaction together with a row of the *commit table*, which records the
last batch id applied per (pipeline's writer id, sink table); a replayed batch finds its id
there and is skipped. The writer id (``SinkContext.writer_id``: name ``@`` run id) is new with
every new checkpoint, so a new stream's batch ids never meet an old stream's record. Python
drivers (pymysql, psycopg) do the writing, so no JDBC jar is needed: the URL only names the
target.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol
from urllib.parse import urlsplit

import psycopg
import pymysql
from pydantic import Field, SecretStr, model_validator

from sparkcdc.errors import ConfigError, SinkError
from sparkcdc.sinks.base import (
    DELETED,
    Sink,
    SinkColumn,
    SinkContext,
    SinkOptions,
    SinkTable,
    final_states,
)
from sparkcdc.sinks.base import quote as spark_quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
ROWS_PER_STATEMENT = 1000  # rows per executemany call / per DELETE ... IN (...)

Family = Literal["mysql", "postgresql"]
# URL scheme -> the SQL dialect spoken (MariaDB speaks MySQL's)
SCHEMES: dict[str, Family] = {"mysql": "mysql", "mariadb": "mysql", "postgresql": "postgresql"}
DEFAULT_PORTS: dict[Family, int] = {"mysql": 3306, "postgresql": 5432}


@dataclass(frozen=True)
class JdbcUrl:
    """The parts of a ``jdbc:<scheme>://host[:port]/database`` URL the sink uses.

    >>> JdbcUrl.parse("jdbc:mariadb://db:3307/shop")
    JdbcUrl(scheme='mariadb', host='db', port=3307, database='shop')
    >>> JdbcUrl.parse("jdbc:postgresql://db/shop").port
    5432
    """

    scheme: str
    host: str
    port: int
    database: str

    @property
    def family(self) -> Family:
        return SCHEMES[self.scheme]

    @classmethod
    def parse(cls, url: str, *, where: str = "sink.url") -> JdbcUrl:
        # Messages name the scheme, host and port at most: a URL may carry credentials.
        supported = ", ".join(f"jdbc:{s}://host:port/database" for s in SCHEMES)
        if not url.startswith("jdbc:"):
            raise ConfigError(
                f"{where}: a JDBC URL starts with 'jdbc:', e.g. 'jdbc:mysql://host:3306/db'; "
                f"supported: {supported}"
            )
        scheme = url[5:].partition(":")[0].lower()
        if scheme not in SCHEMES:
            shown = scheme if re.fullmatch(r"[a-z0-9+.-]{1,20}", scheme) else "(unreadable)"
            raise ConfigError(
                f"{where}: the jdbc sink does not support URL scheme 'jdbc:{shown}'; "
                f"supported: {supported}"
            )
        parts = urlsplit(url[5:])
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"{where}: put the credentials in the sink's 'username' and 'password' options, "
                "not in the URL (a URL ends up in logs)"
            )
        if parts.query or ";" in parts.path:
            names = sorted(
                {p.partition("=")[0] for p in re.split(r"[&;]", parts.query) if "=" in p}
                | {p.partition("=")[0] for p in parts.path.split(";")[1:] if "=" in p}
            )
            raise ConfigError(
                f"{where}: driver properties in the URL are not supported (got "
                f"{', '.join(names)}); the sink writes with a Python driver: give only "
                f"jdbc:{scheme}://host:port/database"
            )
        try:
            port = parts.port
        except ValueError:
            port = -1
        database = parts.path.lstrip("/")
        if (
            not parts.hostname
            or "," in parts.netloc
            or port == -1
            or not database
            or "/" in database
        ):
            raise ConfigError(
                f"{where}: expected jdbc:{scheme}://host[:port]/database with one host, a "
                f"numeric port and a database name"
            )
        family = SCHEMES[scheme]
        return cls(scheme, parts.hostname, port or DEFAULT_PORTS[family], database)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"jdbc:{self.scheme}://{host}:{self.port}/{self.database}"


class JdbcOptions(SinkOptions):
    """Options of ``type: jdbc`` (names after Flink's JDBC connector)."""

    url: str
    username: str | None = None
    password: SecretStr | None = None
    schema_name: str | None = Field(None, alias="schema", description="PostgreSQL schema")
    table_create: bool = Field(True, alias="table.create")
    commit_table: str = Field("sparkcdc_commits", alias="sink.commit-table", min_length=1)

    @model_validator(mode="after")
    def _check(self) -> JdbcOptions:
        # ConfigError passes through pydantic unchanged (it is no ValueError)
        target = self.target
        if self.schema_name is not None and target.family != "postgresql":
            raise ConfigError(
                f"sink.schema applies to PostgreSQL targets only; a {target.scheme} target's "
                f"tables go into the URL's database ({target.database!r}): remove 'schema'"
            )
        return self

    @property
    def target(self) -> JdbcUrl:
        return JdbcUrl.parse(self.url)

    @property
    def namespace(self) -> str:
        """Where target tables live: the PostgreSQL schema or the MySQL database."""
        if self.target.family == "postgresql":
            return self.schema_name or "public"
        return self.target.database


# -- type mapping ------------------------------------------------------------------------

# Spark DDL type -> (MySQL / MariaDB, PostgreSQL). DECIMAL(p,s) maps to itself in both.
TYPE_MAP: dict[str, tuple[str, str]] = {
    "BOOLEAN": ("BOOLEAN", "boolean"),
    "TINYINT": ("TINYINT", "smallint"),  # PostgreSQL has no one-byte integer
    "SMALLINT": ("SMALLINT", "smallint"),
    "INT": ("INT", "integer"),
    "BIGINT": ("BIGINT", "bigint"),
    "FLOAT": ("FLOAT", "real"),
    "DOUBLE": ("DOUBLE", "double precision"),
    "STRING": ("LONGTEXT", "text"),
    "BINARY": ("LONGBLOB", "bytea"),
    "DATE": ("DATE", "date"),
    # MySQL's TIMESTAMP ends in 2038 and shifts by the session time zone: store the UTC
    # wall time in a DATETIME instead.
    "TIMESTAMP": ("DATETIME(6)", "timestamp(6) with time zone"),
    "TIMESTAMP_NTZ": ("DATETIME(6)", "timestamp(6) without time zone"),
}
# InnoDB cannot index TEXT / BLOB without a prefix length, and a key is at most 3072 bytes:
# key columns get a bounded type (255 utf8mb4 characters = 1020 bytes, so up to three string
# columns fit in one key). Binary collation: keys compare as Spark compares them ('a' != 'A').
MYSQL_KEY_TYPES = {
    "STRING": "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    "BINARY": "VARBINARY(255)",
}
# other spellings Spark's DDL parser accepts
_ALIASES = {
    "BYTE": "TINYINT",
    "SHORT": "SMALLINT",
    "INTEGER": "INT",
    "LONG": "BIGINT",
    "REAL": "FLOAT",
    "TIMESTAMP_LTZ": "TIMESTAMP",
}
_DECIMAL_RE = re.compile(r"^(?:DECIMAL|DEC|NUMERIC)(?:\((\d+)(?:,(\d+))?\))?$")


def target_type(spark_type: str, family: Family, *, key: bool = False, where: str = "") -> str:
    """The target column type of a Spark DDL type.

    >>> target_type("DECIMAL(10,2)", "postgresql")
    'numeric(10,2)'
    >>> target_type("STRING", "mysql", key=True)
    'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin'
    """
    name = re.sub(r"\s+", "", spark_type).upper()
    name = _ALIASES.get(name, name)
    decimal = _DECIMAL_RE.match(name)
    if decimal:
        precision, scale = int(decimal.group(1) or 10), int(decimal.group(2) or 0)
        return f"{'DECIMAL' if family == 'mysql' else 'numeric'}({precision},{scale})"
    if family == "mysql" and key and name in MYSQL_KEY_TYPES:
        return MYSQL_KEY_TYPES[name]
    if name not in TYPE_MAP:
        raise SinkError(
            f"jdbc sink: column {where or '?'} has Spark type {spark_type}, which has no "
            f"{family} column type here; supported: {', '.join([*TYPE_MAP, 'DECIMAL(p,s)'])}. "
            "Cast it in a transform (e.g. to STRING)"
        )
    return TYPE_MAP[name][0 if family == "mysql" else 1]


# -- SQL dialects --------------------------------------------------------------------------


class _Cursor(Protocol):
    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Any: ...
    def executemany(self, query: str, params: Sequence[Sequence[Any]], /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> Any: ...
    def close(self) -> Any: ...


class _Connection(Protocol):
    def cursor(self) -> Any: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...


_DRIVER_ERRORS: tuple[type[Exception], ...] = (pymysql.MySQLError, psycopg.Error)


class _Dialect(ABC):
    """What differs between MySQL and PostgreSQL: connecting, quoting, upsert, value shapes."""

    family: ClassVar[Family]
    quote_char: ClassVar[str]

    def ident(self, name: str) -> str:
        # '%' doubled: these strings run with parameters in %s style (both drivers)
        q = self.quote_char
        return q + name.replace(q, q + q).replace("%", "%%") + q

    def ddl_ident(self, name: str) -> str:
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    @abstractmethod
    def connect(self, url: JdbcUrl, user: str | None, password: str | None) -> _Connection: ...

    @abstractmethod
    def is_alive(self, conn: _Connection) -> bool:
        """Whether ``conn`` still works (asked before a transaction starts)."""

    @abstractmethod
    def timestamp_type(self) -> str: ...

    @abstractmethod
    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        """An INSERT of one row (``%s`` placeholders) that updates the row of an existing key."""

    def create_table_suffix(self) -> str:
        return ""

    def converter(self, spark_type: str) -> Callable[[Any], Any] | None:
        return None


class _MySqlDialect(_Dialect):
    family = "mysql"
    quote_char = "`"

    def connect(self, url: JdbcUrl, user: str | None, password: str | None) -> _Connection:
        return pymysql.connect(
            host=url.host,
            port=url.port,
            user=user,
            password=password or "",
            database=url.database,
            connect_timeout=CONNECT_TIMEOUT_S,
            charset="utf8mb4",
            autocommit=False,
            init_command="SET time_zone = '+00:00'",
        )

    def is_alive(self, conn: _Connection) -> bool:
        assert isinstance(conn, pymysql.connections.Connection)
        try:
            conn.ping(reconnect=False)
        except pymysql.MySQLError:
            return False
        return True

    def create_table_suffix(self) -> str:
        return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"

    def timestamp_type(self) -> str:
        return "DATETIME(6)"

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        values = [c for c in columns if c not in keys] or list(keys[:1])
        # VALUES(col), not the row-alias syntax: MariaDB has no row alias
        updates = ", ".join(f"{self.ident(c)} = VALUES({self.ident(c)})" for c in values)
        return (
            f"INSERT INTO {table} ({', '.join(self.ident(c) for c in columns)}) "
            f"VALUES ({', '.join('%s' for _ in columns)}) ON DUPLICATE KEY UPDATE {updates}"
        )

    def converter(self, spark_type: str) -> Callable[[Any], Any] | None:
        if spark_type.strip().upper() in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            return _utc_wall_time
        return None


class _PostgresDialect(_Dialect):
    family = "postgresql"
    quote_char = '"'

    def connect(self, url: JdbcUrl, user: str | None, password: str | None) -> _Connection:
        return psycopg.connect(
            host=url.host,
            port=url.port,
            user=user,
            password=password,
            dbname=url.database,
            connect_timeout=CONNECT_TIMEOUT_S,
            autocommit=False,
        )

    def is_alive(self, conn: _Connection) -> bool:
        assert isinstance(conn, psycopg.Connection)
        if conn.closed or conn.broken:
            return False
        try:
            conn.execute("SELECT 1")  # opens the transaction the write then goes on with
        except psycopg.Error:
            return False
        return True

    def timestamp_type(self) -> str:
        return "timestamp(6) with time zone"

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        values = [c for c in columns if c not in keys]
        action = (
            "DO UPDATE SET "
            + ", ".join(f"{self.ident(c)} = EXCLUDED.{self.ident(c)}" for c in values)
            if values
            else "DO NOTHING"
        )
        return (
            f"INSERT INTO {table} ({', '.join(self.ident(c) for c in columns)}) "
            f"VALUES ({', '.join('%s' for _ in columns)}) "
            f"ON CONFLICT ({', '.join(self.ident(k) for k in keys)}) {action}"
        )


def _utc_wall_time(value: Any) -> Any:
    """An aware datetime as naive UTC (MySQL DATETIME has no zone); None stays None."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _spark_value(spark_type: str) -> Callable[[Any], Any]:
    """How a value a target driver returns becomes the Spark value of ``spark_type``."""
    if spark_type == "BOOLEAN":
        return bool
    if spark_type == "BINARY":
        return bytes
    if spark_type == "TIMESTAMP":
        return lambda v: v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    return lambda v: v


def _dialect(family: Family) -> _Dialect:
    return _MySqlDialect() if family == "mysql" else _PostgresDialect()


# -- the sink ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TablePlan:
    """The SQL of one sink table, prepared once."""

    target: str  # quoted, qualified target table (for DML)
    display: str  # unquoted, for messages
    columns: tuple[str, ...]
    key_positions: tuple[int, ...]
    upsert_sql: str
    delete_prefix: str  # DELETE FROM t WHERE (k1, k2) IN
    delete_row: str  # (%s, %s) or %s
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

    def __init__(self, options: SinkOptions, spark: SparkSession, context: SinkContext) -> None:
        super().__init__(options, spark, context)
        assert isinstance(self.options, JdbcOptions)
        self.jdbc: JdbcOptions = self.options
        self.url = self.jdbc.target
        self._dialect = _dialect(self.url.family)
        self._conn: _Connection | None = None
        self._plans: dict[SinkTable, _TablePlan] = {}
        self._lock = threading.Lock()  # one connection: one transaction at a time

    # -- lifecycle -----------------------------------------------------------------------

    def open(self, tables: Sequence[SinkTable]) -> None:
        self._prepare_tables(tables, commit_table=True)

    def has_rows(self, table: SinkTable) -> bool:
        d = self._dialect
        ref = f"{d.ident(self.jdbc.namespace)}.{d.ident(table.short_name)}"
        with self._lock:
            conn = self._connection()
            try:
                with _cursor(conn) as cur:
                    cur.execute(f"SELECT 1 FROM {ref} LIMIT 1")
                    found = cur.fetchone() is not None
                conn.rollback()
            except _DRIVER_ERRORS as exc:
                self._discard(conn)
                raise SinkError(
                    f"jdbc sink: cannot read {ref} in {self.url}: {self._clean(exc)}"
                ) from None
        return found

    def write(self, table: SinkTable, changes: DataFrame, batch_id: int) -> bool:
        if table not in self._plans:  # a table not seen in open(), or its columns changed
            self._prepare_tables([table], commit_table=False)
        plan = self._plans[table]
        # Spark work first, outside the transaction: the locks are held for the SQL only.
        frame = final_states(changes, table.primary_key).select(
            *[spark_quote(c) for c in plan.columns], DELETED
        )
        arrow = frame.toArrow()
        if arrow.num_rows == 0:
            return True
        columns = []
        for i, convert in enumerate(plan.converters):
            values = arrow.column(i).to_pylist()
            columns.append([convert(v) for v in values] if convert else values)
        upserts: list[tuple[Any, ...]] = []
        deletes: list[tuple[Any, ...]] = []
        flags = arrow.column(DELETED).to_pylist()
        for row, deleted in zip(zip(*columns, strict=True), flags, strict=True):
            if deleted:
                deletes.append(tuple(row[i] for i in plan.key_positions))
            else:
                upserts.append(row)
        with self._lock:
            return self._apply(table, plan, upserts, deletes, batch_id)

    def read_table(self, table: SinkTable) -> DataFrame:
        """The target table's rows, read over the sink's own connection (the sink table's
        declared Spark types; a TIMESTAMP stored as a UTC wall time read back as UTC)."""
        d = self._dialect
        target = f"{d.ident(self.jdbc.namespace)}.{d.ident(table.short_name)}"
        names = ", ".join(d.ident(c) for c in table.column_names)
        with self._lock:
            conn = self._connection()
            cur = conn.cursor()
            try:
                cur.execute(f"SELECT {names} FROM {target}")
                rows = cur.fetchall()
                conn.commit()
            except _DRIVER_ERRORS as exc:
                conn.rollback()
                raise SinkError(
                    f"jdbc sink: cannot read {target} in {self.url}: {self._clean(exc)}"
                ) from None
            finally:
                cur.close()
        readers = [_spark_value(c.spark_type) for c in table.columns]
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
                with _cursor(conn) as cur:
                    if commit_table:
                        self._create_commit_table(cur)
                    plans = {table: self._prepare(cur, table) for table in tables}
                conn.commit()
            except _DRIVER_ERRORS as exc:
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

    def _ddl(self, table: SinkTable, what: str, build: Callable[[_Cursor, str], list[str]]) -> None:
        """Run the statements ``build(cursor, qualified target)`` returns, in a transaction
        where the database has transactional DDL (PostgreSQL)."""
        d = self._dialect
        target = f"{d.ddl_ident(self.jdbc.namespace)}.{d.ddl_ident(table.short_name)}"

        def run(cur: _Cursor) -> None:
            for statement in build(cur, target):
                cur.execute(statement)

        self._transaction(table, what, run)

    def _has_columns(self, cur: _Cursor, table: SinkTable) -> set[str]:
        existing = self._existing_columns(cur, self.jdbc.namespace, table.short_name) or []
        return {self._fold(c) for c in existing}

    def _fold(self, column: str) -> str:  # MySQL column names are case-insensitive
        return column.lower() if self._dialect.family == "mysql" else column

    def add_column(self, table: SinkTable, column: SinkColumn) -> None:
        d = self._dialect
        kind = target_type(column.spark_type, d.family, where=f"{table.name}.{column.name}")

        def build(cur: _Cursor, target: str) -> list[str]:
            if self._fold(column.name) in self._has_columns(cur, table):
                return []  # added before a crash: the change is idempotent
            return [f"ALTER TABLE {target} ADD COLUMN {d.ddl_ident(column.name)} {kind}"]

        self._ddl(table, f"add column {column.name}", build)

    def drop_column(self, table: SinkTable, name: str) -> None:
        def build(cur: _Cursor, target: str) -> list[str]:
            if self._fold(name) not in self._has_columns(cur, table):
                return []
            return [f"ALTER TABLE {target} DROP COLUMN {self._dialect.ddl_ident(name)}"]

        self._ddl(table, f"drop column {name}", build)

    def rename_column(self, table: SinkTable, old: str, new: str) -> None:
        d = self._dialect

        def build(cur: _Cursor, target: str) -> list[str]:
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

        def run(cur: _Cursor, target: str) -> None:
            cur.execute(f"UPDATE {target} SET {name} = %s WHERE {name} IS NULL", (param,))

        self._dml(table, f"fill column {column.name}", run)

    def update_column(self, table: SinkTable, column: SinkColumn, rows: DataFrame) -> None:
        d = self._dialect
        keys = table.primary_key
        arrow = rows.select(*[spark_quote(c) for c in (*keys, column.name)]).toArrow()
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

        def run(cur: _Cursor, target: str) -> None:
            statement = f"UPDATE {target} SET {d.ident(column.name)} = %s WHERE {where}"
            for chunk in _chunks(params, ROWS_PER_STATEMENT):
                cur.executemany(statement, chunk)

        self._dml(table, f"update column {column.name}", run)

    def _dml(self, table: SinkTable, what: str, run: Callable[[_Cursor, str], None]) -> None:
        """``run(cursor, qualified target)`` in one transaction."""
        d = self._dialect
        target = f"{d.ident(self.jdbc.namespace)}.{d.ident(table.short_name)}"
        self._transaction(table, what, lambda cur: run(cur, target))

    def _transaction(self, table: SinkTable, what: str, run: Callable[[_Cursor], None]) -> None:
        """``run(cursor)`` in one transaction on the sink's connection; a driver error is a
        SinkError naming ``what`` and the table, and the connection is discarded."""
        with self._lock:
            conn = self._connection()
            try:
                with _cursor(conn) as cur:
                    run(cur)
                conn.commit()
            except _DRIVER_ERRORS as exc:
                self._discard(conn)
                raise SinkError(
                    f"jdbc sink: cannot {what} in {self.jdbc.namespace}.{table.short_name} "
                    f"({self.url}): {self._clean(exc)}"
                ) from None
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
        upserts: Sequence[tuple[Any, ...]],
        deletes: Sequence[tuple[Any, ...]],
        batch_id: int,
    ) -> bool:
        """One transaction: the batch's rows and its commit-table row; False when the
        commit table shows the batch applied before (nothing is written)."""
        where = f"batch {batch_id} of sink table {table.name} ({plan.display} in {self.url})"
        try:
            conn = self._connection()
        except SinkError as exc:
            raise SinkError(
                f"{exc}. Nothing was committed for {where}; a restart of the pipeline replays it"
            ) from None
        try:
            with _cursor(conn) as cur:
                committed = self._committed_batch(cur, table)
                if committed is not None and committed >= batch_id:
                    conn.rollback()
                    self._log_skip(where, committed, batch_id)
                    return False
                self._delete_rows(cur, plan, deletes)
                self._upsert_rows(cur, plan, upserts)
                self._record_batch(cur, table, batch_id)
        except _DRIVER_ERRORS as exc:
            self._discard(conn)
            raise SinkError(
                f"jdbc sink: writing {where} failed: {self._clean(exc)}. Nothing was committed "
                "for this batch (its transaction was rolled back); a restart of the pipeline "
                "replays it"
            ) from None
        except BaseException:
            # e.g. a value the driver cannot adapt: never leave half a batch in an open
            # transaction that a later COMMIT would make durable
            self._discard(conn)
            raise
        try:
            conn.commit()
        except _DRIVER_ERRORS as exc:
            self._discard(conn)
            raise SinkError(
                f"jdbc sink: the COMMIT of {where} failed: {self._clean(exc)}. The batch was "
                "committed entirely or not at all; a restart of the pipeline replays it and the "
                f"commit table {self.jdbc.commit_table} tells whether it is already applied "
                "(then it is skipped)"
            ) from None
        log.info(
            "jdbc sink: %s applied: %d upserted, %d deleted", where, len(upserts), len(deletes)
        )
        return True

    def _committed_batch(self, cur: _Cursor, table: SinkTable) -> int | None:
        commits = self._commit_table_ref()
        cur.execute(
            f"SELECT batch_id FROM {commits} WHERE pipeline = %s AND sink_table = %s FOR UPDATE",
            (self.context.writer_id, table.name),
        )
        row = cur.fetchone()
        return None if row is None else int(row[0])

    def _delete_rows(self, cur: _Cursor, plan: _TablePlan, keys: Sequence[tuple[Any, ...]]) -> None:
        for chunk in _chunks(keys, ROWS_PER_STATEMENT):
            placeholders = ", ".join(plan.delete_row for _ in chunk)
            cur.execute(f"{plan.delete_prefix} ({placeholders})", [v for key in chunk for v in key])

    def _upsert_rows(self, cur: _Cursor, plan: _TablePlan, rows: Sequence[tuple[Any, ...]]) -> None:
        for chunk in _chunks(rows, ROWS_PER_STATEMENT):
            cur.executemany(plan.upsert_sql, chunk)

    def _record_batch(self, cur: _Cursor, table: SinkTable, batch_id: int) -> None:
        d = self._dialect
        commits = self._commit_table_ref()
        columns = ("pipeline", "sink_table", "batch_id", "committed_at")
        now = datetime.now(UTC)
        committed_at = _utc_wall_time(now) if d.family == "mysql" else now
        cur.execute(
            d.upsert(commits, columns, columns[:2]),
            (self.context.writer_id, table.name, batch_id, committed_at),
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

    def _create_commit_table(self, cur: _Cursor) -> None:
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

    def _prepare(self, cur: _Cursor, table: SinkTable) -> _TablePlan:
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
        keys = table.primary_key
        target = f"{d.ident(namespace)}.{d.ident(name)}"
        key_list = ", ".join(d.ident(k) for k in keys)
        return _TablePlan(
            target=target,
            display=display,
            columns=table.column_names,
            key_positions=tuple(table.column_names.index(k) for k in keys),
            upsert_sql=d.upsert(target, table.column_names, keys),
            delete_prefix=(
                f"DELETE FROM {target} WHERE "
                + (f"({key_list}) IN" if len(keys) > 1 else f"{key_list} IN")
            ),
            delete_row="(" + ", ".join("%s" for _ in keys) + ")" if len(keys) > 1 else "%s",
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

    def _existing_columns(self, cur: _Cursor, namespace: str, name: str) -> list[str] | None:
        cur.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s",
            (namespace, name),
        )
        names = [str(r[0]) for r in cur.fetchall()]
        return names or None

    def _check_existing(
        self, cur: _Cursor, table: SinkTable, namespace: str, name: str, existing: list[str]
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

    def _connection(self) -> _Connection:
        password = self.jdbc.password.get_secret_value() if self.jdbc.password else None
        if self._conn is not None and not self._dialect.is_alive(self._conn):
            self._discard(self._conn)  # e.g. the server closed an idle connection
        try:
            if self._conn is None:
                self._conn = self._dialect.connect(self.url, self.jdbc.username, password)
        except _DRIVER_ERRORS as exc:
            self._conn = None
            raise SinkError(
                f"jdbc sink: the target {self.url} is not reachable as user "
                f"{self.jdbc.username or '(none)'}: {self._clean(exc)}. Check that the server "
                "runs and listens on that host and port, that the database exists, and that "
                "'username' / 'password' are right and the user may connect"
            ) from None
        return self._conn

    def _discard(self, conn: _Connection) -> None:
        """Roll back and drop a connection after an error (the next write reconnects)."""
        for action in (conn.rollback, conn.close):
            with contextlib.suppress(Exception):  # it may be broken already
                action()
        self._conn = None

    def _clean(self, exc: BaseException) -> str:
        """The driver's message, with the password blanked should it ever appear."""
        text = str(exc).strip() or type(exc).__name__
        if self.jdbc.password is not None:
            secret = self.jdbc.password.get_secret_value()
            if secret:
                text = text.replace(secret, "**********")
        return text


class _CursorContext:
    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def __enter__(self) -> _Cursor:
        cursor: _Cursor = self.cursor
        return cursor

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # a cursor of a dead connection
            self.cursor.close()


def _cursor(conn: _Connection) -> _CursorContext:
    return _CursorContext(conn.cursor())


def _chunks(rows: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]
