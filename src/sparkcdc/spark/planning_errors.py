"""How this source's errors and endings surface from the Python processes Spark starts to
plan and drive it (``pyspark.sql.worker.create_data_source``, the streaming source runner):
our message first, and no traceback for a socket the JVM closed on a good stop."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from sparkcdc.errors import SparkCdcError

F = TypeVar("F", bound=Callable[..., Any])

_SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
_SHUTDOWN_ERRORS = (EOFError, BrokenPipeError, ConnectionResetError)


def quiet_runner_shutdown() -> None:
    """In the process that runs this source for Spark (pyspark's streaming source runner),
    drop the traceback Python prints at exit when the JVM closed the runner's socket on
    stopping the query: the runner reads EOF, fails to report it over the closed socket,
    and a chain of EOFError / BrokenPipeError reaches the console of a run that ended well.
    Any other exception is printed as before; so is this chain in any other process."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is None or spec.name != _SOURCE_RUNNER:
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        chain: BaseException | None = exc
        while chain is not None and isinstance(chain, _SHUTDOWN_ERRORS):
            chain = chain.__context__
        if chain is None:
            return  # only the closed socket: nothing went wrong
        previous(kind, exc, tb)

    sys.excepthook = hook


def message_first(method: F) -> F:
    """Our errors, from a method Spark calls in its planning processes, reported as our
    message: the user's ``load()`` / ``start()`` raises ``[PYTHON_DATA_SOURCE_ERROR] ...:
    sparkcdc.errors.SourceError: <what to do>`` instead of a Python traceback that ends in it.

    pyspark's worker (``pyspark.util.handle_worker_exception``) reports an exception as
    ``traceback.format_exc()``, or only its last line when ``SPARK_HIDE_TRACEBACK`` is set in
    the worker's environment, which it reads when it reports. The methods marked run in the
    process that creates a Python data source or runs one streaming source's driver side
    (``pyspark.sql.worker.create_data_source``, ``python_streaming_source_runner``), never in
    the workers that run tasks and users' UDFs, so other errors keep their tracebacks there.
    """

    @wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except SparkCdcError:
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return run  # type: ignore[return-value]
