"""Process facts the private dev servers share.

Their fixed ports (MariaDB 23306, PostgreSQL 25432, Kafka 29092 and its controller 29093,
MinIO 29000 and its console 29001, Spark Connect 29150, and the ports the tests that stop a
server use) lie below Linux's ephemeral range (32768-60999 by default). A port inside it can
be taken at any moment by a program's random listening port (a Spark driver's, a block
manager's) or by a connection's own source port; a CI run once found the private Kafka's
controller port taken that way.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from sparkcdc.errors import SinkError


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (exited, not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # the state follows the parenthesised command name, which may itself contain ')'
    return stat.rpartition(")")[2].split()[0] != "Z"


def port_open(port: int) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def refuse_taken_ports(ports: Sequence[int], server: str, variable: str, second: str) -> None:
    """SinkError when another program listens on one of a server's ``ports`` (``server``
    names the private server, ``variable`` the setting that moves it, ``second`` what its
    port+1 is)."""
    for port in ports:
        if port_open(port):
            raise SinkError(
                f"port {port} on 127.0.0.1 is in use by another program (not {server}); stop "
                f"that program, or choose another port with {variable} (the {second} uses "
                "port+1)"
            )


def recorded_pid(pid_file: Path, *marks: bytes) -> int | None:
    """The pid in ``pid_file`` if that process is alive and each of ``marks`` is one of its
    command line's arguments (a recycled pid belongs to some other program: never signal
    it)."""
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    ours = all(mark in cmdline for mark in marks)
    return pid if ours and alive(pid) else None


def terminate(pid: int, timeout_s: float, poll_s: float) -> None:
    """SIGTERM ``pid``, wait up to ``timeout_s`` for it to end, then SIGKILL it; return
    once it is gone."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive(pid):
        time.sleep(poll_s)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        while alive(pid):
            time.sleep(0.1)


def log_tail(path: Path, size: int = 2000) -> str:
    """The last ``size`` characters of a server's log, for a message that it failed."""
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"
