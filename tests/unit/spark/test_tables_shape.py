"""The tables shape: each value typed in its table's struct when the binlog stores it as the
struct's column does, else as text; nothing dropped, nothing converted by a guess."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.mysql.binlog.decoded_events import ColumnInfo
from sparkcdc.mysql.binlog.metadata_from_schema import image_columns, same_storage
from sparkcdc.mysql.protocol.constants import ColumnType
from sparkcdc.spark.changelog.decoded import SnapshotRows
from sparkcdc.spark.changelog.tables import TablesBuilder, table_column

UTF8 = 45  # utf8mb4_general_ci
BINARY = 63

ID = Column.from_mysql("id", "int", "int(11)", False)
FLAG = Column.from_mysql("flag", "tinyint", "tinyint(1)", True)
NAME = Column.from_mysql("name", "varchar", "varchar(20)", True)
PRICE = Column.from_mysql("price", "decimal", "decimal(10,2)", True)
ORDERS = TableSchema("app", "orders", (ID, FLAG, NAME, PRICE), ("id",))


def info(name: str, kind: ColumnType, meta: int = 0, **extra: object) -> ColumnInfo:
    values: dict[str, object] = {
        "nullable": True,
        "unsigned": False,
        "charset": None,
        "enum_values": None,
        "set_values": None,
    }
    values.update(extra)
    return ColumnInfo(name, kind, meta, **values)  # type: ignore[arg-type]


ORDERS_MAP = (
    info("id", ColumnType.LONG),
    info("flag", ColumnType.TINY),
    info("name", ColumnType.VARCHAR, 80, charset=UTF8),
    info("price", ColumnType.NEWDECIMAL, 10 << 8 | 2),
)


def rows(
    kind: RowsKind, images: list[tuple[object, object]], columns=ORDERS_MAP, table="orders"
) -> RowChanges:
    return RowChanges(
        "app",
        table,
        kind,
        images,  # type: ignore[arg-type]
        1_700_000_000,
        BinlogPosition("b.000001", 400),
        image_columns(columns),
    )


def table_of(batches: list[pa.RecordBatch]) -> list[dict[str, object]]:
    return pa.Table.from_batches(batches).to_pylist()


def test_values_stored_as_the_struct_has_them_travel_typed() -> None:
    builder = TablesBuilder([ORDERS])
    image = (1, 7, "a", Decimal("9.50"))
    after = (1, 0, "b", Decimal("9.50"))
    out = table_of(
        list(
            builder.batches(
                [
                    rows(RowsKind.INSERT, [(None, image)]),
                    rows(RowsKind.UPDATE, [(image, after)]),
                ]
            )
        )
    )
    struct = table_column(0, "app", "orders")
    assert [r["_op"] for r in out] == ["+I", "-U", "+U"]
    assert out[1]["_seq"] == out[2]["_seq"]  # an update's halves share it
    # TINYINT(1) travels as its number: change_frames.py makes it a BOOLEAN by the row's schema
    assert out[0][struct] == {"id": 1, "flag": 7, "name": "a", "price": Decimal("9.50")}
    assert all(r["_text"] is None for r in out)
    assert out[0]["_op_ts"] == dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)


def test_values_stored_otherwise_travel_as_text_and_nothing_is_dropped() -> None:
    builder = TablesBuilder([ORDERS])
    older = (  # written while price was DECIMAL(12,3) and before `note` was dropped
        info("id", ColumnType.LONG),
        info("flag", ColumnType.TINY),
        info("name", ColumnType.VARCHAR, 80, charset=UTF8),
        info("price", ColumnType.NEWDECIMAL, 12 << 8 | 3),
        info("note", ColumnType.BLOB, 2, charset=BINARY),
    )
    image = (1, 1, None, Decimal("1.125"), b"\x00\xff")
    out = table_of(list(builder.batches([rows(RowsKind.DELETE, [(image, None)], older)])))
    struct = out[0][table_column(0, "app", "orders")]
    assert out[0]["_op"] == "-D"
    assert struct == {"id": 1, "flag": 1, "name": None, "price": None}
    assert dict(out[0]["_text"]) == {"price": "1.125", "note": "AP8="}  # NULL name: no text


def test_a_table_without_a_struct_travels_all_as_text() -> None:
    builder = TablesBuilder([ORDERS])
    columns = (info("k", ColumnType.LONGLONG), info("at", ColumnType.DATETIME2, 6))
    image = (5, dt.datetime(2024, 1, 2, 3, 4, 5, 6))
    change = rows(RowsKind.INSERT, [(None, image)], columns, table="joined")
    ddl = SchemaChange.from_binlog(
        "app", "joined", "CREATE TABLE joined (k BIGINT)", 1, change.position
    )
    out = table_of(list(builder.batches([ddl, change])))
    assert [(r["_op"], r["_table"], r["_ddl"]) for r in out] == [
        ("ddl", "joined", "CREATE TABLE joined (k BIGINT)"),
        ("+I", "joined", None),
    ]
    assert dict(out[1]["_text"]) == {"k": "5", "at": "2024-01-02T03:04:05.000006"}
    assert out[1][table_column(0, "app", "orders")] is None


def test_snapshot_chunks_are_typed_unless_read_with_another_shape() -> None:
    builder = TablesBuilder([ORDERS])
    staged = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "flag": pa.array([0, 3], pa.int8()),
            "name": pa.array(["a", None]),
            "price": pa.array([Decimal("1.000"), Decimal("2.500")], pa.decimal128(12, 3)),
        }
    )
    wider = Column.from_mysql("price", "decimal", "decimal(12,3)", True)
    chunk = SnapshotRows(
        "app", "orders", ("id", "flag", "name", "price"), staged, 99, (), (ID, FLAG, NAME, wider)
    )
    out = table_of(list(builder.snapshot_batches(chunk)))
    struct = table_column(0, "app", "orders")
    assert [(r["_op"], r["_seq"], r["_op_ts"]) for r in out] == [("+I", 99, None)] * 2
    assert [r[struct] for r in out] == [
        {"id": 1, "flag": 0, "name": "a", "price": None},
        {"id": 2, "flag": 3, "name": None, "price": None},
    ]
    assert [dict(r["_text"]) for r in out] == [{"price": "1.000"}, {"price": "2.500"}]


def test_same_storage_compares_what_the_binlog_says() -> None:
    assert same_storage(info("id", ColumnType.LONG), ID)
    assert not same_storage(info("id", ColumnType.LONG, unsigned=True), ID)
    assert not same_storage(info("id", ColumnType.LONGLONG), ID)
    assert same_storage(info("p", ColumnType.NEWDECIMAL, 10 << 8 | 2), PRICE)
    assert not same_storage(info("p", ColumnType.NEWDECIMAL, 10 << 8 | 3), PRICE)
    assert same_storage(info("n", ColumnType.VARCHAR, 80, charset=UTF8), NAME)
    assert not same_storage(info("n", ColumnType.VARCHAR, 80, charset=BINARY), NAME)
    assert not same_storage(info("n", ColumnType.VARCHAR, 80), NAME)  # charset unknown
    state = Column.from_mysql("s", "enum", "enum('a','b')", True)
    assert not same_storage(info("s", ColumnType.ENUM, 1), state)  # labels unknown
    assert same_storage(info("s", ColumnType.ENUM, 1, enum_values=("a", "b")), state)
    bits = Column.from_mysql("b", "bit", "bit(10)", True)
    assert same_storage(info("b", ColumnType.BIT, 1 << 8 | 2), bits)
    assert not same_storage(info("b", ColumnType.BIT, 1 << 8 | 3), bits)


def test_text_values_are_spelled_as_the_envelope_json_spells_them() -> None:
    """change_frames.py casts text values exactly as it cast the envelope's JSON values (the
    integration test of every type holds it to that)."""
    import json

    from sparkcdc.spark.changelog.text import image_json, value_text

    values = [
        -(2**63),
        18446744073709551615,
        1.5e-300,
        0.1,
        Decimal("-12345678901234567890.123456789"),
        'ünï"code',
        b"\x00\xff",
        dt.date(2024, 2, 29),
        dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
        dt.timedelta(hours=-838, minutes=-59, seconds=-59),
    ]
    for value in values:
        spelled = json.loads(image_json(["v"], [value]))["v"]
        expected = spelled if isinstance(spelled, str) else image_json(["v"], [value])[5:-1]
        assert value_text(value) == expected, value
