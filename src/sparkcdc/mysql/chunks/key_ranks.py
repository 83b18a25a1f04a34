"""String keys ranked by the server under a collation Python cannot reproduce (the key
order of ``snapshot/keys.py`` for ``*_general_ci``, ``*_unicode_ci``, ``uca1400``, ...): one
SQL query per batch of keys, compared exactly as the chunk's SELECT compares them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from sparkcdc.errors import SnapshotError
from sparkcdc.mysql.protocol.connection import KeptConnection

T = TypeVar("T")


def charset_of(collation: str) -> str:
    """The character set a collation belongs to (every collation name starts with it).

    >>> charset_of("utf8mb4_uca1400_ai_ci"), charset_of("latin1_swedish_ci")
    ('utf8mb4', 'latin1')
    """
    return collation.lower().split("_", 1)[0]


def rank_query(collation: str, bounds: int, keys: int) -> str:
    """SQL ranking ``keys`` values against ``bounds`` values under ``collation``.

    Parameters: the keys, then the bounds. Rows: ``(key index, bounds <= key)``. Both
    sides are converted to the collation's character set and compared with ``COLLATE``,
    exactly as ``k >= %s`` compares a literal with the column in the chunk's SELECT.

    >>> print(rank_query("utf8mb4_unicode_ci", 1, 2))  # doctest: +NORMALIZE_WHITESPACE
    SELECT k.i, COUNT(b.v) FROM (SELECT 0 AS i, CONVERT(%s USING utf8mb4) AS v UNION ALL
    SELECT 1, CONVERT(%s USING utf8mb4)) AS k LEFT JOIN (SELECT CONVERT(%s USING utf8mb4)
    AS v) AS b ON b.v COLLATE utf8mb4_unicode_ci <= k.v COLLATE utf8mb4_unicode_ci
    GROUP BY k.i
    """
    if not collation.replace("_", "").isalnum():
        raise SnapshotError(f"{collation!r} is not a collation name")
    charset = charset_of(collation)
    conv = f"CONVERT(%s USING {charset})"
    key_rows = " UNION ALL ".join(
        f"SELECT 0 AS i, {conv} AS v" if i == 0 else f"SELECT {i}, {conv}" for i in range(keys)
    )
    bound_rows = " UNION ALL ".join(
        f"SELECT {conv} AS v" if i == 0 else f"SELECT {conv}" for i in range(bounds)
    )
    return (
        f"SELECT k.i, COUNT(b.v) FROM ({key_rows}) AS k LEFT JOIN ({bound_rows}) AS b "
        f"ON b.v COLLATE {collation} <= k.v COLLATE {collation} GROUP BY k.i"
    )


class ServerKeyRanking:
    """Keys ranked on a kept connection (opened when the first key is ranked; opened again
    when the server drops it, unless it is the caller's own: ``KeptConnection.over``)."""

    def __init__(self, conn: KeptConnection) -> None:
        self._conn = conn

    def run(self, work: Callable[[Any], T]) -> T:
        return self._conn.run(work)

    def ranks(self, collation: str, keys: Sequence[Any], bounds: Sequence[Any]) -> list[int]:
        rows = self._conn.run(
            partial(_fetched, rank_query(collation, len(bounds), len(keys)), [*keys, *bounds])
        )
        found = {int(index): int(rank) for index, rank in rows}
        return [found[i] for i in range(len(keys))]

    def close(self) -> None:
        self._conn.close()


def _fetched(sql: str, params: Sequence[Any], conn: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())
