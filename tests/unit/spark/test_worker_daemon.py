"""Which of Spark's archives the worker daemon drops from sys.path."""

from __future__ import annotations

from pathlib import Path

from sparkcdc.spark.worker_daemon import without_spark_archives


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
