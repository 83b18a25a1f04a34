"""The postgres-cdc options: Flink CDC's PostgreSQL names, MySQL's left out, errors that
say what to set."""

from __future__ import annotations

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.model.dialect import options_for
from sparkcdc.model.options import SourceOptions
from sparkcdc.postgres.options import PostgresSourceOptions

BASE = {
    "hostname": "127.0.0.1",
    "username": "u",
    "password": "p",
    "database-name": "shop",
    "schema-name": "public",
    "slot.name": "orders_cdc",
    "scan.startup.mode": "latest-offset",
}


def test_defaults_and_flink_names() -> None:
    o = options_for("postgres-cdc", BASE)
    assert isinstance(o, PostgresSourceOptions)
    assert (o.port, o.decoding_plugin_name, o.publication_name) == (
        5432,
        "pgoutput",
        "dbz_publication",
    )
    assert o.table_filter().matches("public", "orders")
    assert not o.table_filter().matches("audit", "orders")
    named = options_for("postgres-cdc", {**BASE, "debezium.publication.name": "p1", "port": "6543"})
    assert isinstance(named, PostgresSourceOptions)
    assert (named.port, named.publication_name) == (6543, "p1")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"slot.name": None}, r"slot.name: Field required"),
        ({"slot.name": "Orders-CDC"}, r"slot.name: .*lower-case letters"),
        ({"database-name": None}, r"database-name is the PostgreSQL database"),
        ({"schema-name": None}, r"set 'schema-name'"),
        ({"decoding.plugin.name": "wal2json"}, r"only PostgreSQL's built-in 'pgoutput'"),
        ({"scan.startup.mode": "initial"}, r"needs 'state.location'"),
        ({"scan.startup.mode": "snapshot"}, r"needs 'state.location'"),
        ({"scan.startup.mode": "earliest-offset"}, r"not one the PostgreSQL source has"),
        ({"server-id": "5400"}, r"unknown option 'server-id' for format 'postgres-cdc'"),
        ({"slot.nam": "x"}, r"unknown option 'slot.nam'.*'slot.name'"),
        ({"debezium.decimal.handling.mode": "exact"}, r"invalid postgres-cdc options"),
    ],
)
def test_errors_say_what_to_set(change: dict[str, str | None], expected: str) -> None:
    raw = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=expected):
        options_for("postgres-cdc", raw)


def test_mysql_options_keep_their_errors() -> None:
    mysql = {
        "hostname": "h",
        "username": "u",
        "database-name": "app",
        "scan.startup.mode": "latest-offset",
    }
    assert type(options_for("mysql-cdc", mysql)) is SourceOptions
    with pytest.raises(ConfigError, match=r"unknown option 'slot.name' for format 'mysql-cdc'"):
        options_for("mysql-cdc", {**mysql, "slot.name": "x"})
    with pytest.raises(ConfigError, match=r"invalid mysql-cdc options"):
        options_for("mysql-cdc", {**mysql, "port": "0"})


def test_the_password_never_shows() -> None:
    o = options_for("postgres-cdc", {**BASE, "password": "hunter2"})
    assert "hunter2" not in repr(o) and "hunter2" not in str(o)
