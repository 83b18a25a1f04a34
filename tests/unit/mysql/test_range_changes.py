"""The range reader on event bytes (``changes_of_events``): compressed transactions, rows of
a binlog without column metadata completed from schema versions, and what stops it.

MySQL 8's TRANSACTION_PAYLOAD cannot be produced here (no MySQL server can be installed on
these machines): it is built from bytes to the documented layout.
"""

from __future__ import annotations

import struct

import pytest
from tests.unit.mysql.test_decoder import (
    FULL_ROW,
    FULL_VALUES,
    NULL_ROW,
    NULL_VALUES,
    lenenc,
    row_image,
    rows_body,
    table_map_body,
)
from tests.unit.mysql.test_decoder_mysql8 import event, mysql8_fde, payload_event

from sparkcdc.errors import ProtocolError, SchemaChangedError, SourceError
from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.mysql.binlog.metadata_from_schema import TableVersions
from sparkcdc.mysql.protocol.constants import EVENT_HEADER_SIZE, EventType
from sparkcdc.mysql.stream.binlog_range import Share, changes_of_events

START = BinlogPosition("mysql-bin.000001", 4)


def read(events: list[bytes], *args: object) -> list[RowChanges | SchemaChange]:
    """``changes_of_events`` up to the end of the last event (the range's end)."""
    end = BinlogPosition("mysql-bin.000001", struct.unpack_from("<I", events[-1], 13)[0])
    return list(changes_of_events(events, START, end, *args))  # type: ignore[arg-type]


def orders(_db: str, table: str) -> bool:
    return table == "orders"


def transaction_events(table_map: bytes, table_id: int = 42) -> bytes:
    write = rows_body(table_id, row_image(FULL_ROW), RowsKind.INSERT, v2=True)
    update = rows_body(table_id, row_image(FULL_ROW) + row_image(NULL_ROW), RowsKind.UPDATE, True)
    delete = rows_body(table_id, row_image(NULL_ROW), RowsKind.DELETE, v2=True)
    return b"".join(
        [
            event(EventType.TABLE_MAP, table_map),
            event(EventType.WRITE_ROWS_V2, write),
            event(EventType.UPDATE_ROWS_V2, update),
            event(EventType.DELETE_ROWS_V2, delete),
            event(EventType.XID, struct.pack("<Q", 77)),
        ]
    )


def with_fde(*events: bytes) -> list[bytes]:
    return [mysql8_fde(), *events]


def test_the_rows_of_a_compressed_transaction_are_delivered_with_distinct_seqs() -> None:
    raw = payload_event(transaction_events(table_map_body()), log_pos=5000)
    changes = read(with_fde(raw), orders)
    assert [type(c) for c in changes] == [RowChanges] * 3
    assert all(isinstance(c, RowChanges) for c in changes)
    rows = [c.rows for c in changes if isinstance(c, RowChanges)]
    assert rows == [[(None, FULL_VALUES)], [(FULL_VALUES, NULL_VALUES)], [(NULL_VALUES, None)]]
    here = BinlogPosition("mysql-bin.000001", 5000 - len(raw))
    assert {c.position for c in changes if isinstance(c, RowChanges)} == {here}
    # insert: 1 image; update: before + after; delete: 1 -> images 0, 1-2, 3
    assert [c.first_row for c in changes if isinstance(c, RowChanges)] == [0, 1, 3]


def test_a_compressed_transaction_of_other_tables_yields_nothing() -> None:
    raw = payload_event(transaction_events(table_map_body()))
    assert read(with_fde(raw), lambda d, t: False) == []


ORDERS = TableSchema(
    "shop",
    "orders",
    (
        Column.from_mysql("id", "bigint", "bigint(20)", False),
        Column.from_mysql("tiny_u", "tinyint", "tinyint(3) unsigned", True),
        Column.from_mysql("name", "varchar", "varchar(100)", True, charset="utf8mb4"),
        Column.from_mysql("amount", "decimal", "decimal(12,3)", True),
        Column.from_mysql("created", "datetime", "datetime(3)", True),
        Column.from_mysql("color", "enum", "enum('red','grün')", True, charset="utf8mb4"),
        Column.from_mysql("tags", "set", "set('a','b','c')", True, charset="utf8mb4"),
        Column.from_mysql("data", "blob", "blob", True),
        Column.from_mysql("wide_char", "char", "char(255)", True, charset="utf8mb4"),
        Column.from_mysql("score", "double", "double", True),
    ),
    ("id",),
)


