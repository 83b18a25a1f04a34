from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import PositionError
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.position import (
    BinlogPosition,
    GtidSet,
    MariaDbGtidSet,
    MySqlGtidSet,
    binlog_file_number,
    binlog_file_tag,
)

uuids = st.uuids().map(str)
intervals = st.lists(
    st.tuples(st.integers(1, 10**9), st.integers(0, 1000)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=4,
)
mysql_sets = st.dictionaries(uuids, intervals, max_size=3).map(
    lambda d: MySqlGtidSet.parse(
        ",".join(u + "".join(f":{s}-{e}" for s, e in iv) for u, iv in d.items())
    )
)
maria_sets = st.dictionaries(
    st.integers(0, 2**32 - 1),
    st.tuples(st.integers(1, 2**32 - 1), st.integers(0, 2**63)),
    max_size=4,
).map(lambda d: MariaDbGtidSet(tuple((dom, s, q) for dom, (s, q) in sorted(d.items()))))
gtid_sets = st.one_of(st.none(), mysql_sets, maria_sets)
positions = st.builds(
    BinlogPosition,
    st.integers(1, 999999).map(lambda n: f"mysql-bin.{n:06d}"),
    st.integers(4, 2**32 - 1),
    gtid_sets,
)


@given(positions)
def test_offset_round_trip_is_lossless_through_json(p: BinlogPosition) -> None:
    back = BinlogPosition.from_offset(json.loads(json.dumps(p.to_offset())))
    assert back == p
    assert str(back.gtids) == str(p.gtids)
    assert type(back.gtids) is type(p.gtids)


@given(positions)
def test_text_round_trip(p: BinlogPosition) -> None:
    assert BinlogPosition.parse(str(p)) == p


@given(positions, positions, positions)
def test_order_is_total_and_transitive(
    a: BinlogPosition, b: BinlogPosition, c: BinlogPosition
) -> None:
    assert (a < b) + (b < a) + (a == b) == 1
    if a <= b <= c:
        assert a <= c


@given(positions, positions)
def test_order_follows_file_number_then_offset(a: BinlogPosition, b: BinlogPosition) -> None:
    if (a.file_number, a.pos) < (b.file_number, b.pos):
        assert a < b


def test_file_number_not_name_orders_files() -> None:
    assert BinlogPosition("mysql-bin.999999", 4) < BinlogPosition("mysql-bin.1000000", 4)


seq_positions = st.builds(
    BinlogPosition,
    st.integers(1, 524287).map(lambda n: f"mysql-bin.{n:06d}"),
    st.integers(4, 2**32 - 2),
)


@given(seq_positions, st.integers(0, 5000), st.integers(0, 5000))
def test_seq_orders_rows_of_one_event(p: BinlogPosition, i: int, j: int) -> None:
    if i < j:
        assert p.seq(i) <= p.seq(j)
    assert p.seq(i) < BinlogPosition(p.file, p.pos + 1).seq()
    assert 0 <= p.seq(i) < 2**63


def test_seq_refuses_file_numbers_it_cannot_pack() -> None:
    with pytest.raises(PositionError, match="too large"):
        BinlogPosition("mysql-bin.524288", 4).seq()


@given(mysql_sets)
def test_mysql_gtid_text_round_trip(g: MySqlGtidSet) -> None:
    assert MySqlGtidSet.parse(str(g)) == g
    assert GtidSet.parse(str(g)) == g if str(g) else True


@given(maria_sets)
def test_mariadb_gtid_text_round_trip(g: MariaDbGtidSet) -> None:
    if str(g):
        assert GtidSet.parse(str(g)) == g


@given(mysql_sets, uuids, st.integers(1, 10**12))
def test_adding_a_transaction_grows_the_set(g: MySqlGtidSet, uuid: str, n: int) -> None:
    bigger = g.add(uuid, n)
    assert bigger.contains(g)
    if not g.contains(MySqlGtidSet.parse(f"{uuid}:{n}")):
        assert g < bigger


def test_mysql_gtid_intervals_merge() -> None:
    g = MySqlGtidSet.parse(
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-3:4-5:7,3e11fa47-71ca-11e1-9e33-c80aa9429562:9"
    )
    assert str(g) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7:9"
    assert g.transaction_count() == 7


def test_mariadb_gtid_advance() -> None:
    g = MariaDbGtidSet.parse("0-1-100,1-2-5").add(0, 3, 101)
    assert str(g) == "0-3-101,1-2-5"


@pytest.mark.parametrize(
    "text",
    ["mysql-bin:abc", "no-colon", "mysql-bin.000001:12@0-1", "mysql-bin.000001:5@zz:1-2"],
)
def test_malformed_positions_say_what_is_expected(text: str) -> None:
    with pytest.raises(PositionError, match="expected"):
        BinlogPosition.parse(text)


def test_file_without_number_is_rejected() -> None:
    with pytest.raises(PositionError, match="sequence number"):
        binlog_file_number("binlog")


def test_errors_pickle() -> None:
    import pickle

    err = PositionError("x")
    assert str(pickle.loads(pickle.dumps(err))) == "x"


# ---------------------------------------------------------------- identity in offsets

identities = st.one_of(
    st.builds(
        ServerIdentity,
        st.just("mysql"),
        st.integers(0, 2**32 - 1),
        uuids,
        st.none(),
    ),
    st.builds(
        ServerIdentity,
        st.just("mariadb"),
        st.integers(0, 2**32 - 1),
        st.none(),
        st.integers(0, 2**32 - 1),
    ),
)
tagged_positions = st.builds(
    BinlogPosition,
    st.integers(1, 999999).map(lambda n: f"mysql-bin.{n:06d}"),
    st.integers(4, 2**32 - 1),
    gtid_sets,
    st.one_of(
        st.none(),
        st.builds(binlog_file_tag, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    ),
    st.integers(0, 1000),
)


@given(tagged_positions, identities)
def test_offset_with_identity_round_trips_through_json(
    p: BinlogPosition, identity: ServerIdentity
) -> None:
    offset = json.loads(json.dumps({"binlog": p.to_offset(), "server": identity.to_offset()}))
    back = BinlogPosition.from_offset(offset["binlog"])
    assert back == p and str(back.gtids) == str(p.gtids)
    assert (back.file_tag, back.seq_file_base) == (p.file_tag, p.seq_file_base)
    again = ServerIdentity.from_offset(offset["server"])
    assert again == identity and again.same_server(identity)


def test_an_old_offset_without_tag_or_base_still_loads() -> None:
    old = {"file": "mysql-bin.000003", "pos": 154, "gtids": "0-1-9", "gtid_flavor": "mariadb"}
    p = BinlogPosition.from_offset(old)
    assert (p.file_tag, p.seq_file_base, str(p.gtids)) == (None, 0, "0-1-9")
    assert p.to_offset() == old


def test_identities_name_servers() -> None:
    a = ServerIdentity("mariadb", 1, domain_id=0)
    assert not a.same_server(ServerIdentity("mariadb", 2, domain_id=0))
    assert not a.same_server(ServerIdentity("mariadb", 1, domain_id=1))
    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    # MySQL: the UUID decides, whatever the server_id
    assert ServerIdentity("mysql", 1, uuid=u).same_server(ServerIdentity("mysql", 7, uuid=u))
    assert not ServerIdentity("mysql", 1, uuid=u).same_server(
        ServerIdentity("mysql", 1, uuid=u.replace("3e", "4f"))
    )
    with pytest.raises(PositionError, match="not a server identity"):
        ServerIdentity.from_offset({"flavor": "oracle", "server_id": 1})


@given(tagged_positions, tagged_positions, st.integers(0, 4095), st.integers(0, 4095))
def test_seq_after_a_failover_keeps_growing(
    old: BinlogPosition, new: BinlogPosition, row_old: int, row_new: int
) -> None:
    moved = new.with_gtids(None).after_failover(old)
    if moved.file_number + moved.seq_file_base <= (1 << 19) - 1:
        assert moved.seq(row_new) > old.seq(row_old)
