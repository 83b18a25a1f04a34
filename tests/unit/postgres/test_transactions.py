"""TransactionAssembler: plain and streamed transactions, interleaved, aborted in part."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sparkcdc.errors import ProtocolError
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import (
    Begin,
    Commit,
    Insert,
    Message,
    Origin,
    Relation,
    ReplicaIdentity,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
)
from sparkcdc.postgres.transactions import Transaction, TransactionAssembler

T = datetime(2026, 12, 7, tzinfo=UTC)
SHAPE = Relation(None, 7, "public", "t", ReplicaIdentity.DEFAULT, ())


def insert(key: str, xid: int | None = None) -> Insert:
    return Insert(xid, 7, (key,))


def feed(messages: list[Message]) -> list[Transaction]:
    assembler = TransactionAssembler()
    done = [assembler.feed(message) for message in messages]
    return [transaction for transaction in done if transaction is not None]


def test_a_plain_transaction_keeps_its_items_in_order() -> None:
    (done,) = feed(
        [
            Begin(Lsn(100), T, 5),
            Origin(Lsn(1), "a"),
            SHAPE,
            insert("1"),
            insert("2"),
            Commit(0, Lsn(100), Lsn(130), T),
        ]
    )
    assert (done.xid, done.commit_lsn, done.end_lsn, done.origin) == (5, Lsn(100), Lsn(130), "a")
    assert done.items == (SHAPE, insert("1"), insert("2"))
    assert not done.streamed


def test_interleaved_streamed_transactions_commit_in_commit_order() -> None:
    done = feed(
        [
            StreamStart(10, True),
            insert("a1", 10),
            StreamStop(),
            StreamStart(20, True),
            insert("b1", 20),
            StreamStop(),
            Begin(Lsn(150), T, 30),
            insert("plain"),
            Commit(0, Lsn(150), Lsn(160), T),
            StreamStart(10, False),
            insert("a2", 10),
            StreamStop(),
            StreamCommit(20, 0, Lsn(200), Lsn(210), T),
            StreamCommit(10, 0, Lsn(300), Lsn(310), T),
        ]
    )
    assert [(t.xid, t.streamed) for t in done] == [(30, False), (20, True), (10, True)]
    assert done[2].items == (insert("a1", 10), insert("a2", 10))


def test_a_streamed_abort_drops_the_transaction_or_only_the_subtransaction() -> None:
    done = feed(
        [
            StreamStart(10, True),
            SHAPE,
            insert("keep", 10),
            insert("sub", 11),
            StreamStop(),
            StreamAbort(10, 11, None, None),
            StreamStart(20, True),
            insert("gone", 20),
            StreamStop(),
            StreamAbort(20, 20, None, None),
            StreamCommit(10, 0, Lsn(300), Lsn(310), T),
        ]
    )
    assert [t.xid for t in done] == [10]
    assert done[0].items == (SHAPE, insert("keep", 10))


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([insert("1")], "outside any transaction"),
        ([Begin(Lsn(1), T, 1), Begin(Lsn(2), T, 2)], "inside an open transaction"),
        ([Commit(0, Lsn(1), Lsn(2), T)], "without its Begin"),
        ([Begin(Lsn(1), T, 1), Commit(0, Lsn(5), Lsn(6), T)], "out of order"),
        ([StreamStop()], "without its Stream Start"),
    ],
)
def test_an_out_of_order_stream_is_refused(messages: list[Message], match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        feed(messages)
