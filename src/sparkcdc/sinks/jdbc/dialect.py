"""What every SQL dialect of the jdbc sink provides (one module per database speaks it)."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Protocol

import psycopg
import pymysql

from sparkcdc.model.changelog import DELETED
from sparkcdc.sinks.jdbc.options import (
    Family,
    JdbcUrl,
)

CONNECT_TIMEOUT_S = 10
ROWS_PER_STATEMENT = 1000  # rows per executemany call


class Cursor(Protocol):
    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Any: ...
    def executemany(self, query: str, params: Sequence[Sequence[Any]], /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> Any: ...
    def close(self) -> Any: ...


class Connection(Protocol):
    def cursor(self) -> Any: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...


DRIVER_ERRORS: tuple[type[Exception], ...] = (pymysql.MySQLError, psycopg.Error)


class Dialect(ABC):
    """What differs between MySQL and PostgreSQL: connecting, quoting, upsert, value shapes.

    ``ident`` quotes for statements run with parameters (``%`` doubled), ``ddl_ident`` for
    those run without (DDL and the staging statements)."""

    family: ClassVar[Family]

    @abstractmethod
    def quote(self, name: str, *, pyformat: bool) -> str: ...

    def ident(self, name: str) -> str:
        return self.quote(name, pyformat=True)

    def ddl_ident(self, name: str) -> str:
        return self.quote(name, pyformat=False)

    @abstractmethod
    def connect(self, url: JdbcUrl, user: str | None, password: str | None) -> Connection: ...

    @abstractmethod
    def is_alive(self, conn: Connection) -> bool:
        """Whether ``conn`` still works (asked before a transaction starts)."""

    @abstractmethod
    def timestamp_type(self) -> str: ...

    staging_table: ClassVar[str]  # the CREATE ... TABLE words of a staging table

    @abstractmethod
    def on_conflict(
        self, columns: Sequence[str], keys: Sequence[str], ident: Callable[[str], str]
    ) -> str:
        """The INSERT's clause that updates the row of a key that exists already."""

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        """An INSERT of one row (``%s`` placeholders) that updates the row of an existing key."""
        return (
            f"INSERT INTO {table} ({', '.join(self.ident(c) for c in columns)}) "
            f"VALUES ({', '.join('%s' for _ in columns)}) "
            + self.on_conflict(columns, keys, self.ident)
        )

    def create_table_suffix(self) -> str:
        return ""

    def converter(self, spark_type: str) -> Callable[[Any], Any] | None:
        return None

    def create_staging(self, staging: str, target: str, columns: Sequence[str]) -> str:
        """A table ``staging`` of the target's ``columns`` (their types) plus ``_deleted``;
        CREATE ... AS SELECT copies the types, not the key: no index to maintain."""
        names = ", ".join(self.ddl_ident(c) for c in columns)
        return (
            f"CREATE {self.staging_table} {staging}{self.create_table_suffix()} AS SELECT "
            f"{names}, FALSE AS {self.ddl_ident(DELETED)} FROM {target} WHERE 1 = 0"
        )

    @abstractmethod
    def load(self, conn: Connection, staging: str, columns: Sequence[str], rows: Any) -> None:
        """Insert ``rows`` (an iterable of tuples) into ``staging``, the fastest way."""

    def upsert_from(
        self, target: str, staging: str, columns: Sequence[str], keys: Sequence[str]
    ) -> str:
        """Insert or update the target rows of the staged rows that are not ``_deleted``."""
        names = ", ".join(self.ddl_ident(c) for c in columns)
        return (
            f"INSERT INTO {target} ({names}) SELECT {names} FROM {staging} "
            f"WHERE NOT {self.ddl_ident(DELETED)} "
            + self.on_conflict(columns, keys, self.ddl_ident)
        )

    @abstractmethod
    def delete_from(self, target: str, staging: str, keys: Sequence[str]) -> str:
        """Delete the target rows of the staged keys that are ``_deleted``."""

    def insert_from(self, target: str, staging: str, columns: Sequence[str]) -> str:
        """Insert the staged rows as they are (snapshot inserts: keys the target lacks)."""
        names = ", ".join(self.ddl_ident(c) for c in columns)
        return f"INSERT INTO {target} ({names}) SELECT {names} FROM {staging}"

    def _key_match(self, keys: Sequence[str]) -> str:
        return " AND ".join(f"t.{self.ddl_ident(k)} = s.{self.ddl_ident(k)}" for k in keys)


class _CursorContext:
    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def __enter__(self) -> Cursor:
        cursor: Cursor = self.cursor
        return cursor

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # a cursor of a dead connection
            self.cursor.close()


def open_cursor(conn: Connection) -> _CursorContext:
    return _CursorContext(conn.cursor())


def chunks(rows: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def batched(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
