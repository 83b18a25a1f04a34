"""The driver's compile thresholds (spark/jit.py): when a pipeline's driver gets them.
tests/integration/test_class_archive.py checks a real driver JVM runs with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.spark import session
from sparkcdc.spark.classdata import JAVA_OPTIONS
from sparkcdc.spark.jit import LATE_C2, compiling_settings


def test_the_thresholds_follow_the_users_other_options() -> None:
    settings = {JAVA_OPTIONS: "-Xmx2g -Dfile.encoding=UTF-8", "spark.app.name": "p"}
    tuned = compiling_settings(settings, {})
    assert tuned[JAVA_OPTIONS].split() == ["-Xmx2g", "-Dfile.encoding=UTF-8", *LATE_C2]
    assert tuned["spark.app.name"] == "p"
    assert settings[JAVA_OPTIONS] == "-Xmx2g -Dfile.encoding=UTF-8"  # not changed in place


@pytest.mark.parametrize(
    "options",
    [
        "-XX:TieredStopAtLevel=1",
        "-XX:-TieredCompilation",
        "-Xmx2g -XX:Tier4InvocationThreshold=1000",
        "-XX:CompileThresholdScaling=0.5",
        "-Xint",
    ],
)
def test_the_users_own_compile_options_are_left_alone(options: str) -> None:
    assert compiling_settings({JAVA_OPTIONS: options}, {}) == {JAVA_OPTIONS: options}


@pytest.mark.parametrize("value", ["off", "0", "false", " No "])
def test_turned_off_by_the_environment(value: str) -> None:
    assert compiling_settings({}, {"SPARKCDC_LATE_C2": value}) == {}


def test_a_pipeline_driver_gets_the_archive_and_the_thresholds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkcdc.spark.classdata import archive_path

    monkeypatch.setattr(session, "jvm_running", lambda: False)
    monkeypatch.setenv("SPARKCDC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPARKCDC_LATE_C2", raising=False)
    monkeypatch.delenv("SPARKCDC_CLASS_ARCHIVE", raising=False)
    settings = {JAVA_OPTIONS: "-Xmx2g"}
    # no archive yet: the thresholds alone
    assert session._pipeline_driver_settings(settings)[JAVA_OPTIONS].split() == [
        "-Xmx2g",
        *LATE_C2,
    ]
    # with an archive (named by the Java and the jars, not by JVM options): the thresholds,
    # then the archive mapped
    archive = archive_path(settings)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    options = session._pipeline_driver_settings(settings)[JAVA_OPTIONS].split()
    assert options == ["-Xmx2g", *LATE_C2, f"-XX:SharedArchiveFile={archive}"]
    # a JVM that runs already is not started again: nothing to tune
    monkeypatch.setattr(session, "jvm_running", lambda: True)
    assert session._pipeline_driver_settings(settings) == settings
