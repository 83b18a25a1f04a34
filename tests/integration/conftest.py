from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flink_consumer import flink_harness  # noqa: F401  (a fixture: Flink's harness, compiled)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from sparkcdc.pipeline.runner import NO_CALL_SITES
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


@pytest.fixture
def server(dev_server: Any) -> Any:
    """The private MariaDB (``dev_server``), under the name the pipeline tests use."""
    return dev_server
