"""``Lsn``: a PostgreSQL WAL position (log sequence number), a frozen, ordered value object.

An LSN is an unsigned 64-bit byte position in the WAL, written as two hexadecimal halves
``high/low`` (``16/B374D848``), as ``pg_current_wal_lsn()`` prints it
(https://www.postgresql.org/docs/current/datatype-pg-lsn.html).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import PositionError

_MAX = (1 << 64) - 1
# seq packs a commit LSN and a row's index in its transaction into one signed 64-bit number
# (DESIGN.md §12.2): 16 bits of row index leave 47 bits, 128 TiB of WAL, for the LSN.
_SEQ_ROW_BITS = 16
_SEQ_MAX_ROW = (1 << _SEQ_ROW_BITS) - 1
_SEQ_MAX_LSN = (1 << (63 - _SEQ_ROW_BITS)) - 1
_TEXT_RE = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


@dataclass(frozen=True, order=True)
class Lsn:
    """A WAL position; ``Lsn(0)`` is PostgreSQL's InvalidXLogRecPtr.

    >>> Lsn.parse("16/B374D848")
    Lsn(value=97500059720)
    >>> str(Lsn(97500059720))
    '16/B374D848'
    """

    value: int

    def __post_init__(self) -> None:
        if not 0 <= self.value <= _MAX:
            raise PositionError(
                f"an LSN is an unsigned 64-bit WAL position, not {self.value}; "
                "pass what pg_current_wal_lsn() or a replication slot reports"
            )

    @classmethod
    def parse(cls, text: str) -> Lsn:
        """``Lsn.parse("0/16B3748")``: the ``high/low`` hexadecimal text of pg_lsn."""
        match = _TEXT_RE.match(text.strip())
        if not match:
            raise PositionError(
                f"{text!r} is not an LSN: expected two hexadecimal halves like '16/B374D848' "
                "(the text of pg_current_wal_lsn() or pg_replication_slots.confirmed_flush_lsn)"
            )
        return cls((int(match.group(1), 16) << 32) | int(match.group(2), 16))

    def __str__(self) -> str:
        return f"{self.value >> 32:X}/{self.value & 0xFFFFFFFF:X}"

    def to_offset(self) -> dict[str, Any]:
        """A JSON dict of primitives (Spark stores offsets as JSON).

        >>> Lsn.parse("0/16B3748").to_offset()
        {'lsn': '0/16B3748'}
        """
        return {"lsn": str(self)}

    @classmethod
    def from_offset(cls, offset: dict[str, Any]) -> Lsn:
        """The inverse of ``to_offset``."""
        text = offset.get("lsn") if isinstance(offset, dict) else None
        if not isinstance(text, str):
            raise PositionError(
                f"an LSN offset is a dict like {{'lsn': '0/16B3748'}}, not {offset!r}; "
                "the checkpoint holding it was not written by this source"
            )
        return cls.parse(text)

    def seq(self, row_index: int = 0) -> int:
        """The ``_seq`` of the row ``row_index`` of the transaction that commits here (this
        LSN, by which ranges take transactions too): rows of later commits order after it.
        Indexes past 65535 share the last slot (they keep their order in the stream).

        >>> Lsn(1).seq(), Lsn(1).seq(2) > Lsn(1).seq(1), Lsn(2).seq() > Lsn(1).seq(10**6)
        (65536, True, True)
        """
        if self.value > _SEQ_MAX_LSN:
            raise PositionError(
                f"LSN {self} is past {Lsn(_SEQ_MAX_LSN)}, the last a row's seq can hold "
                "(128 TiB of WAL): this server's WAL outgrew the PostgreSQL source's seq"
            )
        return (self.value << _SEQ_ROW_BITS) | min(row_index, _SEQ_MAX_ROW)

    def seqs(self, first: int, count: int) -> list[int]:
        """``[seq(first), ..., seq(first + count - 1)]``.

        >>> Lsn(1).seqs(65534, 3) == [Lsn(1).seq(65534), Lsn(1).seq(65535), Lsn(1).seq(65535)]
        True
        """
        base = self.seq()
        return [base | min(row, _SEQ_MAX_ROW) for row in range(first, first + count)]


INVALID_LSN = Lsn(0)
