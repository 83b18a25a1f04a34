"""The jdbc sink's PostgreSQL dialect (psycopg)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from sparkcdc.model.changelog import DELETED
from sparkcdc.model.identifiers import quote_ansi
from sparkcdc.sinks.jdbc.dialect import (
    CONNECT_TIMEOUT_S,
    Connection,
    Dialect,
)
from sparkcdc.sinks.jdbc.options import JdbcUrl


class PostgresDialect(Dialect):
    family = "postgresql"
    # UNLOGGED: no WAL for rows that live for one batch (a crash empties the table, and the
    # replay refills it anyway)
    staging_table = "UNLOGGED TABLE"

    def quote(self, name: str, *, pyformat: bool) -> str:
        return quote_ansi(name, pyformat=pyformat)

    def connect(self, url: JdbcUrl, user: str | None, password: str | None) -> Connection:
        return psycopg.connect(
            host=url.host,
            port=url.port,
            user=user,
            password=password,
            dbname=url.database,
            connect_timeout=CONNECT_TIMEOUT_S,
            autocommit=False,
            **url.tls.psycopg_kwargs(),
        )

    def is_alive(self, conn: Connection) -> bool:
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

    def on_conflict(
        self, columns: Sequence[str], keys: Sequence[str], ident: Callable[[str], str]
    ) -> str:
        values = [c for c in columns if c not in keys]
        action = (
            "DO UPDATE SET " + ", ".join(f"{ident(c)} = EXCLUDED.{ident(c)}" for c in values)
            if values
            else "DO NOTHING"
        )
        return f"ON CONFLICT ({', '.join(ident(k) for k in keys)}) {action}"

    def load(self, conn: Connection, staging: str, columns: Sequence[str], rows: Any) -> None:
        assert isinstance(conn, psycopg.Connection)
        names = ", ".join(self.ddl_ident(c) for c in columns)  # COPY takes no parameters
        with conn.cursor() as cur, cur.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def delete_from(self, target: str, staging: str, keys: Sequence[str]) -> str:
        return (
            f"DELETE FROM {target} t USING {staging} s WHERE {self._key_match(keys)} "
            f"AND s.{self.ddl_ident(DELETED)}"
        )
