"""ChangeDecoder: committed transactions as the model's changes, from messages built here
(the server's own are read in tests/integration/test_postgres_dialect.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import pytest

from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.postgres.changes import ChangeDecoder, UnchangedToastError
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.postgres.pgoutput import (
    UNCHANGED_TOAST,
    Delete,
    Insert,
    Relation,
    RelationColumn,
    ReplicaIdentity,
    Truncate,
    TruncateOption,
    TupleKind,
    Update,
)
from sparkcdc.postgres.transactions import Transaction, TransactionItem
from sparkcdc.postgres.types import TypeCatalog

INT4, TEXT = 23, 25
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def relation(*columns: tuple[str, int], oid: int = 100, name: str = "items") -> Relation:
    return Relation(
        None,
        oid,
        "public",
        name,
        ReplicaIdentity.DEFAULT,
        tuple(RelationColumn(c, t, -1, c == "id") for c, t in columns),
    )


def builtin(oids: Iterable[int]) -> TypeCatalog:
    return TypeCatalog.builtin()


def decoder(**kwargs: bool) -> ChangeDecoder:
    return ChangeDecoder(lambda schema, table: table == "items", builtin, **kwargs)


def transaction(commit: int, *items: TransactionItem) -> Transaction:
    return Transaction(7, Lsn(commit), Lsn(commit + 8), T0, None, items)


ITEMS = relation(("id", INT4), ("name", TEXT))


def test_rows_in_runs_with_increasing_seq_and_key_only_before_images() -> None:
    changes = list(
        decoder().changes(
            transaction(
                1000,
                ITEMS,
                Insert(None, 100, ("1", "a")),
                Insert(None, 100, ("2", "b")),
                Update(None, 100, None, None, ("1", "c")),
                Update(None, 100, TupleKind.KEY, ("2", None), ("3", "b")),
                Delete(None, 100, TupleKind.KEY, ("3", None)),
            )
        )
    )
    # first_row counts row images, as the changelog numbers them: an update's -U and +U
    # each take a seq, so the delete after two updates starts at 2 + 2 * 2
    assert [(c.kind, c.rows, c.first_row) for c in changes if isinstance(c, RowChanges)] == [
        (RowsKind.INSERT, [(None, (1, "a")), (None, (2, "b"))], 0),
        (RowsKind.UPDATE, [((1, None), (1, "c")), ((2, None), (3, "b"))], 2),
        (RowsKind.DELETE, [((3, None), None)], 6),
    ]
    assert all(c.position == Lsn(1000) for c in changes if isinstance(c, RowChanges))


def test_an_unchanged_toast_value_comes_from_the_old_image_or_stops() -> None:
    full = relation(("id", INT4), ("name", TEXT))
    (change,) = decoder().changes(
        transaction(
            10, full, Update(None, 100, TupleKind.OLD, ("1", "big"), ("1", UNCHANGED_TOAST))
        )
    )
    assert isinstance(change, RowChanges) and change.rows == [((1, "big"), (1, "big"))]
    with pytest.raises(UnchangedToastError, match=r'"public"."items".*REPLICA IDENTITY FULL'):
        list(
            decoder().changes(
                transaction(10, full, Update(None, 100, None, None, ("1", UNCHANGED_TOAST)))
            )
        )


def test_relation_changes_and_truncates_are_schema_changes_of_captured_tables_only() -> None:
    d = decoder()
    other = relation(("id", INT4), oid=200, name="other")
    list(d.changes(transaction(10, ITEMS, other, Insert(None, 200, ("1",)))))
    wider = relation(("id", INT4), ("name", INT4), ("note", TEXT))
    changes = list(
        d.changes(
            transaction(
                20,
                wider,
                relation(("id", TEXT), oid=200, name="other"),
                Truncate(None, TruncateOption(0), (100, 200)),
            )
        )
    )
    assert [(c.statement, c.seq) for c in changes if isinstance(c, SchemaChange)] == [
        ('ALTER TABLE "public"."items" ALTER COLUMN "name" TYPE int4', Lsn(20).seq(0)),
        ('ALTER TABLE "public"."items" ADD COLUMN "note" text', Lsn(20).seq(1)),
        ('TRUNCATE TABLE "public"."items"', Lsn(20).seq(2)),
    ]


def test_without_rows_only_schema_changes() -> None:
    d = decoder(rows=False)
    assert list(d.changes(transaction(10, ITEMS, Insert(None, 100, ("1", "a"))))) == []
