"""Data files moved out of a table for a while: whatever reads them fails meanwhile."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def files_moved_away(files: Sequence[Path], away: Path, read: Callable[[], Any]) -> Iterator[None]:
    """Move ``files`` into ``away`` for the block, and back after it; ``read`` (a full read
    of the table) is checked to fail while they are away, so the block's work succeeding
    shows it did not need them."""
    assert files, "no file to move away"
    away.mkdir()
    for path in files:
        path.rename(away / path.name)
    try:
        with pytest.raises(Exception, match=r"(?i)not.*(exist|found)"):
            read()
        yield
    finally:
        for path in files:
            (away / path.name).rename(path)
