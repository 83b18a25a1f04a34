"""Ordering chunk-key values exactly as the server orders them.

The interleaving filter and the backfill decide whether a binlog event's key lies in a
chunk ``[start, end)`` whose rows the *server* selected with ``k >= start AND k < end``;
both must agree with the server or a change lands in two chunks or in none. So the
order is the server's own wherever Python cannot reproduce it exactly:

- **Python** (``python_orders``): numbers, temporal values, binary strings (``memcmp``),
  and character strings under a binary collation of a Unicode character set
  (``utf8mb4_bin``, ``utf8mb3_bin``, ``ascii_bin``, their ``nopad``/``0900`` forms): the
  server compares their code points, PAD SPACE ones as if the shorter side were padded
  with spaces (``'a' = 'a  '``, ``'a\\t' < 'a'``), which ``PaddedWeights`` does; and
  ``CODE_POINT_COLLATION`` (PostgreSQL's "C" on UTF-8): code points, no padding.
- **the server** (every other collation: ``*_general_ci``, ``*_unicode_ci``, ``uca1400``,
  ``0900_ai_ci``, language variants, 8-bit character sets): one SQL query ranks a batch
  of keys against the chunk bounds with the column's collation (``ServerKeyOrder``).

Both are ``KeyOrder``s: ``ranker(bounds)`` over bounds ascending in the server's order
(a chunk plan's bounds are, as the server chose them) gives for each key the number of
bounds ``<=`` it. A key lies in ``[bounds[i], bounds[j])`` iff ``i < rank <= j``.

>>> r = key_order("utf8mb4_bin").ranker(["B", "a", "b"])
>>> r.ranks(["A", "a  ", "c"])
[0, 2, 3]
>>> python_orders("utf8mb4_unicode_ci"), python_orders(None)
(False, True)
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sparkcdc.errors import SnapshotError
from sparkcdc.model.dialect import CODE_POINT_COLLATION, KeyRanking

SortKey = Callable[[Any], Any]

_SPACE = ord(" ")
# Character sets whose binary collation orders by Unicode code point: the server decodes
# each character and compares the code points (ascii is 7-bit: byte = code point).
_CODE_POINT_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8", "ascii"})
# Keys ranked by one query at most; a batch of more is split.
RANK_BATCH = 500


class PaddedWeights:
    """Character weights compared with the shorter side padded with spaces (PAD SPACE)."""

    __slots__ = ("_stripped", "weights")

    def __init__(self, weights: tuple[int, ...]) -> None:
        self.weights = weights
        end = len(weights)
        while end and weights[end - 1] == _SPACE:
            end -= 1
        self._stripped = weights[:end]

    def _cmp(self, other: PaddedWeights) -> int:
        a, b = self._stripped, other._stripped
        n = min(len(a), len(b))
        for i in range(n):
            if a[i] != b[i]:
                return -1 if a[i] < b[i] else 1
        rest, sign = (b[n:], -1) if len(a) < len(b) else (a[n:], 1)
        for w in rest:  # the shorter side continues with spaces
            if w != _SPACE:
                return sign if w > _SPACE else -sign
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PaddedWeights) and self._stripped == other._stripped

    def __hash__(self) -> int:
        return hash(self._stripped)

    def __lt__(self, other: PaddedWeights) -> bool:
        return self._cmp(other) < 0

    def __le__(self, other: PaddedWeights) -> bool:
        return self._cmp(other) <= 0

    def __gt__(self, other: PaddedWeights) -> bool:
        return self._cmp(other) > 0

    def __ge__(self, other: PaddedWeights) -> bool:
        return self._cmp(other) >= 0

    def __repr__(self) -> str:
        return f"PaddedWeights({self._stripped!r})"


def charset_of(collation: str) -> str:
    """The character set a collation belongs to (every collation name starts with it).

    >>> charset_of("utf8mb4_uca1400_ai_ci"), charset_of("latin1_swedish_ci")
    ('utf8mb4', 'latin1')
    """
    return collation.lower().split("_", 1)[0]


def is_pad_space(collation: str) -> bool:
    """True when the collation ignores trailing spaces (PAD SPACE).

    >>> is_pad_space("utf8mb4_general_ci"), is_pad_space("utf8mb4_nopad_bin")
    (True, False)
    >>> is_pad_space("utf8mb4_0900_ai_ci"), is_pad_space(CODE_POINT_COLLATION)
    (False, False)
    """
    if collation == CODE_POINT_COLLATION:
        return False
    name = collation.lower()
    return "nopad" not in name and "_0900_" not in name


def python_orders(collation: str | None) -> bool:
    """Whether Python orders this column's values exactly as the server does.

    True for non-character columns (None) and binary collations of a Unicode character
    set; every other collation is left to the server (see the module docstring).
    """
    if collation is None or collation == CODE_POINT_COLLATION:
        return True
    name = collation.lower()
    return name.endswith("_bin") and charset_of(name) in _CODE_POINT_CHARSETS


def _code_points(text: str) -> tuple[int, ...]:
    return tuple(ord(ch) for ch in text)


def key_sort_key(collation: str | None) -> SortKey:
    """A sort-key function ordering key values as the server does (``python_orders`` only).

    NULL keys are not orderable: callers put them first.

    >>> sorted(["b", "B", "a ", "C"], key=key_sort_key("utf8mb4_bin"))
    ['B', 'C', 'a ', 'b']
    >>> key_sort_key(None)(5) < key_sort_key(None)(12)
    True
    """
    if collation is None:
        return _identity
    if not python_orders(collation):
        raise SnapshotError(
            f"collation {collation} orders strings in a way only the server knows; "
            "chunk keys under it are ranked by the server (key_order with a connection)"
        )
    if not is_pad_space(collation):
        return _nopad_key

    def sort_key(value: Any) -> Any:
        if not isinstance(value, str):
            return value  # bytes, numbers: natural order
        return PaddedWeights(_code_points(value))

    return sort_key


def _nopad_key(value: Any) -> Any:
    return _code_points(value) if isinstance(value, str) else value


def _identity(value: Any) -> Any:
    return value


def in_range(key: Any, start: Any, end: Any, sort_key: SortKey) -> bool:
    """True when ``key`` lies in the chunk ``[start, end)`` (None bounds are infinite).

    A NULL key belongs to the first chunk only, as ``k IS NULL OR k < c1`` selects it.

    >>> in_range(None, None, 5, key_sort_key(None)), in_range(5, None, 5, key_sort_key(None))
    (True, False)
    """
    if key is None:
        return start is None
    k = sort_key(key)
    if start is not None and k < sort_key(start):
        return False
    return end is None or k < sort_key(end)


# ------------------------------------------------------------------------------- orders


class Ranker(Protocol):
    def ranks(self, keys: Sequence[Any]) -> list[int]:
        """For each (non-NULL) key, how many of the ranker's bounds are ``<=`` it."""


