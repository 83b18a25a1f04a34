"""``type: console``: prints each batch's changes, for trying a pipeline out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from sparkcdc.model.changelog import METADATA_COLUMNS, SEQ
from sparkcdc.model.identifiers import quote_spark
from sparkcdc.sinks.base import SchemalessSink, SinkOptions, SinkTable, kind_rank_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


SHOWN = 20  # characters of a value that show(truncate=True) prints


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

    def write(
        self, table: SinkTable, changes: DataFrame, batch_id: int, *, size: int | None = None
    ) -> bool:
        assert isinstance(self.options, ConsoleOptions)
        print(f"--- batch {batch_id}: {table.name}")
        # in commit order (a batch's binlog may be decoded by several partitions); an
        # update's -U before its +U
        shown = changes.orderBy(SEQ, kind_rank_column()).select(
            *METADATA_COLUMNS[:3], *[quote_spark(c) for c in table.column_names]
        )
        if self.options.truncate:
            shown = _cut(shown)
        shown.show(self.options.rows, truncate=self.options.truncate)
        return True


def _cut(frame: DataFrame) -> DataFrame:
    """``frame`` with every text and bytes value cut to what ``show`` prints of it (20
    characters, one more so that it still marks the cut with '...'): ``show`` collects its
    rows to the driver, and a batch of rows with values of tens of MB failed there."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    return frame.select(
        *[
            F.substring(quote_spark(f.name), 1, SHOWN + 1).alias(f.name)
            if isinstance(f.dataType, StringType | BinaryType)
            else quote_spark(f.name)
            for f in frame.schema.fields
        ]
    )
