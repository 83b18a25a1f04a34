"""The validator's judgments as pure functions of variables, version and grants."""

from __future__ import annotations

import pytest

from sparkcdc.mysql.admin.server import ServerInfo, parse_version
from sparkcdc.mysql.admin.validator import (
    SourceFacts,
    check_binlog_filters,
    check_binlog_settings,
    check_privileges,
    check_replica_logging,
    check_version,
    judge,
    parse_grants,
)

GOOD = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
}
MARIADB_1011 = ServerInfo("mariadb", (10, 11, 6), "10.11.6-MariaDB", 1, True)
MARIADB_104 = ServerInfo("mariadb", (10, 4, 32), "10.4.32-MariaDB", 1, True)
MYSQL_80 = ServerInfo("mysql", (8, 0, 36), "8.0.36", 1, True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.11.6-MariaDB-0+deb12u1-log", ("mariadb", (10, 11, 6))),
        ("5.5.5-10.4.32-MariaDB", ("mariadb", (10, 4, 32))),
        ("8.4.3", ("mysql", (8, 4, 3))),
        ("5.7.44-log", ("mysql", (5, 7, 44))),
    ],
)
def test_parse_version(text: str, expected: tuple[str, tuple[int, int, int]]) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("info", "ok"),
    [
        (MYSQL_80, True),
        (ServerInfo("mysql", (5, 7, 0), "5.7.0", 1, False), True),
        (ServerInfo("mysql", (5, 6, 51), "5.6.51", 1, False), False),
        (MARIADB_104, True),
        (ServerInfo("mariadb", (10, 3, 39), "10.3.39-MariaDB", 1, True), False),
    ],
)
def test_version(info: ServerInfo, ok: bool) -> None:
    issues = check_version(info)
    assert (issues == []) is ok
    if not ok:
        assert issues[0].severity == "error" and issues[0].found == info.version_text


def test_good_binlog_settings() -> None:
    assert check_binlog_settings(GOOD, "mysql") == []


@pytest.mark.parametrize(
    ("setting", "value", "fix_part"),
    [
        ("log_bin", "OFF", "log-bin = mysql-bin"),
        ("binlog_format", "MIXED", "SET GLOBAL binlog_format = 'ROW';"),
        ("binlog_format", "STATEMENT", "binlog_format = ROW under [mysqld]"),
        ("binlog_row_image", "MINIMAL", "SET GLOBAL binlog_row_image = 'FULL';"),
        ("binlog_row_image", "NOBLOB", "SET GLOBAL binlog_row_image = 'FULL';"),
    ],
)
def test_bad_binlog_setting_is_an_error(setting: str, value: str, fix_part: str) -> None:
    (issue,) = check_binlog_settings({**GOOD, setting: value}, "mysql")
    assert (issue.setting, issue.found, issue.severity) == (setting, value, "error")
    assert fix_part in issue.fix


def test_row_metadata_minimal_is_a_warning_saying_what_is_lost() -> None:
    (issue,) = check_binlog_settings({**GOOD, "binlog_row_metadata": "MINIMAL"}, "mariadb")
    assert issue.severity == "warning"
    assert issue.fix.startswith("SET GLOBAL binlog_row_metadata = 'FULL';")
    for said in ("column names", "signedness", "ENUM/SET labels", "state.location", "restarts"):
        assert said in issue.fix


def test_row_metadata_missing_on_old_servers() -> None:
    values = {k: v for k, v in GOOD.items() if k != "binlog_row_metadata"}
    (issue,) = check_binlog_settings(values, "mariadb")
    assert issue.severity == "warning" and "MariaDB >= 10.5" in issue.fix


def test_parse_grants() -> None:
    grants = parse_grants(
        [
            "GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*ABC'",
            "GRANT SELECT (a, b), INSERT ON `shop`.`orders` TO `u`@`%`",
            "GRANT ALL ON `app`.* TO `u`@`%`",
            "GRANT PROXY ON ''@'%' TO 'u'@'%' WITH GRANT OPTION",
        ]
    )
    assert grants == {
        "*.*": {"USAGE"},
        "shop.orders": {"SELECT", "INSERT"},
        "app.*": {"ALL PRIVILEGES"},
    }


