"""Private files on the local filesystem: state, checkpoints, status and the worker launcher.

What sparkcdc keeps locally holds the captured tables' rows (staged snapshot chunks), where the
stream stands (checkpoint, status) or code Spark runs (the Python launcher). Directories it
makes are 0700 and files 0600, whatever the umask; a directory that already exists keeps its
mode (the user chose it). Remote filesystems (pyarrow URIs) are left to their own access
control.

>>> import tempfile
>>> base = tempfile.mkdtemp()
>>> path = make_private_dirs(f"{base}/a/b")
>>> oct(os.stat(f"{base}/a").st_mode & 0o777), oct(os.stat(path).st_mode & 0o777)
('0o700', '0o700')
>>> write_private(f"{path}/status.json", b"{}")
>>> oct(os.stat(f"{path}/status.json").st_mode & 0o777)
'0o600'
"""

from __future__ import annotations

import os
import re
import stat
import uuid
from pathlib import Path

from sparkcdc.errors import PrivateDirectoryError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def uri_scheme(location: str) -> str | None:
    """The scheme of a location written as a URI, None for a path.

    >>> uri_scheme("s3a://bucket/lake"), uri_scheme("file:/tmp/x"), uri_scheme("/data/lake")
    ('s3a', 'file', None)
    """
    match = _SCHEME.match(location)
    return match.group(1) if match else None


def make_private_dirs(path: str | os.PathLike[str]) -> str:
    """Make ``path`` and its missing parents as 0700 directories (existing ones untouched)."""
    target = os.path.abspath(path)
    missing: list[str] = []
    current = target
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
            continue
        os.chmod(directory, PRIVATE_DIR_MODE)  # the umask may have taken bits away; never adds
    return target


def open_private(path: str | os.PathLike[str], *, exclusive: bool = True) -> int:
    """A new file opened for writing, 0600 from its creation (a descriptor)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    return os.open(path, flags, PRIVATE_FILE_MODE)


def write_private(path: str | os.PathLike[str], data: bytes | str, *, sync: bool = False) -> None:
    """Replace ``path`` atomically with ``data`` in a 0600 file, making its directory private."""
    directory = make_private_dirs(os.path.dirname(os.path.abspath(path)))
    temp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with os.fdopen(open_private(temp), "wb") as out:
            out.write(raw)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def ensure_private_dir(path: str | os.PathLike[str], holds: str) -> str:
    """``path`` as a directory only this user owns and can write: made 0700 if missing, else
    checked (not a symlink, owned by this user, not writable by group or others). Another
    local user who could write there could plant what sparkcdc then runs or reads.
    ``holds`` says what the directory is for, in the error message.

    Raises PrivateDirectoryError naming the directory, what is wrong and what to do.
    """
    directory = os.path.abspath(path)
    make_private_dirs(directory)
    info = os.lstat(directory)
    problem = None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory (a symbolic link or a file)"
    elif info.st_uid != os.getuid():
        problem = f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"is writable by other users (mode {oct(info.st_mode & 0o777)})"
    if problem is not None:
        raise PrivateDirectoryError(
            f"{directory} {problem}: sparkcdc keeps {holds} there, which no other user may "
            f"change. Remove {directory} (or, if it is yours, `chmod 700 {directory}`), or "
            "set TMPDIR to a directory of your own"
        )
    return directory
