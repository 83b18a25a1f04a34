"""Change row kinds, as Flink's RowKind and Debezium's op codes."""

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
