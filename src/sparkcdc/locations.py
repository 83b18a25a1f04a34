"""Every location sparkcdc itself reads and writes, through one filesystem layer.

A pipeline's checkpoint files (schema history, ``status.json``, the run id, Spark's offset
log as sparkcdc reads it), the source's state (chunk plans, staged chunks) and the Delta
paths a sink checks are written as users write them for Spark: a path, or a URI
(``s3a://bucket/cdc``, ``s3://``, ``gs://``, ``abfss://``, ``hdfs://``, ``file:``). Spark and
its connectors get the location as written; sparkcdc's own reads and writes go through a
pyarrow filesystem opened for it here, with the settings Spark's Hadoop filesystem uses:

- ``s3a://`` and ``s3://`` (one object store, two spellings): pyarrow's S3 filesystem, set
  from Hadoop's S3A keys (``fs.s3a.endpoint``, ``fs.s3a.endpoint.region``,
  ``fs.s3a.access.key`` / ``secret.key`` / ``session.token``,
  ``fs.s3a.connection.ssl.enabled``, ``fs.s3a.path.style.access`` and their per-bucket forms
  ``fs.s3a.bucket.<bucket>.*``), else the AWS default chain (environment, profile, instance
  role), as S3A does. A URI with a query string is taken in pyarrow's own spelling
  (``s3://bucket/x?endpoint_override=host:9000&scheme=http``), as before this layer.
- ``gs://``, ``abfss://``, ``hdfs://``: pyarrow's filesystem for the scheme, with its own
  default credentials.
- a path or ``file:`` URI: the local filesystem, with directories 0700 and files 0600
  (:mod:`sparkcdc.files`).

Nothing here prints a credential: a location shows itself through ``redacted_uri``.

>>> import tempfile
>>> root = open_location(tempfile.mkdtemp())
>>> (root / "schema" / "1.json").write("{}")
>>> (root / "schema").children(), (root / "schema" / "1.json").read_text()
(['1.json'], '{}')
>>> (root / "missing").read_text() is None
True
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

from sparkcdc.errors import ConfigError
from sparkcdc.files import make_private_dirs, uri_scheme, write_private
from sparkcdc.model.text import redacted_uri

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
# schemes pyarrow opens by itself (with its default credentials)
OTHER_SCHEMES = frozenset({"gs", "gcs", "abfs", "abfss", "hdfs", "viewfs"})
SCHEMES = S3_SCHEMES | OTHER_SCHEMES | {"file"}
HADOOP_PREFIX = "spark.hadoop."
S3A = "fs.s3a."
# the S3A settings this layer reads (each also per bucket: fs.s3a.bucket.<bucket>.<key>)
S3A_KEYS = (
    "endpoint",
    "endpoint.region",
    "region",
    "access.key",
    "secret.key",
    "session.token",
    "connection.ssl.enabled",
    "path.style.access",
    "aws.credentials.provider",
)


@dataclass(frozen=True)
class Location:
    """A file or directory: ``path`` on ``fs``; ``uri`` is how Spark is given it."""

    fs: pafs.FileSystem
    path: str
    uri: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def __truediv__(self, name: str) -> Location:
        return Location(
            self.fs, f"{self.path.rstrip('/')}/{name}", f"{self.uri.rstrip('/')}/{name}"
        )

    def __str__(self) -> str:
        return redacted_uri(self.uri)

    def exists(self) -> bool:
        return bool(self.fs.get_file_info(self.path).type != pafs.FileType.NotFound)

    def read_bytes(self) -> bytes | None:
        """The file's bytes; None when it does not exist."""
        try:
            with self.fs.open_input_stream(self.path) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            return None
        except OSError:
            if not self.exists():
                return None
            raise

    def read_text(self) -> str | None:
        data = self.read_bytes()
        return None if data is None else data.decode()

    def write(self, data: bytes | str, *, sync: bool = False) -> None:
        """Replace the file with ``data`` at once: readers see the old or the new bytes.
        Locally through a private temporary file renamed into place; on an object store one
        object written whole (a PUT replaces an object atomically)."""
        if self.is_local:
            write_private(self.path, data, sync=sync)
            return
        raw = data.encode() if isinstance(data, str) else data
        parent = self.path.rstrip("/").rpartition("/")[0]
        if self.fs.type_name == "hdfs":  # a file grows visibly while written: rename it in
            temp = f"{parent}/.tmp-{uuid.uuid4().hex}"
            with self.fs.open_output_stream(temp) as out:
                out.write(raw)
            if self.exists():  # HDFS renames onto no existing file
                self.fs.delete_file(self.path)
            self.fs.move(temp, self.path)
            return
        with self.fs.open_output_stream(self.path) as out:
            out.write(raw)

    def children(self) -> list[str]:
        """The names in this directory, sorted; [] when it does not exist."""
        selector = pafs.FileSelector(self.path, allow_not_found=True)
        return sorted(info.base_name for info in self.fs.get_file_info(selector))

    def make_dirs(self, *, private: bool = True) -> None:
        """The directory and its parents (on a local disk 0700, unless not ``private``)."""
        if self.is_local and private:
            make_private_dirs(self.path)
        elif self.is_local:
            os.makedirs(self.path, exist_ok=True)
        else:
            self.fs.create_dir(self.path, recursive=True)

    def probe(self) -> None:
        """Write, read back and delete a small file in this directory (on a local disk: in
        its nearest existing directory, so nothing is made); ConfigError saying which step
        failed when one does, or (local) which part of the path is a file, where the
        directories a run makes could not be."""
        directory = self
        while directory.is_local and not os.path.isdir(directory.path):
            if os.path.lexists(directory.path):
                raise ConfigError(
                    f"{self}: {directory.path} is a file, not a directory, so nothing can be "
                    "written under it. Choose another location, or move that file away"
                )
            parent = os.path.dirname(directory.path)
            if parent == directory.path:
                break
            directory = Location(self.fs, parent, parent)
        target = directory / f".sparkcdc-probe-{uuid.uuid4().hex}"
        step = "write"
        try:
            target.write(b"probe")
            step = "read back"
            if target.read_bytes() != b"probe":
                raise OSError("the file read back holds other bytes")
            step = "delete"
            self.fs.delete_file(target.path)
        except Exception as exc:
            raise ConfigError(
                f"{self}: cannot {step} a file there: {redacted_uri(str(exc))}. Check the "
                "location, its permissions and (object stores) the fs.s3a.* settings in "
                "pipeline.spark.conf"
            ) from None

    def remove_tree(self) -> None:
        """The directory and everything in it; nothing when it does not exist."""
        if self.fs.get_file_info(self.path).type == pafs.FileType.NotFound:
            return
        self.fs.delete_dir(self.path)


