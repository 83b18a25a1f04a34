"""sparkcdc as users install it: the wheel built from this checkout, installed into a fresh
virtual environment (no checkout on ``sys.path``, no ``jars/`` folder, no
``SPARKCDC_JARS_DIR``), runs a Delta and a Kafka pipeline end to end, its connectors resolved
by Spark from their pinned Maven coordinates; with the connectors already on the class path,
nothing is resolved. The wheel holds no test code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipelines import fresh_database, write_pipeline

from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

# a new environment and cold Spark starts: minutes on a busy machine
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "wheel_db"
SOURCE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{WHEEL_TEST_PASSWORD}}
  tables: {database}.t
  server-id: 5960-5969
"""
DELTA = (
    SOURCE
    + """sink:
  type: delta
  path: {lake}
pipeline:
  name: wheel-delta
  checkpoint: {checkpoint}
"""
)
KAFKA = (
    SOURCE
    + """sink:
  type: kafka
  properties.bootstrap.servers: {servers}
  value.format: debezium-json
  sink.tableId-to-topic.mapping: "{database}.t:{topic}"
pipeline:
  name: wheel-kafka
  checkpoint: {checkpoint}
"""
)
# what Spark's Ivy prints when it resolves spark.jars.packages
RESOLVING = ":: resolving dependencies ::"
FETCHING = "Spark fetches the connectors"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment with the wheel of this checkout installed (and its
    dependencies from the package index, as a user's ``pip install`` gets them)."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    build = ["wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)]
    subprocess.run(
        [sys.executable, "-m", "pip", *build],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = dist.glob("sparkcdc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "sparkcdc_dev" in n or "/testing/" in n or "tests/" in n]
    assert "sparkcdc/spark/ivysettings.xml" in names
    env = work / "venv"
    # nothing of this checkout on the new environment's path, whatever the caller's has
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300, env=clean)
    python = env / "bin" / "python"
    # the pyspark of this environment's line (pip would pick the newest the range allows)
    import pyspark

    install = ["install", "-q", "--disable-pip-version-check", str(wheel)]
    subprocess.run(
        [str(python), "-m", "pip", *install, f"pyspark=={pyspark.__version__}"],
        env=clean,
        check=True,
        capture_output=True,
        timeout=1200,
    )
    yield env
    shutil.rmtree(work, ignore_errors=True)


def run(venv: Path, pipeline: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sparkcdc run --available-now`` of the environment, as its user starts it: none of
    this checkout's paths or jar folders in its environment."""
    drop = ("PYTHONPATH", "SPARKCDC_JARS_DIR", "PYSPARK_PYTHON", "SPARK_HOME", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    env["WHEEL_TEST_PASSWORD"] = DEV_PASSWORD
    return subprocess.run(
        [str(venv / "bin" / "sparkcdc"), "-v", "run", str(pipeline), "--available-now"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=900,
    )


@pytest.fixture
def table(server: DevServer) -> Iterator[list[tuple[int, str]]]:
    rows = [(i, f"v{i}") for i in range(1, 41)]
    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", rows)
    yield rows


def delta_rows(path: Path) -> list[tuple[Any, ...]]:
    import deltalake

    table = deltalake.DeltaTable(str(path)).to_pyarrow_dataset().to_table(use_threads=False)
    data = table.to_pydict()
    return sorted(zip(data["id"], data["v"], strict=True))


def test_the_wheel_runs_a_delta_pipeline_with_connectors_it_resolves(
    venv: Path, server: DevServer, table: list[tuple[int, str]], tmp_path: Path
) -> None:
    pipeline = write_pipeline(DELTA, tmp_path, server, DATABASE)
    done = run(venv, pipeline, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert FETCHING in output and "io.delta:delta-spark_" in output, output[-3000:]
    assert "spark-sql-kafka" not in output.split(FETCHING, 1)[1].splitlines()[0]
    assert delta_rows(tmp_path / "lake" / DATABASE / "t") == table


def test_connectors_on_the_class_path_are_not_resolved(
    venv: Path, server: DevServer, table: list[tuple[int, str]], tmp_path: Path
) -> None:
    """A cluster admin's jars in Spark's own folder are used as they are."""
    from sparkcdc.spark.connectors import connector_jars

    (site,) = (venv / "lib").glob("python3*/site-packages")
    spark_jars = site / "pyspark" / "jars"
    added = [Path(j) for j in connector_jars() if not (spark_jars / Path(j).name).exists()]
    for jar in added:
        shutil.copy(jar, spark_jars)
    try:
        pipeline = write_pipeline(DELTA, tmp_path, server, DATABASE)
        done = run(venv, pipeline, tmp_path)
    finally:
        for jar in added:
            (spark_jars / jar.name).unlink()
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert FETCHING not in output and RESOLVING not in output, output[-3000:]
    assert delta_rows(tmp_path / "lake" / DATABASE / "t") == table


def test_the_wheel_runs_a_kafka_pipeline_with_connectors_it_resolves(
    venv: Path, server: DevServer, table: list[tuple[int, str]], tmp_path: Path
) -> None:
    from confluent_kafka import Consumer, KafkaError

    servers = DevKafka.from_env().start()
    topic = f"wheel-{uuid.uuid4().hex[:10]}"
    pipeline = write_pipeline(KAFKA, tmp_path, server, DATABASE, servers=servers, topic=topic)
    done = run(venv, pipeline, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    fetched = output.split(FETCHING, 1)[1].splitlines()[0]
    assert "spark-sql-kafka-0-10" in fetched and "delta" not in fetched, fetched
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"wheel-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    seen: list[tuple[int, str]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                break
            assert error is None, error
            after = json.loads(msg.value())["after"]
            seen.append((after["id"], after["v"]))
    finally:
        consumer.close()
    assert sorted(seen) == table


def test_the_source_distribution_builds_with_and_without_a_compiler(tmp_path: Path) -> None:
    """With a C compiler, the compiled kernels (binlog rows, snapshot text rows); without
    one, a wheel of pure Python (the decoders say once that they run without them)."""
    subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = tmp_path.glob("sparkcdc-*.tar.gz")
    kernels = {}
    for name, compiler in (("cc", None), ("no-cc", "/bin/false")):
        env = dict(os.environ) | ({"CC": compiler} if compiler else {})
        out = tmp_path / name
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(sdist)],
            env=env,
            check=True,
            capture_output=True,
            timeout=600,
        )
        (wheel,) = out.glob("*.whl")
        kernels[name] = sorted(
            Path(n).name.split(".")[0]
            for n in zipfile.ZipFile(wheel).namelist()
            if n.endswith(".so")
        )
    assert kernels == {"cc": ["_rowkernel", "_textrows"], "no-cc": []}
