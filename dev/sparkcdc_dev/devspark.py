"""A private Spark standalone cluster for the tests: a master and two one-core workers.

They run from the pyspark install (``SPARK_HOME`` is the pyspark package's directory):
``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``, on loopback only (the master on 127.0.0.1, worker N and its
executors on 127.0.0.N+1, so that Spark counts them as separate hosts and never reads one's
shuffle files from the other's disk), on ports picked free when the cluster starts
(``SPARKCDC_DEV_SPARK_PORT`` fixes the master's). Everything lives under
``$SPARKCDC_DEV_DIR/spark-cluster`` (``/tmp/sparkcdc-dev/spark-cluster`` by default):
``cluster.json`` (ports and process ids), each process's log, and per worker its own work
directory (``worker-N/work``: the executors' logs, ``<app-id>/<executor-id>/stderr``) and
its own ``SPARK_LOCAL_DIRS`` (``worker-N/local``). The processes get an environment without
this process's ``PYTHONPATH`` and ``PYSPARK_*``: what executors import comes from what the
application ships (``spark.submit.pyFiles``) or from their Python's own packages, as on
another host. Starting it twice is safe: a running cluster is reused.

Where this process may make mount namespaces (root here; ``unshare(1)``), each worker and
its executors run in their own, with their own ``/tmp`` (``worker-N/tmp`` mounted there, and
the worker's folder mounted back at its own path inside it): a file the driver writes under
``/tmp`` is not there for them, as on separate hosts, and what they write under ``/tmp``
stays theirs. ``cluster.json`` says whether they do (``private_tmp``).

    >>> cluster = DevSpark.from_env()           # doctest: +SKIP
    >>> cluster.start()                         # doctest: +SKIP
    'spark://127.0.0.1:40123'

``python -m sparkcdc_dev.devspark start|stop|status`` does the same from a shell.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparkcdc.errors import SparkMasterError
from sparkcdc_dev import lanes
from sparkcdc_dev.processes import alive, log_tail

DEFAULT_DIR = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
DEFAULT_WORKERS = 2
WORKER_CORES = 1
# what a worker offers its executors (an executor asks 1g by default); not reserved
WORKER_MEMORY = "2g"
# the master and worker daemons themselves (Spark's default is 1g each)
DAEMON_MEMORY = "256m"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# variables of this process the cluster's processes must not inherit: the executors are
# to find sparkcdc as on another host, and Spark settings of this shell are not theirs
_NOT_INHERITED = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_MASTER")


def spark_home() -> Path:
    """The pyspark package's directory: a Spark distribution (bin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def private_tmp_possible() -> bool:
    """True when a child of this process can get a mount namespace of its own (unshare(1)
    present, and the right to make one: root, or CAP_SYS_ADMIN)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = [unshare, "--mount", "--propagation", "private", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


# run in a worker's new mount namespace before the worker: its folder mounted at its own
# path inside the private /tmp (when that path is under /tmp), then that over /tmp
_OWN_TMP = (
    'set -e; if [ -n "$1" ]; then mkdir -p "$1"; mount --bind "$2" "$1"; fi; '
    'mount --rbind "$3" /tmp; shift 3; exec "$@"'
)


def own_tmp_command(folder: Path) -> list[str]:
    """The command prefix that runs a worker whose folder is ``folder`` in a mount
    namespace of its own, with ``folder/tmp`` as its ``/tmp``."""
    folder = folder.resolve()
    tmp = folder / "tmp"
    tmp_root = Path("/tmp").resolve()
    inside = tmp / folder.relative_to(tmp_root) if folder.is_relative_to(tmp_root) else ""
    namespace = ["unshare", "--mount", "--propagation", "private", "--"]
    return [*namespace, "sh", "-c", _OWN_TMP, "sh", str(inside), str(folder), str(tmp)]


def worker_host(number: int) -> str:
    """Worker ``number``'s (1-based) address: a loopback address of its own."""
    return f"127.0.0.{number + 1}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port


