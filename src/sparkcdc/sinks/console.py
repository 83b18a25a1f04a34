"""``type: console``: prints each batch's changes, for trying a pipeline out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from sparkcdc.sinks.base import METADATA_COLUMNS, SchemalessSink, SinkOptions, SinkTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class ConsoleOptions(SinkOptions):
    rows: int = Field(20, ge=1, description="rows shown per table and batch")
    truncate: bool = True


class ConsoleSink(SchemalessSink):
    """Shows the change frame of every table in every batch (nothing is kept)."""

    options_model = ConsoleOptions
    guarantee = "none (prints; a replayed batch prints again)"

    def open(self, tables: Sequence[SinkTable]) -> None:
        for table in tables:
            print(f"console sink: {table.name} <- {', '.join(table.sources)}")

    def write(self, table: SinkTable, changes: DataFrame, batch_id: int) -> bool:
        assert isinstance(self.options, ConsoleOptions)
        print(f"--- batch {batch_id}: {table.name}")
        changes.select(*METADATA_COLUMNS[:3], *table.column_names).show(
            self.options.rows, truncate=self.options.truncate
        )
        return True
