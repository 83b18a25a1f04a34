"""The launcher's Python processes forked from the warm server (``spark/forkserver.py``):
what the child runs with is the launcher's, and without a server the launcher runs alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.model.source_types import SOURCE_TYPES
from sparkcdc.spark import forkserver

PROBE = """
import json, os, sys
print(json.dumps({
    "pid": os.getpid(),
    "ppid": os.getppid(),
    "preloaded": "sparkcdc.spark.source" in sys.modules,
    "modules": sorted(m for m in sys.modules if m.startswith("sparkcdc.")),
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "marker": os.environ.get("PROBE_MARKER"),
}), flush=True)
if sys.argv[1:] == ["wait"]:
    sys.stdin.read()  # until the launcher's stdin closes, or a signal
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


def _wait_for(condition: object, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s} s")
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def probe_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "forkprobe.py").write_text(PROBE)
    paths = [str(tmp_path), *(p for p in sys.path if p)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return tmp_path


@pytest.fixture
def forks(probe_env: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    path = str(tmp_path / "fs.sock")
    process = forkserver.start(path)
    # the socket is bound before the imports: a launcher that connects then waits for them
    try:
        _wait_for(lambda: os.path.exists(path), "socket")
        yield process, path
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the server ends when its driver's pipe closes
        process.wait(timeout=60)


def _launch(args: list[str], socket: str, cwd: Path, **popen: object) -> subprocess.Popen[str]:
    env = {**os.environ, forkserver.SOCKET_ENV: socket, "PROBE_MARKER": "m1", "PROBE_EXIT": "3"}
    return subprocess.Popen(
        [sys.executable, "-m", "sparkcdc.spark.launch", "-m", "forkprobe", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[arg-type]
    )


def test_a_launcher_runs_its_module_in_a_child_of_the_server(
    forks: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    process, path = forks
    work = tmp_path / "work"
    work.mkdir()
    launcher = _launch(["a", "b c"], path, work)
    out, _ = launcher.communicate(timeout=120)
    seen = json.loads(out)
    assert launcher.returncode == 3  # the child's exit code is the launcher's
    assert seen["ppid"] == process.pid and seen["pid"] != launcher.pid
    assert seen["preloaded"]  # the source was imported before the module ran
    # and every source's dialect, which the source's processes import to parse its options
    # and unpickle its reader (the MySQL one ~0.4-0.8 s a process)
    dialects = {target.partition(":")[0] for target in SOURCE_TYPES.values()}
    assert dialects <= set(seen["modules"])
    assert seen["argv"] == ["a", "b c"]
    assert seen["cwd"] == str(work)
    assert seen["marker"] == "m1"  # the launcher's environment


def test_without_a_server_the_launcher_runs_its_module_itself(
    probe_env: Path, tmp_path: Path
) -> None:
    launcher = _launch(["x"], str(tmp_path / "none.sock"), tmp_path)
    out, _ = launcher.communicate(timeout=120)
    seen = json.loads(out)
    assert launcher.returncode == 3
    assert seen["pid"] == launcher.pid and not seen["preloaded"]


def test_a_launcher_on_another_path_is_not_served(
    forks: tuple[subprocess.Popen[bytes], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path = forks
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(other), os.environ["PYTHONPATH"]]))
    launcher = _launch(["x"], path, tmp_path)
    out, _ = launcher.communicate(timeout=120)
    assert json.loads(out)["pid"] == launcher.pid  # other code: run by the launcher itself


def test_a_signal_to_the_launcher_ends_its_child(
    forks: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    _, path = forks
    launcher = _launch(["wait"], path, tmp_path, stdin=subprocess.PIPE)
    assert launcher.stdout is not None
    child = json.loads(launcher.stdout.readline())["pid"]
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=60) == 128 + signal.SIGTERM

    _wait_for(lambda: _gone(child), "end of the child after its launcher's SIGTERM")


def test_a_preloaded_module_runs_quietly_and_ctrl_c_leaves_the_server_serving(
    forks: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    """Spark's own modules are the ones the server preloads: runpy's warning that it found
    them imported must not reach the run's stderr; a terminal's Ctrl-C reaches the server
    too (the foreground process group), which must neither die nor print a stack."""
    process, path = forks
    env = {**os.environ, forkserver.SOCKET_ENV: path}
    command = [sys.executable, "-m", "sparkcdc.spark.launch", "-m", "sparkcdc.spark.source"]
    first = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "RuntimeWarning" not in first.stderr, first.stderr
    process.send_signal(signal.SIGINT)
    second = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert second.returncode == 0 and "RuntimeWarning" not in second.stderr, second.stderr
    assert process.poll() is None, "the server ended on SIGINT"


EARLY_SIGNAL = """
import os, signal, subprocess, sys
from sparkcdc.spark.forkserver import _SignalForward
forward = _SignalForward()
os.kill(os.getpid(), signal.SIGTERM)  # before the child's pid is known: held
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
if sys.argv[1] == "child":
    forward.to(child.pid)  # the held signal goes to the child, the launcher exits
else:
    child.kill()
    forward.undo()  # no child: the launcher takes it itself, as if never held
print("survived", flush=True)
"""


@pytest.mark.parametrize("then", ["child", "none"])
def test_a_signal_before_the_child_is_known_is_not_lost(then: str) -> None:
    """The server's child may run (and Spark may end the launcher) before the child's pid
    reaches the launcher: that SIGTERM must still end the child, or the launcher itself."""
    run = subprocess.run(
        [sys.executable, "-c", EARLY_SIGNAL, then], capture_output=True, text=True, timeout=120
    )
    lines = run.stdout.split()
    assert "survived" not in lines, run.stderr
    if then == "child":
        assert run.returncode == 128 + signal.SIGTERM, run.stderr
        child = int(lines[0])

        _wait_for(lambda: _gone(child), "end of the child the held SIGTERM was passed to")
    else:
        assert run.returncode == -signal.SIGTERM, run.stderr


def test_a_terminals_ctrl_c_to_the_launcher_is_not_passed_on(
    forks: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    """Ctrl-C reaches a served launcher as a member of the driver's foreground group: the
    driver stops the run and Spark ends the launcher with SIGTERM; passed on, it printed a
    forked worker's KeyboardInterrupt stack into the terminal (test_cli_console)."""
    _, path = forks
    launcher = _launch(["wait"], path, tmp_path, stdin=subprocess.PIPE)
    assert launcher.stdout is not None and launcher.stdin is not None
    child = json.loads(launcher.stdout.readline())["pid"]
    launcher.send_signal(signal.SIGINT)
    launcher.stdin.close()  # the child reads its stdin to the end, then exits with PROBE_EXIT
    assert launcher.wait(timeout=60) == 3
    _wait_for(lambda: _gone(child), "end of the child")