def supported_location(location: str, what: str) -> str:
    """``location`` when this layer reaches it (a path, or a URI of ``SCHEMES``); else a
    ValueError saying what ``what`` may be. The URI is never shown, only its scheme.

    >>> supported_location("s3a://lake/cdc", "pipeline.checkpoint")
    's3a://lake/cdc'
    """
    scheme = (uri_scheme(location) or "").lower()
    if not scheme or scheme in SCHEMES:
        return location
    raise ValueError(
        f"{what} is a {scheme}: URI, which sparkcdc does not read or write; give a path, or "
        f"a URI of one of {', '.join(sorted(SCHEMES - {'file'}))}"
    )


def open_location(location: str, hadoop: Mapping[str, str] | None = None) -> Location:
    """``location`` (a path or URI, as users write it for Spark) on its filesystem.

    ``hadoop``: Hadoop settings (``fs.s3a.endpoint``...; keys spelled ``spark.hadoop.*``
    are taken too), e.g. :func:`session_hadoop_settings` or a pipeline's ``spark.conf``.

    Raises ConfigError naming the location (credentials masked) and what is wrong.
    """
    scheme = (uri_scheme(location) or "").lower()
    if not scheme or scheme == "file":
        path = unquote(urlsplit(location).path) if scheme else location
        path = os.path.abspath(path)
        return Location(pafs.LocalFileSystem(), path, path)
    try:
        supported_location(location, "the location")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    parts = urlsplit(location)
    try:
        if scheme in S3_SCHEMES and not parts.query:
            if not parts.netloc:
                raise ValueError("no bucket after the scheme")
            fs: pafs.FileSystem = pafs.S3FileSystem(**s3_options(parts.netloc, hadoop or {}))
            path = f"{parts.netloc}{parts.path}".rstrip("/")
        else:
            pyarrow_uri = location if scheme not in S3_SCHEMES else "s3" + location[len(scheme) :]
            fs, path = pafs.FileSystem.from_uri(pyarrow_uri)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants
        raise ConfigError(
            f"location {redacted_uri(location)!r} cannot be opened: {redacted_uri(str(exc))}"
        ) from None
    return Location(fs, path, location)


def as_location(location: str | Location) -> Location:
    """A Location as it is; a string opened without Hadoop settings (``open_location``):
    a local path, or a URI reached with its filesystem's default credentials."""
    return location if isinstance(location, Location) else open_location(location)


