"""pgoutput messages decoded from bytes laid out as the protocol documents them
(https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html)."""

from __future__ import annotations

import contextlib
import pickle
import struct
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.errors import ProtocolError
from sparkcdc.postgres.copyboth import (
    PrimaryKeepalive,
    XLogData,
    decode_copy_message,
    standby_status_update,
)
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    DecodeContext,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Relation,
    RelationColumn,
    ReplicaIdentity,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    Truncate,
    TruncateOption,
    TupleKind,
    TypeDefinition,
    Update,
    decode_message,
)

T0 = datetime(2026, 12, 7, 8, 0, 0, 123456, tzinfo=UTC)
T0_MICROS = (T0 - datetime(2000, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
STREAM = DecodeContext(in_stream=True)


def cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def tuple_data(*columns: bytes) -> bytes:
    return struct.pack(">h", len(columns)) + b"".join(columns)


def text(value: str) -> bytes:
    raw = value.encode()
    return b"t" + struct.pack(">i", len(raw)) + raw


NULL, TOAST = b"n", b"u"
ROW = tuple_data(text("1"), NULL, TOAST, b"b" + struct.pack(">i", 4) + b"\x00\x00\x00\x07")
ROW_VALUES = ("1", None, UNCHANGED_TOAST, b"\x00\x00\x00\x07")

CASES: list[tuple[str, bytes, DecodeContext, Message]] = [
    (
        "begin",
        b"B" + struct.pack(">QqI", 0x100, T0_MICROS, 722),
        DecodeContext(),
        Begin(Lsn(0x100), T0, 722),
    ),
    (
        "commit",
        b"C" + struct.pack(">bQQq", 0, 0x100, 0x130, T0_MICROS),
        DecodeContext(),
        Commit(0, Lsn(0x100), Lsn(0x130), T0),
    ),
    (
        "origin",
        b"O" + struct.pack(">Q", 0x42) + cstr("node_a"),
        DecodeContext(),
        Origin(Lsn(0x42), "node_a"),
    ),
    (
        "relation",
        b"R"
        + struct.pack(">I", 16390)
        + cstr("public")
        + cstr("orders")
        + b"f"
        + struct.pack(">h", 2)
        + b"\x01"
        + cstr("id")
        + struct.pack(">Ii", 23, -1)
        + b"\x00"
        + cstr("price")
        + struct.pack(">Ii", 1700, 655366),
        DecodeContext(),
        Relation(
            None,
            16390,
            "public",
            "orders",
            ReplicaIdentity.FULL,
            (RelationColumn("id", 23, -1, True), RelationColumn("price", 1700, 655366, False)),
        ),
    ),
    (
        "relation in a stream",
        b"R" + struct.pack(">II", 900, 7) + cstr("") + cstr("t") + b"d" + struct.pack(">h", 0),
        STREAM,
        Relation(900, 7, "", "t", ReplicaIdentity.DEFAULT, ()),
    ),
    (
        "type",
        b"Y" + struct.pack(">I", 16400) + cstr("public") + cstr("mood"),
        DecodeContext(),
        TypeDefinition(None, 16400, "public", "mood"),
    ),
    (
        "insert",
        b"I" + struct.pack(">I", 7) + b"N" + ROW,
        DecodeContext(),
        Insert(None, 7, ROW_VALUES),
    ),
    (
        "insert in a stream",
        b"I" + struct.pack(">II", 901, 7) + b"N" + ROW,
        STREAM,
        Insert(901, 7, ROW_VALUES),
    ),
    (
        "update without old image",
        b"U" + struct.pack(">I", 7) + b"N" + ROW,
        DecodeContext(),
        Update(None, 7, None, None, ROW_VALUES),
    ),
    (
        "update with old key",
        b"U" + struct.pack(">I", 7) + b"K" + tuple_data(text("9"), NULL) + b"N" + ROW,
        DecodeContext(),
        Update(None, 7, TupleKind.KEY, ("9", None), ROW_VALUES),
    ),
    (
        "update with old tuple",
        b"U" + struct.pack(">I", 7) + b"O" + ROW + b"N" + ROW,
        DecodeContext(),
        Update(None, 7, TupleKind.OLD, ROW_VALUES, ROW_VALUES),
    ),
    (
        "delete by key",
        b"D" + struct.pack(">I", 7) + b"K" + tuple_data(text("1")),
        DecodeContext(),
        Delete(None, 7, TupleKind.KEY, ("1",)),
    ),
    (
        "delete with old tuple in a stream",
        b"D" + struct.pack(">II", 902, 7) + b"O" + ROW,
        STREAM,
        Delete(902, 7, TupleKind.OLD, ROW_VALUES),
    ),
    (
        "truncate",
        b"T" + struct.pack(">iBII", 2, 3, 7, 8),
        DecodeContext(),
        Truncate(None, TruncateOption.CASCADE | TruncateOption.RESTART_IDENTITY, (7, 8)),
    ),
    (
        "message",
        b"M" + struct.pack(">BQ", 1, 0x200) + cstr("sparkcdc") + struct.pack(">i", 3) + b"abc",
        DecodeContext(),
        LogicalMessage(None, True, Lsn(0x200), "sparkcdc", b"abc"),
    ),
    ("stream start", b"S" + struct.pack(">IB", 900, 1), DecodeContext(), StreamStart(900, True)),
    ("stream stop", b"E", STREAM, StreamStop()),
    (
        "stream commit",
        b"c" + struct.pack(">IbQQq", 900, 0, 0x300, 0x330, T0_MICROS),
        DecodeContext(),
        StreamCommit(900, 0, Lsn(0x300), Lsn(0x330), T0),
    ),
    (
        "stream abort",
        b"A" + struct.pack(">II", 900, 901),
        DecodeContext(),
        StreamAbort(900, 901, None, None),
    ),
    (
        "stream abort, protocol 4 parallel",
        b"A" + struct.pack(">IIQq", 900, 900, 0x400, T0_MICROS),
        DecodeContext(),
        StreamAbort(900, 900, Lsn(0x400), T0),
    ),
]


@pytest.mark.parametrize(
    ("payload", "context", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_message_type_decodes(
    payload: bytes, context: DecodeContext, expected: Message
) -> None:
    assert decode_message(payload, context) == expected


def test_unchanged_toast_is_a_marker_not_a_value() -> None:
    (decoded,) = decode_message(b"I" + struct.pack(">I", 7) + b"N" + tuple_data(TOAST)).new  # type: ignore[union-attr]
    assert decoded is UNCHANGED_TOAST
    assert not isinstance(decoded, str | bytes) and decoded is not None
    assert pickle.loads(pickle.dumps(decoded)) is UNCHANGED_TOAST


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"", "empty"),
        (b"Z", "not one this decoder knows"),
        (b"B" + struct.pack(">Q", 1), "truncated"),
        (b"C" + struct.pack(">bQQq", 0, 1, 2, 3) + b"x", "bytes after its end"),
        (b"I" + struct.pack(">I", 7) + b"X" + tuple_data(), "tuple kind"),
        (b"I" + struct.pack(">I", 7) + b"N" + tuple_data(b"q"), "column format"),
        (b"O" + struct.pack(">Q", 1) + b"no-nul", "terminating NUL"),
        (
            b"R" + struct.pack(">I", 1) + cstr("s") + cstr("t") + b"z" + struct.pack(">h", 0),
            "replica identity",
        ),
    ],
)
def test_malformed_messages_say_what_is_wrong(payload: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        decode_message(payload)


def test_copy_both_messages() -> None:
    xlog = decode_copy_message(b"w" + struct.pack(">QQq", 5, 6, T0_MICROS) + b"B...")
    assert xlog == XLogData(Lsn(5), Lsn(6), T0, b"B...")
    keepalive = decode_copy_message(b"k" + struct.pack(">QqB", 9, T0_MICROS, 0))
    assert keepalive == PrimaryKeepalive(Lsn(9), T0, False)
    with pytest.raises(ProtocolError, match="expected XLogData"):
        decode_copy_message(b"k" + struct.pack(">Qq", 9, 0))


def test_a_status_update_reports_the_confirmed_lsn_as_written_flushed_and_applied() -> None:
    update = standby_status_update(Lsn(0x1234), T0, reply_requested=True)
    assert update == b"r" + struct.pack(">QQQqB", 0x1234, 0x1234, 0x1234, T0_MICROS, 1)


@given(st.sampled_from([c[1] for c in CASES]), st.data())
def test_damaged_messages_raise_only_protocol_errors(payload: bytes, data: st.DataObject) -> None:
    """Any cut or flipped byte of a real layout decodes or says ProtocolError, nothing else."""
    cut = data.draw(st.integers(0, len(payload)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), max_size=3))
    damaged = bytearray(payload[:cut] + data.draw(st.binary(max_size=8)))
    for where, value in flips:
        if damaged:
            damaged[where % len(damaged)] = value
    for context in (DecodeContext(), STREAM):
        with contextlib.suppress(ProtocolError):
            decode_message(bytes(damaged), context)
