"""Frame steps: the frame operations of a message plan, with their column expressions
built once per sink table and applied to every batch's change frame."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

FrameStep = Callable[["DataFrame"], "DataFrame"]


def applied(steps: Sequence[FrameStep], frame: DataFrame) -> DataFrame:
    return reduce(lambda done, step: step(done), steps, frame)


def selected(*columns: Column | str) -> FrameStep:
    """The step that selects ``columns`` (built once, selected from each frame)."""
    return lambda frame: frame.select(*columns)
