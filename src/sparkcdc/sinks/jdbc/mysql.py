"""The jdbc sink's MySQL / MariaDB dialect (pymysql)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pymysql

from sparkcdc.model.changelog import DELETED
from sparkcdc.model.identifiers import quote_mysql
from sparkcdc.mysql.protocol.connection import connect_with_tls
from sparkcdc.sinks.jdbc.dialect import (
    CONNECT_TIMEOUT_S,
    ROWS_PER_STATEMENT,
    Connection,
    Dialect,
    batched,
    open_cursor,
)
from sparkcdc.sinks.jdbc.options import JdbcUrl
from sparkcdc.sinks.jdbc.types import utc_wall_time


class MySqlDialect(Dialect):
    family = "mysql"
    staging_table = "TABLE"

    def quote(self, name: str, *, pyformat: bool) -> str:
        return quote_mysql(name, pyformat=pyformat)

    def connect(self, url: JdbcUrl, user: str | None, password: str | None) -> Connection:
        conn = connect_with_tls(
            url.tls.mysql(),
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
        conn.connect()
        return conn

    def is_alive(self, conn: Connection) -> bool:
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

    def on_conflict(
        self, columns: Sequence[str], keys: Sequence[str], ident: Callable[[str], str]
    ) -> str:
        values = [c for c in columns if c not in keys] or list(keys[:1])
        # VALUES(col), not the row-alias syntax: MariaDB has no row alias
        updates = ", ".join(f"{ident(c)} = VALUES({ident(c)})" for c in values)
        return f"ON DUPLICATE KEY UPDATE {updates}"

    def converter(self, spark_type: str) -> Callable[[Any], Any] | None:
        if spark_type.strip().upper() in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            return utc_wall_time
        return None

    def load(self, conn: Connection, staging: str, columns: Sequence[str], rows: Any) -> None:
        statement = self.insert_values(staging, columns)
        with open_cursor(conn) as cur:
            for chunk in batched(rows, ROWS_PER_STATEMENT):
                cur.executemany(statement, chunk)

    def insert_values(self, staging: str, columns: Sequence[str]) -> str:
        """The INSERT of one row that pymysql's executemany turns into multi-row INSERTs."""
        return (
            f"INSERT INTO {staging.replace('%', '%%')} "
            f"({', '.join(self.ident(c) for c in columns)}) "
            f"VALUES ({', '.join('%s' for _ in columns)})"
        )

    def delete_from(self, target: str, staging: str, keys: Sequence[str]) -> str:
        return (
            f"DELETE t FROM {target} t JOIN {staging} s ON {self._key_match(keys)} "
            f"WHERE s.{self.ddl_ident(DELETED)}"
        )