@pytest.mark.parametrize("compressed", [False, True])
def test_rows_without_metadata_decode_as_with_full_metadata(compressed: bool) -> None:
    """A TABLE_MAP without optional metadata, completed from the versions before its rows
    decode (also inside a compressed transaction): the very values FULL metadata gives."""
    bare = transaction_events(table_map_body(optional=False))
    events = with_fde(payload_event(bare) if compressed else bare)
    if not compressed:
        events = [mysql8_fde(), *_split(bare)]
    versions = TableVersions.of([ORDERS])
    changes = read(events, orders, versions)
    rows = [c.rows for c in changes if isinstance(c, RowChanges)]
    assert rows == [[(None, FULL_VALUES)], [(FULL_VALUES, NULL_VALUES)], [(NULL_VALUES, None)]]
    names = list(changes[0].columns.names)  # type: ignore[union-attr]
    assert names == list(ORDERS.column_names)
    with pytest.raises(SourceError, match="no column metadata"):
        read(events, orders)


def _split(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        out.append(data[pos : pos + size])
        pos += size
    # give each event its own end position, in order
    return [e[:13] + struct.pack("<I", 1000 + 100 * i) + e[17:] for i, e in enumerate(out)]


def test_a_schema_that_disagrees_with_the_table_map_stops() -> None:
    wrong = TableSchema("shop", "orders", ORDERS.columns[:-1], ("id",))
    events = [mysql8_fde(), *_split(transaction_events(table_map_body(optional=False)))]
    with pytest.raises(SourceError, match="do not match the schema"):
        read(events, orders, TableVersions.of([wrong]))


def test_a_ddl_the_versions_do_not_know_stops_the_next_bare_table_map() -> None:
    ddl = struct.pack("<IIBHH", 9, 0, 4, 0, 0) + b"shop\0ALTER TABLE orders ADD COLUMN x INT"
    events = [
        mysql8_fde(),
        *_split(event(EventType.QUERY, ddl) + transaction_events(table_map_body(optional=False))),
    ]
    with pytest.raises(SchemaChangedError, match="changed at binlog position"):
        read(events, orders, TableVersions.of([ORDERS]))
    # with FULL metadata the DDL is delivered and the rows decode by their own names
    full = [
        mysql8_fde(),
        *_split(event(EventType.QUERY, ddl) + transaction_events(table_map_body())),
    ]
    kinds = [type(c) for c in read(full, orders, TableVersions.of([ORDERS]))]
    assert kinds == [SchemaChange, RowChanges, RowChanges, RowChanges]


def test_row_images_that_lack_columns_stop_with_the_fix() -> None:
    minimal = rows_body(42, row_image([struct.pack("<q", 1)]), RowsKind.DELETE, True, b"\x01\x00")
    events = [
        mysql8_fde(),
        *_split(
            event(EventType.TABLE_MAP, table_map_body()) + event(EventType.DELETE_ROWS_V2, minimal)
        ),
    ]
    with pytest.raises(SourceError) as caught:
        read(events, orders)
    message = str(caught.value)
    assert "shop.orders" in message and "tiny_u" in message
    assert "SET GLOBAL binlog_row_image='FULL'" in message


@pytest.mark.parametrize(
    ("type_code", "flags", "error"),
    [
        (EventType.INCIDENT, 0, SourceError),
        (EventType.EXECUTE_LOAD_QUERY, 0, SourceError),
        (120, 0, ProtocolError),
        (120, 0x80, None),  # LOG_EVENT_IGNORABLE_F: the server says it may be skipped
        (EventType.MARIA_BINLOG_CHECKPOINT, 0, None),
        (EventType.INTVAR, 0, None),
    ],
)
def test_unknown_events_stop_unless_inert_or_ignorable(
    type_code: int, flags: int, error: type[Exception] | None
) -> None:
    raw = event(type_code, b"\x00" * 8, log_pos=2000, flags=flags)
    events = with_fde(raw)
    if error is None:
        assert read(events, orders) == []
    else:
        with pytest.raises(error, match=r"at .*position"):
            read(events, orders)


def test_an_xa_rollback_prepared_before_the_read_stops_only_a_read_that_delivers_rows() -> None:
    rollback = struct.pack("<IIBHH", 9, 0, 4, 0, 0) + b"shop\0XA ROLLBACK X'7a',X'',1"
    events = with_fde(event(EventType.QUERY, rollback, log_pos=2000))
    with pytest.raises(SourceError, match="before this read began"):
        read(events, orders)
    # a schema-change scan delivers no rows; the chunk backfill follows XA itself (on_xa)
    end = BinlogPosition("mysql-bin.000001", 2000)
    assert list(changes_of_events(events, START, end, orders, rows=False)) == []
    completed: list[str] = []
    on_xa = lambda kind, at: completed.append(kind)  # noqa: E731
    assert list(changes_of_events(events, START, end, orders, on_xa=on_xa)) == []


# ---------------------------------------------------------------- shares of one range


def _positioned(*bodies: tuple[int, bytes]) -> list[bytes]:
    """Events (type code, body) one after another from position 4: each ends where the
    next begins, as in a binlog file."""
    out, pos = [mysql8_fde()], 4
    for type_code, body in bodies:
        pos += EVENT_HEADER_SIZE + len(body)
        out.append(event(type_code, body, log_pos=pos))
    return out


def _query(text: str) -> tuple[int, bytes]:
    return EventType.QUERY, struct.pack("<IIBHH", 9, 0, 4, 0, 0) + b"shop\0" + text.encode()


def _transaction(*images: tuple[RowsKind, bytes]) -> list[tuple[int, bytes]]:
    codes = {
        RowsKind.INSERT: EventType.WRITE_ROWS_V2,
        RowsKind.UPDATE: EventType.UPDATE_ROWS_V2,
        RowsKind.DELETE: EventType.DELETE_ROWS_V2,
    }
    return [
        _query("BEGIN"),
        (EventType.TABLE_MAP, table_map_body()),
        *((codes[kind], rows_body(42, image, kind, v2=True)) for kind, image in images),
        (EventType.XID, struct.pack("<Q", 77)),
    ]


def _workload() -> list[bytes]:
    full, null = row_image(FULL_ROW), row_image(NULL_ROW)
    bodies: list[tuple[int, bytes]] = []
    for i in range(7):
        bodies += _transaction(
            *[(RowsKind.INSERT, full)] * (i % 3 + 1),
            (RowsKind.UPDATE, full + null),
            (RowsKind.DELETE, null * (i % 2 + 1)),
        )
        if i == 3:
            bodies.append(_query("ALTER TABLE orders ADD COLUMN extra INT"))
    return _positioned(*bodies)


@pytest.mark.parametrize("count", [2, 3, 5])
def test_readers_of_shares_of_a_range_yield_each_change_exactly_once(count: int) -> None:
    events = _workload()
    end = BinlogPosition("mysql-bin.000001", struct.unpack_from("<I", events[-1], 13)[0])
    whole = list(changes_of_events(events, START, end, orders))
    assert sum(isinstance(c, SchemaChange) for c in whole) == 1
    parts = [
        list(changes_of_events(events, START, end, orders, share=Share(i, count)))
        for i in range(count)
    ]
    # every reader decodes some rows; together exactly the whole range's, each once
    assert all(any(isinstance(c, RowChanges) for c in part) for part in parts)
    key = lambda c: (c.position, getattr(c, "first_row", -1))  # noqa: E731
    merged = sorted((c for part in parts for c in part), key=key)
    assert [(key(c), c.rows if isinstance(c, RowChanges) else c.statement) for c in merged] == [
        (key(c), c.rows if isinstance(c, RowChanges) else c.statement) for c in whole
    ]
    # the schema change is reader 0's alone
    assert [sum(isinstance(c, SchemaChange) for c in part) for part in parts] == [1] + [0] * (
        count - 1
    )


def test_every_reader_of_a_share_judges_an_xa_rollback_of_captured_rows() -> None:
    """A reader that leaves an XA transaction's rows to another still knows they touched a
    captured table: its ROLLBACK stops every reader, not only the one that decoded them."""
    full = row_image(FULL_ROW)
    events = _positioned(
        _query("XA START X'7a',X'',1"),
        (EventType.TABLE_MAP, table_map_body()),
        (EventType.WRITE_ROWS_V2, rows_body(42, full, RowsKind.INSERT, v2=True)),
        (EventType.WRITE_ROWS_V2, rows_body(42, full, RowsKind.INSERT, v2=True)),
        _query("XA END X'7a',X'',1"),
        _query("XA PREPARE X'7a',X'',1"),
        _query("XA ROLLBACK X'7a',X'',1"),
    )
    end = BinlogPosition("mysql-bin.000001", struct.unpack_from("<I", events[-1], 13)[0])
    for index in range(3):
        with pytest.raises(SourceError, match="rolled back"):
            list(changes_of_events(events, START, end, orders, share=Share(index, 3)))


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TABLE audit, orders",  # the captured table is not the first named
        "RENAME TABLE orders_new TO orders",  # an online schema change tool's swap
        "RENAME TABLE audit TO audit_old, orders TO orders_old",
        "ALTER TABLE orders_tmp RENAME TO orders",
    ],
)
def test_a_ddl_on_a_captured_table_anywhere_in_the_statement_is_delivered(statement: str) -> None:
    body = struct.pack("<IIBHH", 9, 0, 4, 0, 0) + b"shop\0" + statement.encode()
    changes = read([mysql8_fde(), event(EventType.QUERY, body)], orders)
    assert [(type(c), c.database, c.table) for c in changes] == [(SchemaChange, "shop", "orders")]
    assert isinstance(changes[0], SchemaChange) and changes[0].statement == statement


