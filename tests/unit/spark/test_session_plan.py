"""What a session is built with on local and cluster masters: the launcher and the worker
daemon only where the workers are this machine's processes; a user's settings kept."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from sparkcdc.errors import ConfigError, SparkMasterError
from sparkcdc.spark import masters, python_env, session
from sparkcdc.spark.masters import check_master, is_local_master
from sparkcdc.spark.python_env import ensure_python_env, python_environ
from sparkcdc.spark.session_plan import plan_session

CLUSTER = "spark://10.1.2.3:7077"


@pytest.fixture
def connector_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("delta-spark_2.13-4.0.jar", "iceberg-spark-runtime.jar"):
        (folder / name).write_bytes(b"")
    monkeypatch.setenv("SPARKCDC_JARS_DIR", str(folder))
    return folder


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local-cluster[2,1,1024]", True),
        (CLUSTER, False),
        ("yarn", False),
        ("k8s://https://10.0.0.1:6443", False),
        ("localhost", False),
    ],
)
def test_which_masters_are_local(master: str, local: bool) -> None:
    assert is_local_master(master) is local


def test_a_cluster_master_gets_no_launcher_and_sparks_own_daemon() -> None:
    plan = plan_session("p", CLUSTER, configured={}, environ={})
    assert plan.master == CLUSTER
    assert plan.settings["spark.master"] == CLUSTER
    assert plan.settings["spark.python.daemon.module"] == "pyspark.daemon"
    changes = python_environ(CLUSTER, {})
    assert "PYSPARK_PYTHON" not in changes  # Spark's default on the executors
    assert "PYTHONPATH" not in changes  # this machine's paths mean nothing there


def test_a_local_master_gets_the_launcher_and_sparkcdcs_daemon() -> None:
    plan = plan_session("p", "local[2]", configured={}, environ={})
    assert plan.settings["spark.python.daemon.module"] == "sparkcdc.spark.worker_daemon"
    changes = python_environ("local[2]", {})
    python = changes["PYSPARK_PYTHON"]
    assert python is not None
    assert python == sys.executable or "sparkcdc.spark.launch" in Path(python).read_text()
    assert changes["PYTHONPATH"]


@pytest.mark.parametrize("master", ["local[2]", CLUSTER])
def test_a_users_pyspark_python_is_kept(master: str) -> None:
    changes = python_environ(master, {"PYSPARK_PYTHON": "/opt/py/bin/python3"})
    assert "PYSPARK_PYTHON" not in changes


def test_a_launcher_set_for_a_local_session_is_not_left_for_a_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.setattr(python_env, "_OWN_PYTHON", set())
    ensure_python_env("local[2]")
    ours = python_env.os.environ["PYSPARK_PYTHON"]
    assert python_environ(CLUSTER, {"PYSPARK_PYTHON": ours}) == {
        "PYSPARK_DRIVER_PYTHON": python_env._local_launcher() or sys.executable,
        "PYSPARK_PYTHON": None,
    }
    ensure_python_env(CLUSTER)
    assert "PYSPARK_PYTHON" not in python_env.os.environ


def test_connector_jars_come_after_the_users_jars(connector_dir: Path) -> None:
    users = "/opt/hadoop/hadoop-aws-3.4.1.jar,/opt/aws/bundle-2.29.jar"
    plan = plan_session(
        "p",
        CLUSTER,
        conf={"spark.jars": users},
        connectors=True,
        jars=["/extra/x.jar"],
        configured={},
        environ={},
    )
    assert plan.settings["spark.jars"].split(",") == [
        "/opt/hadoop/hadoop-aws-3.4.1.jar",
        "/opt/aws/bundle-2.29.jar",
        str(connector_dir / "delta-spark_2.13-4.0.jar"),
        str(connector_dir / "iceberg-spark-runtime.jar"),
        "/extra/x.jar",
    ]


def test_spark_submits_settings_are_kept_and_merged(connector_dir: Path) -> None:
    configured = {
        "spark.master": "spark://cluster:7077",
        "spark.jars": "file:/home/u/delta-spark_2.13-4.0.jar,file:/home/u/s3.jar",
        "spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.4.1",
        "spark.driver.extraClassPath": "/opt/a.jar",
        "spark.executor.extraClassPath": "/opt/b.jar",
        "spark.submit.pyFiles": "hdfs:///libs/sparkcdc-0.1.0.zip",
        "spark.sql.extensions": "com.example.MyExtension",
        "spark.sql.shuffle.partitions": "64",
        "spark.driver.memory": "16g",
    }
    plan = plan_session(
        "p",
        None,
        conf={"spark.jars.packages": "com.example:lib:1.0"},
        connectors=True,
        configured=configured,
        environ={},
    )
    settings = plan.settings
    assert plan.master == "spark://cluster:7077"
    # the user's copy of a connector jar stands for ours; the rest are added after
    assert settings["spark.jars"].split(",") == [
        "file:/home/u/delta-spark_2.13-4.0.jar",
        "file:/home/u/s3.jar",
        str(connector_dir / "iceberg-spark-runtime.jar"),
    ]
    assert settings["spark.jars.packages"] == (
        "org.apache.hadoop:hadoop-aws:3.4.1,com.example:lib:1.0"
    )
    assert settings["spark.driver.extraClassPath"] == "/opt/a.jar"
    assert settings["spark.executor.extraClassPath"] == "/opt/b.jar"
    assert settings["spark.submit.pyFiles"] == "hdfs:///libs/sparkcdc-0.1.0.zip"
    assert settings["spark.sql.extensions"].split(",") == [
        "com.example.MyExtension",
        "io.delta.sql.DeltaSparkSessionExtension",
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    ]
    # sparkcdc's defaults do not replace what spark-submit set (the builder would)
    assert "spark.sql.shuffle.partitions" not in settings
    assert "spark.driver.memory" not in settings


@pytest.mark.parametrize(
    ("master", "conf", "configured", "environ", "chosen"),
    [
        ("local[3]", {}, {"spark.master": "yarn"}, {}, "local[3]"),  # the argument wins
        (None, {"spark.master": "yarn"}, {"spark.master": CLUSTER}, {}, "yarn"),
        (None, {}, {"spark.master": CLUSTER}, {"SPARK_MASTER": "yarn"}, CLUSTER),
        (None, {}, {}, {"SPARK_MASTER": "yarn"}, "yarn"),
        (None, {}, {}, {}, "local[2]"),
    ],
)
def test_the_master_chosen(
    master: str | None,
    conf: dict[str, str],
    configured: dict[str, str],
    environ: dict[str, str],
    chosen: str,
) -> None:
    plan = plan_session("p", master, conf=conf, configured=configured, environ=environ)
    assert plan.master == chosen == plan.settings["spark.master"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_unreachable_master_says_what_to_do() -> None:
    port = _closed_port()
    with pytest.raises(SparkMasterError) as caught:
        check_master(f"spark://127.0.0.1:{port}", timeout_s=2)
    message = str(caught.value)
    assert f"spark://127.0.0.1:{port} cannot be reached" in message
    assert f"127.0.0.1:{port}:" in message
    assert "--master" in message and "start-master.sh" in message


def test_an_unreachable_kubernetes_master_is_shown_without_credentials() -> None:
    port = _closed_port()
    with pytest.raises(SparkMasterError) as caught:
        check_master(f"k8s://https://admin:s3cret@127.0.0.1:{port}", timeout_s=2)
    assert "s3cret" not in str(caught.value)
    assert f"k8s://https://127.0.0.1:{port}" in str(caught.value)


def test_a_reachable_master_and_masters_without_an_endpoint_pass() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        check_master(f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}", timeout_s=2)
    for master in ("local[2]", "yarn"):
        check_master(master)


def test_a_line_without_icebergs_runtime_gets_no_iceberg_extensions_and_stops_an_iceberg_sink(
    connector_dir: Path,
) -> None:
    """Spark 4.2's jars have no Iceberg runtime (Iceberg publishes none for it): the session
    is built without Iceberg's SQL extensions, and an iceberg sink stops before it connects,
    naming the line that runs it; delta runs on."""
    from sparkcdc.errors import ConfigError
    from sparkcdc.sinks.base import runnable_sink_class

    runnable_sink_class("iceberg")  # the folder has a runtime: runs
    (connector_dir / "iceberg-spark-runtime.jar").unlink()
    plan = plan_session("p", "local[2]", connectors=True, configured={}, environ={})
    assert plan.settings["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert runnable_sink_class("delta").__name__ == "DeltaSink"
    with pytest.raises(ConfigError) as caught:
        runnable_sink_class("iceberg")
    message = str(caught.value)
    assert "Iceberg's Spark runtime is not among the connector jars in" in message
    assert str(connector_dir) in message
    assert "pip install 'pyspark>=4.1.4,<4.2'" in message


@pytest.mark.parametrize(
    ("configured", "conf", "expected"),
    [
        ({}, {}, "false"),  # the caller's default
        ({"spark.sql.inMemoryColumnarStorage.compressed": "true"}, {}, "true"),  # spark-submit's
        ({}, {"spark.sql.inMemoryColumnarStorage.compressed": "true"}, "true"),  # the file's
    ],
)
def test_a_callers_defaults_give_way_to_the_users_settings(
    configured: dict[str, str], conf: dict[str, str], expected: str
) -> None:
    plan = plan_session(
        "p",
        "local[2]",
        conf=conf,
        configured=configured,
        environ={},
        defaults={"spark.sql.inMemoryColumnarStorage.compressed": "false"},
    )
    assert plan.settings.get("spark.sql.inMemoryColumnarStorage.compressed", "true") == expected


@pytest.mark.parametrize(
    ("master", "starts_jvm", "environ", "on_class_path"),
    [
        ("local[2]", True, {}, True),
        ("local", True, {}, True),
        ("local[2]", False, {}, False),  # this process's JVM runs: its class path is set
        ("local[2]", True, {"PYSPARK_GATEWAY_PORT": "4040"}, False),  # spark-submit's JVM
        ("local-cluster[2,1,1024]", True, {}, False),  # executors are JVMs of their own
        (CLUSTER, True, {}, False),
    ],
)
def test_the_connector_jars_go_on_the_class_path_of_a_local_jvm_about_to_start(
    connector_dir: Path, master: str, starts_jvm: bool, environ: dict[str, str], on_class_path: bool
) -> None:
    """A local executor is the driver's JVM: the jars are read from its class path, not
    fetched as spark.jars (a copy and a chmod process each); a user's entries come first."""
    jars = sorted(str(p) for p in connector_dir.glob("*.jar"))
    plan = plan_session(
        "p",
        master,
        connectors=True,
        jars=["/user/udf.jar"],
        conf={"spark.driver.extraClassPath": "/user/first.jar"},
        configured={},
        environ=environ,
        starts_jvm=starts_jvm,
    )
    shipped = plan.settings["spark.jars"].split(",")
    class_path = plan.settings["spark.driver.extraClassPath"].split(":")
    assert "/user/udf.jar" in shipped  # the caller's own jars are shipped as before
    assert class_path[0] == "/user/first.jar"
    if on_class_path:
        assert class_path[1:] == jars
        assert not set(jars) & set(shipped)
    else:
        assert class_path == ["/user/first.jar"]
        assert shipped[: len(jars)] == jars