class KeyOrder(Protocol):
    """The server's order of one chunk key's values."""

    def ranker(self, bounds: Sequence[Any]) -> Ranker:
        """A ranker over ``bounds``: non-NULL, ascending (ties allowed) in the server's order."""

    def close(self) -> None:
        """Release a server connection this order opened."""


class _PythonRanker:
    __slots__ = ("_bounds", "_sort_key")

    def __init__(self, bounds: Sequence[Any], sort_key: SortKey) -> None:
        self._sort_key = sort_key
        self._bounds = [sort_key(b) for b in bounds]

    def ranks(self, keys: Sequence[Any]) -> list[int]:
        return [bisect_right(self._bounds, self._sort_key(k)) for k in keys]


class PythonKeyOrder:
    """The order of a column Python orders exactly (``python_orders``)."""

    def __init__(self, collation: str | None) -> None:
        self._sort_key = key_sort_key(collation)

    def ranker(self, bounds: Sequence[Any]) -> Ranker:
        return _PythonRanker(bounds, self._sort_key)

    def close(self) -> None:
        pass


class _ServerRanker:
    def __init__(self, order: ServerKeyOrder, bounds: Sequence[Any]) -> None:
        self._order = order
        self._bounds = list(bounds)

    def ranks(self, keys: Sequence[Any]) -> list[int]:
        if not self._bounds:
            return [0] * len(keys)
        distinct = list(dict.fromkeys(keys))
        found: dict[Any, int] = {}
        ranking, collation = self._order.ranking, self._order.collation
        for i in range(0, len(distinct), RANK_BATCH):
            part = distinct[i : i + RANK_BATCH]
            ranks = ranking.ranks(collation, part, self._bounds)
            found.update(zip(part, ranks, strict=True))
        return [found[k] for k in keys]


class ServerKeyOrder:
    """The order of a column under a collation only the server knows, ranked by the
    source (``SourceDialect.key_ranking``) in batches of distinct keys."""

    def __init__(self, collation: str, ranking: KeyRanking) -> None:
        self.collation = collation
        self.ranking = ranking

    def ranker(self, bounds: Sequence[Any]) -> Ranker:
        return _ServerRanker(self, bounds)

    def close(self) -> None:
        self.ranking.close()


class _Unranked:
    """The ranking of an order given none: ranking says what is missing."""

    def ranks(self, collation: str, keys: Sequence[Any], bounds: Sequence[Any]) -> list[int]:
        raise SnapshotError(
            "string chunk keys under a non-binary collation are ranked by the server, but no "
            "connection was given (pass the source's key_ranking to the filter or key_order)"
        )

    def close(self) -> None:
        pass


def key_order(collation: str | None, ranking: KeyRanking | None = None) -> KeyOrder:
    """The KeyOrder of a chunk key column of this collation (None: not a string column);
    ``ranking``: the source's, for collations only the server orders."""
    if python_orders(collation):
        return PythonKeyOrder(collation)
    assert collation is not None
    return ServerKeyOrder(collation, ranking or _Unranked())


def chunk_membership(order: KeyOrder, start: Any, end: Any, keys: Sequence[Any]) -> dict[Any, bool]:
    """Whether each key lies in the chunk ``[start, end)`` (None bounds: infinite), by
    ``order``: one ranking of the distinct keys. NULL keys belong to the first chunk only.

    >>> chunk_membership(key_order(None), 3, 6, [None, 2, 3, 6])
    {None: False, 2: False, 3: True, 6: False}
    """
    bounds = [b for b in (start, end) if b is not None]
    values = [k for k in dict.fromkeys(keys) if k is not None]
    ranks = order.ranker(bounds).ranks(values) if values else []
    out: dict[Any, bool] = {None: start is None} if None in keys else {}
    low = 0 if start is None else 1  # rank a key needs to be >= start
    high = len(bounds)  # rank it must not exceed to be < end (or any, end = +inf)
    for key, rank in zip(values, ranks, strict=True):
        out[key] = low <= rank and (end is None or rank < high)
    return out
