"""The state location through pyarrow.fs: local paths and any filesystem URI pyarrow reaches.

``write_once`` is the first-writer-wins primitive of staging and plan persistence:

- local filesystems: the bytes go to a temporary file in the target's directory, then
  ``os.link(temp, target)``, which fails atomically if the target exists (POSIX
  ``link(2)``: EEXIST); the temporary name is removed either way. Readers never see a
  partly written target.
- other pyarrow filesystems (S3, GCS, HDFS, ...): pyarrow exposes neither a no-clobber
  rename nor a conditional put, so the target is checked for existence and then written
  in one ``open_output_stream`` (one whole-object PUT on object stores, so readers see
  the old state or the whole new object, never a torn one). Two writers racing inside
  that window both succeed and the later object stays; every staged object is
  self-contained (rows and their watermarks in one file), so whichever stays is a
  correct chunk. Disable speculative execution on such stores to keep the window empty.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow.fs as pafs

from sparkcdc.errors import ConfigError, SnapshotError
from sparkcdc.files import open_private
from sparkcdc.locations import Location, open_location
from sparkcdc.model.identifiers import path_segment


@dataclass(frozen=True)
class StateStore:
    """A directory of the state location: ``<state.location>/<stream-id>``.

    Staged chunks hold whole tables' rows: on a local filesystem the directories it makes are
    0700 and its files 0600 (remote filesystems keep their own access control).

    >>> store = StateStore.open("/tmp/sparkcdc-doctest-state", "s1")
    >>> store.path("plan", "app.t", "meta.json").endswith("/s1/plan/app.t/meta.json")
    True
    >>> store.table_path("plan", "app.../x", "meta.json").endswith("/plan/app...~2Fx/meta.json")
    True
    """

    fs: pafs.FileSystem
    root: str

    @classmethod
    def open(
        cls, location: str, stream_id: str, hadoop: Mapping[str, str] | None = None
    ) -> StateStore:
        """``<location>/<stream_id>``; ``hadoop``: the S3A settings of an ``s3a://`` or
        ``s3://`` location (``sparkcdc.locations``)."""
        if not location:
            raise SnapshotError(
                "the incremental snapshot needs 'state.location' (a directory or filesystem "
                "URI where chunk plans and staged chunks are kept so batches can be replayed)"
            )
        try:
            opened = open_location(location, hadoop)
        except ConfigError as exc:
            raise SnapshotError(f"state.location: {exc}") from None
        return cls(opened.fs, f"{opened.path.rstrip('/')}/{stream_id}")

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def table_path(self, area: str, table: str, *parts: str) -> str:
        """A path of a table's own directory under ``area``: the table's (qualified) name is
        one encoded segment (``model.identifiers.path_segment``), so no name leaves it."""
        return self.path(area, path_segment(table), *parts)

    def _at(self, path: str) -> Location:
        return Location(self.fs, path, path)

    def exists(self, path: str) -> bool:
        return self._at(path).exists()

    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None if it does not exist."""
        return self._at(path).read_bytes()

    def list(self, directory: str) -> list[str]:
        """Base names of the files in ``directory`` (sorted; empty if it does not exist)."""
        selector = pafs.FileSelector(directory, allow_not_found=True)
        return sorted(
            info.base_name
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File and not info.base_name.startswith(".")
        )

    def _directory_of(self, path: str) -> str:
        directory = path.rpartition("/")[0]
        self._at(directory).make_dirs()
        return directory

    def remove_table(self, area: str, table: str) -> None:
        """A table's directory under ``area`` and everything in it (nothing if absent)."""
        self._at(self.table_path(area, table)).remove_tree()

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(path)

    def write_once(self, path: str, data: bytes) -> bool:
        """Write ``data`` to ``path`` unless it exists; True if this call wrote it."""
        directory = self._directory_of(path)
        if self.is_local:
            temp = _temp_file(directory, data, sync=True)
            try:
                os.link(temp, path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(temp)
        if self.exists(path):
            return False
        with self.fs.open_output_stream(path) as out:
            out.write(data)
        return True

    def overwrite(self, path: str, data: bytes) -> None:
        """Replace ``path`` atomically where the filesystem can (small metadata only)."""
        self._directory_of(path)
        self._at(path).write(data)


def _temp_file(directory: str, data: bytes, *, sync: bool) -> str:
    """A new uniquely named file in ``directory`` holding ``data`` (local filesystems)."""
    temp = f"{directory}/.tmp-{uuid.uuid4().hex}"
    with os.fdopen(open_private(temp), "wb") as out:
        out.write(data)
        if sync:
            out.flush()
            os.fsync(out.fileno())
    return temp