@pytest.mark.parametrize(
    ("master", "settings", "environ", "shown"),
    [
        ("local[2]", {}, {}, None),
        ("local[2]", {"spark.api.mode": "classic"}, {}, None),
        ("sc://h:15002", {}, {}, "the master sc://h:15002"),
        ("local[2]", {"spark.remote": "sc://h:1/;token=t"}, {}, "spark.remote=sc://h:1"),
        ("local[2]", {"spark.remote": "local[2]"}, {}, "spark.remote=local[2]"),
        ("local[2]", {"spark.api.mode": " Connect"}, {}, "spark.api.mode=connect"),
        ("local[2]", {}, {"SPARK_REMOTE": "sc://u:p@h:1/;token=t"}, "SPARK_REMOTE=sc://h:1"),
    ],
)
def test_what_asks_for_spark_connect_is_named_without_its_credentials(
    master: str, settings: dict[str, str], environ: dict[str, str], shown: str | None
) -> None:
    assert masters.connect_request(master, settings, environ) == shown


def test_spark_session_refuses_spark_connect_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:1/;token=secret")
    monkeypatch.setattr(session, "jvm_running", lambda: False)
    monkeypatch.setattr(session, "configured_conf", dict)

    def started(settings: object) -> None:
        raise AssertionError("a JVM was started")

    monkeypatch.setattr(session, "start_jvm", started)
    with pytest.raises(ConfigError, match=r"SPARK_REMOTE=sc://127\.0\.0\.1:1 asks") as raised:
        session.spark_session("a", "local[2]")
    assert "secret" not in str(raised.value)
    assert "sparkcdc.register(spark)" in str(raised.value)
