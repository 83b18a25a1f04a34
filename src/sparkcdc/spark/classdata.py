"""The driver JVM's class-data archive: a Spark session that starts seconds sooner.

A new Spark driver spends most of its first seconds loading, parsing and verifying classes:
~25,000 of them (Spark's, Scala's, the connectors'): on a machine of two cores ~2.5 s of
a snapshot ``sparkcdc run`` of ~20 s, ~4.5 s of a catch-up (a MERGE loads much of Delta).
Java's class-data sharing (JDK 13+, JEP 350 "dynamic CDS archives") keeps the classes a JVM
loaded in a file that later JVMs map instead:

- ``sparkcdc prepare`` starts a driver with ``-XX:ArchiveClassesAtExit`` and runs a small
  job that loads what a pipeline loads (``spark/prepare.py``: a Python streaming source
  read with ``foreachBatch``, a Delta table made, merged into and appended to); the JVM
  writes the archive when it exits. It goes under another name first and takes its own only after
  that JVM exited cleanly: a JVM that maps a half-written archive dies (SIGBUS), so no half
  is ever under the name a JVM maps.
- Every driver JVM a pipeline starts itself (``sparkcdc run``; not one spark-submit
  started) then maps the archive with ``-XX:SharedArchiveFile``, when there is one.

An archive belongs to one Java, one Spark and one set of jars: its name is a hash of them
(``archive_key``), so an upgrade makes a new name and the old archive is no longer used
(``sparkcdc prepare`` again writes the new one). The JVM checks the rest itself: it maps no
archive whose JVM, class path or classes differ from its own, and then simply loads the
classes as it would without one. Nothing about what a pipeline computes changes.

Where: ``SPARKCDC_CACHE_DIR`` (default ``$XDG_CACHE_HOME/sparkcdc``, else
``~/.cache/sparkcdc``), under ``jvm/``; ~200 MB an archive, the newest ``KEEP`` kept.
``SPARKCDC_CLASS_ARCHIVE=off`` turns its use off, and so does any ``-Xshare`` or CDS option
of the user's own in ``spark.driver.extraJavaOptions``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from sparkcdc.files import make_private_dirs
from sparkcdc.spark.list_settings import list_entries

log = logging.getLogger(__name__)

# the archives kept (newest first): one per Java / Spark / jars in use on this machine
KEEP = 4
_OFF = {"0", "off", "false", "no"}
# a user's own class-data sharing options: they say how this JVM shares classes, not us
_USER_CDS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "DumpLoadedClassList")
JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def archive_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the archives are (see the module's docstring).

    >>> str(archive_dir({"SPARKCDC_CACHE_DIR": "/var/cache/cdc"}))
    '/var/cache/cdc/jvm'
    >>> str(archive_dir({"XDG_CACHE_HOME": "/c", "HOME": "/h"}))
    '/c/sparkcdc/jvm'
    """
    environ = os.environ if environ is None else environ
    base = environ.get("SPARKCDC_CACHE_DIR")
    if not base:
        xdg = environ.get("XDG_CACHE_HOME")
        home = environ.get("HOME") or str(Path.home())
        base = str(Path(xdg or Path(home, ".cache")) / "sparkcdc")
    return Path(base) / "jvm"


def java_binary(environ: Mapping[str, str] | None = None) -> Path | None:
    """The ``java`` Spark's launcher runs (``$JAVA_HOME/bin/java``, else ``java`` on the
    ``PATH``), its links resolved; None when there is none."""
    environ = os.environ if environ is None else environ
    home = environ.get("JAVA_HOME")
    found = str(Path(home, "bin", "java")) if home else shutil.which("java")
    return Path(found).resolve() if found and os.path.exists(found) else None


def _identity(path: Path) -> list[object]:
    """What tells one build of a file from another: its path, size and modification time."""
    try:
        stat = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), stat.st_size, stat.st_mtime_ns]


def _files(settings: Mapping[str, str], key: str) -> list[list[object]]:
    """The identities of the files a list setting names."""
    return [_identity(Path(e.removeprefix("file:"))) for e in list_entries(key, settings.get(key))]


