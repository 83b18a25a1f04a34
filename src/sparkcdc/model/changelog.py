"""The typed changelog's vocabulary, spoken by the source, the pipeline and every sink.

A change row is one :class:`RowKind` in ``_op``, the metadata columns of
:data:`METADATA_COLUMNS`, then the table's columns; an envelope row spells its change with
an :class:`EnvelopeOp` (DESIGN.md §4). Rows of one key are ordered by ``_seq``; the two
halves of one update share theirs and :func:`kind_rank` orders them.
"""

from __future__ import annotations

from enum import StrEnum


class RowKind(StrEnum):
    """``_op`` of the typed changelog (Flink RowKind short strings)."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"


class EnvelopeOp(StrEnum):
    """``op`` of the envelope (Debezium codes, plus schema changes)."""

    READ = "r"  # snapshot row
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    DDL = "ddl"


OP = "_op"  # the row's RowKind
OP_TS = "_op_ts"  # when the change was written to the source's log; NULL for snapshot rows
SEQ = "_seq"  # orders all changes of one key
DATABASE = "_database"  # the source table the row came from
TABLE = "_table"
METADATA_COLUMNS = (OP, OP_TS, SEQ, DATABASE, TABLE)
"""The columns before the table's own in every change row, in this order."""

DELETED = "_deleted"
"""Added to a key's last change by the sinks' final states: the key no longer exists."""

GONE_KINDS = (RowKind.DELETE, RowKind.UPDATE_BEFORE)
"""The kinds that leave their key absent when they are its last change (a delete, or the
old key of a key-changing update)."""

SORTS_FIRST = RowKind.UPDATE_BEFORE
"""Of the rows sharing one ``_seq`` (an update's two halves), the kind that comes first."""


def kind_rank(kind: str) -> int:
    """Where a change row of ``kind`` sorts among the rows of its ``_seq``: ``-U`` first.

    >>> sorted(["+U", "-U"], key=kind_rank)
    ['-U', '+U']
    """
    return 0 if kind == SORTS_FIRST else 1
