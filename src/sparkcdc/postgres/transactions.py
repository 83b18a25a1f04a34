"""Whole committed transactions from a sequence of decoded pgoutput messages.

``TransactionAssembler`` is pure: feed it messages in stream order, it returns each
transaction once its commit arrives. A plain transaction is Begin .. Commit; a streamed one
(protocol 2+, ``streaming on``) arrives in Stream Start .. Stream Stop segments, possibly
interleaved with other transactions, and ends in Stream Commit (kept) or Stream Abort (of
the whole transaction, or of one subtransaction whose changes are dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sparkcdc.errors import ProtocolError
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Relation,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    Truncate,
    TypeDefinition,
    Update,
)

# What a transaction holds, in stream order: its changes, transactional logical messages,
# and the Relation / Type messages that describe the tables of the changes after them.
TransactionItem = Insert | Update | Delete | Truncate | LogicalMessage | Relation | TypeDefinition


@dataclass(frozen=True)
class Transaction:
    xid: int
    commit_lsn: Lsn  # the commit record's LSN: a transaction is in [start, end) by this
    end_lsn: Lsn  # the end of the commit record: confirm() this once the transaction is kept
    commit_time: datetime
    origin: str | None  # the replication origin that applied it here, if any
    items: tuple[TransactionItem, ...]
    streamed: bool = False


@dataclass
class _Open:
    xid: int
    items: list[TransactionItem] = field(default_factory=list)
    origin: str | None = None


class TransactionAssembler:
    """Feed messages in order; ``feed`` returns a Transaction when one commits.

    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> assembler = TransactionAssembler()
    >>> assembler.feed(Begin(Lsn(100), t, 7)) is None
    True
    >>> assembler.feed(Commit(0, Lsn(100), Lsn(120), t)).end_lsn
    Lsn(value=120)
    """

    def __init__(self) -> None:
        self._current: _Open | None = None  # the plain transaction between Begin and Commit
        self._streamed: dict[int, _Open] = {}  # streamed transactions by top-level xid
        self._segment: _Open | None = None  # the streamed transaction of the open segment
        self._begin: Begin | None = None

    @property
    def in_stream(self) -> bool:
        """True between Stream Start and Stream Stop (where messages carry an xid)."""
        return self._segment is not None

    @property
    def in_transaction(self) -> bool:
        """True between Begin and Commit of a plain transaction."""
        return self._current is not None

    def feed(self, message: Message) -> Transaction | None:
        match message:
            case Begin():
                self._expect_outside(message)
                self._begin, self._current = message, _Open(message.xid)
            case Commit():
                return self._commit(message)
            case Origin():
                self._open(message).origin = message.name
            case StreamStart():
                self._expect_outside(message)
                self._segment = self._streamed.setdefault(message.xid, _Open(message.xid))
            case StreamStop():
                if self._segment is None:
                    raise ProtocolError("a Stream Stop without its Stream Start")
                self._segment = None
            case StreamCommit():
                self._expect_outside(message)
                done = self._streamed.pop(message.xid, None) or _Open(message.xid)
                return Transaction(
                    message.xid,
                    message.commit_lsn,
                    message.end_lsn,
                    message.commit_time,
                    done.origin,
                    tuple(done.items),
                    streamed=True,
                )
            case StreamAbort():
                self._abort(message)
            case LogicalMessage(transactional=False):
                pass  # outside any transaction: the reader passes it on by itself
            case Relation() | TypeDefinition():
                # a table's shape may arrive between transactions too: keep it with the
                # next one's items only when inside one
                if self._current is not None or self._segment is not None:
                    self._open(message).items.append(message)
            case _:
                self._open(message).items.append(message)
        return None

    def _open(self, message: Message) -> _Open:
        current = self._segment or self._current
        if current is None:
            raise ProtocolError(
                f"a pgoutput {type(message).__name__} message outside any transaction: "
                "expected it between Begin and Commit or Stream Start and Stream Stop"
            )
        return current

    def _expect_outside(self, message: Message) -> None:
        if self._current is not None or self._segment is not None:
            raise ProtocolError(
                f"a pgoutput {type(message).__name__} message inside an open transaction "
                "(after a Begin or Stream Start that has not ended): the stream is out of order"
            )

    def _commit(self, commit: Commit) -> Transaction:
        if self._current is None or self._begin is None:
            raise ProtocolError(f"a Commit at {commit.commit_lsn} without its Begin")
        if self._begin.final_lsn != commit.commit_lsn:
            raise ProtocolError(
                f"a Commit at {commit.commit_lsn} closes the transaction whose Begin said it "
                f"commits at {self._begin.final_lsn}: the stream is out of order"
            )
        done, self._current, self._begin = self._current, None, None
        return Transaction(
            done.xid,
            commit.commit_lsn,
            commit.end_lsn,
            commit.commit_time,
            done.origin,
            tuple(done.items),
        )

    def _abort(self, abort: StreamAbort) -> None:
        self._expect_outside(abort)
        if abort.subxid == abort.xid:
            self._streamed.pop(abort.xid, None)
            return
        pending = self._streamed.get(abort.xid)
        if pending is not None:  # drop the aborted subtransaction's changes; shapes stay
            pending.items = [
                item
                for item in pending.items
                if isinstance(item, Relation | TypeDefinition) or item.xid != abort.subxid
            ]
