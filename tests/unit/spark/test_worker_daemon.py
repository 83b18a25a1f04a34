"""The worker daemon: which of Spark's archives it drops from sys.path, what it preloads
(``spark/preloads.py``), and that it starts without a warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sparkcdc
from sparkcdc.spark.archives import without_spark_archives


def _package(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")


def _spark_path(tmp_path: Path) -> list[str]:
    lib = tmp_path / "spark" / "python" / "lib"
    return [
        str(lib / "pyspark.zip"),
        str(lib / "py4j-0.10.9.9-src.zip"),
        str(tmp_path / "spark" / "jars" / "spark-core_2.13-4.1.4.jar"),
        str(tmp_path / "site"),
    ]


def test_archives_go_when_pyspark_and_py4j_are_installed(tmp_path: Path) -> None:
    _package(tmp_path / "site", "pyspark")
    _package(tmp_path / "site", "py4j")
    assert without_spark_archives(_spark_path(tmp_path)) == [str(tmp_path / "site")]


def test_archives_stay_when_only_they_hold_pyspark(tmp_path: Path) -> None:
    _package(tmp_path / "site", "pyspark")  # py4j only in Spark's zip
    path = _spark_path(tmp_path)
    assert without_spark_archives(path) == path


def test_a_path_without_archives_is_left_alone(tmp_path: Path) -> None:
    path = [str(tmp_path / "a"), str(tmp_path / "b.egg")]
    assert without_spark_archives(path) == path


def _launch(tmp_path: Path, *args: str) -> list[str]:
    """Output lines of ``python -m sparkcdc.spark.launch ARGS`` with Spark's archives first
    on PYTHONPATH and pyspark / py4j installed in a site folder after them."""
    _package(tmp_path / "site", "pyspark")
    _package(tmp_path / "site", "py4j")
    (tmp_path / "site" / "probe.py").write_text(
        "import os, sys\nprint(sys.argv[1:])\nprint(os.environ['PYTHONPATH'])\n"
        "print(os.pathsep.join(sys.path))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*_spark_path(tmp_path), _src()])}
    done = subprocess.run(
        [sys.executable, "-m", "sparkcdc.spark.launch", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    return done.stdout.splitlines()


def test_the_launcher_runs_a_module_without_the_archives(tmp_path: Path) -> None:
    argv, inherited, path = _launch(tmp_path, "-m", "probe", "a", "--b")
    assert argv == repr(["a", "--b"])
    assert inherited.split(os.pathsep) == [str(tmp_path / "site"), _src()]
    archives = set(_spark_path(tmp_path)) - {str(tmp_path / "site")}
    assert not archives & set(path.split(os.pathsep)), path
    assert str(tmp_path / "site") in path.split(os.pathsep)


def test_the_launcher_runs_other_command_lines_on_a_stripped_pythonpath(tmp_path: Path) -> None:
    script = "import os, sys; print(sys.argv[1:]); print(os.environ['PYTHONPATH'])"
    argv, inherited = _launch(tmp_path, "-c", script, "x")
    assert argv == repr(["x"])
    assert inherited.split(os.pathsep) == [str(tmp_path / "site"), _src()]


def _src() -> str:
    return str(Path(sparkcdc.__file__).resolve().parents[1])


def test_the_daemon_preloads_the_source_and_its_dialects_and_leaves_a_bad_one() -> None:
    script = (
        "import sys\n"
        "from sparkcdc.spark import preloads\n"
        "preloads.PRELOADED = ('sparkcdc_no_such_module', *preloads.PRELOADED)\n"
        "preloads.preload()\n"
        "print(sorted(n for n in ('pyspark.worker', 'sparkcdc.spark.source', 'pyarrow', "
        "'sparkcdc.mysql.dialect') "
        "if n in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == (
        "['pyarrow', 'pyspark.worker', 'sparkcdc.mysql.dialect', 'sparkcdc.spark.source']"
    )


def test_a_workers_first_arrays_import_nothing_the_daemon_did_not() -> None:
    """pyarrow imports pandas when it first builds an array or scalar from Python values
    (as a snapshot chunk's metadata columns are built), and a connection to a named host
    the idna codec: a forked worker finds them imported by the daemon, not in its task."""
    probe = (
        "import sys\n"
        "from sparkcdc.spark import preloads\n"
        "preloads.preload()\n"
        "before = set(sys.modules)\n"
        "import pyarrow as pa\n"
        "pa.array([1, 2], pa.int64()); pa.scalar('+I', pa.string())\n"
        "'localhost'.encode('idna')\n"
        "print(sorted(m for m in set(sys.modules) - before if not m.startswith('_')))\n"
    )
    env = {**os.environ, "PYTHONPATH": _src()}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_daemon_starts_without_a_fork_server_and_without_a_warning() -> None:
    """Run as Spark runs it where no fork server serves (another master, ``sparkcdc
    prepare``, ``SPARKCDC_FORKSERVER`` off): through the launcher, ``-m``. Python warned on
    its stderr, for every daemon, while the launcher imported the daemon's module (through
    the fork server's) before running it as ``__main__``."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKCDC_FORKSERVER"}
    env["PYTHONPATH"] = _src()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "sparkcdc.spark.launch", "-m", "sparkcdc.spark.worker_daemon"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert daemon.stdout is not None
        port = int.from_bytes(daemon.stdout.read(4), "big")  # pyspark.daemon is listening
    finally:
        daemon.kill()
        _, err = daemon.communicate(timeout=60)
    assert 0 < port < 65536, err
    assert b"Warning" not in err, err.decode(errors="replace")
