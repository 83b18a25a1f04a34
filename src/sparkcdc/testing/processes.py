"""Process facts the private dev servers share.

Their fixed ports (MariaDB 23306, PostgreSQL 25432, Kafka 29092 and its controller 29093,
MinIO 29000 and its console 29001, and the ports the tests that stop a server use) lie
below Linux's ephemeral range (32768-60999 by default). A port inside it can be taken at
any moment by a program's random listening port (a Spark driver's, a block manager's) or by
a connection's own source port; a CI run once found the private Kafka's controller port
taken that way.
"""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (exited, not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # the state follows the parenthesised command name, which may itself contain ')'
    return stat.rpartition(")")[2].split()[0] != "Z"
