"""The class-data archive's bookkeeping (spark/classdata.py): its name, when a JVM maps it,
and that only a whole archive is ever under that name. tests/integration/test_class_archive.py
runs the real JVMs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcdc.spark.classdata import (
    KEEP,
    archive_key,
    archive_path,
    clear_abandoned,
    pending_path,
    publish,
    sharing_settings,
)


def _jar(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def test_the_name_changes_with_java_spark_and_every_jar(tmp_path: Path) -> None:
    spark_home = tmp_path / "spark"
    (spark_home / "jars").mkdir(parents=True)
    _jar(spark_home / "jars" / "spark-core_2.13-4.2.0.jar", b"core")
    java = _jar(tmp_path / "java", b"java")
    delta = _jar(tmp_path / "delta.jar", b"delta")
    settings = {"spark.jars": f"file:{delta}", "spark.driver.extraClassPath": ""}
    key = archive_key(settings, spark_home, java, "4.2.0")
    assert key == archive_key(dict(settings), spark_home, java, "4.2.0")

    changed = {
        "another Spark version": archive_key(settings, spark_home, java, "4.2.1"),
        "another jar listed": archive_key(
            {**settings, "spark.jars": f"{delta},{java}"}, spark_home, java, "4.2.0"
        ),
        "a class path entry": archive_key(
            {**settings, "spark.driver.extraClassPath": str(delta)}, spark_home, java, "4.2.0"
        ),
    }
    _jar(delta, b"delta, rebuilt in place")
    changed["the jar rebuilt"] = archive_key(settings, spark_home, java, "4.2.0")
    _jar(spark_home / "jars" / "spark-sql_2.13-4.2.0.jar", b"sql")
    changed["a jar of Spark's own"] = archive_key(settings, spark_home, java, "4.2.0")
    _jar(java, b"java, upgraded")
    changed["the java upgraded"] = archive_key(settings, spark_home, java, "4.2.0")
    keys = [key, *changed.values()]
    assert len(set(keys)) == len(keys), changed


def _environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"SPARKCDC_CACHE_DIR": str(tmp_path / "cache"), "PATH": os.environ["PATH"], **extra}


def test_a_jvm_maps_the_archive_only_when_there_is_one_and_the_user_has_not_chosen(
    tmp_path: Path,
) -> None:
    settings = {"spark.jars": "", "spark.driver.extraJavaOptions": "-Dx=1"}
    environ = _environ(tmp_path)
    assert sharing_settings(settings, environ) == settings  # none written yet
    path = archive_path(settings, environ)
    assert path.parent == tmp_path / "cache" / "jvm"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"an archive")
    assert sharing_settings(settings, environ)["spark.driver.extraJavaOptions"] == (
        f"-Dx=1 -XX:SharedArchiveFile={path}"
    )
    # the user's own class-data sharing choice stands; so does turning it off
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/theirs.jsa", "-Xshare:auto -Xmx2g"):
        mine = {**settings, "spark.driver.extraJavaOptions": own}
        assert sharing_settings(mine, environ) == mine
    for off in ("off", "0", "false", "OFF"):
        assert sharing_settings(settings, {**environ, "SPARKCDC_CLASS_ARCHIVE": off}) == settings
    # another jar set is another archive, not this one
    other = {**settings, "spark.jars": str(tmp_path / "extra.jar")}
    assert sharing_settings(other, environ) == other


def test_only_an_archive_whose_jvm_exited_cleanly_is_published(tmp_path: Path) -> None:
    final = tmp_path / "classes-abc.jsa"
    pending = pending_path(final)
    assert pending.parent == final.parent and pending != final

    pending.write_bytes(b"half")
    assert not publish(pending, final, 134)  # the JVM died (SIGBUS, kill): its file too
    assert not pending.exists() and not final.exists()
    assert not publish(pending, final, 0)  # exited cleanly, wrote nothing
    assert not final.exists()

    pending.write_bytes(b"whole")
    assert publish(pending, final, 0)
    assert final.read_bytes() == b"whole" and not pending.exists()


def test_publishing_keeps_the_newest_archives(tmp_path: Path) -> None:
    old = []
    for n in range(KEEP + 2):
        path = tmp_path / f"classes-{n}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
        old.append(path)
    pending = pending_path(tmp_path / "classes-new.jsa")
    pending.write_bytes(b"new")
    assert publish(pending, tmp_path / "classes-new.jsa", 0)
    kept = sorted(p.name for p in tmp_path.glob("classes-*.jsa"))
    assert kept == sorted(["classes-new.jsa", *(p.name for p in old[-(KEEP - 1) :])])


def test_pending_files_of_gone_writers_are_cleared(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = pending_path(tmp_path / "classes-a.jsa", int(gone.stdout))
    live = pending_path(tmp_path / "classes-b.jsa")  # this process: still writing
    for path in (dead, live):
        path.write_bytes(b"part")
    clear_abandoned(tmp_path)
    assert not dead.exists()
    assert live.exists()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"SPARKCDC_CACHE_DIR": "/a"}, "/a/jvm"),
        ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/sparkcdc/jvm"),
        ({"HOME": "/h"}, "/h/.cache/sparkcdc/jvm"),
    ],
)
def test_where_the_archives_are(environ: dict[str, str], expected: str) -> None:
    from sparkcdc.spark.classdata import archive_dir

    assert str(archive_dir(environ)) == expected
