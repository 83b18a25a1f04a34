"""Chunk membership of string keys is decided by the server, for every collation.

The keys below are chosen where Unicode collations and a naive Python ordering disagree:
punctuation vs digits vs ``_``, accents, expansions (``ß``, ``æ``), case, trailing
spaces and tabs (PAD SPACE), characters outside the BMP.
"""

from __future__ import annotations

from typing import Any

import pytest

from sparkcdc.devserver import DevServer
from sparkcdc.snapshot.keys import in_range, key_sort_key

pytestmark = pytest.mark.integration

COLLATIONS = [
    "utf8mb4_unicode_ci",
    "utf8mb4_unicode_520_ci",
    "utf8mb4_uca1400_ai_ci",
    "utf8mb4_general_ci",
]
KEYS = [
    "a", "B", "a\t", "_", "-", "0", "9", "a_b", "a-b", "ab", "a0", "é", "f", "ß", "st",
    "Æ", "af", "~", "'", ".", "a.b", "a b", "ﬁ", "fj", "Å", "z", "ø", "p", "œ", "of",
    "ı", "j", "𝒜", "日", "🎉", "", "x  ", "x\t",
]  # fmt: skip


def server_chunk_of(cur: Any, collation: str, bounds: list[str], key: str) -> int:
    """The chunk a key's row is SELECTed into: the number of bounds <= key, by the server."""
    cur.execute(
        "SELECT " + " + ".join([f"(%s COLLATE {collation} >= %s)"] * len(bounds)),
        [v for b in bounds for v in (key, b)],
    )
    return int(cur.fetchone()[0])


@pytest.mark.parametrize("collation", COLLATIONS)
def test_membership_agrees_with_the_server(dev_server: DevServer, collation: str) -> None:
    bounds = ["-", "0", "_", "a", "a b", "ab", "Æ", "f", "ß", "z", "日"]
    conn = dev_server.connection()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT v FROM (SELECT DISTINCT %s AS v "
            + " ".join(["UNION SELECT %s"] * (len(bounds) - 1))
            + f") AS b ORDER BY v COLLATE {collation}",
            bounds,
        )
        ordered = [r[0] for r in cur.fetchall()]
        want = {key: server_chunk_of(cur, collation, ordered, key) for key in KEYS}
    sk = key_sort_key(collation)
    edges = [None, *ordered, None]
    got = {
        key: next(i for i in range(len(edges) - 1) if in_range(key, edges[i], edges[i + 1], sk))
        for key in KEYS
    }
    assert got == want
