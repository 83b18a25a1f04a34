"""Running streaming queries: our own error from a failed query, and typed streams that
restart themselves on a schema change."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from sparkcdc.errors import SchemaChangedError, SparkCdcError, error_class

log = logging.getLogger(__name__)


def query_error(exc: BaseException) -> SparkCdcError:
    r"""Our own error from a failed streaming query's (Java-wrapped) exception text.

    >>> query_error(Exception("...\nsparkcdc.errors.SinkError: gone:\n\tIs it up?\n\n\tat x"))
    SinkError('gone: Is it up?')
    >>> query_error(Exception("[PYTHON_...] latestOffset: sparkcdc.errors.PositionError: "
    ...                       "purged; restart.\n SQLSTATE: 38000\n\tat x"))
    PositionError('purged; restart.')
    """
    text = str(exc)
    found = re.search(r"sparkcdc\.errors\.(\w+Error): ", text)
    if found:
        message = text[found.end() :]
        # the exception's own lines end where the Java / Python traceback goes on
        # (or where Spark appends the error class's SQLSTATE)
        message = re.split(
            r"\n\s*\n|\n\s*at |\nJVM stacktrace|\n\s*SQLSTATE: ", message, maxsplit=1
        )[0]
        return error_class(found.group(1))(" ".join(message.split()))
    first = next((line for line in text.splitlines() if line.strip()), text)
    return SparkCdcError(f"the streaming query failed: {first}")


def await_restarting(
    start: Callable[[], Any], *, max_restarts: int = 100, timeout_s: float | None = None
) -> Any:
    """Run the query ``start()`` starts; when it stops because its typed table changed shape,
    start it again (same checkpoint: it goes on with the new schema). Returns the last query
    once it ends otherwise, or when ``timeout_s`` passes (still running); other failures raise
    our own error.

    >>> def start():                                                   # doctest: +SKIP
    ...     return (spark.readStream.format("mysql-cdc").options(**opts).load()
    ...             .writeStream.option("checkpointLocation", "/chk")
    ...             .format("delta").option("mergeSchema", "true").start("/lake/orders"))
    >>> await_restarting(start)                                        # doctest: +SKIP
    """
    import time

    from pyspark.errors import StreamingQueryException

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    restarts = 0
    while True:
        query = start()
        try:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            query.awaitTermination(left)
            return query
        except StreamingQueryException as exc:
            error = query_error(exc)
            if not isinstance(error, SchemaChangedError) or restarts >= max_restarts:
                raise error from None
            restarts += 1
            log.info("%s; restarting the query on the new schema", error)