def test_a_ddl_on_two_captured_tables_is_a_schema_change_of_each() -> None:
    statement = "DROP TABLE orders, shop.orders_archive"
    body = struct.pack("<IIBHH", 9, 0, 4, 0, 0) + b"shop\0" + statement.encode()
    changes = read([mysql8_fde(), event(EventType.QUERY, body)], lambda d, t: d == "shop")
    assert [(c.database, c.table) for c in changes] == [
        ("shop", "orders"),
        ("shop", "orders_archive"),
    ]


def test_rows_of_a_table_the_stream_no_longer_has_a_schema_for_stop_every_reader() -> None:
    """A table the stream captured before it stopped, gone when it started again: its DDL
    comes through the DDL filter, a row change of it stops the read (every reader of a
    share, the one that would decode it or not); other tables' rows are not judged."""
    full = row_image(FULL_ROW)
    events = _positioned(
        _query("ALTER TABLE orders ADD COLUMN extra INT"),
        *_transaction((RowsKind.INSERT, full), (RowsKind.INSERT, full)),
    )
    end = BinlogPosition("mysql-bin.000001", struct.unpack_from("<I", events[-1], 13)[0])
    nothing = lambda d, t: False  # noqa: E731
    for index in range(2):
        with pytest.raises(SourceError) as caught:
            list(
                changes_of_events(
                    events,
                    START,
                    end,
                    nothing,
                    share=Share(index, 2),
                    ddl_filter=orders,
                    stop_table=orders,
                )
            )
        assert "rows of shop.orders changed" in str(caught.value)
        assert "ddl.row-changes=continue" in str(caught.value)
    # without it (ddl.row-changes=continue) the DDL still comes, the rows do not
    changes = list(changes_of_events(events, START, end, nothing, ddl_filter=orders))
    assert [(type(c), c.table) for c in changes] == [(SchemaChange, "orders")]
    # a gone table's name is no stop for a table that is captured
    assert len(list(changes_of_events(events, START, end, orders, stop_table=nothing))) == 3


