"""The canonical row form ``sparkcdc verify`` compares, as far as every side shares it: the
hash width, the epoch, the exact text of a double, and what a source is asked over one table
(:class:`ChecksumTable`). Each side writes it in its own SQL (pipeline/canonical.py: Spark
and Arrow; a source's dialect: its database, DESIGN.md §10).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparkcdc.model.schema import TableSchema

HASH_HEX_DIGITS = 15  # 60 bits: a sum of 2^37 of them fits DECIMAL(38,0)
EPOCH = "'1970-01-01 00:00:00'"
_TWO_52 = "4503599627370496"
_TWO_53 = "9007199254740992"


def float_text(x: str, to_int: str, to_text: str) -> str:
    """``m p k`` of a double ``x`` (an SQL expression): the value is exactly ``m * 2^k``
    with the integer ``m`` in [2^52, 2^53) (or k = -1074), ``0`` for zero. ``to_int`` and
    ``to_text`` are the SQL's casts to an integer and to text, with ``{}`` for the value.

    >>> float_text("x", "INT({})", "TEXT({})").startswith("(CASE WHEN x = 0 THEN '0'")
    True
    """
    k0 = f"GREATEST(FLOOR(LOG2(ABS({x}))) - 52, -1074)"
    m0 = f"({x} / POW(2, {k0}))"
    too_big = f"ABS({m0}) >= {_TWO_53}"
    too_small = f"ABS({m0}) < {_TWO_52} AND {k0} > -1074"
    m = f"(CASE WHEN {too_big} THEN {m0} / 2 WHEN {too_small} THEN {m0} * 2 ELSE {m0} END)"
    k = f"(CASE WHEN {too_big} THEN {k0} + 1 WHEN {too_small} THEN {k0} - 1 ELSE {k0} END)"
    body = f"CONCAT({to_text.format(to_int.format(m))}, 'p', {to_text.format(k)})"
    return f"(CASE WHEN {x} = 0 THEN '0' WHEN {x} IS NOT NULL THEN {body} END)"


@dataclass(frozen=True)
class ChecksumTable:
    """A source table as verify compares it: ``values``, the canonical texts of the
    compared columns in sink column order (each the dialect's ``canonical_value``, or
    ``NULL``); ``keys``, the indexes of the sink table's key among them."""

    schema: TableSchema
    values: tuple[str, ...]
    keys: tuple[int, ...]

    @classmethod
    def of(cls, schema: TableSchema, values: Sequence[str], keys: Sequence[int]) -> ChecksumTable:
        return cls(schema, tuple(values), tuple(keys))

    @property
    def key_values(self) -> tuple[str, ...]:
        return tuple(self.values[i] for i in self.keys)
