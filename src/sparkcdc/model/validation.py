"""What a source validator reports: one issue per thing wrong, with the statement that fixes it.
Every source's validator (MySQL/MariaDB, PostgreSQL) speaks it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# a note: nothing is wrong, the check says what sparkcdc will do (create a missing object)
Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class ValidationIssue:
    """One thing wrong with the source, and the exact statement that fixes it.

    >>> fix = "SET GLOBAL binlog_format=ROW"
    >>> str(ValidationIssue("binlog_format", "MIXED", "ROW", fix, "error"))
    'binlog_format: found MIXED, expected ROW; fix: SET GLOBAL binlog_format=ROW'
    """

    setting: str
    found: str
    expected: str
    fix: str
    severity: Severity

    def __str__(self) -> str:
        return f"{self.setting}: found {self.found}, expected {self.expected}; fix: {self.fix}"
