"""Writing one micro-batch's sink tables at once.

A MERGE into a small Delta table is ~20 Spark jobs, most of its time the driver planning
between them (~5 s here for 400 changes into 2,000 rows, whatever the batch's size), so a
batch that touches four tables took ~20 s one table after the other. The writes of different
sink tables are independent (each commits on its own and is idempotent per batch on its own),
so :class:`ConcurrentWrites` runs them in threads: a batch of four tables took ~13 s here
against ~23 s (``bench/table_writes.py``), the driver's planning of one overlapping another's
jobs.

Each write runs in a session of its own, a clone of the batch's (its settings, temporary
views and functions copied): sinks commit with session settings (Delta's ``txnAppId`` /
``txnVersion`` and ``userMetadata``, Iceberg's snapshot properties) that must not leak into
another table's commit. The clone reads the batch through a global temporary view of the
cached batch frame: Spark's cache is shared by the sessions of one application, so the rows
are read from the cache, not from the source again.
"""

from __future__ import annotations

import concurrent.futures
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

T = TypeVar("T")
# what ties a job to the streaming query that runs the batch: stopping the query cancels the
# jobs of its group, the writes' included
JOB_PROPERTIES = (
    "spark.jobGroup.id",
    "spark.job.description",
    "spark.job.interruptOnCancel",
    "spark.job.tags",
)


def cloned_session(session: SparkSession) -> SparkSession | None:
    """A new session of the same application with ``session``'s settings, temporary views
    and functions (Spark's own ``cloneSession``, as a streaming query makes its session);
    None where this Spark does not offer it."""
    from pyspark.sql import SparkSession

    try:
        return SparkSession(session.sparkContext, session._jsparkSession.cloneSession())
    except Exception as exc:  # py4j: no such method on this Spark line
        log.debug("cannot clone the Spark session (%s): writes run one after the other", exc)
        return None


class ConcurrentWrites:
    """Runs a batch's per-table writes, up to ``workers`` at once.

    A write is a function of the batch frame; :meth:`run` hands each one the batch as its
    own session sees it and returns their results in order. Every write has ended (committed
    or failed) before :meth:`run` returns or raises: the first failure is raised after the
    others finished, so no write of the batch is still running when Spark replays it."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def run(self, batch: DataFrame, writes: Sequence[Callable[[DataFrame], T]]) -> list[T]:
        if self.workers < 2 or len(writes) < 2:
            return [write(batch) for write in writes]
        session = batch.sparkSession
        sessions = [s for s in (cloned_session(session) for _ in writes) if s is not None]
        if len(sessions) < len(writes):
            return [write(batch) for write in writes]
        view = f"sparkcdc_batch_{uuid.uuid4().hex}"
        batch.createOrReplaceGlobalTempView(view)
        database = session.conf.get("spark.sql.globalTempDatabase", "global_temp")
        name = f"{database}.{view}"
        try:
            if self._pool is None:  # kept: each thread keeps its connection to the JVM
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.workers, thread_name_prefix="sparkcdc-write"
                )
            context = session.sparkContext
            job = {key: context.getLocalProperty(key) for key in JOB_PROPERTIES}

            def in_own_session(own: SparkSession, write: Callable[[DataFrame], T]) -> T:
                for key, value in job.items():  # this thread's (None: unset)
                    context.setLocalProperty(key, value)  # type: ignore[arg-type]
                return write(own.table(name))

            futures = [
                self._pool.submit(in_own_session, own, write)
                for own, write in zip(sessions, writes, strict=True)
            ]
            concurrent.futures.wait(futures)
            return [future.result() for future in futures]
        finally:
            session.catalog.dropGlobalTempView(view)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
