"""A warm Python that Spark's local Python processes are forked from (DESIGN.md §11.3).

A run on a local master starts about six Python processes one after another: the lookup of
installed data sources, the source's schema, the streaming source's runner, the read's
planner, the worker daemon. Each is a new interpreter that imports pyspark, pyarrow, numpy,
pydantic, the source and its dialect (~1 s each on two busy cores) before it does its ~0.1 s
of work.

The driver starts this server beside its JVM (``start``): one process that imports all of
that once (``PRELOADED``) and then forks a child per request. The launcher Spark runs
(``spark/launch.py``) asks it (``run_forked``) to run ``-m <module>`` with the launcher's
own standard streams (passed over the socket), environment, working directory and
``sys.path``; the child's exit code is the launcher's. The server serves only launchers whose
``sys.path`` is its own (the same code), and a launcher that cannot be served (no server,
not ready to accept, another path) runs the module itself, as without a server. A
signal that ends the launcher ends its child too (``_SignalForward``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from sparkcdc.spark.archives import strip_spark_archives
from sparkcdc.spark.preloads import PRELOADED as WORKER_PRELOADED
from sparkcdc.spark.preloads import preload

# the environment variable that names the server's socket to the processes Spark starts
SOCKET_ENV = "SPARKCDC_FORKSERVER"

# what Spark's Python processes import before their work: its planner and worker modules,
# and, unpickling the mysql-cdc source, sparkcdc's source with pyarrow and pydantic, and the
# source's dialect (``model.source_types``, imported on first use: the MySQL one brings
# pymysql, cryptography and sqlglot, ~0.4-0.8 s in each of the source's processes). Named by
# the light registry, not ``model.dialect``: the launcher imports this module, and stays light.
# A worker's share (the daemon's own list, as it preloads without a server) ends the list
PRELOADED = (
    "pyspark.sql.worker.lookup_data_sources",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyspark.daemon",
    *WORKER_PRELOADED,
)

# runpy's warning for a module found in sys.modules before it runs it as __main__
_PRELOADED_WARNING = r".*found in sys\.modules after import of package"
_CODE = struct.Struct("!i")  # the child's pid, then its exit code, each a 4-byte int
_MAX_REQUEST = 1 << 20
_STREAMS = 3  # stdin, stdout, stderr


def start(socket_path: str) -> subprocess.Popen[bytes]:
    """Start a server on ``socket_path`` in the background: it imports ``PRELOADED`` and
    serves until this process closes the pipe to its stdin (when it exits)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    return subprocess.Popen(
        [sys.executable, "-m", "sparkcdc.spark.forkserver", socket_path], stdin=subprocess.PIPE
    )


def serve(socket_path: str) -> NoReturn:
    """Listen on ``socket_path`` (before the imports, so that a launcher that comes early
    waits for them rather than importing everything itself), import ``PRELOADED`` (and what
    a worker's first read imports: ``spark/preloads.py``), then fork a child per request
    until stdin closes; then exit."""
    # the terminal's Ctrl-C goes to the whole foreground process group, this server too: it
    # ends with the driver's pipe (stdin), not on a signal, and prints no stack; a child gets
    # Python's own handler back (``_run_child``)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    if sys.path and sys.path[0] == os.getcwd():
        sys.path.pop(0)  # `-m` put the working directory first; a launcher has its own there
    preload(PRELOADED)  # one that does not import: the child that needs it meets its error
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    with selectors.DefaultSelector() as selector:
        selector.register(listener, selectors.EVENT_READ)
        selector.register(sys.stdin, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is sys.stdin:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(socket_path)
                    # at once: finalizing pyarrow's and numpy's modules took ~0.3 s of the
                    # driver's exit (the server holds the driver's stderr until it ends)
                    os._exit(0)
                conn, _ = listener.accept()
                with conn:
                    _fork_child(conn, listener)


@dataclass(frozen=True)
class Request:
    """What a launcher asks the server to run, and as whom: its module and arguments,
    environment, working directory and ``sys.path``."""

    module: str
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    path: tuple[str, ...]

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Request:
        data = json.loads(raw)
        return cls(
            str(data["module"]),
            tuple(str(a) for a in data["args"]),
            {str(k): str(v) for k, v in data["env"].items()},
            str(data["cwd"]),
            tuple(str(p) for p in data["path"]),
        )


def _fork_child(conn: socket.socket, listener: socket.socket) -> None:
    """Read one request from ``conn`` and fork its child; a request it cannot serve is
    answered by closing ``conn`` (the launcher then runs the module itself)."""
    try:
        raw, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, _STREAMS)
    except OSError:
        return
    try:
        request = Request.from_json(raw)
        if len(fds) != _STREAMS or list(request.path[1:]) != sys.path:
            return
        pid = os.fork()
        if pid == 0:
            listener.close()
            _run_child(conn, fds, request)  # never returns
        conn.sendall(_CODE.pack(pid))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    finally:
        for fd in fds:
            os.close(fd)


