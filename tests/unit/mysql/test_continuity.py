"""mysql/stream/continuity.judge decides from what the server says; the GTID dump's first
transaction is found from bytes (MySQL's path is tested only here: no MySQL server in CI)."""

from __future__ import annotations

import struct
import uuid

import pytest

from sparkcdc.errors import (
    BinlogResetError,
    DifferentServerError,
    PositionBehindError,
    PositionError,
)
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.position import BinlogPosition, GtidSet, MySqlGtidSet
from sparkcdc.mysql.admin.server import gtid_state_contains
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EventType
from sparkcdc.mysql.stream.continuity import Continuity, ServerView, judge
from sparkcdc.mysql.stream.positions import first_transaction_start

MARIA = ServerIdentity("mariadb", 1, domain_id=0)
REPLICA = ServerIdentity("mariadb", 3, domain_id=0)
U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4f22fa47-71ca-11e1-9e33-c80aa9429562"


def view(identity: ServerIdentity = MARIA, state: str = "0-1-50", **sizes: int) -> ServerView:
    files = tuple(sorted((f"mysql-bin.{n}", s) for n, s in sizes.items()))
    last, size = files[-1]
    return ServerView(identity, BinlogPosition(last, size), files, state)


def at(file: str, pos: int, gtids: str | None = "0-1-40", tag: str | None = None) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{file}", pos, GtidSet.parse(gtids) if gtids else None, tag)


def test_the_same_server_ahead_of_the_offset_is_same() -> None:
    assert judge(at("000002", 400), MARIA, view(**{"000002": 900})) is Continuity.SAME


def test_an_offset_without_identity_is_adopted_but_still_checked() -> None:
    assert judge(at("000002", 400), None, view(**{"000002": 900})) is Continuity.ADOPT
    with pytest.raises(BinlogResetError):
        judge(at("000005", 400), None, view(**{"000001": 900}))


def test_reset_master_files_restarted() -> None:
    with pytest.raises(BinlogResetError, match="gone, and no later file exists"):
        judge(at("000005", 400), MARIA, view(state="0-1-3", **{"000001": 900}))


def test_purged_is_not_reset() -> None:
    with pytest.raises(PositionError, match="purged") as info:
        judge(at("000002", 400), MARIA, view(**{"000004": 900, "000005": 100}))
    assert not isinstance(info.value, BinlogResetError)


def test_a_file_of_the_same_name_with_other_content_is_a_reset() -> None:
    tags = {"mysql-bin.000002": "1700000099:1"}
    with pytest.raises(BinlogResetError, match="now holds another file"):
        judge(at("000002", 400, tag="1700000000:1"), MARIA, view(**{"000002": 900}), tags.get)
    # without a way to read tags (cheap checks) the content is not compared
    assert judge(at("000002", 400, tag="1700000000:1"), MARIA, view(**{"000002": 900})) is (
        Continuity.SAME
    )


def test_a_binlog_behind_the_offset_went_back() -> None:
    with pytest.raises(PositionBehindError, match="went back"):
        judge(at("000002", 4000), MARIA, view(**{"000002": 900}))
    with pytest.raises(PositionBehindError, match="does not hold the offset's GTID set"):
        judge(at("000002", 400, "0-1-60"), MARIA, view(**{"000002": 900}))


def test_another_server_with_the_offsets_gtids_is_a_failover() -> None:
    replica = view(REPLICA, "0-1-45,0-3-2", **{"000001": 700})
    assert judge(at("000009", 400), MARIA, replica) is Continuity.FAILOVER


def test_another_server_without_them_is_refused() -> None:
    other = view(ServerIdentity("mariadb", 2, domain_id=0), "0-2-90", **{"000009": 9000})
    with pytest.raises(DifferentServerError, match="another server") as info:
        judge(at("000009", 400), MARIA, other)
    assert "server_id 1" in str(info.value) and "server_id 2" in str(info.value)
    with pytest.raises(DifferentServerError, match="no GTID set"):
        judge(at("000009", 400, None), MARIA, view(REPLICA, "0-1-45", **{"000001": 1}))


def test_mysql_failover_is_by_uuid_and_gtid_set() -> None:
    old = ServerIdentity("mysql", 1, uuid=U1)
    new = ServerIdentity("mysql", 1, uuid=U2)  # same server_id, another server
    offset = BinlogPosition("binlog.000007", 900, MySqlGtidSet.parse(f"{U1}:1-40"))
    state = f"{U1}:1-45,{U2}:1-3"
    files = (("binlog.000002", 5000),)
    moved = ServerView(new, BinlogPosition("binlog.000002", 5000), files, state)
    assert judge(offset, old, moved) is Continuity.FAILOVER
    behind = ServerView(new, BinlogPosition("binlog.000002", 5000), files, f"{U1}:1-39")
    with pytest.raises(DifferentServerError):
        judge(offset, old, behind)
    assert gtid_state_contains(f"{U1}:1-45", MySqlGtidSet.parse(f"{U1}:3-40"))
    assert not gtid_state_contains(f"{U1}:1-20:22-45", MySqlGtidSet.parse(f"{U1}:1-40"))


# ---------------------------------------------- first transaction of a dump by GTID


def event(type_code: EventType, body: bytes, log_pos: int, flags: int = 0) -> bytes:
    size = EVENT_HEADER.size + len(body) + 4  # the server counts the stripped checksum
    return EVENT_HEADER.pack(1700000000, type_code, 1, size, log_pos, flags) + body


def rotate(file: str) -> bytes:
    return event(EventType.ROTATE, struct.pack("<Q", 4) + file.encode(), 0, 0x20)


def mysql_gtid(log_pos: int) -> bytes:
    # GTID body: flags u8, sid [16], gno u64, then logical clocks (not read here)
    return event(EventType.GTID, struct.pack("<B16sQ", 1, uuid.UUID(U1).bytes, 41), log_pos)


def test_the_first_transaction_a_mysql_gtid_dump_sends_is_where_we_resume() -> None:
    fde = event(EventType.FORMAT_DESCRIPTION, bytes(80), 0)
    previous = event(EventType.PREVIOUS_GTIDS, bytes(8), 200)
    gtid = mysql_gtid(1311)
    events = [rotate("binlog.000002"), fde, previous, gtid]
    found = first_transaction_start(events, "binlog.000001")
    assert found == BinlogPosition("binlog.000002", 1311 - (len(gtid) + 4))
    # heartbeats and artificial events (log_pos 0) do not count; none at all: None
    assert first_transaction_start([rotate("binlog.000002"), fde, previous], "x.1") is None
