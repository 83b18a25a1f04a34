"""Committed pgoutput transactions as the model's changes (``RowChanges`` / ``SchemaChange``).

A transaction's row messages become ``RowChanges`` (one per run of changes of one kind to
one table), each row's ``seq`` the transaction's commit LSN and the row's index in it
(``Lsn.seq``), the place ranges take transactions by. The stream carries no DDL: a table's
Relation message that differs from the last one seen for it (a column added, dropped or
retyped) is its schema change, as ``ALTER TABLE`` statements in PostgreSQL's SQL. A
TRUNCATE is the table's ``TRUNCATE TABLE`` schema change.

What the WAL does not carry is never written as data (DESIGN.md §12.2): under REPLICA
IDENTITY DEFAULT an update's before image is its key only, and a TOASTed value the update
left unchanged is taken from the row's old image when the WAL has it (REPLICA IDENTITY
FULL), else the read stops naming the table and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from sparkcdc.errors import SourceError
from sparkcdc.model.events import Image, ImageColumns, RowChanges, Rows, RowsKind, SchemaChange
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.postgres.catalog import quote_table
from sparkcdc.postgres.pgoutput import (
    UNCHANGED_TOAST,
    ColumnValue,
    Delete,
    Insert,
    Relation,
    RelationColumn,
    Truncate,
    Update,
)
from sparkcdc.postgres.replication import quote_identifier
from sparkcdc.postgres.transactions import Transaction
from sparkcdc.postgres.types import DecimalHandlingMode, TypeCatalog
from sparkcdc.postgres.values import RowsDecoder


class UnchangedToastError(SourceError):
    """An update left a TOASTed value out of the WAL and no image of the row holds it."""


TypeLoader = Callable[[Iterable[int]], TypeCatalog]
"""The type catalog with (at least) the given type OIDs (read from pg_type)."""

_KINDS = {Insert: RowsKind.INSERT, Update: RowsKind.UPDATE, Delete: RowsKind.DELETE}


@dataclass
class _Table:
    relation: Relation
    decoder: RowsDecoder
    columns: ImageColumns


def _same_storage(decoder: RowsDecoder, index: int, column: Column) -> bool:
    return (
        decoder.relation.columns[index].name == column.name
        and decoder.columns[index].spark_type == column.spark_type
    )


def schema_statements(old: Relation, new: Relation, catalog: TypeCatalog) -> list[str]:
    """The ALTER TABLE statements that turn ``old``'s columns into ``new``'s (none when
    only what the stream does not type changed: the replica identity, the OID).

    Columns are matched by name: a rename reads as a drop and an add, as in Flink CDC's
    PostgreSQL source, which infers schema changes from Relation messages too.
    """
    before = {c.name: (c.type_oid, c.type_modifier) for c in old.columns}
    return _statements(before, new, catalog, lambda c: (c.type_oid, c.type_modifier))


def baseline_statements(
    known: TableSchema, new: Relation, decoder: RowsDecoder, catalog: TypeCatalog
) -> list[str]:
    """The ALTER TABLE statements that turn ``known`` (the table's schema as the reader
    knew it where the read starts) into ``new``, the first Relation of the table the read
    sees: a change made while no read ran (DESIGN.md §12.2). Columns are compared by name
    and by the type the stream gives their values (their Spark type): a retype that keeps
    it (varchar(20) to varchar(40)) changes no value's form and is not told."""
    before = {c.name: c.spark_type for c in known.columns}
    spark = {c.name: t.spark_type for c, t in zip(new.columns, decoder.columns, strict=True)}
    return _statements(before, new, catalog, lambda c: spark[c.name])


def _statements(
    before: Mapping[str, object],
    new: Relation,
    catalog: TypeCatalog,
    identity: Callable[[RelationColumn], object],
) -> list[str]:
    """DROP for the columns of ``before`` (name -> type identity) that ``new`` lacks, then
    in ``new``'s order ADD for a new column and ALTER TYPE for one whose ``identity``
    differs."""
    table = quote_table(new.namespace, new.name)

    def typed(column: RelationColumn) -> str:
        found = catalog.types.get(column.type_oid)
        name = found.name if found is not None else str(column.type_oid)
        typmod = column.type_modifier
        if typmod >= 0 and found is not None and found.name == "numeric":
            return _numeric_text(typmod)
        if typmod >= 0 and found is not None and found.name == "bit":
            return f"bit({typmod})"  # bit(1) is BOOLEAN, a longer one text (types.py)
        return name

    after = {c.name: c for c in new.columns}
    statements = [
        f"ALTER TABLE {table} DROP COLUMN {quote_identifier(name)}"
        for name in before
        if name not in after
    ]
    for name, column in after.items():
        if name not in before:
            statements.append(
                f"ALTER TABLE {table} ADD COLUMN {quote_identifier(name)} {typed(column)}"
            )
        elif before[name] != identity(column):
            statements.append(
                f"ALTER TABLE {table} ALTER COLUMN {quote_identifier(name)} TYPE {typed(column)}"
            )
    return statements


def _numeric_text(typmod: int) -> str:
    packed = typmod - 4
    return f"numeric({(packed >> 16) & 0xFFFF},{((packed & 0x7FF) ^ 1024) - 1024})"