class DevSpark:
    """Start, reuse and stop the private standalone cluster."""

    def __init__(
        self,
        base_dir: Path = DEFAULT_DIR,
        workers: int = DEFAULT_WORKERS,
        port: int | None = None,
    ) -> None:
        self.base_dir = base_dir / "spark-cluster"
        self.workers = workers
        self.port = port
        self.state_file = self.base_dir / "cluster.json"

    @classmethod
    def from_env(cls) -> DevSpark:
        port = os.environ.get("SPARKCDC_DEV_SPARK_PORT")
        return cls(DEFAULT_DIR, DEFAULT_WORKERS, int(port) if port else None)

    # -- where things are ------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self._state()['port']}"

    @property
    def ui_url(self) -> str:
        """The master's web UI; ``<ui_url>/json/`` is its state as JSON."""
        return f"http://127.0.0.1:{self._state()['ui_port']}"

    @property
    def private_tmp(self) -> bool:
        """True when each worker has a ``/tmp`` of its own (a mount namespace)."""
        return bool(self._state().get("private_tmp"))

    def worker_dir(self, number: int) -> Path:
        """Worker ``number``'s (1-based) folder: ``work/`` and ``local/`` in it."""
        return self.base_dir / f"worker-{number}"

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 120.0) -> str:
        """Start the master and the workers (or reuse them); return the master's URL once
        every worker has registered with it."""
        if self.is_running():
            return self.master_url
        self.stop()  # whatever is left of an earlier start
        launcher = spark_home() / "bin" / "spark-class"
        if not launcher.is_file():
            raise SparkMasterError(
                f"no {launcher}: the pyspark install has no Spark distribution to start a "
                "standalone cluster from; reinstall pyspark (pip install -e '.[dev]')"
            )
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "conf").mkdir(exist_ok=True)  # no spark-defaults.conf of anyone's
        port, ui_port = self.port or free_port(), free_port()
        state: dict[str, Any] = {"port": port, "ui_port": ui_port, "pids": {}}
        state["private_tmp"] = private_tmp_possible()
        master_url = f"spark://127.0.0.1:{port}"
        state["pids"]["master"] = self._launch(
            "master",
            [
                MASTER_CLASS,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                f"{ui_port}",
            ],
            {},
        )
        self._save(state)
        for number in range(1, self.workers + 1):
            shutil.rmtree(self.worker_dir(number), ignore_errors=True)  # earlier runs' logs
            self._start_worker(number, state)
        self._await_workers(state, timeout_s)
        return master_url

    def kill_worker(self, number: int) -> None:
        """SIGKILL worker ``number`` (1-based) and its executors at once, as a host that
        goes down; the master and the other workers go on. ``restart_worker`` brings it
        back."""
        state = self._state()
        pid = state["pids"][f"worker-{number}"]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        while _group_alive(pid):
            time.sleep(0.1)
        _reap(pid)

    def restart_worker(self, number: int, timeout_s: float = 120.0) -> None:
        """Start worker ``number`` again (after ``kill_worker``) with its folder as it
        was, and wait until the master counts it."""
        state = self._state()
        if alive(state["pids"][f"worker-{number}"]):
            return
        self._start_worker(number, state)
        self._await_workers(state, timeout_s)

    def _start_worker(self, number: int, state: dict[str, Any]) -> None:
        folder = self.worker_dir(number)
        for sub in ("work", "local", "tmp", "conf"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        host = worker_host(number)
        args = [WORKER_CLASS, "--host", host, "--cores", str(WORKER_CORES)]
        args += ["--memory", WORKER_MEMORY, "--work-dir", str(folder / "work")]
        args += ["--webui-port", str(free_port(host)), f"spark://127.0.0.1:{state['port']}"]
        env = {
            "SPARK_LOCAL_IP": host,
            "SPARK_LOCAL_DIRS": str(folder / "local"),
            "SPARK_WORKER_DIR": str(folder),
            "SPARK_CONF_DIR": str(folder / "conf"),
            "SPARK_LOG_DIR": str(folder),
        }
        prefix = own_tmp_command(folder) if state.get("private_tmp") else []
        state["pids"][f"worker-{number}"] = self._launch(f"worker-{number}", args, env, prefix)
        self._save(state)

    def _await_workers(self, state: dict[str, Any], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, pid in state["pids"].items():
                if not alive(pid):
                    self.stop()
                    raise SparkMasterError(
                        f"the private Spark {name} exited while starting; its log "
                        f"{self._log(name)} ends with:\n{log_tail(self._log(name))}"
                    )
            if self.is_running():
                return
            time.sleep(0.25)
        tails = "\n".join(f"{n}: {log_tail(self._log(n), 600)}" for n in state["pids"])
        self.stop()
        raise SparkMasterError(
            f"the private Spark cluster under {self.base_dir} did not have its "
            f"{self.workers} worker(s) registered within {timeout_s:.0f}s; the logs end "
            f"with:\n{tails}"
        )

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the processes ``cluster.json`` names (workers first, with their
        executors); nothing else. Wait until they are gone."""
        if not self.state_file.exists():
            return
        pids: dict[str, int] = self._state().get("pids", {})
        for name in sorted(pids, key=lambda n: n == "master"):  # the master last
            _stop_group(pids[name], timeout_s)
        self.state_file.unlink(missing_ok=True)

    def is_running(self) -> bool:
        """True when this cluster's master answers and has all its workers alive."""
        if not self.state_file.exists():
            return False
        state = self._state()
        if not all(alive(pid) for pid in state.get("pids", {}).values()):
            return False
        try:
            status = self.status()
        except SparkMasterError:
            return False
        return status.get("status") == "ALIVE" and status.get("aliveworkers", 0) >= self.workers

    def status(self) -> dict[str, Any]:
        """The master's state (its web UI's ``/json/``): workers, cores, apps."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as answer:
                status: dict[str, Any] = json.load(answer)
        except (OSError, urllib.error.URLError, ValueError) as exc:
            raise SparkMasterError(
                f"the private Spark master's web UI {self.ui_url} does not answer ({exc}); "
                "run 'python -m sparkcdc_dev.devspark start'"
            ) from None
        return status

    def executor_tasks(self, app_id: str) -> dict[str, int]:
        """Per worker (``worker-N``): how many tasks application ``app_id``'s executors
        there ran, counted in the executors' logs in that worker's own work directory."""
        counts = {}
        for number in range(1, self.workers + 1):
            logs = (self.worker_dir(number) / "work" / app_id).glob("*/stderr")
            counts[f"worker-{number}"] = sum(
                line.count("Running task ")
                for path in logs
                for line in path.read_text(errors="replace").splitlines()
            )
        return counts

    # -- internals -------------------------------------------------------------------

    def _launch(
        self, name: str, args: list[str], env: dict[str, str], prefix: Sequence[str] = ()
    ) -> int:
        environ = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        environ.update(
            SPARK_HOME=str(spark_home()),
            SPARK_CONF_DIR=str(self.base_dir / "conf"),
            SPARK_LOG_DIR=str(self.base_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        )
        environ.update(env)
        with open(self._log(name), "ab") as log:
            # its own process group: stop() ends the daemon and the executors it started
            process = subprocess.Popen(
                [*prefix, str(spark_home() / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environ,
                cwd=self.base_dir,
                start_new_session=True,
            )
        return process.pid

    def _log(self, name: str) -> Path:
        return self.base_dir / f"{name}.log"

    def _state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            raise SparkMasterError(
                f"the private Spark cluster under {self.base_dir} is not running (no "
                f"readable {self.state_file}); run 'python -m sparkcdc_dev.devspark start'"
            ) from None
        return state

    def _save(self, state: dict[str, Any]) -> None:
        temp = self.state_file.with_suffix(".tmp")
        temp.write_text(json.dumps(state))
        temp.replace(self.state_file)


def _stop_group(pid: int, timeout_s: float) -> None:
    """SIGTERM the process group ``pid`` leads (the daemon, and the executors a worker
    started, even when the worker died first), unless ``pid`` now names another program
    (a process id can be reused once its group is gone); SIGKILL what is left at the
    deadline."""
    if alive(pid) and b"org.apache.spark.deploy" not in _cmdline(pid):
        return
    if not _group_alive(pid):
        _reap(pid)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _group_alive(pid):
        time.sleep(0.2)
    if _group_alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        while _group_alive(pid):
            time.sleep(0.1)
    _reap(pid)


def _group_alive(pgid: int) -> bool:
    """True while a live (not zombie) process of group ``pgid`` remains."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields[0] != "Z" and int(fields[3]) == pgid:  # state, ppid, pgrp
            return True
    return False


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if this process started it (no zombie left)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def main() -> None:
    """``python -m sparkcdc_dev.devspark [start|stop|status]``."""
    import sys

    cluster = DevSpark.from_env()
    command = sys.argv[1] if len(sys.argv) > 1 else "start"
    if command == "stop":
        cluster.stop()
        print("stopped")
    elif command == "status":
        running = cluster.is_running()
        where = cluster.master_url if running else str(cluster.base_dir)
        print(f"Spark standalone cluster {'running at' if running else 'not running in'} {where}")
        raise SystemExit(0 if running else 1)
    elif command == "start":
        url = cluster.start()
        print(f"Spark standalone cluster at {url} (web UI {cluster.ui_url})")
        print(f"its logs and work directories: {cluster.base_dir}")
    else:
        raise SystemExit(
            f"usage: python -m sparkcdc_dev.devspark [start|stop|status], not {command!r}"
        )


if __name__ == "__main__":
    main()
