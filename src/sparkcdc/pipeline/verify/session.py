"""verify's own SparkSession and Spark sink, started only where verify needs them."""

from __future__ import annotations

import logging
import os
from functools import partial
from typing import TYPE_CHECKING, Any

from sparkcdc.locations import session_hadoop_settings
from sparkcdc.pipeline.config import PipelineConfig
from sparkcdc.pipeline.verify.columns import ColumnPlan
from sparkcdc.pipeline.verify.compare import Side
from sparkcdc.pipeline.verify.readers import ArrowSide, SparkSide
from sparkcdc.sinks.base import Sink, SinkTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


log = logging.getLogger(__name__)


class VerifySession:
    """verify's SparkSession and Spark sink, started at their first use (if any)."""

    def __init__(
        self, config: PipelineConfig, spark: Any, master: str | None, log_file: str | None
    ) -> None:
        self.config, self.master, self.log_file = config, master, log_file
        self._spark: SparkSession | None = spark
        self._sink: Sink | None = None
        self._used = False

    def hadoop(self) -> dict[str, str]:
        """The Hadoop settings sparkcdc's own files are read with (the session's, when one
        was given; else the file's ``spark.conf``: no session started for them)."""
        from sparkcdc.locations import hadoop_settings

        if self._spark is not None:
            return session_hadoop_settings(self._spark)
        return dict(hadoop_settings(self.config.pipeline.session_conf()))

    def get(self) -> SparkSession:
        if self._spark is None:
            if self.log_file is not None:
                log.info("Spark's own log: %s", self.log_file)
            self._spark = verify_session(self.config, self.master, self.log_file)
        self._used = True
        return self._spark

    def sink(self) -> Sink:
        from sparkcdc.sinks.base import SinkContext, runnable_sink_class

        if self._sink is None:
            cls = runnable_sink_class(self.config.sink.type)
            context = SinkContext(self.config.pipeline.name, self.config.checkpoint)
            self._sink = cls(self.config.sink, self.get(), context)
        return self._sink

    def sink_side(self, plan: ColumnPlan, hadoop: dict[str, str]) -> tuple[Side, str]:
        """The sink table's side, and what reads it: the sink's own reader without Spark
        where it has one and every compared type has an Arrow form, else Spark."""
        from sparkcdc.sinks.base import runnable_sink_class

        cls = runnable_sink_class(self.config.sink.type)
        reader = cls.arrow_reader(self.config.sink, plan.table, hadoop)
        if reader is not None:
            side = ArrowSide(reader, plan)
            if side.readable():
                return side, f"{self.config.sink.type}'s Arrow reader (no Spark)"
        read = partial(_sink_frame, self, plan.table)
        return SparkSide(read, plan, older=True), "Spark"

    def describe(self) -> str | None:
        """Where the session runs (None: verify used no Spark)."""
        if self._spark is None or not self._used:
            return None
        context = self._spark.sparkContext
        return f"master {context.master}, application {context.appName}"

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()


def _sink_frame(session: VerifySession, table: SinkTable) -> DataFrame:
    return session.sink().read_table(table)


def verify_session(
    config: PipelineConfig, master: str | None, log_file: str | None = None
) -> SparkSession:
    """verify's own session: application ``<pipeline>-verify``, on ``master``, else local
    with at most this machine's cores (the pipeline's master is not taken: on a cluster a
    running pipeline holds its cores, and verify would wait for them), the sink's and the
    file's Spark settings (its master aside)."""
    from sparkcdc.pipeline.run_plan import pipeline_conf
    from sparkcdc.spark.session import spark_session

    cores = max(1, min(config.pipeline.parallelism, os.cpu_count() or 1))
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
        **pipeline_conf(config),
    }
    return spark_session(
        f"{config.pipeline.name}-verify",
        master or f"local[{cores}]",
        connectors=True,
        conf=conf,
        log_file=log_file,
    )