@dataclass
class ChangeDecoder:
    """Turns the transactions of one stream into changes of the captured tables.

    ``captured(schema, table)``: whether a table's changes are wanted; ``rows``: False for
    schema changes only. It keeps the last Relation of each table across transactions, so
    it must see every transaction of the stream it decodes, in order.
    """

    captured: Callable[[str, str], bool]
    load_types: TypeLoader
    rows: bool = True
    mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE
    # (schema, table) -> its schema where the stream starts, as the reader knows it: the
    # first Relation of the table is compared with it (unknown: that Relation is the base)
    known: Mapping[tuple[str, str], TableSchema] = field(default_factory=dict)
    _tables: dict[int, _Table] = field(default_factory=dict)

    def changes(self, transaction: Transaction) -> Iterator[RowChanges | SchemaChange]:
        at = transaction.commit_lsn
        when = int(transaction.commit_time.timestamp())
        row = 0  # the index of the next row in the transaction: its seq
        run: list[Insert | Update | Delete] = []

        def flush() -> Iterator[RowChanges]:
            nonlocal row
            if run:
                first = run[0]
                table = self._tables[first.relation_oid]
                rows = self._rows(table, run)
                yield RowChanges(
                    table.relation.namespace,
                    table.relation.name,
                    _KINDS[type(first)],
                    rows,
                    when,
                    at,
                    table.columns,
                    first_row=row,
                )
                # first_row counts row images: an update's -U and +U take a seq each
                row += len(rows) * (2 if _KINDS[type(first)] is RowsKind.UPDATE else 1)
                run.clear()

        for item in transaction.items:
            if isinstance(item, Relation):
                yield from flush()
                for statement in self._relation(item):  # each a seq of its own, in order
                    yield SchemaChange(item.namespace, item.name, statement, at.seq(row), when)
                    row += 1
            elif isinstance(item, Insert | Update | Delete):
                table = self._tables.get(item.relation_oid)
                if table is None:
                    raise SourceError(
                        f"a row change of the table of OID {item.relation_oid} at commit LSN "
                        f"{at} came before its Relation message: the stream is out of order"
                    )
                if not self.rows or not self.captured(
                    table.relation.namespace, table.relation.name
                ):
                    continue
                if run and (
                    type(run[0]) is not type(item) or run[0].relation_oid != item.relation_oid
                ):
                    yield from flush()
                run.append(item)
            elif isinstance(item, Truncate):
                yield from flush()
                for oid in item.relation_oids:
                    table = self._tables.get(oid)
                    if table is not None and self.captured(
                        table.relation.namespace, table.relation.name
                    ):
                        schema, name = table.relation.namespace, table.relation.name
                        yield SchemaChange(
                            schema,
                            name,
                            f"TRUNCATE TABLE {quote_table(schema, name)}",
                            at.seq(row),
                            when,
                        )
                        row += 1
        yield from flush()

    def _relation(self, relation: Relation) -> list[str]:
        """Keep ``relation`` as its table's shape; the statements of its schema change
        (for the first one seen, against the ``known`` schema if there is one; none for
        a table not captured)."""
        catalog = self.load_types(c.type_oid for c in relation.columns)
        old = self._tables.get(relation.oid)
        captured = self.captured(relation.namespace, relation.name)
        if not captured:
            decoder = RowsDecoder(relation, ())
        else:
            decoder = RowsDecoder.for_relation(relation, catalog, self.mode)
        names = tuple(c.name for c in relation.columns)
        self._tables[relation.oid] = _Table(
            relation,
            decoder,
            ImageColumns(names, lambda i, column: _same_storage(decoder, i, column)),
        )
        if not captured:
            return []
        if old is None:
            known = self.known.get((relation.namespace, relation.name))
            return [] if known is None else baseline_statements(known, relation, decoder, catalog)
        return schema_statements(old.relation, relation, catalog)

    def _rows(self, table: _Table, run: list[Insert | Update | Delete]) -> Rows:
        relation = table.relation
        keys = [i for i, c in enumerate(relation.columns) if c.is_key]
        befores: list[tuple[ColumnValue, ...] | None] = []
        afters: list[tuple[ColumnValue, ...] | None] = []
        for change in run:
            if isinstance(change, Insert):
                befores.append(None)
                afters.append(change.new)
            elif isinstance(change, Delete):
                befores.append(change.old)
                afters.append(None)
            else:
                old = change.old
                if old is None:  # the key did not change: the before image is the key
                    old = tuple(v if i in keys else None for i, v in enumerate(change.new))
                befores.append(old)
                afters.append(self._resolved(relation, change.new, change.old))
        return list(zip(self._decoded(table, befores), self._decoded(table, afters), strict=True))

    @staticmethod
    def _resolved(
        relation: Relation, new: tuple[ColumnValue, ...], old: tuple[ColumnValue, ...] | None
    ) -> tuple[ColumnValue, ...]:
        if UNCHANGED_TOAST not in new:
            return new
        resolved = list(new)
        for index, value in enumerate(new):
            if value is UNCHANGED_TOAST:
                kept = old[index] if old is not None else UNCHANGED_TOAST
                if kept is UNCHANGED_TOAST:
                    table = quote_table(relation.namespace, relation.name)
                    raise UnchangedToastError(
                        f"an update of {table} left the TOASTed value of column "
                        f"{relation.columns[index].name!r} out of the WAL (REPLICA IDENTITY "
                        "DEFAULT logs only changed large values), so the row's new image is "
                        f"not whole. Run ALTER TABLE {table} REPLICA IDENTITY FULL, then take "
                        "a new snapshot of the table (or start a new stream from latest-offset)"
                    )
                resolved[index] = kept
        return tuple(resolved)

    @staticmethod
    def _decoded(table: _Table, images: list[tuple[ColumnValue, ...] | None]) -> list[Image | None]:
        present = [image for image in images if image is not None]
        if not present:
            return [None] * len(images)
        batch = table.decoder.record_batch(present)
        columns = [column.to_pylist() for column in batch.columns]
        decoded = iter(zip(*columns, strict=True))
        return [None if image is None else next(decoded) for image in images]
