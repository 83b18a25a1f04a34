"""A batch's cut (``positions.transaction_cut``) on MySQL binlogs built to the documented
layouts (no MySQL server runs here; MariaDB's side is tested against the real server in
``test_replication.py``): the first GTID event past the budget, with the executed GTID set
grown by each GTID event walked, ANONYMOUS_GTID boundaries without a set, and no cut
inside a transaction or at a BEGIN."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sparkcdc.model.position import BinlogPosition, MySqlGtidSet
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EventType
from sparkcdc.mysql.stream import positions

FILE = "binlog.000007"
SOURCE = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
OTHER = uuid.UUID("9b8a1c2e-0000-11ee-8000-000000000001")


def event(type_code: int, body: bytes, at: int) -> tuple[BinlogPosition, int, int, bytes]:
    size = EVENT_HEADER.size + len(body)
    header = EVENT_HEADER.pack(1_700_000_000, type_code, 1, size, at + size, 0)
    return BinlogPosition(FILE, at), type_code, 1_700_000_000, header + body


def gtid_body(source: uuid.UUID, gno: int) -> bytes:
    # flags, source uuid, gno; then the logical clock fields MySQL 5.7+ writes
    return struct.pack("<B16sq", 1, source.bytes, gno) + b"\x02" + struct.pack("<qq", 0, 1)


def transactions(spec: list[tuple[int, uuid.UUID | None, int]]) -> list[Any]:
    """One transaction per (rows bytes, source, gno): GTID (or ANONYMOUS_GTID without a
    source), QUERY BEGIN, TABLE_MAP, WRITE_ROWS of that many bytes, XID."""
    events, at = [], 4
    for rows, source, gno in spec:
        for type_code, body in (
            (EventType.GTID, gtid_body(source, gno))
            if source is not None
            else (EventType.ANONYMOUS_GTID, gtid_body(uuid.UUID(int=0), 0)),
            (EventType.QUERY, struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\x00BEGIN"),
            (EventType.TABLE_MAP, b"\x00" * 40),
            (EventType.WRITE_ROWS_V2, b"\x00" * rows),
            (EventType.XID, struct.pack("<Q", gno)),
        ):
            events.append(event(type_code, body, at))
            at += len(events[-1][3])
    return events


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    binlog: list[Any] = []

    def events_from(_settings: Any, start: BinlogPosition, _server_id: int) -> Iterator[Any]:
        yield from (e for e in binlog if e[0] >= start)

    monkeypatch.setattr(positions, "_events_from", events_from)
    return binlog


def starts(binlog: list[Any]) -> list[BinlogPosition]:
    return [e[0] for e in binlog if e[1] in (EventType.GTID, EventType.ANONYMOUS_GTID)]


def test_the_cut_carries_the_executed_set_of_every_gtid_walked(walked: list[Any]) -> None:
    walked.extend(
        transactions([(300, SOURCE, 5), (300, OTHER, 1), (5_000, SOURCE, 6), (300, SOURCE, 7)])
    )
    opening = starts(walked)
    end = BinlogPosition(FILE, walked[-1][0].pos + len(walked[-1][3]))
    start = opening[0].with_gtids(MySqlGtidSet.parse(f"{SOURCE}:1-4"))
    cut = positions.transaction_cut(None, start, end, 1)  # type: ignore[arg-type]
    assert cut == opening[1]
    assert str(cut.gtids) == f"{SOURCE}:1-5"
    # a budget that ends inside the 5,000-byte transaction cuts after it, not in it
    inside = opening[2].pos - start.pos + 100
    cut = positions.transaction_cut(None, start, end, inside)  # type: ignore[arg-type]
    assert cut == opening[3]
    assert cut.gtids == MySqlGtidSet.parse(f"{SOURCE}:1-6,{OTHER}:1")
    # past the last transaction's start: no cut, the batch reads to the end
    last = opening[3].pos - start.pos + 1
    assert positions.transaction_cut(None, start, end, last) is None  # type: ignore[arg-type]


def test_anonymous_transactions_are_boundaries_without_a_set(walked: list[Any]) -> None:
    walked.extend(transactions([(300, None, 0), (300, None, 0), (300, None, 0)]))
    opening = starts(walked)
    end = BinlogPosition(FILE, walked[-1][0].pos + len(walked[-1][3]))
    cut = positions.transaction_cut(None, opening[0], end, 2)  # type: ignore[arg-type]
    assert cut == opening[1] and cut.gtids is None
    # never at the BEGIN, the TABLE_MAP or the rows of a transaction
    assert all(e[1] in (EventType.GTID, EventType.ANONYMOUS_GTID) for e in walked if e[0] == cut)
