"""Private local files: modes whatever the umask, and the launcher directory's checks."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.errors import PrivateDirectoryError
from sparkcdc.files import ensure_private_dir, make_private_dirs, write_private
from sparkcdc.pipeline.status import STATUS_FILE, write_status
from sparkcdc.spark.python_env import launcher_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def lenient_umask() -> Iterator[None]:
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_private_directories_and_files_ignore_a_lenient_umask(
    tmp_path: Path, lenient_umask: None
) -> None:
    make_private_dirs(tmp_path / "a" / "b" / "c")
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert mode(path) == 0o700, path
    write_private(tmp_path / "a" / "f.json", "{}")
    assert mode(tmp_path / "a" / "f.json") == 0o600
    write_private(tmp_path / "a" / "f.json", b"[]")  # replaced: still private
    assert mode(tmp_path / "a" / "f.json") == 0o600
    assert (tmp_path / "a" / "f.json").read_text() == "[]"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b", "f.json"]  # no temp left


def test_existing_directories_keep_their_mode(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared").chmod(0o755)
    make_private_dirs(tmp_path / "shared" / "mine")
    assert mode(tmp_path / "shared") == 0o755
    assert mode(tmp_path / "shared" / "mine") == 0o700


def test_status_json_is_private(tmp_path: Path, lenient_umask: None) -> None:
    write_status(str(tmp_path / "checkpoint"), {"state": "running"})
    assert mode(tmp_path / "checkpoint" / STATUS_FILE) == 0o600
    assert mode(tmp_path / "checkpoint") == 0o700


def test_a_missing_launcher_directory_is_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lenient_umask: None
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = Path(launcher_dir())
    assert folder == tmp_path / f"sparkcdc-{os.getuid()}"
    assert mode(folder) == 0o700
    assert launcher_dir() == str(folder)  # the second look accepts it


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777, 0o1777])
def test_a_launcher_directory_others_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"sparkcdc-{os.getuid()}"
    folder.mkdir()
    folder.chmod(bits)
    with pytest.raises(PrivateDirectoryError, match="writable by other users") as error:
        launcher_dir()
    assert str(folder) in str(error.value) and "chmod 700" in str(error.value)
    assert mode(folder) == bits  # refused, not repaired behind the user's back


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a directory to another user")
def test_a_launcher_directory_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"sparkcdc-{os.getuid()}"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    with pytest.raises(PrivateDirectoryError, match="owned by uid 65534"):
        launcher_dir()


def test_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PrivateDirectoryError, match="symbolic link"):
        ensure_private_dir(tmp_path / "link", "a test")


def test_a_running_pipelines_status_is_written_when_it_matters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At once when the run starts or stops running; a change at most every few seconds;
    the same status again only as a heartbeat (not on every poll: a PUT each on S3)."""
    from sparkcdc.pipeline import status as run_status

    clock = [1000.0]
    monkeypatch.setattr(run_status.time, "monotonic", lambda: clock[0])
    status = run_status.StatusWriter(str(tmp_path / "checkpoint"))
    path = tmp_path / "checkpoint" / STATUS_FILE

    def at(seconds: float, **fields: object) -> bool:
        clock[0] = 1000.0 + seconds
        return status.write({"running": True, "updated": seconds, **fields})

    assert at(0, last_batch=-1)  # the first
    assert not at(0.5, last_batch=-1)  # only "updated" differs
    assert not at(1, last_batch=0)  # a change, too soon
    assert at(run_status.STATUS_MIN_INTERVAL_S, last_batch=0)
    assert json.loads(path.read_text())["last_batch"] == 0
    assert not at(run_status.STATUS_MIN_INTERVAL_S + 10, last_batch=0)
    assert at(run_status.STATUS_MIN_INTERVAL_S + run_status.STATUS_HEARTBEAT_S, last_batch=0)
    assert at(run_status.STATUS_MIN_INTERVAL_S + run_status.STATUS_HEARTBEAT_S + 0.1, running=False)
    assert json.loads(path.read_text())["running"] is False
