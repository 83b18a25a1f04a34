"""Fixtures of the pipeline's unit tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture
def new_session() -> SimpleNamespace:
    """What a stand-in for ``spark_session`` returns: the little of a session a pipeline
    touches when it opens one (its log level set, its sources registered)."""
    return SimpleNamespace(
        sparkContext=SimpleNamespace(setLogLevel=lambda level: None, defaultParallelism=2),
        dataSource=SimpleNamespace(register=lambda source: None),
    )
