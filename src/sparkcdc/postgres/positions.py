"""Positions of the PostgreSQL source taken over SQL: the watermark."""

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