def _run_child(conn: socket.socket, fds: Sequence[int], request: Request) -> NoReturn:
    """In the forked child: become the launcher's process (its streams, environment,
    working directory, arguments), run the module, report its exit code and exit."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # runpy warns that the module it runs was imported already: it was, by the server
        # (PRELOADED), which is the point; the warning would be the run's stderr noise
        warnings.filterwarnings("ignore", _PRELOADED_WARNING, RuntimeWarning)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.environ.clear()
        os.environ.update(request.env)
        os.chdir(request.cwd)
        sys.argv[:] = [sys.argv[0], *request.args]
        sys.path[:] = request.path
        runpy.run_module(request.module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(_CODE.pack(code))
        os._exit(code)


def run_forked(module: str, args: Sequence[str]) -> int | None:
    """In a launcher: run ``-m module args`` in a child of the server ``SOCKET_ENV`` names,
    with this process's streams; its exit code, or None when no server serves it (the caller
    runs the module itself)."""
    path = os.environ.get(SOCKET_ENV)
    if not path:
        return None
    forward = _SignalForward()  # before the request: the child may run before the reply
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
        request = Request(module, tuple(args), dict(os.environ), os.getcwd(), tuple(sys.path))
        socket.send_fds(client, [request.to_json()], list(range(_STREAMS)))
        client.shutdown(socket.SHUT_WR)
        started = _read_int(client)
    except OSError:
        started = None
    if started is None:
        client.close()
        forward.undo()
        return None
    forward.to(started)
    code = _read_int(client)
    return 1 if code is None else code


def _read_int(conn: socket.socket) -> int | None:
    data = b""
    while len(data) < _CODE.size:
        chunk = conn.recv(_CODE.size - len(data))
        if not chunk:
            return None
        data += chunk
    (value,) = _CODE.unpack(data)
    return int(value)


class _SignalForward:
    """Spark ends a Python process it started with SIGTERM (``Process.destroy``): the
    launcher passes that on to the child that does its work, then exits. The handlers are
    set before the request is sent, since the child can run (and be seen running) before
    its pid reaches the launcher: a signal in between waits for the pid, or, when no child
    was started, is taken by the launcher itself as it would have been.

    A terminal's Ctrl-C is not passed on: it reaches the launcher only as a member of the
    driver's foreground process group, the driver stops the run and Spark ends its processes
    with SIGTERM. Spark's daemon, run by a launcher itself, leaves that group
    (``pyspark.daemon`` calls ``setpgid``); forked, its launcher stays in it, and a SIGINT
    passed on printed a worker's KeyboardInterrupt stack into ``sparkcdc run``'s terminal."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._child: int | None = None
        self._pending: int | None = None
        self._before = {signum: signal.signal(signum, self._on_signal) for signum in self.SIGNALS}
        self._before[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def _on_signal(self, signum: int, _: object) -> None:
        if self._child is None:
            self._pending = self._pending or signum
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._child, signum)
        os._exit(128 + signum)

    def to(self, pid: int) -> None:
        """Forward to ``pid`` from now on, and a signal that came before it now."""
        self._child = pid
        if self._pending is not None:
            self._on_signal(self._pending, None)

    def undo(self) -> None:
        """No child: the launcher's own handlers again, and a signal that came meanwhile
        delivered to itself under them."""
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        if self._pending is not None:
            os.kill(os.getpid(), self._pending)


def socket_path(folder: str) -> str:
    """The server's socket for this process, in the private ``folder``."""
    return str(Path(folder) / f"forkserver-{os.getpid()}.sock")


if __name__ == "__main__":
    strip_spark_archives()
    serve(sys.argv[1])
