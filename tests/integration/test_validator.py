"""The source validator against the private MariaDB, with a real restricted user."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from sparkcdc.errors import SourceError
from sparkcdc.mysql.admin.validator import check_source, validate_source
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc_dev.devserver import DevServer, DevSettings

pytestmark = pytest.mark.integration

_PASSWORD = "restricted-pw-7731"


@pytest.fixture
def settings(dev_settings: DevSettings) -> ConnectionSettings:
    return ConnectionSettings(
        dev_settings.host, dev_settings.port, dev_settings.user, dev_settings.password
    )


@pytest.fixture
def admin(dev_server: DevServer) -> Iterator[pymysql.cursors.Cursor]:
    conn = dev_server.connection()
    with conn.cursor() as cur:
        yield cur
    conn.close()


@pytest.fixture
def restricted_user(
    admin: pymysql.cursors.Cursor, dev_settings: DevSettings
) -> Iterator[ConnectionSettings]:
    """A user that may only SELECT."""
    name = f"v_{uuid.uuid4().hex[:10]}"
    admin.execute(f"CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY %s", (_PASSWORD,))
    admin.execute(f"GRANT SELECT ON *.* TO '{name}'@'127.0.0.1'")
    yield ConnectionSettings(dev_settings.host, dev_settings.port, name, _PASSWORD)
    admin.execute(f"DROP USER IF EXISTS '{name}'@'127.0.0.1'")


def test_dev_server_passes(settings: ConnectionSettings) -> None:
    assert validate_source(settings) == []
    check_source(settings)  # does not raise


def test_restricted_user_gets_the_exact_grant(
    restricted_user: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    issues = validate_source(restricted_user)
    assert len(issues) == 1
    (issue,) = issues
    user = restricted_user.user
    assert issue.severity == "error"
    assert issue.setting == "privileges"
    assert issue.found == "SELECT on *.*"
    # MariaDB >= 10.5.2 calls REPLICATION CLIENT "BINLOG MONITOR"
    assert issue.fix == f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1';"

    with pytest.raises(SourceError, match="not ready for CDC") as raised:
        check_source(restricted_user)
    assert issue.fix in str(raised.value)
    assert _PASSWORD not in str(raised.value)

    # the fix is exact: running it makes the source pass
    admin.execute(issue.fix)
    assert validate_source(restricted_user) == []


def test_user_without_any_privilege(
    restricted_user: ConnectionSettings, admin: pymysql.cursors.Cursor
) -> None:
    user = restricted_user.user
    admin.execute(f"REVOKE SELECT ON *.* FROM '{user}'@'127.0.0.1'")
    (issue,) = validate_source(restricted_user)
    assert issue.found == "USAGE on *.*"
    assert issue.fix == (
        f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO '{user}'@'127.0.0.1';"
    )


def test_unreachable_server_raises(settings: ConnectionSettings) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SourceError, match="connection refused"):
        validate_source(ConnectionSettings("127.0.0.1", port, "cdc", "pw"))


FILTERED_PORT = 23078  # the replica below: no log_slave_updates, a binlog filter


@pytest.fixture(scope="module")
def filtered_replica(dev_server: DevServer) -> Iterator[DevServer]:
    """A replica of the private MariaDB that logs nothing it applies and whose binlog leaves
    database ``skipped`` out: two ways a server silently keeps changes from its binlog."""
    replica = DevServer(
        Path("/tmp/sparkcdc-dev-filtered"),
        FILTERED_PORT,
        server_id=4,
        extra_args=("--log-slave-updates=OFF", "--binlog-ignore-db=skipped"),
    )
    replica.stop()
    shutil.rmtree(replica.base_dir, ignore_errors=True)
    replica.start()
    yield replica
    replica.stop()


def _settings_of(dev: DevServer) -> ConnectionSettings:
    s = dev.settings
    return ConnectionSettings(s.host, s.port, s.user, s.password)


def _binlog_end(dev: DevServer) -> tuple[str, int]:
    with dev.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos, *_ = cur.fetchone()
    return str(file), int(pos)


def test_a_replica_that_does_not_log_what_it_applies_is_refused(
    dev_server: DevServer, filtered_replica: DevServer
) -> None:
    settings = _settings_of(filtered_replica)
    assert validate_source(settings) == []  # not replicating yet: its own writes are logged
    filtered_replica.replicate(dev_server)
    try:
        before = _binlog_end(filtered_replica)
        database = f"repl_{uuid.uuid4().hex[:6]}"
        with dev_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {database}")
            cur.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
            cur.execute(f"INSERT INTO {database}.t VALUES (1), (2)")
        filtered_replica.wait_replicated(dev_server)
        with filtered_replica.connection() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {database}.t")
            assert cur.fetchone()[0] == 2  # applied here ...
        assert _binlog_end(filtered_replica) == before  # ... and not in its binlog
        (issue,) = validate_source(settings)
        assert issue.setting == "log_slave_updates" and issue.severity == "error"
        with pytest.raises(SourceError, match=r"log_slave_updates: found OFF on a replica"):
            check_source(settings)
    finally:
        with filtered_replica.root_connection() as conn, conn.cursor() as cur:
            cur.execute("STOP SLAVE")
            cur.execute("RESET SLAVE ALL")
        with dev_server.connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
    assert validate_source(settings) == []


def test_a_captured_database_the_binlog_filters_leave_out_is_refused(
    filtered_replica: DevServer,
) -> None:
    from sparkcdc.model.options import SourceOptions
    from sparkcdc.spark.capture import plan_capture

    with filtered_replica.connection() as conn, conn.cursor() as cur:
        for database in ("skipped", "kept"):
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {database}.t (id INT PRIMARY KEY)")
        before = _binlog_end(filtered_replica)
        cur.execute("INSERT INTO skipped.t VALUES (1)")
        assert _binlog_end(filtered_replica) == before  # the premise: not in the binlog
        cur.execute("INSERT INTO kept.t VALUES (1)")
        assert _binlog_end(filtered_replica) > before
    s = filtered_replica.settings

    def options(databases: str) -> SourceOptions:
        return SourceOptions.from_options(
            {
                "hostname": s.host,
                "port": str(s.port),
                "username": s.user,
                "password": s.password,
                "database-name": databases,
                "table-name": "t",
                "scan.startup.mode": "latest-offset",
            }
        )

    assert [t.qualified_name for t in plan_capture(options("kept")).tables] == ["kept.t"]
    with pytest.raises(SourceError, match=r"skipped.*binlog-ignore-db=skipped") as refused:
        plan_capture(options("kept|skipped"))
    assert "kept" not in str(refused.value).replace("skipped", "")
