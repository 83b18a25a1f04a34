"""The ``sparkcdc`` command as a user runs it: a subprocess, its output and its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcdc.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

DATABASE = "cli_db"
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{CLI_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5860-5869
sink:
  type: delta
  path: {lake}
pipeline:
  name: cli-test
  checkpoint: {checkpoint}
"""


def sparkcdc(*args: str, password: str = DEV_PASSWORD) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLI_TEST_PASSWORD": password}
    return subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    server = DevServer.from_env()
    settings = server.start()
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"CREATE TABLE {DATABASE}.t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.executemany(
            f"INSERT INTO {DATABASE}.t VALUES (%s, %s)", [(i, f"v{i}") for i in range(1, 31)]
        )
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        PIPELINE.format(
            host=settings.host,
            port=settings.port,
            database=DATABASE,
            lake=tmp_path / "lake",
            checkpoint=tmp_path / "checkpoint",
        )
    )
    return path


def test_run_available_now_then_status(pipeline: Path, tmp_path: Path) -> None:
    import deltalake

    done = sparkcdc("run", str(pipeline), "--available-now")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "30 change row(s) written to delta (cli_db.t)" in done.stdout
    table = deltalake.DeltaTable(str(tmp_path / "lake" / DATABASE / "t")).to_pandas()
    assert sorted(zip(table["id"], table["v"], strict=True)) == [(i, f"v{i}") for i in range(1, 31)]

    status = sparkcdc("status", str(pipeline), "--json")
    assert status.returncode == 0, status.stderr[-2000:]
    report = json.loads(status.stdout)
    assert report["phase"] == "binlog"
    assert report["running"] is False
    assert report["tables"] == {f"{DATABASE}.t": {"chunks_done": 1, "chunks_total": 1}}
    assert report["last_committed_batch"] >= 0
    assert report["server"] == "MariaDB server_id 1 (gtid_domain_id 0)"
    source = report["schema"]["sources"][f"{DATABASE}.t"]
    assert source == {
        "versions": 1,
        "last_changed_batch": None,
        "columns": ["id int(11)", "v varchar(10)"],
    }

    # a column added: the schema history shows the new version and the batch that made it
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {DATABASE}.t ADD COLUMN w INT")
        cur.execute(f"INSERT INTO {DATABASE}.t VALUES (31, 'v31', 7)")
    done = sparkcdc("run", str(pipeline), "--available-now")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(sparkcdc("status", str(pipeline), "--json").stdout)
    source = report["schema"]["sources"][f"{DATABASE}.t"]
    assert source["versions"] == 2
    assert source["last_changed_batch"] == report["last_committed_batch"]
    assert [c.split()[0] for c in source["columns"]] == ["id", "v", "w"]
    assert "w INT" in report["schema"]["sinks"][f"{DATABASE}.t"]["columns"]
    text = sparkcdc("status", str(pipeline)).stdout
    assert "on server: MariaDB server_id 1 (gtid_domain_id 0)" in text
    assert "schema: 1 source table(s), 1 changed by DDL" in text
    assert f"{DATABASE}.t: 2 versions, last changed in batch" in text


def test_validate_reports_a_wrong_password_as_a_source_problem(pipeline: Path) -> None:
    result = sparkcdc("validate", str(pipeline), password="not-the-password")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "source error" in result.stderr
    assert "not-the-password" not in result.stdout + result.stderr


def test_a_typo_exits_2_naming_the_key(pipeline: Path) -> None:
    pipeline.write_text(pipeline.read_text().replace("  path:", "  pth:"))
    result = sparkcdc("run", str(pipeline), "--available-now")
    assert result.returncode == 2
    assert "sink.pth: unknown key. Did you mean 'path'?" in result.stderr
