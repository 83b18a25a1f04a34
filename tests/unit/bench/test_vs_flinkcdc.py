"""bench/vs_flinkcdc.py's pure parts: its sizes from the command line, and the check that stops
it when a side did not read exactly the workload (a ratio of wrong counts is no ratio)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "vs_flinkcdc.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vs_flinkcdc", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vs_flinkcdc"] = module
    spec.loader.exec_module(module)
    return module


def test_the_default_sizes_are_the_issues(bench: ModuleType) -> None:
    sizes = bench.parse_args([])
    assert (sizes.rows, sizes.changes, sizes.rounds) == (2_000_000, 1_000_000, 2)
    assert sizes.writes_per_s == 1000.0


def test_quick_is_ten_times_fewer_rows_and_changes(bench: ModuleType) -> None:
    sizes = bench.parse_args(["--quick", "--rows", "500000", "--rounds", "3"])
    assert (sizes.rows, sizes.changes, sizes.rounds) == (50_000, 100_000, 3)


def test_sizes_too_small_to_measure_are_refused(bench: ModuleType) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--quick", "--changes", "50"])


def test_the_catch_up_workload_by_kind_adds_up_to_the_changes(bench: ModuleType) -> None:
    kinds = bench.binlog_kinds(1_000_000)
    assert kinds == {"+I": 500_000, "-U": 300_000, "+U": 300_000, "-D": 200_000}
    odd = bench.binlog_kinds(1_001)
    assert odd["+I"] + odd["+U"] + odd["-D"] == 1_001 and odd["-U"] == odd["+U"]


def test_exact_counts_pass(bench: ModuleType) -> None:
    expected = bench.binlog_kinds(1000)
    bench.check_counts("flinkcdc", "binlog", dict(expected), expected)
    bench.check_counts("sparkcdc", "snapshot", {"+I": 10}, bench.snapshot_kinds(10))


@pytest.mark.parametrize(
    "counted",
    [
        {"+I": 500, "-U": 300, "+U": 300, "-D": 199},  # one delete missing
        {"+I": 500, "-U": 0, "+U": 300, "-D": 200},  # updates without before-images
        {"+I": 500, "-U": 300, "+U": 300, "-D": 200, "x": 1},  # a kind nobody wrote
        {"+I": 1000},  # the same total, the wrong kinds
    ],
)
def test_wrong_counts_stop_the_bench_saying_which(
    bench: ModuleType, counted: dict[str, int]
) -> None:
    with pytest.raises(bench.CountMismatchError, match="no ratio is reported") as stopped:
        bench.check_counts("sparkcdc", "binlog", counted, bench.binlog_kinds(1000))
    assert "sparkcdc read the wrong rows in the binlog phase" in str(stopped.value)


def test_both_peers_run_by_default(bench: ModuleType) -> None:
    assert bench.parse_args([]).peers == ("flinkcdc", "debezium")


def test_peers_can_be_chosen(bench: ModuleType) -> None:
    assert bench.parse_args(["--peers", "debezium"]).peers == ("debezium",)
    assert bench.parse_args(["--peers", "debezium,flinkcdc"]).peers == ("debezium", "flinkcdc")


@pytest.mark.parametrize("peers", ["", "debezium,flink", "kafka"])
def test_unknown_or_no_peers_are_refused(bench: ModuleType, peers: str) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--peers", peers])
