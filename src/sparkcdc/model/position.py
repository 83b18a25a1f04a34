"""Binlog positions and GTID sets: frozen, totally ordered value objects.

A position is a binlog file plus a byte offset, and, where the server has GTIDs,
the GTID set executed up to that point. Offsets travel through Spark as JSON
dicts of primitives (``to_offset`` / ``from_offset``), and ``str``/``parse``
round-trip losslessly too.

Ordering: positions order by (file sequence number, byte offset), the file name
breaking ties; the GTID set, derived from the place, takes no part in ordering or
equality. GTID sets order by the number of transactions they contain, then by
their canonical text; a strict subset of a set therefore always orders before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache, total_ordering
from typing import Any, ClassVar

from sparkcdc.errors import PositionError

# seq packs a position into one signed 64-bit integer (DESIGN.md §3, "seq"):
# 19 bits of binlog file number, 32 bits of byte offset, 12 bits of row index.
_SEQ_ROW_BITS = 12
_SEQ_POS_BITS = 32
_SEQ_MAX_FILE = (1 << 19) - 1
_SEQ_MAX_ROW = (1 << _SEQ_ROW_BITS) - 1

_FILE_RE = re.compile(r"^(?P<base>.*?)\.?(?P<num>\d+)$")


def binlog_file_tag(created: int, server_id: int) -> str:
    """What tells one binlog file from another of the same name: the timestamp and the
    server_id in the header of its FORMAT_DESCRIPTION event (the event at byte 4 that
    opens every file; the server resends that header unchanged at the start of every dump).

    >>> binlog_file_tag(1767225600, 1)
    '1767225600:1'
    """
    return f"{created}:{server_id}"


@lru_cache(maxsize=1024)  # asked for each event's position: a few names repeat
def binlog_file_number(file: str) -> int:
    """The sequence number of a binlog file name.

    >>> binlog_file_number("mysql-bin.000042")
    42
    """
    match = _FILE_RE.match(file)
    if not match:
        raise PositionError(
            f"binlog file name {file!r} does not end in a sequence number "
            "(expected something like 'mysql-bin.000003'); check the file name you passed"
        )
    return int(match.group("num"))


# ---------------------------------------------------------------------------------- GTIDs


@dataclass(frozen=True)
class GtidSet:
    """Base of the two GTID flavours; use ``GtidSet.parse`` to build either."""

    flavor: ClassVar[str] = ""

    @staticmethod
    def parse(text: str) -> GtidSet:
        """Parse MySQL (``uuid:1-5:7``) or MariaDB (``0-1-100,1-2-7``) GTID text.

        >>> str(GtidSet.parse("0-1-100"))
        '0-1-100'
        """
        text = text.strip()
        if not text or ":" in text:
            return MySqlGtidSet.parse(text)
        return MariaDbGtidSet.parse(text)

    def transaction_count(self) -> int:
        raise NotImplementedError

    def _order_key(self) -> tuple[int, str, str]:
        return (self.transaction_count(), self.flavor, str(self))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._order_key() < other._order_key()

    def __le__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._order_key() <= other._order_key()

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._order_key() > other._order_key()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._order_key() >= other._order_key()


_UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)


def _merge_intervals(intervals: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


@dataclass(frozen=True)
class MySqlGtidSet(GtidSet):
    """A MySQL GTID set: per server UUID, closed intervals of transaction numbers."""

    flavor: ClassVar[str] = "mysql"
    sets: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()

    @classmethod
    def parse(cls, text: str) -> MySqlGtidSet:
        """Parse ``uuid:1-5:7,uuid2:1-3`` (whitespace and newlines allowed).

        >>> str(MySqlGtidSet.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-3:5"))
        '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:5'
        """
        by_uuid: dict[str, list[tuple[int, int]]] = {}
        for part in re.split(r"\s*,\s*", text.strip()):
            if not part:
                continue
            uuid, *ranges = part.strip().split(":")
            if not _UUID_RE.match(uuid) or not ranges:
                raise PositionError(
                    f"cannot parse MySQL GTID set element {part!r}: expected "
                    "'server_uuid:first-last[:first-last...]'"
                )
            intervals = by_uuid.setdefault(uuid.lower(), [])
            for rng in ranges:
                lo, _, hi = rng.partition("-")
                try:
                    start, end = int(lo), int(hi or lo)
                except ValueError:
                    raise PositionError(
                        f"cannot parse GTID interval {rng!r} in {part!r}: expected 'N' or 'N-M'"
                    ) from None
                if start < 1 or end < start:
                    raise PositionError(f"GTID interval {rng!r} in {part!r} is empty or negative")
                intervals.append((start, end))
        return cls(tuple((u, _merge_intervals(iv)) for u, iv in sorted(by_uuid.items())))

    def __str__(self) -> str:
        return ",".join(
            uuid + "".join(f":{s}" if s == e else f":{s}-{e}" for s, e in intervals)
            for uuid, intervals in self.sets
        )

    def transaction_count(self) -> int:
        return sum(e - s + 1 for _, intervals in self.sets for s, e in intervals)

    def add(self, uuid: str, number: int) -> MySqlGtidSet:
        """This set with one more transaction ``uuid:number``."""
        by_uuid = {u: list(iv) for u, iv in self.sets}
        by_uuid.setdefault(uuid.lower(), []).append((number, number))
        return MySqlGtidSet(tuple((u, _merge_intervals(iv)) for u, iv in sorted(by_uuid.items())))

    def contains(self, other: MySqlGtidSet) -> bool:
        mine = dict(self.sets)
        for uuid, intervals in other.sets:
            have = mine.get(uuid, ())
            for s, e in intervals:
                if not any(hs <= s and e <= he for hs, he in have):
                    return False
        return True


@dataclass(frozen=True)
class MariaDbGtidSet(GtidSet):
    """A MariaDB GTID position: per replication domain, the last ``server-seq`` applied."""

    flavor: ClassVar[str] = "mariadb"
    # (domain_id, server_id, sequence), sorted by domain
    gtids: tuple[tuple[int, int, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> MariaDbGtidSet:
        """Parse ``domain-server-seq[,domain-server-seq...]``.

        >>> MariaDbGtidSet.parse("1-2-7,0-1-100").gtids
        ((0, 1, 100), (1, 2, 7))
        """
        by_domain: dict[int, tuple[int, int, int]] = {}
        for part in re.split(r"\s*,\s*", text.strip()):
            if not part:
                continue
            try:
                domain, server, seq = (int(x) for x in part.split("-"))
            except ValueError:
                raise PositionError(
                    f"cannot parse MariaDB GTID {part!r}: expected 'domain-server-sequence' "
                    "such as '0-1-100'"
                ) from None
            if domain in by_domain:
                raise PositionError(f"MariaDB GTID position {text!r} names domain {domain} twice")
            by_domain[domain] = (domain, server, seq)
        return cls(tuple(by_domain[d] for d in sorted(by_domain)))

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{q}" for d, s, q in self.gtids)

    def transaction_count(self) -> int:
        return sum(q for _, _, q in self.gtids)

    def add(self, domain: int, server: int, sequence: int) -> MariaDbGtidSet:
        """This position after transaction ``domain-server-sequence``."""
        by_domain = {d: (d, s, q) for d, s, q in self.gtids}
        by_domain[domain] = (domain, server, sequence)
        return MariaDbGtidSet(tuple(by_domain[d] for d in sorted(by_domain)))


# ------------------------------------------------------------------------------ positions


@total_ordering
@dataclass(frozen=True)
class BinlogPosition:
    """A point in the binlog: ``file`` + byte ``pos``, optionally with the GTID set.

    >>> p = BinlogPosition.parse("mysql-bin.000003:154")
    >>> p < BinlogPosition("mysql-bin.000004", 4)
    True
    >>> BinlogPosition.from_offset(p.to_offset()) == p
    True
    """

    file: str
    pos: int
    gtids: GtidSet | None = field(default=None, compare=False)
    # Which file ``file`` is: "<FORMAT_DESCRIPTION timestamp>:<its server_id>", the
    # header of the event that opens every binlog file (see ``binlog_file_tag``). A file
    # of the same name after RESET MASTER, a restore or on another server has another.
    file_tag: str | None = field(default=None, compare=False)
    # Added to the file number in ``seq``: after a failover the new server's files may
    # number lower than the old one's, and seq must still grow (see ``after_failover``).
    seq_file_base: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        binlog_file_number(self.file)  # validates the name
        if self.seq_file_base < 0:
            raise PositionError(f"seq_file_base {self.seq_file_base} of {self.file} is negative")
        if self.gtids is not None and not str(self.gtids):
            object.__setattr__(self, "gtids", None)  # an empty set says nothing more than None
        if not 0 <= self.pos < (1 << _SEQ_POS_BITS):
            raise PositionError(
                f"binlog position {self.pos} in {self.file!r} is out of range (0 .. 2^32-1)"
            )

    @property
    def file_number(self) -> int:
        return binlog_file_number(self.file)

    def _key(self) -> tuple[int, int, str]:
        # The GTID set is derived from the place (file, pos); it takes no part in
        # ordering or equality, so positions learnt with and without GTIDs compare.
        return (self.file_number, self.pos, self.file)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._key() < other._key()

    def with_gtids(self, gtids: GtidSet | None) -> BinlogPosition:
        return replace(self, gtids=gtids)

    def with_file_tag(self, tag: str | None) -> BinlogPosition:
        return replace(self, file_tag=tag)

    def after_failover(self, previous: BinlogPosition) -> BinlogPosition:
        """This position, on a server we failed over to, with a ``seq_file_base`` that puts
        its ``seq`` (and every later one on this server) after every seq up to ``previous``
        on the server we left: the base is ``previous``'s effective file number + 1, so it
        depends only on ``previous`` and keeps growing with it.

        >>> old = BinlogPosition("mysql-bin.000009", 500)
        >>> new = BinlogPosition("mysql-bin.000002", 4).after_failover(old)
        >>> new.seq() > old.seq(4095), new.seq_file_base
        (True, 10)
        """
        return replace(self, seq_file_base=previous.file_number + previous.seq_file_base + 1)

    @classmethod
    def parse(cls, text: str) -> BinlogPosition:
        """Parse ``file:pos`` or ``file:pos@gtid-set``."""
        head, _, gtid = text.partition("@")
        file, sep, pos = head.rpartition(":")
        if not sep or not pos.isdigit():
            raise PositionError(
                f"cannot parse binlog position {text!r}: expected 'file:pos' or "
                "'file:pos@gtid-set', e.g. 'mysql-bin.000003:154'"
            )
        return cls(file, int(pos), GtidSet.parse(gtid) if gtid else None)

    def __str__(self) -> str:
        text = f"{self.file}:{self.pos}"
        return f"{text}@{self.gtids}" if self.gtids is not None else text

    def to_offset(self) -> dict[str, Any]:
        """A JSON-ready dict of primitives (Spark stores it in the offset log)."""
        out: dict[str, Any] = {"file": self.file, "pos": self.pos}
        if self.gtids is not None:
            out["gtids"] = str(self.gtids)
            out["gtid_flavor"] = self.gtids.flavor
        if self.file_tag is not None:
            out["file_tag"] = self.file_tag
        if self.seq_file_base:
            out["seq_file_base"] = self.seq_file_base
        return out

    @classmethod
    def from_offset(cls, data: dict[str, Any]) -> BinlogPosition:
        try:
            gtid_text = data.get("gtids")
            gtids: GtidSet | None = None
            if gtid_text is not None:
                flavor = data.get("gtid_flavor")
                if flavor == MariaDbGtidSet.flavor:
                    gtids = MariaDbGtidSet.parse(gtid_text)
                elif flavor == MySqlGtidSet.flavor:
                    gtids = MySqlGtidSet.parse(gtid_text)
                else:
                    gtids = GtidSet.parse(gtid_text)
            tag = data.get("file_tag")
            return cls(
                str(data["file"]),
                int(data["pos"]),
                gtids,
                None if tag is None else str(tag),
                int(data.get("seq_file_base", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PositionError(
                f"offset {data!r} is not a binlog position (expected keys 'file' and 'pos'): {exc}"
            ) from None

    def seq(self, row_index: int = 0) -> int:
        """One signed 64-bit number ordering all changes (DESIGN.md §3).

        Rows of one event get increasing ``row_index``; indexes past 4095 share
        the last slot (they are of one event and keep their order in the stream).
        """
        number = self.file_number + self.seq_file_base
        if number > _SEQ_MAX_FILE:
            raise PositionError(f"binlog file number {number} is too large for seq (max 524287)")
        return (
            (number << (_SEQ_POS_BITS + _SEQ_ROW_BITS))
            | (self.pos << _SEQ_ROW_BITS)
            | min(row_index, _SEQ_MAX_ROW)
        )

    def seqs(self, first: int, count: int) -> list[int]:
        """``[seq(first), seq(first + 1), ...]``, ``count`` of them: the rows of one event,
        with the file name parsed once.

        >>> p = BinlogPosition("b.000001", 4)
        >>> p.seqs(4094, 3) == [p.seq(4094), p.seq(4095), p.seq(4096)]
        True
        """
        base = self.seq()
        if first + count - 1 <= _SEQ_MAX_ROW:
            return list(range(base + first, base + first + count))
        return [base | min(row, _SEQ_MAX_ROW) for row in range(first, first + count)]
