"""Issue 16, part 4: every error the source validator and the option checks know, reached
from the PySpark API (``spark.readStream.format("mysql-cdc")...load()`` / ``.start()``),
raises with our message first: Spark's error class, then ``sparkcdc.errors.<Kind>: <the
message sparkcdc validate prints>``, no Python traceback and no Java stack before it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import SourceError
from sparkcdc.mysql.admin.validator import check_source
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

DATABASE = "api_errors_db"


@contextmanager
def restricted_user() -> Iterator[tuple[str, str]]:
    """A user that may only SELECT (no replication grants)."""
    name, password = f"api_{uuid.uuid4().hex[:8]}", "api-restricted-pw"
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY %s", (password,))
        cur.execute(f"GRANT SELECT ON *.* TO '{name}'@'127.0.0.1'")
    try:
        yield name, password
    finally:
        with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{name}'@'127.0.0.1'")


@contextmanager
def statement_binlog() -> Iterator[None]:
    """The server's binlog_format set to STATEMENT (new sessions take it), then ROW again."""
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        yield
    finally:
        with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'ROW'")


def validator_message(user: str, password: str) -> str:
    """What ``sparkcdc validate`` says of the server for this user."""
    settings = DevServer.from_env().settings
    with pytest.raises(SourceError) as info:
        check_source(ConnectionSettings(settings.host, settings.port, user, password))
    return str(info.value)


@pytest.fixture(scope="module")
def tables() -> None:
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE}")
        cur.execute(f"CREATE TABLE {DATABASE}.t (id INT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE {DATABASE}.nokey (a INT, b INT)")
        cur.execute(f"INSERT INTO {DATABASE}.t VALUES (1, 1)")


def first_error(spark: Any, options: dict[str, str], tmp_path: Path) -> str:
    """The text of the error the user's ``load()``, ``start()`` or the running query raises."""
    settings = DevServer.from_env().settings
    base = {
        "hostname": settings.host,
        "port": str(settings.port),
        "username": "cdc",
        "password": DEV_PASSWORD,
        "database-name": DATABASE,
        "table-name": "t",
        "server-id": "5890-5899",
        "state.location": str(tmp_path / "state"),
    }
    try:
        frame = spark.readStream.format("mysql-cdc").options(**{**base, **options}).load()
        query = (
            frame.writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            query.awaitTermination(180)  # raises when the query fails
        finally:
            query.stop()
    except Exception as exc:  # pyspark's AnalysisException / StreamingQueryException
        return str(exc)
    raise AssertionError(f"no error for {options}")


# case: options (a user and password, a server state, the options), the error kind, and the
# message (a regular expression, or what the validator says)
CASES: dict[str, tuple[Callable[[], Any], dict[str, str], str, str | None]] = {
    "unknown option": (
        nullcontext,
        {"scan.startup.mod": "initial"},
        "ConfigError",
        r"unknown option 'scan.startup.mod' for format 'mysql-cdc'\. "
        r"Did you mean 'scan.startup.mode'\?",
    ),
    "bad option value": (
        nullcontext,
        {"scan.startup.mode": "initail"},
        "ConfigError",
        r"invalid mysql-cdc options: scan\.startup\.mode: Input should be 'initial', ",
    ),
    "unknown table": (
        nullcontext,
        {"table-name": "nosuch"},
        "ConfigError",
        rf"{DATABASE}\.nosuch matches no table .* Tables that exist in the databases it "
        rf"names: {DATABASE}\.nokey, {DATABASE}\.t",
    ),
    "no primary key": (
        nullcontext,
        {"table-name": "nokey"},
        "ConfigError",
        rf"table {DATABASE}\.nokey has no primary key, so sparkcdc cannot cut it into chunks: "
        r"set the option 'scan\.incremental\.snapshot\.chunk\.key-column'",
    ),
    "purged binlog": (
        nullcontext,
        {
            "scan.startup.mode": "specific-offset",
            "scan.startup.specific-offset.file": "mysql-bin.000000",
            "scan.startup.specific-offset.pos": "4",
        },
        "PositionError",
        r"the offset's binlog file mysql-bin\.000000 .* was purged from .* binlog files there "
        r"now: ",
    ),
    "missing grants": (restricted_user, {}, "SourceError", None),
    "binlog_format not ROW": (statement_binlog, {}, "SourceError", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_errors_from_the_pyspark_api_carry_our_message_first(
    spark: Any, tmp_path: Path, tables: None, case: str
) -> None:
    setup, options, kind, pattern = CASES[case]
    with setup() as user:
        if user is not None:  # the restricted user
            options = {**options, "username": user[0], "password": user[1]}
        if pattern is None:  # what `sparkcdc validate` says of the server for this user
            login = options.get("username", "cdc"), options.get("password", DEV_PASSWORD)
            pattern = re.escape(validator_message(*login))
        text = first_error(spark, options, tmp_path)
    # Spark's error class, then ours at once: no traceback or stack before the message
    head = text.split(f"sparkcdc.errors.{kind}: ", 1)
    assert len(head) == 2, text[:3000]
    assert "Traceback" not in head[0] and "\tat " not in head[0] and "File " not in head[0], text
    assert re.match(pattern, head[1], re.DOTALL), text[:3000]
    assert "Traceback" not in text, text[:3000]
    assert "api-restricted-pw" not in text and DEV_PASSWORD not in text
