"""The test tiers (docs/development.md, "The tests"). Every test is in exactly one:

- ``unit``: no server, no Spark: tests/unit and the doctests of src/ and dev/. A bare
  ``pytest`` runs this tier alone (seconds).
- ``server``: the private MariaDB, PostgreSQL, Kafka or MinIO, but no Spark.
- ``e2e``: Spark, the sinks, clusters, kills.
- ``fuzz``: the decoders' coverage-guided fuzz runs (tests/fuzz; clang).

``-m TIER`` selects one; scripts/test.sh runs them all. A test's tier is its own mark (on the
test or its module's ``pytestmark``), else its folder's: tests/unit and doctests are
``unit``, tests/fuzz ``fuzz``, and tests/integration ``e2e`` when the test uses the ``spark``
or ``spark_cluster`` fixture, ``server`` otherwise. Nothing is dropped without a word: a test
no rule places, a test with two tiers, a ``unit`` or ``server`` test that asks for a Spark
fixture and a ``unit`` test that asks for a server stop the collection; and a ``unit``,
``server`` or ``fuzz`` test that starts Spark some other way (``run_pipeline``, a
``sparkcdc run`` child) fails: a watch on its child processes sees the Spark JVM.
Integration tests (both tiers) keep the ``integration`` mark.

Property tests (hypothesis) run without a deadline: no test here asserts a time.

This file sits at the repository's root so that the doctests under src/ and dev/ get their
tier too (a conftest applies to the folder below it). It also puts the process in its test
lane (``sparkcdc_dev.lanes``) before any server module reads its ports: scripts/test.sh runs
the tests in two pytest-xdist workers, each with private servers of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem
from hypothesis import settings

from sparkcdc_dev.lanes import lane_environment, lane_of

os.environ.update(lane_environment(lane_of(os.environ), os.environ))

# Property tests prove behaviour, not speed: hypothesis's default deadline (200 ms an example)
# failed them on a loaded machine (a DeadlineExceeded, then Flaky on its replay). A failure
# prints the blob that reproduces it (``@reproduce_failure``).
settings.register_profile("sparkcdc", deadline=None, print_blob=True)
settings.load_profile("sparkcdc")

TIERS = ("unit", "server", "fuzz", "e2e")
_TIER = pytest.StashKey[str]()
SPARK_FIXTURES = frozenset({"spark", "spark_cluster"})
SERVER_FIXTURES = frozenset({"dev_server", "dev_settings", "database", "sql", "server", "minio"})
_ROOT = Path(__file__).parent
_FOLDER_TIERS = {
    _ROOT / "tests" / "unit": "unit",
    _ROOT / "tests" / "fuzz": "fuzz",
    _ROOT / "src": "unit",
    _ROOT / "dev": "unit",
}


def tier_of(item: pytest.Item) -> str:
    """The one tier of ``item`` by the rules of this module's docstring; a test none places,
    or that two place, is a ``pytest.UsageError`` naming it."""
    marked = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
    if len(marked) > 1:
        raise pytest.UsageError(
            f"{item.nodeid} is marked with tiers {sorted(marked)}; a test is in exactly one "
            f"of {', '.join(TIERS)}: keep one mark"
        )
    if marked:
        return marked.pop()
    if isinstance(item, DoctestItem):  # a doctest asks for no fixture: plain Python
        return "unit"
    path = Path(item.path)
    for folder, tier in _FOLDER_TIERS.items():
        if path.is_relative_to(folder):
            return tier
    if path.is_relative_to(_ROOT / "tests" / "integration"):
        return "e2e" if SPARK_FIXTURES & _fixtures(item) else "server"
    raise pytest.UsageError(
        f"{item.nodeid} is in no tier: it is outside tests/unit, tests/integration, "
        f"tests/fuzz, src and dev; mark it with one of {', '.join(TIERS)}"
    )


def _fixtures(item: pytest.Item) -> set[str]:
    """The fixtures ``item`` uses, without the arguments its parametrization gives (a
    parameter may be called ``spark``)."""
    callspec = getattr(item, "callspec", None)
    given = set(callspec.params) if callspec is not None else set()
    return set(getattr(item, "fixturenames", ())) - given


def _check(item: pytest.Item, tier: str) -> None:
    """A ``unit`` or ``server`` test that asks for Spark, or a ``unit`` test that asks for
    a server, stops the collection."""
    used = _fixtures(item)
    if tier in ("unit", "server", "fuzz") and SPARK_FIXTURES & used:
        raise pytest.UsageError(
            f"{item.nodeid} is in the {tier} tier but uses {sorted(SPARK_FIXTURES & used)}: "
            "Spark runs in the e2e tier only; mark it pytest.mark.e2e (or drop the mark "
            "that says otherwise)"
        )
    if tier == "unit" and SERVER_FIXTURES & used:
        raise pytest.UsageError(
            f"{item.nodeid} is in the unit tier but uses {sorted(SERVER_FIXTURES & used)}: "
            "a unit test needs no server; move it to tests/integration (the server tier)"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every item with its tier (before ``-m`` selects) and runs the tiers in the
    order of ``TIERS``, so that no Spark of an e2e test is up in this process while a server
    test runs; with neither ``-m`` nor a path given (a bare ``pytest``), keeps the unit tier
    alone."""
    tiers: dict[pytest.Item, str] = {}
    for item in items:
        tier = tiers[item] = tier_of(item)
        _check(item, tier)
        item.add_marker(tier)
        item.stash[_TIER] = tier
        if tier in ("server", "e2e"):
            item.add_marker("integration")
    items.sort(key=lambda item: TIERS.index(tiers[item]))  # stable: files keep their order
    if config.option.markexpr or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    kept = [item for item in items if item.get_closest_marker("unit") is not None]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def _spark_processes(root: int) -> dict[int, str]:
    """The Spark JVMs among ``root``'s descendants (``/proc``): their command lines by pid."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat_line = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:  # it ended meanwhile
            continue
        if stat_line:
            parent = int(stat_line.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = {}, list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"org.apache.spark." in command:
            found[pid] = command.decode(errors="replace")[-300:]
    return found


class _SparkWatch:
    """Looks for a Spark JVM under this process, other than those running at the start,
    every half second until stopped: a JVM runs for seconds, so none a test starts goes
    unseen."""

    def __init__(self) -> None:
        self._before = set(_spark_processes(os.getpid()))
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="spark-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self.seen:
            self.seen = self._new()
            if self._stop.wait(0.5):
                return

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join()
        return self.seen or self._new()

    def _new(self) -> list[str]:
        running = _spark_processes(os.getpid())
        return [command for pid, command in running.items() if pid not in self._before]


@pytest.fixture(autouse=True)
def _spark_only_in_e2e(request: pytest.FixtureRequest) -> Iterator[None]:
    """Outside the e2e tier, a test that starts Spark (in this process or in one it starts:
    ``run_pipeline``, a ``sparkcdc run`` child) fails, saying to mark it ``e2e``."""
    tier = request.node.stash[_TIER]
    if tier == "e2e" or not Path("/proc/self/stat").exists():
        yield
        return
    watch = _SparkWatch()
    yield
    seen = watch.stop()
    if seen:
        pytest.fail(
            f"{request.node.nodeid} is in the {tier} tier but started Spark ({seen[0]}); "
            "Spark runs in the e2e tier only: mark the test (or its module) pytest.mark.e2e, "
            "or have it use the spark fixture (conftest.py at the repository's root)",
            pytrace=False,
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds a test phase's time (set-up, call, tear-down) to its tier's; in the process that
    reports, so a run in several xdist workers adds theirs up."""
    tier = next((t for t in TIERS if t in report.keywords), None)
    if tier is not None:
        count, seconds = _spent.get(tier, (0, 0.0))
        counted = report.when == "call" or (report.when == "setup" and report.skipped)
        _spent[tier] = (count + counted, seconds + report.duration)


_spent: dict[str, tuple[int, float]] = {}  # tier -> (tests, seconds) reported in this process


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """One line: the tests run and the wall time of each tier."""
    if _spent:
        terminalreporter.write_line(
            "test time per tier (summed over workers): "
            + "; ".join(
                f"{t} {_spent[t][0]} tests {_spent[t][1]:.0f} s" for t in TIERS if t in _spent
            )
        )
