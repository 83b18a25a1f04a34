"""The connectors a session asks Spark for: the pinned coordinates of what a pipeline needs,
none that the class path has already, a user's own packages kept; and jars/pom.xml (the
development checkout's offline folder) equal to the coordinates pinned in the package."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sparkcdc.spark import connectors, session_plan
from sparkcdc.spark.connectors import EXCLUDES, LINES, pipeline_connectors
from sparkcdc.spark.session_plan import plan_session

POM = Path(__file__).resolve().parents[3] / "jars" / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom_coordinates(line: str) -> set[str]:
    root = ET.parse(POM).getroot()
    properties = {p.tag.split("}")[1]: p.text or "" for p in root.find("m:properties", _NS) or []}
    profile = next(
        p
        for p in root.iterfind("m:profiles/m:profile", _NS)
        if p.findtext("m:id", "", _NS) == f"spark-{line}"
    )
    properties.update(
        {p.tag.split("}")[1]: p.text or "" for p in profile.find("m:properties", _NS) or []}
    )
    found = set()
    for deps in (root.find("m:dependencies", _NS), profile.find("m:dependencies", _NS)):
        for dep in deps or []:
            version = dep.findtext("m:version", "", _NS)
            for name, value in properties.items():
                version = version.replace("${" + name + "}", value)
            group, artifact = (
                dep.findtext("m:groupId", "", _NS),
                dep.findtext("m:artifactId", "", _NS),
            )
            found.add(f"{group}:{artifact}:{version}")
    return found


@pytest.mark.parametrize("line", sorted(LINES))
def test_the_pom_pins_what_the_package_pins(line: str) -> None:
    pinned = {p for c in LINES[line].values() for p in c.packages}
    assert _pom_coordinates(line) == pinned


@pytest.fixture
def no_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """As from a wheel: no SPARKCDC_JARS_DIR, no checkout's jars folder."""
    monkeypatch.setattr(session_plan, "connector_folder", lambda: None)


def _spark_home(tmp_path: Path, *jars: str) -> Path:
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    for name in ("spark-core_2.13-4.2.0.jar", *jars):
        (tmp_path / "spark" / "jars" / name).write_bytes(b"")
    return tmp_path / "spark"


def test_a_kafka_pipeline_asks_for_kafka_alone(no_folder: None, tmp_path: Path) -> None:
    plan = plan_session(
        "p",
        "local[2]",
        connectors=pipeline_connectors("kafka", ["/tmp/cp"]),
        configured={},
        environ={},
        spark_home=_spark_home(tmp_path),
    )
    kafka = LINES[connectors.SPARK_LINE]["kafka"].packages
    assert plan.settings["spark.jars.packages"].split(",") == list(kafka)
    assert plan.settings["spark.jars.excludes"].split(",") == list(EXCLUDES)
    # resolved from Ivy's cache and Maven Central, not from ~/.m2 (poms there lack jars)
    assert Path(plan.settings["spark.jars.ivySettings"]).is_file()
    # no Delta: neither its extension nor its catalog (they would fail without its jar)
    assert "io.delta" not in plan.settings.get("spark.sql.extensions", "")
    assert "spark.sql.catalog.spark_catalog" not in plan.settings
    assert "spark.driver.extraClassPath" not in plan.settings


def test_a_connector_on_the_class_path_is_not_fetched(no_folder: None, tmp_path: Path) -> None:
    home = _spark_home(tmp_path, "delta-spark_4.2_2.13-4.4.0.jar")
    plan = plan_session(
        "p",
        "local[2]",
        connectors=pipeline_connectors("delta", ["s3a://lake/t"]),
        configured={},
        environ={},
        spark_home=home,
    )
    s3a = LINES[connectors.SPARK_LINE]["s3a"].packages
    assert plan.settings["spark.jars.packages"].split(",") == list(s3a)
    assert "io.delta.sql.DeltaSparkSessionExtension" in plan.settings["spark.sql.extensions"]
    # the same with the user's own jar given in spark.jars (a folder of them counts too)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    plan = plan_session(
        "p",
        "local[2]",
        connectors=["delta", "s3a"],
        conf={"spark.driver.extraClassPath": f"{tmp_path / 'mine'}/*"},
        configured={},
        environ={},
        spark_home=home,
    )
    assert "spark.jars.packages" not in plan.settings


def test_the_users_packages_come_first_and_stay(no_folder: None, tmp_path: Path) -> None:
    plan = plan_session(
        "p",
        "local[2]",
        connectors=["delta"],
        configured={"spark.jars.packages": "com.example:lib:1.0", "spark.jars.excludes": "a:b"},
        environ={},
        spark_home=_spark_home(tmp_path),
    )
    delta = LINES[connectors.SPARK_LINE]["delta"].packages
    assert plan.settings["spark.jars.packages"].split(",") == ["com.example:lib:1.0", *delta]
    assert plan.settings["spark.jars.excludes"].split(",") == ["a:b", *EXCLUDES]
    assert "spark.jars.ivySettings" in plan.settings
    mine = {"spark.jars.ivySettings": "/etc/ivy.xml"}
    plan = plan_session("p", "local[2]", connectors=["delta"], configured=mine, environ={})
    assert "spark.jars.ivySettings" not in plan.settings  # the user's is the JVM's already


def test_a_console_pipeline_needs_no_connector(no_folder: None, tmp_path: Path) -> None:
    plan = plan_session(
        "p",
        "local[2]",
        connectors=pipeline_connectors("console", ["/tmp/cp"]),
        configured={},
        environ={},
        spark_home=_spark_home(tmp_path),
    )
    assert "spark.jars.packages" not in plan.settings
    assert "spark.jars.excludes" not in plan.settings
    assert "spark.jars.ivySettings" not in plan.settings


def test_a_running_jvm_that_loads_a_connector_gets_none_fetched(
    no_folder: None, tmp_path: Path
) -> None:
    """Databricks ships Delta under jar names of its own: the class is what counts there."""
    loads = {LINES[connectors.SPARK_LINE]["delta"].probe_class}
    plan = plan_session(
        "p",
        "local[2]",
        connectors=["delta", "kafka"],
        configured={"spark.master": "local[2]"},
        environ={},
        starts_jvm=False,
        spark_home=_spark_home(tmp_path),
        loadable=loads.__contains__,
    )
    kafka = LINES[connectors.SPARK_LINE]["kafka"].packages
    assert plan.settings["spark.jars.packages"].split(",") == list(kafka)