@pytest.mark.parametrize(
    ("info", "grant", "fix"),
    [
        (
            MYSQL_80,
            "GRANT USAGE ON *.* TO `u`@`%`",
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'u'@'%';",
        ),
        (
            MYSQL_80,
            "GRANT SELECT, REPLICATION CLIENT ON *.* TO `u`@`%`",
            "GRANT REPLICATION SLAVE ON *.* TO 'u'@'%';",
        ),
        (
            MARIADB_1011,
            "GRANT SELECT ON *.* TO `u`@`%`",
            "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'u'@'%';",
        ),
        (
            MARIADB_104,
            "GRANT SELECT ON *.* TO `u`@`%`",
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'u'@'%';",
        ),
    ],
)
def test_missing_privileges_give_the_exact_grant(info: ServerInfo, grant: str, fix: str) -> None:
    (issue,) = check_privileges([grant], info, "u@%")
    assert issue.severity == "error" and issue.fix == fix


@pytest.mark.parametrize(
    ("info", "grant"),
    [
        (MYSQL_80, "GRANT ALL PRIVILEGES ON *.* TO `u`@`%` WITH GRANT OPTION"),
        (MYSQL_80, "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`"),
        (MARIADB_1011, "GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%`"),
        # MariaDB >= 10.5 still accepts the old name when a grant was migrated as text
        (MARIADB_1011, "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`"),
    ],
)
def test_sufficient_privileges(info: ServerInfo, grant: str) -> None:
    assert check_privileges([grant], info, "u@%") == []


def test_select_on_some_databases_only_is_a_warning() -> None:
    issues = check_privileges(
        [
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`h`",
            "GRANT SELECT ON `shop`.* TO `u`@`h`",
        ],
        MYSQL_80,
        "u@h",
    )
    (issue,) = issues
    assert issue.severity == "warning" and "shop.*" in issue.found
    assert issue.fix.startswith("GRANT SELECT ON *.* TO 'u'@'h';")


def test_password_hash_never_reaches_an_issue() -> None:
    facts = SourceFacts(
        MYSQL_80,
        {**GOOD, "binlog_format": "MIXED"},
        ("GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*SECRETHASH'",),
        "u@%",
    )
    issues = judge(facts)
    assert [i.setting for i in issues] == ["binlog_format", "privileges"]
    assert all("SECRETHASH" not in str(i) for i in issues)


@pytest.mark.parametrize(
    ("values", "replicating", "flagged"),
    [
        ({"log_slave_updates": "OFF"}, 1, "log_slave_updates"),
        ({"log_slave_updates": "OFF", "log_replica_updates": "OFF"}, 2, "log_replica_updates"),
        ({"log_slave_updates": "ON"}, 1, None),
        ({"log_replica_updates": "ON", "log_slave_updates": "ON"}, 1, None),
        ({"log_slave_updates": "OFF"}, 0, None),  # not a replica: its own writes are logged
        ({"log_slave_updates": "OFF"}, None, None),  # the server would not say
        ({}, 1, None),  # a server without the setting
    ],
)
def test_a_replica_must_log_what_it_applies(
    values: dict[str, str], replicating: int | None, flagged: str | None
) -> None:
    issues = check_replica_logging(values, replicating)
    assert [i.setting for i in issues] == ([flagged] if flagged else [])
    for issue in issues:
        assert issue.severity == "error" and "restart" in issue.fix


def test_a_replica_without_logging_fails_the_judgment() -> None:
    facts = SourceFacts(
        MARIADB_1011,
        {**GOOD, "log_slave_updates": "OFF"},
        ("GRANT ALL PRIVILEGES ON *.* TO `u`@`%`",),
        "u@%",
        1,
    )
    assert [i.setting for i in judge(facts)] == ["log_slave_updates"]


@pytest.mark.parametrize(
    ("do_db", "ignore_db", "left_out"),
    [
        ((), (), []),
        (("app",), (), ["shop"]),
        (("app", "shop"), (), []),
        ((), ("shop",), ["shop"]),
        ((), ("audit",), []),
        (("app",), ("app",), ["shop"]),  # do-db rules decide alone, as the server does
    ],
)
def test_binlog_filters_that_leave_a_captured_database_out(
    do_db: tuple[str, ...], ignore_db: tuple[str, ...], left_out: list[str]
) -> None:
    issues = check_binlog_filters(do_db, ignore_db, ["shop", "app", "app"])
    assert [i.setting.rsplit(" ", 1)[-1] for i in issues] == left_out
    for issue in issues:
        assert issue.severity == "error" and "binlog" in issue.found