UNKNOWN_COLLATION = 4000  # no server's collation table has it (MariaDB's uca1400 ends at 3071)


def _unknown_collation_table_map() -> bytes:
    """The orders TABLE_MAP with FULL metadata, but its text columns (and ENUM / SET labels)
    in a collation sparkcdc does not know; ``data`` stays binary."""
    body = table_map_body()
    known = b"\x02\x03" + lenenc(45) + lenenc(1) + lenenc(63)  # DEFAULT_CHARSET: utf8mb4
    unknown = lenenc(UNKNOWN_COLLATION) + lenenc(1) + lenenc(63)
    labels_known = b"\x0a\x01" + lenenc(45)  # ENUM_AND_SET_DEFAULT_CHARSET
    labels_unknown = lenenc(UNKNOWN_COLLATION)
    assert body.count(known) == 1 and body.count(labels_known) == 1
    body = body.replace(known, b"\x02" + lenenc(len(unknown)) + unknown)
    return body.replace(labels_known, b"\x0a" + lenenc(len(labels_unknown)) + labels_unknown)


def _with_charset(schema: TableSchema, charset: str) -> TableSchema:
    columns = tuple(
        Column.from_mysql(c.name, c.data_type, c.column_type, c.nullable, charset=charset)
        if c.charset
        else c
        for c in schema.columns
    )
    return TableSchema(schema.database, schema.table, columns, schema.primary_key)


