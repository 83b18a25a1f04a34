from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flink_consumer import flink_harness  # noqa: F401  (a fixture: Flink's harness, compiled)

from sparkcdc_dev.devpostgres import DevPostgres


@pytest.fixture(scope="session", autouse=True)
def _lane_mariadb(dev_server: Any) -> Any:
    """The lane's private MariaDB is up before the first integration test, also for the
    tests that reach it by ``DevServer.from_env()`` alone: scripts/test.sh starts lane 0's,
    and the ``dev_server`` fixture a pytest-xdist worker's (``sparkcdc_dev.lanes``)."""
    return dev_server


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from sparkcdc.pipeline.run_plan import NO_CALL_SITES
    from sparkcdc.spark.session import spark_session

    # as a pipeline's own session: no Python call site recorded per DataFrame call (half the
    # time to build a frame; pipelines run on this session too)
    session = spark_session("sparkcdc-tests", "local[2]", connectors=True, conf=NO_CALL_SITES)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[Any]:
    """The private Spark standalone cluster (a master, two one-core workers), stopped at the
    end of the session with its executors."""
    from sparkcdc_dev.devspark import DevSpark

    cluster = DevSpark.from_env()
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def minio() -> Any:
    """The private MinIO (started, or the running one reused)."""
    from sparkcdc_dev.devminio import DevMinio

    store = DevMinio.from_env()
    store.start()
    return store


@pytest.fixture
def bucket(minio: Any) -> str:
    """A new bucket on the private MinIO, for this test alone; its name."""
    name = f"lake-{uuid.uuid4().hex[:12]}"
    minio.bucket(name)
    return name


@pytest.fixture(scope="module")
def pg() -> DevPostgres:
    """The private PostgreSQL, started if it is not running; per module, so a module after
    one that stopped it finds it again."""
    server = DevPostgres.from_env()
    server.start()
    return server


@pytest.fixture
def server(dev_server: Any) -> Any:
    """The private MariaDB (``dev_server``), under the name the pipeline tests use."""
    return dev_server


@pytest.fixture(autouse=True)
def delta_tables_read_by_arrow_readers(tmp_path: Path) -> Iterator[None]:
    """After each test, every Delta table it left under ``tmp_path`` is read by delta-rs's
    Arrow reader and by polars, the pandas / polars path of users who read a lake without
    Spark, and delta-rs's rows equal its DataFusion reader's. Tables with column mapping
    (names Delta needs it for, renames and drops under ``evolve``) are left out: delta-rs
    reads their columns as NULLs and polars refuses them (docs/sinks.md says so), as are
    tables a test gave deletion vectors on purpose."""
    yield
    import deltalake
    import polars
    import pyarrow as pa

    for log_dir in sorted(tmp_path.rglob("_delta_log")):
        path = str(log_dir.parent)
        try:
            table = deltalake.DeltaTable(path)
        except Exception:  # TableNotFoundError: no commit in the log (a test that failed)
            continue
        configuration = table.metadata().configuration
        if configuration.get("delta.columnMapping.mode", "none") != "none":
            continue
        if configuration.get("delta.enableDeletionVectors") == "true":
            continue
        # to_pyarrow_table's own reader, without its thread pool: Arrow's reader threads
        # can abort a process at its exit (apache/arrow#34314), and this one is pytest
        arrow = table.to_pyarrow_dataset().to_table(use_threads=False)
        reader = deltalake.QueryBuilder().register("t", table)
        reference = pa.table(reader.execute("SELECT * FROM t").read_all())
        assert sorted(map(repr, arrow.to_pylist())) == sorted(
            map(repr, reference.select(arrow.column_names).to_pylist())
        ), f"delta-rs's Arrow reader and its DataFusion reader disagree on {path}"
        frame = polars.read_delta(path)
        assert (frame.height, frame.columns) == (arrow.num_rows, arrow.column_names), path