def archive_key(
    settings: Mapping[str, str], spark_home: Path, java: Path, spark_version: str
) -> str:
    """The hash an archive is named by: the JVM's files, Spark's version and jars, and the
    jars of ``spark.jars`` and ``spark.driver.extraClassPath`` (each by path, size and
    modification time: a jar rebuilt in place is another jar).

    >>> a = archive_key({"spark.jars": "/x/delta.jar"}, Path("/spark"), Path("/j"), "4.2.0")
    >>> a == archive_key({"spark.jars": "/x/delta.jar"}, Path("/spark"), Path("/j"), "4.1.1")
    False
    """
    spark_jars = sorted((spark_home / "jars").glob("*.jar"))
    parts = {
        "java": _identity(java),
        "jvm": [_identity(p) for p in sorted(java.parent.parent.glob("lib/server/libjvm.*"))],
        "spark": [spark_version, str(spark_home), [p.name for p in spark_jars]],
        "jars": _files(settings, "spark.jars"),
        "class_path": _files(settings, "spark.driver.extraClassPath"),
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def turned_off(environ: Mapping[str, str], variable: str) -> bool:
    """Whether the environment variable ``variable`` turns something off.

    >>> turned_off({"SPARKCDC_CLASS_ARCHIVE": "Off"}, "SPARKCDC_CLASS_ARCHIVE")
    True
    >>> turned_off({}, "SPARKCDC_CLASS_ARCHIVE")
    False
    """
    return environ.get(variable, "").strip().lower() in _OFF


def user_shares_classes(settings: Mapping[str, str]) -> bool:
    """Whether the user's own JVM options already say how classes are shared.

    >>> user_shares_classes({"spark.driver.extraJavaOptions": "-Xshare:off -Xmx4g"})
    True
    >>> user_shares_classes({"spark.driver.extraJavaOptions": "-Xmx4g"})
    False
    """
    return user_options_name(settings, _USER_CDS)


def user_options_name(settings: Mapping[str, str], fragments: tuple[str, ...]) -> bool:
    """Whether the driver's JVM options the user gave name any of ``fragments``."""
    options = settings.get(JAVA_OPTIONS) or ""
    return any(fragment in options for fragment in fragments)


def with_java_option(settings: Mapping[str, str], option: str) -> dict[str, str]:
    """``settings`` with ``option`` after the driver's other JVM options.

    >>> with_java_option({"spark.driver.extraJavaOptions": "-Da=1"}, "-Xb")
    {'spark.driver.extraJavaOptions': '-Da=1 -Xb'}
    """
    updated = dict(settings)
    updated[JAVA_OPTIONS] = " ".join(o for o in (settings.get(JAVA_OPTIONS), option) if o)
    return updated


def archive_path(settings: Mapping[str, str], environ: Mapping[str, str] | None = None) -> Path:
    """The archive for a driver JVM started with ``settings`` on this machine."""
    from pyspark import __version__
    from pyspark.find_spark_home import _find_spark_home

    java = java_binary(environ)
    key = archive_key(
        settings,
        Path(_find_spark_home()).resolve(),
        java or Path("java"),
        __version__,
    )
    return archive_dir(environ) / f"classes-{key}.jsa"


def sharing_settings(
    settings: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``settings`` for a driver JVM that maps this machine's archive: unchanged when there
    is none (``sparkcdc prepare`` writes it), when the user's options say how to share
    classes, or when ``SPARKCDC_CLASS_ARCHIVE`` is off."""
    environ = os.environ if environ is None else environ
    if turned_off(environ, "SPARKCDC_CLASS_ARCHIVE"):
        return dict(settings)
    if user_shares_classes(settings):
        return dict(settings)
    path = archive_path(settings, environ)
    if not path.is_file():
        log.debug(
            "the Spark driver starts without a class-data archive: `sparkcdc prepare` writes "
            "one, and a driver that maps it starts seconds sooner"
        )
        return dict(settings)
    log.debug("the Spark driver maps its class-data archive %s", path)
    return with_java_option(settings, f"-XX:SharedArchiveFile={path}")


def pending_path(final: Path, pid: int | None = None) -> Path:
    """Where a JVM writes ``final`` before it is whole: beside it, named by the writing
    process (``pid``, this one by default).

    >>> pending_path(Path("/c/classes-ab.jsa"), 42).name
    'classes-ab.jsa.42.pending'
    """
    return final.with_name(f"{final.name}.{os.getpid() if pid is None else pid}.pending")


def publish(pending: Path, final: Path, jvm_exit_code: int) -> bool:
    """Give ``pending`` the name ``final`` if the JVM that wrote it exited cleanly (else
    drop it), then keep only the newest ``KEEP`` archives. Whether it was published."""
    if jvm_exit_code != 0 or not pending.is_file() or pending.stat().st_size == 0:
        pending.unlink(missing_ok=True)
        return False
    os.replace(pending, final)  # atomic: a JVM maps the old file or the new one, whole
    archives = sorted(final.parent.glob("classes-*.jsa"), key=lambda p: p.stat().st_mtime)
    for old in archives[:-KEEP]:
        old.unlink(missing_ok=True)
    return True


def clear_abandoned(directory: Path) -> None:
    """Remove pending archives whose writing process is gone (killed before it published)."""
    for pending in directory.glob("classes-*.jsa.*.pending"):
        pid = pending.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not _alive(int(pid)):
            pending.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The archive directory, made (private) if missing, abandoned pending files gone."""
    directory = archive_dir(environ)
    make_private_dirs(directory)
    clear_abandoned(directory)
    return directory
