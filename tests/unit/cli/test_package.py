"""``sparkcdc package``: a zip executors import sparkcdc from, and spark-submit's entry."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import sparkcdc
from sparkcdc.cli.main import main


def test_the_zip_holds_the_package_and_is_what_python_imports(tmp_path: Path) -> None:
    assert main(["package", "--output", str(tmp_path / "dist")]) == 0
    archive = tmp_path / "dist" / f"sparkcdc-{sparkcdc.__version__}.zip"
    names = set(zipfile.ZipFile(archive).namelist())
    assert {
        "sparkcdc/__init__.py",
        "sparkcdc/py.typed",
        "sparkcdc/spark/log4j2-file.properties",
        "sparkcdc/spark/source.py",
        "sparkcdc/cli/main.py",
    } <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # as an executor's worker puts a pyFiles entry: first on sys.path
    probe = (
        f"import sys; sys.path.insert(0, {str(archive)!r}); "
        "import sparkcdc.spark.source, sparkcdc; print(sparkcdc.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == str(archive / "sparkcdc" / "__init__.py")


def test_the_entry_script_runs_the_command_line(tmp_path: Path) -> None:
    main(["package", "--output", str(tmp_path)])
    archive = tmp_path / f"sparkcdc-{sparkcdc.__version__}.zip"
    env = {**os.environ, "PYTHONPATH": str(archive)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "sparkcdc_submit.py"), "--help"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "package" in done.stdout and "run" in done.stdout


def test_under_spark_submit_the_driver_runs_the_installed_sparkcdc(tmp_path: Path) -> None:
    """spark-submit puts the zip first on the driver's sys.path (PYTHONPATH); the entry
    runs the sparkcdc installed here, whose jars folder and compiled decoder are beside
    it, and falls back to the zip only where none is installed."""
    main(["package", "--output", str(tmp_path)])
    archive = tmp_path / f"sparkcdc-{sparkcdc.__version__}.zip"
    entry = tmp_path / "sparkcdc_submit.py"
    probe = (
        f"import sys; sys.argv = [{str(entry)!r}, '--help']\n"
        f"try: exec(open({str(entry)!r}).read())\n"
        "except SystemExit: pass\n"
        "import sparkcdc; print(sparkcdc.__file__)"
    )
    env = {**os.environ, "PYTHONPATH": str(archive)}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    # the installed one (in a git worktree, the sparkcdc under test is the checkout on
    # PYTHONPATH, not the installed one)
    installed = subprocess.run(
        [sys.executable, "-c", "import sparkcdc; print(sparkcdc.__file__)"],
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert done.stdout.splitlines()[-1] == installed
    # no sparkcdc installed (-S: no site-packages): the zip's
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, capture_output=True, text=True
    )
    assert done.stdout.splitlines()[-1] == str(archive / "sparkcdc" / "__init__.py"), done.stderr


def test_the_same_sources_give_the_same_zip(tmp_path: Path) -> None:
    main(["package", "--output", str(tmp_path / "a")])
    main(["package", "--output", str(tmp_path / "b")])
    name = f"sparkcdc-{sparkcdc.__version__}.zip"
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
