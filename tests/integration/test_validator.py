"""The source validator against the private MariaDB, with a real restricted user."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pymysql
import pytest

from sparkcdc.errors import SourceError
from sparkcdc.mysql.connection import ConnectionSettings
from sparkcdc.mysql.validator import check_source, validate_source
from sparkcdc.testing.devserver import DevServer, DevSettings

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
