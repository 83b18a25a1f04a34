"""Chunk membership of string keys is decided by the server, for every collation.

The keys below are chosen where Unicode collations and a naive Python ordering disagree:
punctuation vs digits vs ``_``, accents, expansions (``ß``, ``æ``, ligatures), case,
trailing spaces and tabs (PAD SPACE), characters outside the BMP. The old Python
approximation put ``~``, ``ø``, dotless i and ``\\U0001d49c`` in other chunks than the server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_snapshot_reader import dialect_of

from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin.catalog import load_schema
from sparkcdc.mysql.chunks.key_ranks import ServerKeyRanking
from sparkcdc.mysql.protocol.connection import KeptConnection
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.filter import (
    InterleavingFilter,
    completed_chunks,
    filter_state,
    tracked_table,
)
from sparkcdc.snapshot.keys import chunk_membership, key_order
from sparkcdc.snapshot.splitter import ChunkSplitter, all_chunks
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

COLLATIONS = [
    "utf8mb4_unicode_ci",
    "utf8mb4_unicode_520_ci",
    "utf8mb4_uca1400_ai_ci",
    "utf8mb4_general_ci",
    "utf8mb4_uca1400_as_cs",  # three levels
    "utf8mb4_unicode_nopad_ci",
]
KEYS = [
    "a", "B", "a\t", "_", "-", "0", "9", "a_b", "a-b", "ab", "a0", "é", "f", "ß", "st",
    "Æ", "af", "~", "'", ".", "a.b", "a b", "\ufb01", "fj", "Å", "z", "ø", "p", "œ", "of",
    "\u0131", "j", "\U0001d49c", "日", "🎉", "", "x  ", "x\t", "x", "X ", "A",
]  # fmt: skip
BOUNDS = ["-", "0", "_", "a", "a b", "ab", "Æ", "f", "ß", "x", "z", "日"]


def server_sorted(cur: Any, collation: str, values: list[str]) -> list[str]:
    """``values`` in the server's order, one of each run of equal values."""
    cur.execute(
        "SELECT MIN(v) FROM (SELECT %s AS v "
        + " ".join(["UNION ALL SELECT %s"] * (len(values) - 1))
        + f") AS b GROUP BY v COLLATE {collation} ORDER BY v COLLATE {collation}",
        values,
    )
    return [r[0] for r in cur.fetchall()]


def server_chunk_of(cur: Any, collation: str, bounds: list[str], key: str) -> int:
    """The chunk whose SELECT (``k >= start AND k < end``) returns ``key``: bounds <= key."""
    cur.execute(
        "SELECT " + " + ".join([f"(%s COLLATE {collation} >= %s)"] * len(bounds)),
        [v for b in bounds for v in (key, b)],
    )
    return int(cur.fetchone()[0])


@pytest.mark.parametrize("collation", COLLATIONS)
def test_membership_and_filter_agree_with_the_server(dev_server: DevServer, collation: str) -> None:
    conn = dev_server.connection()
    with conn.cursor() as cur:
        ordered = server_sorted(cur, collation, BOUNDS)
        want = {key: server_chunk_of(cur, collation, ordered, key) for key in KEYS}
    edges = [None, *ordered, None]
    plan = [ChunkRange("db.s", i, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]

    # backfill membership: one chunk against all keys
    order = key_order(collation, ServerKeyRanking(KeptConnection.over(conn)))
    for chunk in plan:
        member = chunk_membership(order, chunk.start, chunk.end, KEYS)
        assert {k for k, inside in member.items() if inside} == {
            k for k in KEYS if want[k] == chunk.index
        }, chunk

    # the interleaving filter: every other chunk done (HW 100), keys batched, then judged
    hw = BinlogPosition("b.000001", 100)
    done = [completed_chunks(c.start, c.end, hw, c.index, c.index + 1) for c in plan[::2]]
    state = filter_state({"db.s": tracked_table(collation, len(done), len(plan), done)})
    flt = InterleavingFilter.from_state(
        json.loads(json.dumps(state)), ServerKeyRanking(KeptConnection(dev_server.connection))
    )
    at = BinlogPosition("b.000001", 200)
    assert flt.needs_server("db.s", at)
    flt.prepare("db.s", KEYS)
    got = {key: flt.emit("db.s", key, at) for key in KEYS}
    assert got == {key: want[key] % 2 == 0 for key in KEYS}
    flt.close()
    conn.close()


@pytest.mark.parametrize("collation", ["utf8mb4_uca1400_ai_ci", "utf8mb4_unicode_ci"])
def test_string_chunks_cover_the_table_once_under_uca(
    dev_server: DevServer, database: str, sql: Any, collation: str
) -> None:
    sql.execute(
        f"CREATE TABLE s (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE {collation} PRIMARY KEY)"
    )
    for key in KEYS:  # IGNORE: keys the collation deems equal
        sql.execute("INSERT IGNORE INTO s VALUES (%s)", (key,))
    conn = dev_server.connection(database)
    schema = load_schema(conn, database, "s")
    kept = KeptConnection.over(conn)
    splitter = ChunkSplitter.for_table(dialect_of(dev_server), kept, schema, chunk_size=3)
    chunks = all_chunks(splitter, step=4)
    seen: list[str] = []
    for chunk in chunks:
        where, params = [], []
        if chunk.start is not None:
            where.append("k >= %s")
            params.append(chunk.start)
        if chunk.end is not None:
            where.append("k < %s")
            params.append(chunk.end)
        sql.execute("SELECT k FROM s" + (" WHERE " + " AND ".join(where) if where else ""), params)
        rows = [r[0] for r in sql.fetchall()]
        assert rows or chunk.end is None, f"empty chunk {chunk}: its bounds are equal"
        seen.extend(rows)
    sql.execute("SELECT k FROM s")
    assert sorted(seen) == sorted(r[0] for r in sql.fetchall())
    conn.close()


def test_keys_ranked_again_when_the_server_drops_the_ranking_connection(
    dev_server: DevServer,
) -> None:
    """A task ranks string keys of a server-ordered collation on a kept connection: killed
    between two rankings (a restart, a proxy), the next ranking runs on a new one, opened
    at once (found dropped before its work: no retry, no pause), and ranks the same."""
    collation = COLLATIONS[0]
    pauses: list[float] = []
    ranking = ServerKeyRanking(KeptConnection(dev_server.connection, sleep=pauses.append))
    order = key_order(collation, ranking)
    ranks = order.ranker(BOUNDS).ranks(KEYS)
    first = ranking.run(lambda conn: conn.thread_id())
    with dev_server.connection() as admin, admin.cursor() as cur:
        cur.execute(f"KILL CONNECTION {first}")
    assert order.ranker(BOUNDS).ranks(KEYS) == ranks
    assert ranking.run(lambda conn: conn.thread_id()) != first and pauses == []
    order.close()
