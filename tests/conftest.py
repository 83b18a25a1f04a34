"""Shared fixtures: the private MariaDB (started once per session) and fresh databases."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator

import pymysql
import pytest

from sparkcdc_dev.devserver import DevServer, DevSettings

_counter = itertools.count()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``thorough`` are skipped unless ``SPARKCDC_THOROUGH=1``
    (docs/development.md, "The tests"). Tests marked ``iceberg`` are skipped on a Spark line
    without Iceberg's runtime (4.2): scripts/test.sh runs them again under PySpark 4.1, the
    line that has it."""
    from pipelines import THOROUGH

    if not THOROUGH:
        repeat = pytest.mark.skip(reason="a repeat of a proof CI runs once: SPARKCDC_THOROUGH=1")
        for item in items:
            if item.get_closest_marker("thorough") is not None:
                item.add_marker(repeat)
    from sparkcdc.errors import ConfigError
    from sparkcdc.spark.compat import SPARK_LINE
    from sparkcdc.spark.connectors import has_iceberg_runtime

    try:
        if has_iceberg_runtime():
            return
    except ConfigError:  # no connector jars: the tests that need them say so
        return
    skip = pytest.mark.skip(
        reason=f"Iceberg publishes no Spark {SPARK_LINE} runtime: scripts/test.sh runs the "
        "Iceberg tests under PySpark 4.1"
    )
    for item in items:
        if item.get_closest_marker("iceberg") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def dev_server() -> Iterator[DevServer]:
    """The private MariaDB of DESIGN.md §8 (log-bin, ROW, FULL image and metadata)."""
    server = DevServer.from_env()
    server.start()
    # Start from a fresh, small binlog: the private server's data directory outlives runs
    # (benchmarks leave GBs of binlog), and nothing here needs older files.
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        current = cur.fetchone()[0]
        cur.execute(f"PURGE BINARY LOGS TO '{current}'")
    yield server


@pytest.fixture(scope="session")
def dev_settings(dev_server: DevServer) -> DevSettings:
    return dev_server.settings


@pytest.fixture
def database(dev_server: DevServer) -> Iterator[str]:
    """A fresh, uniquely named database, dropped after the test."""
    name = f"t_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
    with dev_server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    yield name
    with dev_server.connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def sql(dev_server: DevServer, database: str) -> Iterator[pymysql.cursors.Cursor]:
    """An autocommit cursor on the fresh database."""
    conn = dev_server.connection(database)
    with conn.cursor() as cur:
        yield cur
    conn.close()
