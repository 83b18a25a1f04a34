"""Background: a call on a thread of its own, waited for, its error raised in the waiter."""

from __future__ import annotations

import threading

import pytest

from sparkcdc.background import Background


def test_wait_returns_once_the_call_is_done() -> None:
    started, release, done = threading.Event(), threading.Event(), []

    def call() -> None:
        started.set()
        release.wait(10)
        done.append(threading.current_thread().name)

    work = Background(call, "sparkcdc-test")
    assert started.wait(10) and not done  # running beside the caller
    release.set()
    work.wait()
    assert done == ["sparkcdc-test"]


def test_its_error_is_raised_by_wait_once() -> None:
    def call() -> None:
        raise RuntimeError("the data-source lookup failed")

    work = Background(call, "sparkcdc-test")
    with pytest.raises(RuntimeError, match="lookup failed"):
        work.wait()
    work.wait()  # raised once, in the caller's thread