def s3_options(bucket: str, hadoop: Mapping[str, str]) -> dict[str, Any]:
    """pyarrow ``S3FileSystem`` arguments for ``bucket`` from Hadoop's S3A settings (a
    per-bucket ``fs.s3a.bucket.<bucket>.<key>`` before ``fs.s3a.<key>``).

    >>> s3_options("lake", {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
    ...     "fs.s3a.bucket.lake.endpoint.region": "eu-west-1"})
    {'endpoint_override': '127.0.0.1:9000', 'scheme': 'http', 'region': 'eu-west-1'}
    >>> s3_options("lake", {})
    {}
    """
    settings = {
        (k[len(HADOOP_PREFIX) :] if k.startswith(HADOOP_PREFIX) else k): v
        for k, v in hadoop.items()
    }

    def get(key: str) -> str | None:
        value = settings.get(f"{S3A}bucket.{bucket}.{key}", settings.get(S3A + key))
        return value.strip() if value is not None and value.strip() else None

    options: dict[str, Any] = {}
    endpoint = get("endpoint")
    ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
    if endpoint is not None:
        split = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
        options["endpoint_override"] = split.netloc + split.path.rstrip("/")
        options["scheme"] = split.scheme or ("https" if ssl else "http")
    elif not ssl:
        options["scheme"] = "http"
    region = get("endpoint.region") or get("region")
    if region is not None:
        options["region"] = region
    if (get("path.style.access") or "").lower() == "false" and endpoint is not None:
        options["force_virtual_addressing"] = True
    access, secret = get("access.key"), get("secret.key")
    if access is not None and secret is not None:
        options["access_key"], options["secret_key"] = access, secret
        token = get("session.token")
        if token is not None:
            options["session_token"] = token
    elif "Anonymous" in (get("aws.credentials.provider") or ""):
        options["anonymous"] = True
    return options


def s3a_settings(location: str, hadoop: Mapping[str, str]) -> dict[str, str]:
    """The S3A settings (of ``S3A_KEYS``) that reach ``location``: none unless it is an
    ``s3a://`` / ``s3://`` URI in Hadoop's spelling. What executors are given to open it.

    >>> s3a_settings("s3a://lake/state", {"fs.s3a.endpoint": "h", "fs.s3a.block.size": "1"})
    {'fs.s3a.endpoint': 'h'}
    >>> s3a_settings("/data/state", {"fs.s3a.endpoint": "h"})
    {}
    """
    parts = urlsplit(location)
    if (uri_scheme(location) or "").lower() not in S3_SCHEMES or parts.query:
        return {}
    wanted = {S3A + k for k in S3A_KEYS} | {f"{S3A}bucket.{parts.netloc}.{k}" for k in S3A_KEYS}
    return {k: v for k, v in hadoop.items() if k in wanted}


def state_options(settings: Mapping[str, str]) -> dict[str, str]:
    """Source options (``state.fs.s3a.*``) that carry S3A settings of ``state.location``."""
    return {f"state.{k}": v for k, v in settings.items()}


def hadoop_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """The filesystem settings among Spark settings (``spark.hadoop.fs.*``), as Hadoop keys.

    >>> hadoop_settings({"spark.hadoop.fs.s3a.endpoint": "h", "spark.master": "local"})
    {'fs.s3a.endpoint': 'h'}
    """
    return {
        k[len(HADOOP_PREFIX) :]: v for k, v in conf.items() if k.startswith(HADOOP_PREFIX + "fs.")
    }


def session_hadoop_settings(spark: Any) -> dict[str, str]:
    """The S3A settings of a running session's Hadoop configuration (what Spark's own
    ``s3a://`` reads use: ``spark.hadoop.*``, ``core-site.xml``, ``spark-submit --conf``)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    props = conf.getPropsWithPrefix(S3A)  # one call: a java.util.Map, keys without the prefix
    return {S3A + str(k): str(v) for k, v in props.items()}


def blind_executors(spark: Any, location: Location, settings: Mapping[str, str]) -> list[str]:
    """The hosts of executors that cannot read a file the driver just wrote under
    ``location`` (opened there with ``settings``); [] when every task read it. One small
    job of as many tasks as the session's parallelism, so each executor runs one."""
    probe = location / f".sparkcdc-shared-{uuid.uuid4().hex}"
    probe.write(b"shared")
    uri = probe.uri
    wanted = dict(settings)

    def seen(_: Any) -> Any:
        import socket

        try:
            ok = open_location(uri, wanted).read_bytes() == b"shared"
        except Exception:
            ok = False
        yield socket.gethostname(), ok

    tasks = max(2, int(spark.sparkContext.defaultParallelism))
    try:
        rdd = spark.sparkContext.parallelize(range(tasks), tasks)
        results = rdd.mapPartitions(seen).collect()
    finally:
        probe.fs.delete_file(probe.path)
    return sorted({str(host) for host, ok in results if not ok})
