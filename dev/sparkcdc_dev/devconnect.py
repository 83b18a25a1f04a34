"""A private Spark Connect server for the tests of the source through a Connect client.

It runs ``SparkConnectServer`` from the pyspark install (whose ``jars/`` holds
``spark-connect_2.13-<version>.jar``: nothing is fetched) with ``spark-submit``, a
``local[2]`` master, on 127.0.0.1 only, on its own port (``SPARKCDC_DEV_CONNECT_PORT``,
29150 by default). Its Python workers (the source's partitions, a ``foreachBatch``
function) run this interpreter (``PYSPARK_PYTHON``), which imports sparkcdc from its own
installation as a server's Python must (docs/connect.md): the server gets no
``PYTHONPATH`` of this process. Or, as on a server where sparkcdc is not installed, another
``python`` and the zip ``sparkcdc package`` writes in ``py_files``: on the server's
``PYTHONPATH`` (its own Python workers: the source's planning, ``foreachBatch``) and given
with ``--py-files`` (the executors'). Its log, pid file and empty ``conf/`` live under
``$SPARKCDC_DEV_DIR/spark-connect-<port>``. Starting it twice is safe: a running server
is reused.

    >>> server = DevConnect.from_env()          # doctest: +SKIP
    >>> server.start()                          # doctest: +SKIP
    'sc://127.0.0.1:29150'

``python -m sparkcdc_dev.devconnect start|stop|status`` does the same from a shell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sparkcdc.errors import SparkMasterError
from sparkcdc_dev import lanes
from sparkcdc_dev.devspark import spark_home
from sparkcdc_dev.lanes import default_port
from sparkcdc_dev.processes import alive, log_tail, port_open, recorded_pid

DEFAULT_PORT = default_port("SPARKCDC_DEV_CONNECT_PORT")
DEFAULT_DIR = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DRIVER_MEMORY = "1g"
# variables of this process the server must not inherit: its Python workers find sparkcdc
# installed, as on another host, and Spark settings of this shell are not the server's
_NOT_INHERITED = (
    "PYTHONPATH",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "SPARK_MASTER",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
)


class DevConnect:
    """Start, reuse and stop the private Spark Connect server."""

    def __init__(
        self,
        base_dir: Path = DEFAULT_DIR,
        port: int = DEFAULT_PORT,
        python: str | None = None,
        py_files: Sequence[str] = (),
    ) -> None:
        self.base_dir = base_dir / f"spark-connect-{port}"
        self.port = port
        self.python = python or sys.executable
        self.py_files = tuple(py_files)
        self.pid_file = self.base_dir / "server.pid"
        self.log_file = self.base_dir / "server.log"
        self.url = f"sc://127.0.0.1:{port}"

    @classmethod
    def from_env(cls) -> DevConnect:
        port = int(os.environ.get("SPARKCDC_DEV_CONNECT_PORT", DEFAULT_PORT))
        return cls(DEFAULT_DIR, port)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 180.0) -> str:
        """Start the server (or reuse the running one); return its ``sc://`` URL once it
        accepts connections."""
        if self.is_running():
            return self.url
        if self._pid() is None:
            if port_open(self.port):
                raise SparkMasterError(
                    f"port {self.port} on 127.0.0.1 is in use by another program (not the "
                    f"private Spark Connect server of {self.base_dir}); stop that program, or "
                    "choose another port with SPARKCDC_DEV_CONNECT_PORT"
                )
            self._launch()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._pid() is None:
                raise SparkMasterError(
                    f"the private Spark Connect server on port {self.port} exited while "
                    f"starting; {self.log_file} ends with:\n{log_tail(self.log_file)}"
                )
            if port_open(self.port):
                return self.url
            time.sleep(0.25)
        self.stop()
        raise SparkMasterError(
            f"the private Spark Connect server on port {self.port} did not accept "
            f"connections within {timeout_s:.0f}s (stopped again); {self.log_file} ends "
            f"with:\n{log_tail(self.log_file)}"
        )

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the server the pid file names, with its Python workers (its process
        group); nothing else. Wait until they are gone."""
        pid = self._pid()
        self.pid_file.unlink(missing_ok=True)
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # what is left of the group: workers, or all
        while alive(pid):
            time.sleep(0.1)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # no zombie when this process started it

    def is_running(self) -> bool:
        """True when this directory's server is alive and accepts connections."""
        return self._pid() is not None and port_open(self.port)

    # -- internals -------------------------------------------------------------------

    def _launch(self) -> None:
        home = spark_home()
        submit = home / "bin" / "spark-submit"
        if not submit.is_file():
            raise SparkMasterError(
                f"no {submit}: the pyspark install has no Spark distribution to start a "
                "Connect server from; reinstall pyspark (pip install -e '.[dev]')"
            )
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "conf").mkdir(exist_ok=True)  # no spark-defaults.conf of anyone's
        environ = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        environ.update(
            SPARK_HOME=str(home),
            SPARK_CONF_DIR=str(self.base_dir / "conf"),
            SPARK_LOG_DIR=str(self.base_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=self.python,
        )
        if self.py_files:
            environ["PYTHONPATH"] = os.pathsep.join(self.py_files)
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "4",
        }
        command = [str(submit), "--class", SERVER_CLASS, "--master", "local[2]"]
        command += ["--name", f"sparkcdc-dev-connect-{self.port}"]
        command += ["--driver-memory", DRIVER_MEMORY]
        if self.py_files:
            command += ["--py-files", ",".join(self.py_files)]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")  # no application jar: the server's own class
        with self.log_file.open("ab") as log:
            # its own process group: stop() ends the JVM and the Python workers it started
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environ,
                cwd=self.base_dir,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{process.pid}\n")

    def _pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is this server. While it
        starts, the process execs four programs (env, bash for spark-submit and for
        spark-class, java), and its command line reads empty or half-made during an exec:
        a live process of the pid file that does not match yet is asked again for up to
        two seconds before it counts as another program (a pid used again)."""
        port = f"spark.connect.grpc.binding.port={self.port}"
        deadline = time.monotonic() + 2.0
        while True:
            pid = recorded_pid(self.pid_file, SERVER_CLASS.encode(), port.encode())
            if pid is not None or time.monotonic() > deadline or not self._recorded_alive():
                return pid
            time.sleep(0.02)

    def _recorded_alive(self) -> bool:
        """True when the pid file names a live process, whatever its program."""
        try:
            return alive(int(self.pid_file.read_text().strip()))
        except (OSError, ValueError):
            return False


def main() -> None:
    """``python -m sparkcdc_dev.devconnect [start|stop|status]``."""
    server = DevConnect.from_env()
    command = sys.argv[1] if len(sys.argv) > 1 else "start"
    if command == "stop":
        server.stop()
        print("stopped")
    elif command == "status":
        running = server.is_running()
        print(f"Spark Connect {'running' if running else 'not running'} at {server.url}")
        raise SystemExit(0 if running else 1)
    elif command == "start":
        url = server.start()
        print(f"Spark Connect running at {url} (log in {server.log_file})")
    else:
        raise SystemExit(
            f"usage: python -m sparkcdc_dev.devconnect [start|stop|status], not {command!r}"
        )


if __name__ == "__main__":
    main()
