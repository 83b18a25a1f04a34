"""Ordering chunk-key values in Python exactly as the server orders them.

The interleaving filter and the backfill decide in Python whether a binlog event's key
lies in a chunk ``[start, end)`` whose rows the *server* selected with ``k >= start AND
k < end``; both must agree or a row lands in two chunks or in none. Numbers, temporal
values and binary strings (compared byte by byte, ``memcmp``) order naturally in Python.
Character strings order by their column's collation:

- ``*_bin``: by code point (for utf8mb4 the same as by UTF-8 bytes).
- ``*_general_ci`` / ``*_general_nopad_ci`` (MySQL's and MariaDB's "general" family):
  one weight per character: the character's base letter (accents stripped, by Unicode
  canonical decomposition), upper-cased; ``ß`` weighs as ``S``; characters beyond the
  Basic Multilingual Plane all weigh U+FFFD, as the server's tables say.
- any other ``*_ci`` / ``*_ai`` collation (``unicode_ci``, ``0900_ai_ci``, ``uca1400``...):
  an approximation of the Unicode Collation Algorithm's primary level: accents
  stripped, ``casefold``. Letters, digits and case/accent ties order as the server does;
  the order *between* punctuation, digits and letters may differ from UCA, so prefer a
  ``_bin`` or ``general_ci`` chunk key, or an integer one, for such tables.
- PAD SPACE collations (all but ``*nopad*`` and MySQL's ``*_0900_*``) compare as if the
  shorter string were padded with spaces: ``'a' = 'a  '`` and ``'a\\t' < 'a'``.

>>> k = key_sort_key("utf8mb4_general_ci")
>>> k("abc") == k("ABC  "), k("é") == k("E"), k("a") < k("_")
(True, True, True)
>>> k = key_sort_key("utf8mb4_bin")
>>> k("B") < k("a")
True
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any

SortKey = Callable[[Any], Any]

_SPACE = ord(" ")
_REPLACEMENT = 0xFFFD
_BMP_LIMIT = 0xFFFF
_GENERAL_SPECIAL = {"ß": "S"}


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


@lru_cache(maxsize=65536)
def _general_weight(ch: str) -> int:
    if ord(ch) > _BMP_LIMIT:
        return _REPLACEMENT
    special = _GENERAL_SPECIAL.get(ch)
    if special is not None:
        return ord(special)
    base = unicodedata.normalize("NFD", ch)[0]
    upper = base.upper()
    return ord(upper) if len(upper) == 1 else ord(base)


def _general_weights(text: str) -> tuple[int, ...]:
    return tuple(_general_weight(ch) for ch in text)


def _bin_weights(text: str) -> tuple[int, ...]:
    return tuple(ord(ch) for ch in text)


def _folded_weights(text: str) -> tuple[int, ...]:
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return tuple(ord(ch) for ch in decomposed if not unicodedata.combining(ch))


def is_pad_space(collation: str) -> bool:
    """True when the collation ignores trailing spaces (PAD SPACE).

    >>> is_pad_space("utf8mb4_general_ci"), is_pad_space("utf8mb4_nopad_bin")
    (True, False)
    >>> is_pad_space("utf8mb4_0900_ai_ci")
    False
    """
    name = collation.lower()
    return "nopad" not in name and "_0900_" not in name


def string_weigher(collation: str) -> Callable[[str], tuple[int, ...]]:
    """The per-character weight function of a collation (see the module docstring)."""
    name = collation.lower()
    if name.endswith("_bin") or name == "binary":
        return _bin_weights
    if "_general_" in name and name.endswith("_ci"):
        return _general_weights
    if name.endswith(("_ci", "_ai")) or "_ai_" in name:
        return _folded_weights
    return _bin_weights  # case- and accent-sensitive: code points are the best we know


def key_sort_key(collation: str | None) -> SortKey:
    """A sort-key function ordering key values as the server does for this column.

    ``collation`` is the column's ``information_schema.COLUMNS.COLLATION_NAME`` (None for
    non-character columns). NULL keys are not orderable: callers put them first.

    >>> sorted(["b", "A", "a ", "C"], key=key_sort_key("utf8mb4_general_ci"))
    ['A', 'a ', 'b', 'C']
    >>> key_sort_key(None)(5) < key_sort_key(None)(12)
    True
    """
    if collation is None:
        return _identity
    weigh = string_weigher(collation)
    pad = is_pad_space(collation)

    def sort_key(value: Any) -> Any:
        if not isinstance(value, str):
            return value  # bytes, numbers: natural order
        weights = weigh(value)
        return PaddedWeights(weights) if pad else weights

    return sort_key


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
