"""Guard rails of ``sparkcdc run`` (issue 57, item 7): one run per checkpoint (a lease that a
killed run leaves free), and one stream per server id on a source (a clash refused at start)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipelines import fresh_database, pipeline_env

from sparkcdc.errors import CheckpointInUseError, ServerIdClashError
from sparkcdc.model.position import BinlogPosition
from sparkcdc.mysql.admin import server as mysql_server
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.replication import BinlogClient
from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.status import committed_offset
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

DATABASE = "run_guards"
IDS = "5910-5914"
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.t
  server-id: {ids}
sink:
  type: console
pipeline:
  name: guards
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(1, 21)])
    yield conn
    conn.close()


def pipeline_file(server: DevServer, tmp_path: Path, name: str, ids: str = IDS) -> Path:
    settings = server.start()
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        PIPELINE.format(
            host=settings.host,
            port=settings.port,
            database=DATABASE,
            ids=ids,
            checkpoint=tmp_path / f"{name}-checkpoint",
        )
    )
    return path


def config(path: Path) -> PipelineConfig:
    return parse_pipeline(path.read_text(), base_dir=path.parent, env=pipeline_env())


def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def lock_free(server: DevServer, server_id: int) -> bool:
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SELECT IS_FREE_LOCK(%s)", (f"sparkcdc.server-id.{server_id}",))
        return bool(cur.fetchone()[0])


def test_a_second_run_is_refused_at_once_and_a_killed_run_frees_checkpoint_and_ids(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    first = pipeline_file(server, tmp_path, "a")
    checkpoint = config(first).checkpoint_location()
    running = subprocess.Popen(
        [sys.executable, "-m", "sparkcdc.cli.main", "run", str(first)],
        cwd=tmp_path,
        env=pipeline_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: committed_offset(checkpoint) is not None or running.poll() is not None,
            300,
            "the first run committed no batch within 300 s",
        )
        assert running.poll() is None, f"the first run ended (exit {running.returncode})"
        # the same checkpoint: refused before any query starts, naming the run that holds it
        began = time.monotonic()
        with pytest.raises(CheckpointInUseError) as info:
            run_pipeline(config(first), available_now=True, spark=spark)
        assert time.monotonic() - began < 60  # at once, not after Spark's log clash
        message = str(info.value)
        assert "in use by another run" in message and f"pid {running.pid} on host" in message
        assert spark.streams.active == []
        # another checkpoint with the same server ids: refused at start
        second = pipeline_file(server, tmp_path, "b")
        with pytest.raises(ServerIdClashError) as clash:
            run_pipeline(config(second), available_now=True, spark=spark)
        assert "server-id 5910-5914 clashes" in str(clash.value)
        assert "another sparkcdc stream running now uses server id 5910" in str(clash.value)
        assert "server-id range of its own" in str(clash.value)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)  # the run and its JVM, as a crash
        running.wait()
    # the killed run's lease stays behind, but its process is gone: a new run goes on
    wait_for(lambda: lock_free(server, 5910), 60, "the killed run's server-id locks stayed")
    summary = run_pipeline(config(first), available_now=True, spark=spark)
    assert summary.last_offset is not None


def test_a_replica_reading_with_one_of_the_ids_is_refused(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    settings = server.start()
    connection = ConnectionSettings(settings.host, settings.port, settings.user, settings.password)
    with sql_connection(connection) as conn:
        start = mysql_server.current_position(conn, mysql_server.server_info(conn))
    stop = threading.Event()
    reading = threading.Event()

    def replica() -> None:  # a blocking dump with server id 5912, as a real replica keeps
        with BinlogClient(connection, 5912) as client:
            for _ in client.events(BinlogPosition(start.file, start.pos), blocking=True):
                reading.set()
                if stop.is_set():
                    return

    thread = threading.Thread(target=replica, daemon=True)
    thread.start()
    try:
        assert reading.wait(60)
        with pytest.raises(ServerIdClashError) as clash:
            run_pipeline(config(pipeline_file(server, tmp_path, "c")), spark=spark)
        message = str(clash.value)
        assert "reads its binlog with server id 5912" in message and "SHOW SLAVE HOSTS" in message
    finally:
        stop.set()
        source.cursor().execute("INSERT INTO t VALUES (100, 100)")  # wakes the dump to stop
        thread.join(60)
