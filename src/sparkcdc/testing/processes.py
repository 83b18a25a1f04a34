"""Process facts the private dev servers share."""

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
