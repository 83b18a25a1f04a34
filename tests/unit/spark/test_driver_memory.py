"""The driver heap sparkcdc's sessions ask for follows the machine's memory, within bounds."""

from __future__ import annotations

import os

import pytest

from sparkcdc.spark import session_plan


@pytest.mark.parametrize(
    ("physical_gib", "expected"),
    [(4, "2g"), (8, "2g"), (16, "4g"), (24, "6g"), (64, "8g"), (512, "8g")],
)
def test_a_quarter_of_the_machine_between_2g_and_8g(
    monkeypatch: pytest.MonkeyPatch, physical_gib: int, expected: str
) -> None:
    page = 4096
    sizes = {"SC_PAGE_SIZE": page, "SC_PHYS_PAGES": (physical_gib << 30) // page}
    monkeypatch.setattr(os, "sysconf", lambda name: sizes[name])
    assert session_plan.driver_memory() == expected


def test_without_a_memory_figure_it_asks_for_2g(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", unknown)
    assert session_plan.driver_memory() == "2g"
