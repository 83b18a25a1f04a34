"""Columns added mid-stream with a value in the rows that already exist: the sink must hold
the values the source gave those rows (DEFAULT literals, CURRENT_TIMESTAMP, generated
STORED and VIRTUAL columns, implicit NOT NULL defaults), never a NULL in their place.

Rows are inserted and updated before and after each ALTER in the same batch (one
AvailableNow run is one batch) and in other batches; at the end the sink table, read back
independently of Spark (delta-rs, psycopg, pyiceberg), equals ``SELECT *`` of the source.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pipelines import fresh_database
from test_schema_evolution import (
    DELTA_SINK,
    ICEBERG_SINK,
    delta_table,
    iceberg_table,
    jdbc_sink,
    make_config,
    pg_table,
    run_steps,
)

from sparkcdc.pipeline.evolution.persistence import Divergences
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

DATABASE = "evolve_db"  # make_config's pipeline captures evolve_db.ev
Row = tuple[Any, ...]

# (statements, then run a batch)
STEPS: list[list[str]] = [
    [
        # before the first ALTER, in the same batch: written in the segment without the column
        "INSERT INTO ev VALUES (5, 5, 'b5')",
        "UPDATE ev SET a = 20 WHERE id = 2",
        "ALTER TABLE ev ADD COLUMN s VARCHAR(10) NOT NULL DEFAULT 'new'",
        "INSERT INTO ev (id, a, b, s) VALUES (6, 6, 'b6', 's6')",
        "UPDATE ev SET s = 'x3' WHERE id = 3",
        "ALTER TABLE ev ADD COLUMN n INT DEFAULT 7",
        # set to NULL after the ALTER: must stay NULL (a NULL is not "not filled" here)
        "UPDATE ev SET n = NULL WHERE id = 3",
        "ALTER TABLE ev ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP",
        "ALTER TABLE ev ADD COLUMN g INT AS (a * 2) STORED",
        "ALTER TABLE ev ADD COLUMN v INT AS (a * 3) VIRTUAL",
        "UPDATE ev SET a = 40 WHERE id = 4",
        "ALTER TABLE ev ADD COLUMN z INT NOT NULL",  # implicit default: 0
    ],
    # an ALTER alone in its batch, its rows in the next
    [
        "ALTER TABLE ev ADD COLUMN k DECIMAL(5,2) NOT NULL DEFAULT '1.5', "
        "ADD COLUMN f TINYINT(1) NOT NULL DEFAULT TRUE, "
        # DATE: Delta refuses to add a TIMESTAMP_NTZ (DATETIME) column to an existing table
        "ADD COLUMN d DATE NOT NULL DEFAULT '2024-01-02' AFTER a"
    ],
    [
        "INSERT INTO ev (id, a, b, z) VALUES (7, 7, 'b7', 70)",
        "UPDATE ev SET k = 2.25, f = FALSE WHERE id = 1",
        "DELETE FROM ev WHERE id = 5",
    ],
]


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE ev (id INT PRIMARY KEY, a INT, b VARCHAR(10))")
        cur.execute("INSERT INTO ev VALUES (1, 1, 'b1'), (2, 2, 'b2'), (3, 3, 'b3'), (4, 4, 'b4')")
    yield conn
    conn.close()


def plain(value: Any) -> Any:
    """One comparable form for the source's and every reader's values."""
    if hasattr(value, "item") and not isinstance(value, bytes | str):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def normalized(
    table: tuple[list[str], list[Row]], order: list[str] | None = None
) -> tuple[list[str], list[Row]]:
    """Rows in comparable form, columns in ``order`` (sinks append added columns last,
    ``AFTER`` places them in the source)."""
    columns, rows = table
    order = order or columns
    if sorted(order) != sorted(columns):
        return columns, rows  # a different set of columns: compared as it is
    index = [columns.index(c) for c in order]
    return order, sorted(tuple(plain(row[i]) for i in index) for row in rows)


def source_table(conn: Any, booleans: tuple[str, ...] = ("f",)) -> tuple[list[str], list[Row]]:
    """Columns and rows of the source table, TIMESTAMPs in UTC, TINYINT(1) as booleans."""
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("SELECT * FROM ev")
        columns = [d[0] for d in cur.description]
        rows = [
            tuple(
                bool(v) if c in booleans and v is not None else v
                for c, v in zip(columns, r, strict=True)
            )
            for r in cur.fetchall()
        ]
    return normalized((columns, rows))


def check_values(table: tuple[list[str], list[Row]]) -> None:
    """Spot checks that the comparison sees the values the ALTERs gave (not NULLs)."""
    columns, rows = table
    by_id = {r[0]: dict(zip(columns, r, strict=True)) for r in rows}
    assert by_id[1]["s"] == "new" and by_id[1]["n"] == 7 and by_id[1]["g"] == 2
    assert by_id[1]["v"] == 3 and by_id[1]["z"] == 0 and by_id[1]["ts"] is not None
    assert by_id[1]["k"] == "2.25" and by_id[1]["f"] is False
    assert by_id[2]["s"] == "new" and by_id[2]["g"] == 40 and by_id[2]["k"] == "1.50"
    assert by_id[2]["d"] == dt.date(2024, 1, 2) and by_id[2]["f"] is True
    assert by_id[3]["s"] == "x3" and by_id[3]["n"] is None
    assert by_id[4]["g"] == 80 and by_id[4]["v"] == 120


# lenient adds these columns as evolve does (it differs on drops and truncates, which STEPS
# have none of): a repeat, run with SPARKCDC_THOROUGH=1
@pytest.mark.parametrize(
    "behavior", ["evolve", pytest.param("lenient", marks=pytest.mark.thorough)]
)
def test_delta_added_columns_hold_the_sources_values(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, behavior: str
) -> None:
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), behavior)
    run_steps(spark, config, source, STEPS)
    expected = source_table(source)
    check_values(expected)
    assert normalized(delta_table(lake / DATABASE / "ev"), expected[0]) == expected


def test_jdbc_postgresql_added_columns_hold_the_sources_values(
    spark: Any,
    server: DevServer,
    source: Any,
    pg: DevPostgres,
    tmp_path: Path,
) -> None:
    schema = "fill_evolve"
    config = make_config(server, tmp_path, jdbc_sink(pg, schema), "evolve")
    run_steps(spark, config, source, STEPS)
    expected = source_table(source)
    check_values(expected)
    assert normalized(pg_table(pg, schema, "ev"), expected[0]) == expected


@pytest.mark.iceberg
def test_iceberg_added_columns_hold_the_sources_values(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    block = ICEBERG_SINK.format(catalog="fill_evolve", warehouse=warehouse)
    config = make_config(server, tmp_path, block, "evolve")
    run_steps(spark, config, source, STEPS)
    expected = source_table(source)
    check_values(expected)
    assert normalized(iceberg_table(warehouse, "ev"), expected[0]) == expected


def test_a_replayed_batch_fills_again_without_undoing_later_values(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    """The batch with the ALTERs runs twice (its commit removed, as after a crash between
    the sink's write and Spark's commit): the fills run again and change nothing."""
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), "evolve")
    run_steps(spark, config, source, STEPS[:1])
    commits = Path(config.checkpoint) / "spark" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    run_steps(spark, config, source, STEPS[1:])
    expected = source_table(source)
    check_values(expected)
    assert normalized(delta_table(lake / DATABASE / "ev"), expected[0]) == expected


def test_ignore_and_excluded_add_column_fill_nothing(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    config = make_config(
        server,
        tmp_path,
        DELTA_SINK.format(lake=lake),
        "evolve",
        "exclude.schema.changes: [add.column]\n",
    )
    run_steps(spark, config, source, STEPS)
    columns, rows = source_table(source)
    kept = [columns.index(c) for c in ("id", "a", "b")]
    assert normalized(delta_table(lake / DATABASE / "ev")) == (
        ["id", "a", "b"],
        sorted(tuple(r[i] for i in kept) for r in rows),
    )


def test_a_column_that_cannot_be_read_back_is_reported(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, caplog: Any
) -> None:
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), "lenient")
    steps = [
        [
            "ALTER TABLE ev ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP",
            # gone before the batch is read back; lenient keeps the sink column
            "ALTER TABLE ev DROP COLUMN ts",
        ]
    ]
    with caplog.at_level(logging.WARNING, logger="sparkcdc.pipeline.batch_writer"):
        run_steps(spark, config, source, steps)
    warned = [r.getMessage() for r in caplog.records if "cannot be read back" in r.getMessage()]
    assert len(warned) == 1 and "column ts" in warned[0] and "CURRENT_TIMESTAMP" in warned[0]
    assert "evolve_db.ev has no column ts any more" in warned[0] and "To repair" in warned[0]
    (recorded,) = Divergences(config.checkpoint).all()
    assert recorded["sink_table"] == "evolve_db.ev" and recorded["column"] == "ts"
    report = json.loads((Path(config.checkpoint) / "divergences.json").read_text())
    assert report == [recorded]


def test_console_sink_warns_that_written_messages_keep_null(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, caplog: Any
) -> None:
    config = make_config(server, tmp_path, "type: console\n", "evolve")
    with caplog.at_level(logging.WARNING, logger="sparkcdc.pipeline.batch_writer"):
        run_steps(spark, config, source, [["ALTER TABLE ev ADD COLUMN n INT DEFAULT 7"]])
    warned = [r.getMessage() for r in caplog.records if "materialize" in r.getMessage()]
    assert len(warned) == 1 and "column n (DEFAULT 7)" in warned[0]


def _idle_ids(dev_server: DevServer) -> set[int]:
    with dev_server.root_connection() as root, root.cursor() as cur:
        cur.execute(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s AND COMMAND = 'Sleep'",
            (dev_server.settings.user,),
        )
        return {int(thread) for (thread,) in cur.fetchall()}


def test_a_read_back_whose_connection_dropped_between_pages_reads_on(
    dev_server: DevServer, database: str, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The added column's read-back pages the source by key on a kept connection while the
    sink writes each page; dropped while it idles between two pages (a proxy's idle timeout,
    ``wait_timeout``, a KILL), it reads on from the next page on a new connection: every
    row once, in key order, with its value."""
    from sparkcdc.mysql.admin import catalog
    from sparkcdc.mysql.chunks import read_back as keyset
    from sparkcdc.mysql.protocol.connection import ConnectionSettings

    sql.execute("CREATE TABLE rb (id INT PRIMARY KEY, pad VARCHAR(100), n INT)")
    sql.executemany(
        "INSERT INTO rb VALUES (%s, %s, %s)", [(k, "p" * 100, k * 3) for k in range(1, 3_001)]
    )
    monkeypatch.setattr(keyset, "READ_BACK_ROWS", 500)
    with dev_server.connection(database) as conn:
        schema = catalog.load_schema(conn, database, "rb")
    columns = {c.name: c for c in schema.columns}
    s = dev_server.settings
    settings = ConnectionSettings(s.host, s.port, s.user, s.password, connect_max_retries=0)
    before = _idle_ids(dev_server)
    pages = keyset.read_column_pages(settings, schema, [columns["id"]], columns["n"])
    rows = list(next(pages))
    (reader,) = _idle_ids(dev_server) - before
    with dev_server.root_connection() as root, root.cursor() as cur:
        cur.execute(f"KILL CONNECTION {reader}")
    for page in pages:
        rows.extend(page)
    assert rows == [(k, k * 3) for k in range(1, 3_001)]
    assert reader not in _idle_ids(dev_server)
