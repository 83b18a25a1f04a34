"""The column changes that take a sink table's old shape to its new one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparkcdc.model.schema_change import SchemaChangeType
from sparkcdc.sinks.base import SinkTable


@dataclass(frozen=True)
class SinkChange:
    """A change of a sink table's columns, derived from its sources' schema changes."""

    kind: SchemaChangeType
    name: str  # the column (the old name for a rename)
    new_name: str | None = None
    spark_type: str | None = None
    old_type: str | None = None

    def describe(self) -> str:
        if self.kind is SchemaChangeType.RENAME_COLUMN:
            return f"rename column {self.name} to {self.new_name}"
        if self.kind is SchemaChangeType.ALTER_COLUMN_TYPE:
            return f"change column {self.name} from {self.old_type} to {self.spark_type}"
        if self.kind is SchemaChangeType.ADD_COLUMN:
            return f"add column {self.name} {self.spark_type}"
        return f"drop column {self.name}"


def diff_frames(
    old: SinkTable, new: SinkTable, renames: Sequence[tuple[str, str]] = ()
) -> list[SinkChange]:
    """The column changes that take ``old`` to ``new`` (renames where the source renamed).

    >>> from sparkcdc.sinks.base import SinkColumn
    >>> a = SinkTable("t", (SinkColumn("id", "INT"), SinkColumn("x", "INT")), ("id",), ())
    >>> b = SinkTable("t", (SinkColumn("id", "BIGINT"), SinkColumn("y", "INT")), ("id",), ())
    >>> [c.describe() for c in diff_frames(a, b, [("x", "y")])]
    ['rename column x to y', 'change column id from INT to BIGINT']
    """
    before = {c.name: c.spark_type for c in old.columns}
    after = {c.name: c.spark_type for c in new.columns}
    changes: list[SinkChange] = []
    renamed_from: set[str] = set()
    renamed_to: set[str] = set()
    for old_name, new_name in renames:
        if (
            old_name in before
            and old_name not in after
            and new_name in after
            and new_name not in before
        ):
            changes.append(
                SinkChange(
                    SchemaChangeType.RENAME_COLUMN,
                    old_name,
                    new_name,
                    spark_type=after[new_name],
                    old_type=before[old_name],
                )
            )
            renamed_from.add(old_name)
            renamed_to.add(new_name)
            if before[old_name] != after[new_name]:
                changes.append(
                    SinkChange(
                        SchemaChangeType.ALTER_COLUMN_TYPE,
                        new_name,
                        spark_type=after[new_name],
                        old_type=before[old_name],
                    )
                )
    for name, spark_type in after.items():
        if name in renamed_to:
            continue
        if name not in before:
            changes.append(SinkChange(SchemaChangeType.ADD_COLUMN, name, spark_type=spark_type))
        elif before[name] != spark_type:
            changes.append(
                SinkChange(
                    SchemaChangeType.ALTER_COLUMN_TYPE,
                    name,
                    spark_type=spark_type,
                    old_type=before[name],
                )
            )
    changes.extend(
        SinkChange(SchemaChangeType.DROP_COLUMN, name)
        for name in before
        if name not in after and name not in renamed_from
    )
    return changes


def type_suffix(spark_type: str) -> str:
    """A column-name suffix for a type: ``DECIMAL(12,2)`` → ``decimal_12_2``."""
    return re.sub(r"[^0-9a-z]+", "_", spark_type.lower()).strip("_")
