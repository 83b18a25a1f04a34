"""The driver's compile thresholds (spark/jit.py): when a pipeline's driver gets them.
tests/integration/test_class_archive.py checks a real driver JVM runs with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.spark import session
from sparkcdc.spark.classdata import JAVA_OPTIONS
from sparkcdc.spark.jit import C1_ONLY, LATE_C2, compiling_settings


def test_the_thresholds_follow_the_users_other_options() -> None:
    settings = {JAVA_OPTIONS: "-Xmx2g -Dfile.encoding=UTF-8", "spark.app.name": "p"}
    tuned = compiling_settings(settings, {})
    assert tuned[JAVA_OPTIONS].split() == ["-Xmx2g", "-Dfile.encoding=UTF-8", *LATE_C2]
    assert tuned["spark.app.name"] == "p"
    assert settings[JAVA_OPTIONS] == "-Xmx2g -Dfile.encoding=UTF-8"  # not changed in place


def test_a_run_that_ends_compiles_with_c1_alone() -> None:
    settings = {JAVA_OPTIONS: "-Xmx2g"}
    tuned = compiling_settings(settings, {}, available_now=True)
    assert tuned[JAVA_OPTIONS].split() == ["-Xmx2g", *C1_ONLY]
    assert not set(LATE_C2) & set(tuned[JAVA_OPTIONS].split())


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
@pytest.mark.parametrize("available_now", [False, True])
def test_the_users_own_compile_options_are_left_alone(options: str, available_now: bool) -> None:
    tuned = compiling_settings({JAVA_OPTIONS: options}, {}, available_now=available_now)
    assert tuned == {JAVA_OPTIONS: options}


@pytest.mark.parametrize("value", ["off", "0", "false", " No "])
@pytest.mark.parametrize("available_now", [False, True])
def test_turned_off_by_the_environment(value: str, available_now: bool) -> None:
    assert compiling_settings({}, {"SPARKCDC_LATE_C2": value}, available_now=available_now) == {}


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
    options = session._pipeline_driver_settings(settings, True)[JAVA_OPTIONS].split()
    assert options == ["-Xmx2g", *C1_ONLY, f"-XX:SharedArchiveFile={archive}"]
    # a JVM that runs already is not started again: nothing to tune
    monkeypatch.setattr(session, "jvm_running", lambda: True)
    assert session._pipeline_driver_settings(settings) == settings
