"""``type: delta``: one Delta Lake table per sink table, kept equal to its source by MERGE.

Each batch's change frame is reduced to the last change per key (latest ``_seq`` wins) and
merged: keys whose last change deletes them are deleted, the others upserted. The MERGE runs
with Delta's idempotent-write settings (``txnAppId`` = pipeline and table, ``txnVersion`` =
batch id), so a batch Spark replays after a crash is skipped by the tables that already have
it: exactly-once per table.

Tables live under ``path`` (``<path>/<database>/<table>``, created when missing), or, without
``path``, in the session catalog as ``<database>.<table>``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sparkcdc.errors import SinkError
from sparkcdc.sinks.base import (
    Sink,
    SinkOptions,
    SinkTable,
    final_states,
    merge_statement,
    quote,
    spark_error_text,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class DeltaOptions(SinkOptions):
    path: str | None = None  # base directory; None: tables in the session catalog


class DeltaSink(Sink):
    """Delta Lake tables, MERGE per batch, idempotent through txnAppId / txnVersion."""

    options_model = DeltaOptions
    guarantee = "exactly-once"

    @property
    def _options(self) -> DeltaOptions:
        assert isinstance(self.options, DeltaOptions)
        return self.options

    def location(self, table: SinkTable) -> str | None:
        """The table's directory (path mode), else None (catalog mode)."""
        if self._options.path is None:
            return None
        parts = [p for p in table.name.split(".") if p]
        return str(Path(self._options.path, *parts))

    def identifier(self, table: SinkTable) -> str:
        """How Spark SQL names the table."""
        location = self.location(table)
        if location is not None:
            return f"delta.{quote(location)}"
        return ".".join(quote(p) for p in table.name.split("."))

    def open(self, tables: Sequence[SinkTable]) -> None:
        for table in tables:
            location = self.location(table)
            try:
                if location is not None:
                    Path(location).mkdir(parents=True, exist_ok=True)
                elif table.namespace:
                    self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(table.namespace)}")
                self.spark.sql(
                    f"CREATE TABLE IF NOT EXISTS {self.identifier(table)} "
                    f"({table.spark_ddl()}) USING delta"
                )
            except OSError as exc:
                raise SinkError(
                    f"delta sink: cannot create table directory {location}: {exc.strerror}. "
                    "Check sink.path and its permissions"
                ) from None
            except Exception as exc:  # Spark's AnalysisException and friends
                raise SinkError(
                    f"delta sink: cannot create or open table {table.name} at "
                    f"{location or 'the session catalog'}: {spark_error_text(exc)}"
                ) from None

    def write(self, table: SinkTable, changes: DataFrame, batch_id: int) -> None:
        session: SparkSession = changes.sparkSession
        final = final_states(changes, table.primary_key)
        view = f"sparkcdc_changes_{uuid.uuid4().hex}"
        final.createOrReplaceTempView(view)
        statement = merge_statement(self.identifier(table), view, table)
        # Delta records (appId, version) in the same commit and skips a version it has seen
        session.conf.set("spark.databricks.delta.write.txnAppId", self.app_id(table))
        session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            session.sql(statement)
        except Exception as exc:
            raise SinkError(
                f"delta sink: MERGE into {table.name} failed for batch {batch_id}: "
                f"{spark_error_text(exc)}. Nothing of this batch is committed to that "
                "table; a restart replays it"
            ) from None
        finally:
            session.conf.unset("spark.databricks.delta.write.txnAppId")
            session.conf.unset("spark.databricks.delta.write.txnVersion")
            session.catalog.dropTempView(view)

    def app_id(self, table: SinkTable) -> str:
        return f"sparkcdc:{self.context.pipeline_name}:{table.name}"
