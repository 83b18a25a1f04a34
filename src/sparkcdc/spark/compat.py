"""What differs between the PySpark lines the source runs on, in one place.

PySpark 4.1 drives a Python stream reader with ``latestOffset()`` alone: no start offset,
no read limit, and under ``Trigger.AvailableNow`` Spark wraps the source
(``AvailableNowDataStreamWrapper``), asks ``latestOffset()`` once and runs one batch to it.

PySpark 4.2 (``pyspark.sql.streaming.datasource``) adds admission control and AvailableNow
for Python sources. Measured on 4.2.1 (``python_streaming_source_runner.check_support_func``
and the JVM's ``PythonMicroBatchStreamWithTriggerAvailableNow``):

- a reader whose ``latestOffset`` takes parameters is driven as ``SupportsAdmissionControl``:
  Spark asks ``getDefaultReadLimit()`` once and calls ``latestOffset(start, limit)`` with it
  before every batch; ``Trigger.Once`` passes ``ReadAllAvailable`` instead;
- a reader that is also a ``SupportsTriggerAvailableNow`` gets
  ``prepareForTriggerAvailableNow()`` once when an AvailableNow query starts (before
  ``initialOffset``), then bounded batches with the default limit until ``latestOffset``
  returns its ``start`` unchanged; one without the mixin is wrapped as on 4.1 and gets a
  single ``latestOffset(start, ReadAllAvailable())``;
- only Spark's built-in limits cross to Python (``ReadAllAvailable``, ``ReadMinRows``,
  ``ReadMaxRows``, ``ReadMaxFiles``, ``ReadMaxBytes``): a source cannot define "chunks".

The source expresses ``scan.incremental.snapshot.chunks-per-batch`` as ``ReadMaxRows`` of
that many chunks' rows (``chunk.size`` each, the most rows a chunk is cut to hold), and reads
a limit back as a number of chunks here. The first batch a query plans reads a share of
either budget (``scan.first-batch.share``, ``opening_budget``, DESIGN.md §2.4).
"""

from __future__ import annotations

import importlib
from typing import Any

import pyspark

# "4.2": the Spark line of the installed pyspark; the connector jars are fetched per line
# (jars/pom.xml profiles, jars/lib/spark-<line>/)
SPARK_LINE = ".".join(pyspark.__version__.split(".")[:2])

_streaming: Any
try:  # PySpark >= 4.2
    _streaming = importlib.import_module("pyspark.sql.streaming.datasource")
except ImportError:  # PySpark 4.1: no read limits, no AvailableNow for Python sources
    _streaming = None

ADMISSION_CONTROL = _streaming is not None


class _NoAvailableNow:
    """PySpark 4.1 has no ``SupportsTriggerAvailableNow``: a plain base in its place."""


# the reader's second base: Spark 4.2 sees it with isinstance and then calls
# prepareForTriggerAvailableNow(); on 4.1 nothing calls that method
AvailableNowBase: type = (
    _streaming.SupportsTriggerAvailableNow if _streaming is not None else _NoAvailableNow
)


def default_read_limit(chunks_per_batch: int, chunk_size: int, binlog_bytes: int) -> Any:
    """The read limit that says ``chunks_per_batch`` chunks (0: every remaining chunk),
    or, where no chunk is counted, ``binlog_bytes`` of binlog (0: all available).

    Only called by PySpark >= 4.2 (``getDefaultReadLimit``).
    """
    assert _streaming is not None
    if chunks_per_batch > 0:
        return _streaming.ReadMaxRows(chunks_per_batch * chunk_size)
    if binlog_bytes > 0:
        return _streaming.ReadMaxBytes(binlog_bytes)
    return _streaming.ReadAllAvailable()


# the first batch a query plans reads a share of a large budget (scan.first-batch.share, 8 by
# default: an eighth): a backlog's first rows reach the sink after that share is read, not
# after a whole budget (a batch costs its rows' time plus ~1-3 s of its own); a budget at or
# below the floor (8 chunks, the source's default; 8 MiB of binlog, ~80,000 changes) is read
# whole, the share never below it
OPENING_FLOOR_CHUNKS = 8
OPENING_FLOOR_BYTES = 8 << 20


def opening_budget(budget: int, share: int, floor: int) -> int:
    """``budget`` (0: unbounded) for a batch, of which the query's first reads one
    ``share``-th (any other batch, or a share of 1: all of it), but not below ``floor``
    (nor above the budget). An unbounded budget stays unbounded (``Trigger.Once`` reads
    everything in its one batch).

    >>> opening_budget(123, 8, 8), opening_budget(123, 1, 8), opening_budget(0, 8, 8)
    (15, 123, 0)
    >>> opening_budget(40, 8, 8), opening_budget(3, 8, 8)
    (8, 3)
    """
    if share <= 1 or budget == 0:
        return budget
    return max(min(budget, floor), budget // share)


def binlog_budget(limit: Any, binlog_bytes: int, share: int = 1) -> int:
    """How many bytes of binlog a batch planned under ``limit`` may read (0: all available).

    ``limit`` is None on PySpark 4.1, which runs a ``Trigger.AvailableNow`` query as one
    batch: a bound there would end the run short of what was available, so 4.1 reads all.
    ``ReadAllAvailable`` (``Trigger.Once``): all. ``ReadMaxBytes(n)``: ``n``. Any other
    limit (the chunks' ``ReadMaxRows``): the configured ``binlog_bytes``. The query's first
    batch (a ``share`` above 1) takes ``opening_budget`` of it.

    >>> binlog_budget(None, 1 << 20)
    0
    """
    if limit is None or _streaming is None:
        return 0
    if isinstance(limit, _streaming.ReadAllAvailable):
        return 0
    if isinstance(limit, _streaming.ReadMaxBytes):
        return opening_budget(max(1, int(limit.max_bytes)), share, OPENING_FLOOR_BYTES)
    return opening_budget(binlog_bytes, share, OPENING_FLOOR_BYTES)


def chunk_budget(limit: Any, chunks_per_batch: int, chunk_size: int, share: int = 1) -> int:
    """How many snapshot chunks a batch planned under ``limit`` may take (0: all remaining).

    ``limit`` is None on PySpark 4.1 (no admission control): the configured
    ``chunks_per_batch``. ``ReadAllAvailable`` (``Trigger.Once``, or a source option of 0):
    every remaining chunk. ``ReadMaxRows(n)``: ``n // chunk_size`` chunks, at least one, so
    every batch makes progress. Any other built-in limit has no meaning for chunks of rows;
    the configured number holds. The query's first batch (a ``share`` above 1) takes
    ``opening_budget`` of it. On 4.1 the budget is whole: an AvailableNow run is one batch.

    >>> chunk_budget(None, 8, 400)
    8
    """
    if limit is None or _streaming is None:
        return chunks_per_batch
    if isinstance(limit, _streaming.ReadAllAvailable):
        return 0
    if isinstance(limit, _streaming.ReadMaxRows):
        chunks = max(1, int(limit.max_rows) // max(1, chunk_size))
        return opening_budget(chunks, share, OPENING_FLOOR_CHUNKS)
    return opening_budget(chunks_per_batch, share, OPENING_FLOOR_CHUNKS)
