"""The fuzz targets (tests/fuzz/targets.py) on their committed inputs, and a short fuzz run.

Every seed (real binlog events and result rows of the private MariaDB, tests/fuzz/capture.py)
and every input a fuzz run once crashed on (tests/fuzz/regressions: each named for what it
found) must end in a correct decode or a clean error. ``test_a_short_fuzz_run`` runs
scripts/fuzz.sh for a few seconds a target (the kernels under AddressSanitizer and UBSan);
for a long campaign see that script.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.fuzz import targets

from sparkcdc.mysql.binlog import arrowrows
from sparkcdc.mysql.chunks import textrows

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SECONDS_PER_TARGET = 8


def _inputs(kind: str) -> list[tuple[str, Path]]:
    return [
        (target, path)
        for target in targets.TARGETS
        for path in sorted((HERE / kind / target).glob("*"))
    ]


def test_the_compiled_kernels_are_built() -> None:
    """Otherwise the targets would fuzz the Python paths alone."""
    assert arrowrows.COMPILED and textrows.COMPILED, "pip install -e . with a C compiler"


@pytest.mark.timeout(60)  # some of them hung
@pytest.mark.parametrize(
    ("target", "path"), _inputs("regressions"), ids=lambda v: v.name if isinstance(v, Path) else v
)
def test_what_a_fuzz_run_found_ends_clean(target: str, path: Path) -> None:
    targets.TARGETS[target](path.read_bytes())


@pytest.mark.parametrize("target", list(targets.TARGETS))
def test_every_seed_ends_clean(target: str) -> None:
    seeds = sorted((HERE / "corpus" / targets.SEEDS[target]).glob("*"))
    assert len(seeds) > 20, "the seed corpus is missing: python -m tests.fuzz.capture"
    for path in seeds:
        targets.TARGETS[target](path.read_bytes())


@pytest.mark.fuzz
@pytest.mark.skipif(sys.platform != "linux", reason="the sanitizer runtimes are Linux builds")
def test_a_short_fuzz_run(tmp_path: Path) -> None:
    """Each target for SECONDS_PER_TARGET seconds under the sanitizers: no finding."""
    assert shutil.which("clang"), "no clang for the sanitized kernels: run scripts/setup_fuzz.sh"
    env = dict(os.environ, SPARKCDC_FUZZ_DIR=str(tmp_path), PYTHON=sys.executable)
    run = subprocess.run(
        ["bash", "scripts/fuzz.sh", str(SECONDS_PER_TARGET)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    crashes = sorted(p.name for p in (tmp_path / "crashes").glob("*"))
    assert run.returncode == 0 and not crashes, (
        f"fuzz.sh exited {run.returncode}, inputs saved: {crashes}\n{run.stderr[-6000:]}"
    )
    for target in targets.TARGETS:
        assert f"fuzz: {target} for {SECONDS_PER_TARGET}s" in run.stdout
        assert "Done " in run.stderr and "runs in" in run.stderr
