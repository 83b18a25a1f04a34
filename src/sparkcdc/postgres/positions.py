"""Positions of the PostgreSQL source taken over SQL: the watermark, and its reuse while idle."""

from __future__ import annotations

from typing import Any

import psycopg

from sparkcdc.postgres.lsn import Lsn

WATERMARK_PREFIX = "sparkcdc.watermark"


def watermark(conn: psycopg.Connection[Any]) -> Lsn:
    """A position on a transaction boundary that the stream surely reaches: the LSN of a
    non-transactional logical message written now.

    Not ``pg_current_wal_lsn()``: it is the WAL *write* location, and a transaction committed
    with ``synchronous_commit = off`` is visible before its commit record is written
    ("the server reports success before the WAL is written": the docs of
    synchronous_commit), so a chunk's SELECT could see a transaction whose commit LSN lies
    after such a watermark and the stream would apply it again. The message's LSN is the end
    of a record inserted after every commit a SELECT now sees, and the walsender decodes it
    (``pg_current_wal_insert_lsn()`` would be as exact but is not always a place the
    walsender reports reaching: a record ending at a page's end)."""
    row = conn.execute(
        "SELECT pg_logical_emit_message(false, %s, '')::text", [WATERMARK_PREFIX]
    ).fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def insert_lsn(conn: psycopg.Connection[Any]) -> Lsn:
    """Where the server inserts its next WAL record; reading it writes nothing."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def still_at(conn: psycopg.Connection[Any], last: Lsn) -> bool:
    """Whether the insert LSN is still ``last`` (no WAL record was inserted after it), so
    ``last`` is still a watermark taken "now" (DESIGN.md §12.2).

    Exact: a commit record is inserted (its place reserved, moving the insert LSN) before
    the transaction is visible or its COMMIT returns, whatever ``synchronous_commit``
    says. So an insert LSN still at ``last`` means no commit lies after ``last`` yet: every
    change committed so far is before it (a DDL too: the schemas as of ``last`` are the
    schemas now). A commit between this check and the plan that uses ``last`` has its
    record past ``last``: the range ending at ``last`` leaves it whole to the next range,
    whose check sees the insert LSN moved and takes a new watermark past it. Records that
    are no change (the checkpointer's, the background writer's running-transactions record
    every 15 s after other WAL) also move the insert LSN: a new watermark then, never an
    old one too late. When ``last`` ended a WAL page the insert LSN is past the page's
    header, so that one check takes a new watermark; so does an insert LSN behind ``last``
    (another server).

    >>> still_at(conn, Lsn(24414408))  # doctest: +SKIP
    True
    """
    return insert_lsn(conn) == last
