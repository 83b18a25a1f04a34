"""Snapshot chunks: half-open ranges of chunk-key values, and their lossless JSON form.

A table's chunk plan is a sequence of contiguous ranges ``[start, end)`` over the chunk
key; ``None`` stands for -inf as a start and +inf as an end, so the first chunk is
``(-inf, c1)`` and the last ``[cn, +inf)``. Rows whose chunk key is NULL belong to the
first chunk (DESIGN.md §2).

Key values travel in offsets and persisted plans as JSON; ``encode_key`` tags every
value with its type so ``decode_key(encode_key(v)) == v`` with the same type
(int, str, Decimal, float, date, datetime naive or aware, time delta, bytes, None).

>>> c = ChunkRange("app.orders", 0, None, 100)
>>> ChunkRange.from_json(c.to_json()) == c
True
>>> decode_key(encode_key(b"\\x00\\xff"))
b'\\x00\\xff'
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sparkcdc.errors import SnapshotError

KeyValue = Any
"""A chunk-key value as the binlog decoder yields it (int, str, Decimal, bytes, ...)."""

_UTC = dt.UTC


def encode_key(value: KeyValue) -> Any:
    """A JSON-ready, type-tagged form of one key value (``None`` stays ``None``).

    >>> encode_key(Decimal("1.50"))
    ['dec', '1.50']
    >>> encode_key(12)
    ['int', '12']
    """
    if value is None:
        return None
    # bool before int: bool is an int subclass
    if isinstance(value, bool):
        return ["bool", bool(value)]
    if isinstance(value, int):
        return ["int", str(value)]  # text: no precision loss past 2^53 in other JSON readers
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, Decimal):
        return ["dec", str(value)]
    if isinstance(value, float):
        return ["float", value.hex()]
    if isinstance(value, bytes | bytearray | memoryview):
        return ["bytes", base64.b64encode(bytes(value)).decode("ascii")]
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return ["dtz", value.astimezone(_UTC).isoformat()]
        return ["dt", value.isoformat()]
    if isinstance(value, dt.date):
        return ["date", value.isoformat()]
    if isinstance(value, dt.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        return ["td", str(micros)]
    raise SnapshotError(
        f"chunk-key value {value!r} has type {type(value).__name__}, which sparkcdc cannot "
        "store in an offset; choose another scan.incremental.snapshot.chunk.key-column"
    )


def decode_key(data: Any) -> KeyValue:
    """The value ``encode_key`` encoded.

    >>> decode_key(["dt", "2026-01-02T03:04:05.000006"])
    datetime.datetime(2026, 1, 2, 3, 4, 5, 6)
    """
    if data is None:
        return None
    try:
        tag, text = data
        if tag == "bool":
            return bool(text)
        if tag == "int":
            return int(text)
        if tag == "str":
            return str(text)
        if tag == "dec":
            return Decimal(text)
        if tag == "float":
            return float.fromhex(text)
        if tag == "bytes":
            return base64.b64decode(text)
        if tag == "dtz":
            return dt.datetime.fromisoformat(text).astimezone(_UTC)
        if tag == "dt":
            return dt.datetime.fromisoformat(text)
        if tag == "date":
            return dt.date.fromisoformat(text)
        if tag == "td":
            return dt.timedelta(microseconds=int(text))
    except (TypeError, ValueError) as exc:
        raise SnapshotError(f"cannot decode chunk-key value {data!r}: {exc}") from None
    raise SnapshotError(
        f"cannot decode chunk-key value {data!r}: unknown type tag (state written by a newer "
        "sparkcdc?)"
    )


@dataclass(frozen=True)
class ChunkRange:
    """One chunk of a table: chunk-key values in ``[start, end)``; ``None`` = unbounded.

    ``table`` is the qualified name ``db.table``; ``index`` numbers the chunks of a
    table from 0 in key order.
    """

    table: str
    index: int
    start: KeyValue
    end: KeyValue

    def to_offset(self) -> dict[str, Any]:
        """A JSON-ready dict of primitives."""
        return {
            "table": self.table,
            "index": self.index,
            "start": encode_key(self.start),
            "end": encode_key(self.end),
        }

    @classmethod
    def from_offset(cls, data: dict[str, Any]) -> ChunkRange:
        try:
            return cls(
                str(data["table"]),
                int(data["index"]),
                decode_key(data["start"]),
                decode_key(data["end"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(
                f"{data!r} is not a chunk (expected keys table, index, start, end): {exc}"
            ) from None

    def to_json(self) -> str:
        return json.dumps(self.to_offset(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> ChunkRange:
        return cls.from_offset(json.loads(text))

    def __str__(self) -> str:
        lo = "(-inf" if self.start is None else f"[{self.start!r}"
        hi = "+inf)" if self.end is None else f"{self.end!r})"
        return f"{self.table} chunk {self.index} {lo}, {hi}"
