"""Work begun on a thread of its own while the caller goes on, and waited for before what
needs it: a sink's table creations while the stream starts, a session's data-source
registration while a run takes its lease and plans."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Background:
    """``call`` run now on a daemon thread named ``name``. :meth:`wait` joins it and raises
    its error in the caller's thread, once: a later wait returns."""

    def __init__(self, call: Callable[[], None], name: str) -> None:
        self._error: BaseException | None = None

        def run() -> None:
            try:
                call()
            except BaseException as exc:  # raised again by wait(), in the caller's thread
                self._error = exc

        self._thread: threading.Thread | None = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error
