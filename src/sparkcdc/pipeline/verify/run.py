"""``verify_pipeline``: plan the comparison of every sink table of a pipeline and run it."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import ConfigError
from sparkcdc.model.dialect import SourceDialect
from sparkcdc.model.schema import TableSchema
from sparkcdc.pipeline.config import PipelineConfig, TransformRule
from sparkcdc.pipeline.progress import StreamOffsets
from sparkcdc.pipeline.verify.columns import ColumnPlan, column_plan, pushes_down, same_key
from sparkcdc.pipeline.verify.compare import Side, TableCheck, UnionSide, compare, wait_for_pipeline
from sparkcdc.pipeline.verify.readers import SparkSide
from sparkcdc.pipeline.verify.report import TableReport, VerifyReport
from sparkcdc.pipeline.verify.session import VerifySession
from sparkcdc.pipeline.verify.source import SqlSide, row_estimate, transformed_source
from sparkcdc.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


ROWS_PER_BUCKET = 10_000


def verify_pipeline(
    config: PipelineConfig,
    *,
    spark: Any = None,
    timeout_s: float = 300.0,
    tables: Iterable[str] | None = None,
    master: str | None = None,
    spark_log: str | None = None,
) -> VerifyReport:
    """Compare every sink table of ``config`` with its source tables, as the pipeline
    promises them (:func:`column_plan`).

    Spark is started only where it is needed: a transform in Spark SQL, a source column the
    database cannot compute, a sink without a reader of its own (``Sink.arrow_reader``).
    Then the session is verify's own (``<pipeline>-verify``) on ``master``, else local
    (never the pipeline's cluster, whose cores a running pipeline holds); ``spark``: use
    that one instead. ``spark_log``: the file a session verify starts logs to.

    >>> report = verify_pipeline(load_pipeline("p.yaml"))  # doctest: +SKIP
    >>> report.equal, report.to_json()["tables"][0]["counts"]  # doctest: +SKIP
    (False, {'missing': 1, 'extra': 0, 'different': 0})
    """
    from sparkcdc.pipeline.evolution.persistence import SchemaHistory
    from sparkcdc.pipeline.routes import needs_session, plan_pipeline
    from sparkcdc.pipeline.run_plan import source_of
    from sparkcdc.sinks.base import runnable_sink_class
    from sparkcdc.spark.capture import plan_capture

    started = time.monotonic()
    log.info("verify of %s: planning", config.pipeline.name)
    cls = runnable_sink_class(config.sink.type)
    if cls.read_table is Sink.read_table:  # before connecting anywhere
        raise ConfigError(
            f"verify does not support the {config.sink.type} sink yet: it keeps no table to "
            "compare with the source"
        )
    options, dialect = source_of(config)
    capture = plan_capture(options, dialect)
    session = VerifySession(config, spark, master, spark_log)
    hadoop = session.hadoop()
    root = config.checkpoint_location(hadoop)
    history = SchemaHistory(root).states()
    saved = history[-1] if history else None
    needs = needs_session(config, capture.tables)
    plan = plan_pipeline(config, capture.tables, session.get() if needs else None)
    report = VerifyReport([])
    position: list[Any] = []

    def caught_up() -> str:
        # once per phase: the pipeline must have passed the source position read last
        now = dialect.position_now()
        if position and position[-1] == now:
            return str(now)
        position.append(now)
        report.position = str(now)
        note = wait_for_pipeline(root, now, timeout_s, StreamOffsets.of(dialect))
        if note is not None:
            report.waited.append(note)
        return str(now)

    wanted = set(tables) if tables is not None else None
    checks: list[TableCheck] = []
    try:
        for planned in plan.sink_tables:
            if wanted is not None and planned.name not in wanted:
                continue
            members = [s for s in plan.sources if s.sink_table == planned.name]
            state = saved.sinks.get(planned.name) if saved is not None else None
            columns, notes = column_plan(config, planned, state, history, members)
            sides: list[Side] = []
            mode = "pushdown"
            for index, member in enumerate(members):
                pushable = pushes_down(member.transform)
                table = columns.source_values(member.schema, dialect) if pushable else None
                if table is not None and same_key(member.schema, columns.table):
                    sides.append(SqlSide(dialect, table, config.pipeline.parallelism, index))
                else:
                    mode = "spark"
                    schema, rule = member.schema, member.transform
                    read = partial(_transformed, session, dialect, schema, rule, columns)
                    sides.append(SparkSide(read, columns))
            sink_side, reader = session.sink_side(columns, hadoop)
            rows = sum(row_estimate(dialect, m.schema) for m in members)
            buckets = max(1, rows // ROWS_PER_BUCKET)
            result = TableReport(
                columns.table.name,
                columns.table.sources,
                mode,
                sink_reader=reader,
                columns=len(columns.compared),
                not_compared=notes,
                buckets=buckets,
            )
            report.tables.append(result)
            checks.append(TableCheck(columns, UnionSide(sides), sink_side, result))
        compare(checks, caught_up)
    finally:
        session.close()
    report.spark = session.describe()
    report.seconds = time.monotonic() - started
    return report


def _transformed(
    session: VerifySession,
    source: SourceDialect[Any],
    schema: TableSchema,
    rule: TransformRule | None,
    plan: ColumnPlan,
) -> DataFrame:
    return transformed_source(session.get(), source, schema, rule, plan)
