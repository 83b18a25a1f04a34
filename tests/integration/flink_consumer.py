"""Reading a Kafka topic as a Flink SQL user does: the independent consumer of issue 19's proof.

``tests/harness/flink/MaterializeTopic.java`` runs Flink 1.20 SQL (``jars/flink``, fetched by
``bash scripts/fetch_flink.sh``) in a local MiniCluster: a Kafka table with Flink's own
``debezium-json`` / ``canal-json`` format over the whole topic, ``SELECT *``, the changelog
applied by primary key as a sink table would hold it. The harness is compiled once per source
version into the dev directory; each read is one JVM (about 7 s).
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sparkcdc_dev.javaharness import compiled_classpath

_PROJECT = Path(__file__).resolve().parents[2]
HARNESS = _PROJECT / "tests" / "harness" / "flink" / "MaterializeTopic.java"
FLINK_LIB = _PROJECT / "jars" / "flink" / "lib"
# One slot and small topics: a small heap, and the client compiler only (C1), which halves a
# read (13 s → 7 s here): the JVM lives too briefly for C2's optimisations to pay off.
JVM_OPTIONS = ("-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
READ_TIMEOUT_S = 180


class FlinkReadError(Exception):
    """Flink could not read the topic (a record it cannot parse, a failed job): its message."""


@functools.cache
def harness_classpath() -> str:
    """The classpath that runs the harness, compiling it first if this version is new."""
    return compiled_classpath(HARNESS, [FLINK_LIB], "flink-harness")


@pytest.fixture(scope="session")
def flink_harness() -> str:
    """The harness compiled (once per session and source version); its classpath."""
    return harness_classpath()


def flink_rows(
    bootstrap: str,
    topic: str,
    value_format: str,
    columns: str,
    options: Mapping[str, str] | None = None,
) -> list[dict[str, str | None]]:
    """The rows a Flink SQL table over ``topic`` ends with, every value as Flink's exact text.

    ``columns`` is the DDL's column list with its primary key, e.g.
    ``"id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED"``; ``options`` are further
    ``WITH`` options, e.g. ``{"debezium-json.timestamp-format.standard": "ISO-8601"}``.
    Texts: DECIMAL plain (``toPlainString``), TIMESTAMP ``yyyy-MM-ddTHH:mm:ss.fffffffff``,
    TIMESTAMP_LTZ the same in UTC with ``Z``, BYTES lower-case hex, NULL ``None``.
    Raises :class:`FlinkReadError` with Flink's message when the job fails.
    """
    command = [
        "java",
        *JVM_OPTIONS,
        "-cp",
        harness_classpath(),
        "MaterializeTopic",
        bootstrap,
        topic,
        value_format,
        columns,
        *(f"{key}={value}" for key, value in (options or {}).items()),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    if done.returncode != 0:
        raise FlinkReadError(
            f"Flink ({value_format}) could not read topic {topic!r} "
            f"(exit {done.returncode}):\n{done.stderr.strip()}"
        )
    rows: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines()]
    return rows


def flink_rows_of_ddl(ddl: str) -> list[dict[str, str | None]]:
    """As :func:`flink_rows`, for a user's whole ``CREATE TABLE`` of a Kafka table (a
    documented recipe), run as given and read to the topic's current end."""
    command = ["java", *JVM_OPTIONS, "-cp", harness_classpath(), "MaterializeTopic", "--ddl", ddl]
    done = subprocess.run(command, capture_output=True, text=True, timeout=READ_TIMEOUT_S)
    if done.returncode != 0:
        raise FlinkReadError(
            f"Flink could not run the DDL (exit {done.returncode}):\n{done.stderr}"
        )
    return [json.loads(line) for line in done.stdout.splitlines()]