def test_text_of_an_unknown_collation_decodes_by_the_schemas_character_set() -> None:
    """A collation id sparkcdc does not know (a newer server's, or one compiled in by hand)
    used to decode as UTF-8, a guess. The text now decodes by the character set the schema
    names for the column; without a schema, or with a character set sparkcdc cannot decode,
    the read stops and says which column and what to do."""
    events = [mysql8_fde(), *_split(transaction_events(_unknown_collation_table_map()))]
    rows = [
        c.rows
        for c in read(events, orders, TableVersions.of([ORDERS]))
        if isinstance(c, RowChanges)
    ]
    assert rows == [[(None, FULL_VALUES)], [(FULL_VALUES, NULL_VALUES)], [(NULL_VALUES, None)]]

    # the schema's character set is the one used: UTF-8 bytes read as MySQL latin1
    latin1 = _with_charset(ORDERS, "latin1")
    first = next(c for c in read(events, orders, TableVersions.of([latin1])))
    assert isinstance(first, RowChanges)
    name = FULL_VALUES[2].encode("utf-8").decode("cp1252", "mysql-latin1")  # type: ignore[union-attr]
    assert first.rows[0][1][2] == name  # type: ignore[index]

    with pytest.raises(SourceError, match=f"collation id {UNKNOWN_COLLATION}"):
        read(events, orders)
    unreadable = _with_charset(ORDERS, "klingon8")
    with pytest.raises(SourceError, match="character set klingon8 in the schema") as caught:
        read(events, orders, TableVersions.of([unreadable]))
    assert "'name' of shop.orders" in str(caught.value)


def test_a_decoder_without_a_schema_refuses_text_of_an_unknown_collation() -> None:
    from sparkcdc.mysql.binlog.decoder import BinlogDecoder

    decoder = BinlogDecoder(table_filter=orders)
    table_map, insert, *_ = _split(transaction_events(_unknown_collation_table_map()))
    decoder.decode(mysql8_fde())
    decoder.decode(table_map)
    with pytest.raises(ProtocolError, match=f"collation id {UNKNOWN_COLLATION}"):
        decoder.decode(insert)


def test_the_message_names_every_unknown_collation_id_zero_included() -> None:
    from sparkcdc.mysql.binlog.decoded_events import ColumnInfo
    from sparkcdc.mysql.binlog.metadata_from_schema import missing_metadata
    from sparkcdc.mysql.protocol.constants import ColumnType

    columns = tuple(
        ColumnInfo(f"c{i}", ColumnType.VARCHAR, 80, True, False, collation, None, None)
        for i, collation in enumerate((UNKNOWN_COLLATION, 0, 45))
    )
    assert missing_metadata(columns) == (
        f"a text column with collation id 0, {UNKNOWN_COLLATION}, which sparkcdc does not know"
    )


@pytest.mark.parametrize(
    ("statement", "answer", "stop"),
    [
        # the server says the uncaptured table changes alone: the statement goes by
        ("INSERT INTO audit VALUES (1)", None, None),
        ("UPDATE IGNORE audit SET n = 1", None, None),
        # a trigger (or no server to ask): not proven
        ("INSERT INTO audit VALUES (1)", "it has a trigger (t1)", "writes shop.audit, and it has"),
        ("INSERT INTO audit VALUES (1)", "no server", "writes shop.audit, and no server to ask"),
        ("INSERT INTO log SELECT * FROM audit", "it is a view", "reads shop.audit, and it is"),
        # never asked: the captured table is named, or the statement calls a stored function
        ("UPDATE LOW_PRIORITY orders SET n = 1", None, "a data change to shop.orders"),
        ("SELECT `aux`.`f`()", None, "it calls aux.f(), a stored function"),
    ],
)
def test_a_statement_logged_change_goes_by_only_when_proven(
    statement: str, answer: str | None, stop: str | None
) -> None:
    events = _positioned(_query(statement))
    end = BinlogPosition("mysql-bin.000001", struct.unpack_from("<I", events[-1], 13)[0])
    asked: list[tuple[str, str, bool]] = []

    def effects(database: str, table: str, written: bool) -> str | None:
        asked.append((database, table, written))
        if answer == "it is a view":  # a view is judged also when only read
            return answer if table == "audit" else None
        return answer if written else None

    server = None if answer == "no server" else effects
    changes = changes_of_events(events, START, end, orders, write_effects=server)
    if stop is None:
        assert list(changes) == []
        assert asked == [("shop", "audit", True)]
        return
    with pytest.raises(SourceError) as caught:
        list(changes)
    message = str(caught.value)
    assert stop in message and "binlog_format=STATEMENT or MIXED" in message
    assert "at binlog position mysql-bin.000001:4" in message
