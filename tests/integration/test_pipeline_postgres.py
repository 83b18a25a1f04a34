"""A pipeline whose source is PostgreSQL (``source: type: postgres``, issue 59): the
snapshot, then inserts, an update that changes the key, deletes and a column added while
the stream runs, into Delta and into PostgreSQL-as-sink (the jdbc sink, into the test
server's ``sink_db``); the sink table equals the source's SELECT and ``verify`` says so.
An unknown PostgreSQL option is named."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from sparkcdc.cli.inspect import status, validate
from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.verify.run import verify_pipeline
from sparkcdc_dev.devpostgres import DevPostgres

pytestmark = pytest.mark.integration

SINKS = {
    "delta": "sink:\n  type: delta\n  path: {lake}",
    "jdbc": (
        "sink:\n  type: jdbc\n  url: jdbc:postgresql://{host}:{port}/sink_db\n"
        "  username: {user}\n  password: ${{PG_TEST_PASSWORD}}\n  schema: {database}"
    ),
}

PIPELINE = """
source:
  type: postgres
  hostname: {host}
  port: {port}
  username: {user}
  password: ${{PG_TEST_PASSWORD}}
  database-name: {database}
  tables: public.items
  slot.name: {slot}
  scan.incremental.snapshot.chunk.size: 40
{more}{sink}
pipeline:
  name: pg-delta
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""


@pytest.fixture
def database(pg: DevPostgres) -> Iterator[str]:
    with pg.scratch_database("pgpipe") as name:
        yield name


def config_text(
    pg: DevPostgres, database: str, tmp_path: Path, sink: str = "delta", **more: str
) -> str:
    s = pg.settings
    text = PIPELINE.replace("{sink}", SINKS[sink]).format(
        more="".join(f"  {k}: {v}\n" for k, v in more.items()),
        host=s.host,
        port=s.port,
        user=s.user,
        database=database,
        slot=f"slot_{database}",
        lake=tmp_path / "lake",
        checkpoint=tmp_path / "checkpoint",
    )
    return text


def source_rows(pg: DevPostgres, database: str, columns: str) -> list[tuple[Any, ...]]:
    with pg.connection(database) as conn:
        rows = conn.execute(f"SELECT {columns} FROM items").fetchall()
    return sorted((int(r[0]), *[None if v is None else str(v) for v in r[1:]]) for r in rows)


def sink_rows(
    spark: Any, pg: DevPostgres, sink: str, database: str, tmp_path: Path, columns: str
) -> list[tuple[Any, ...]]:
    """The sink table's rows: Delta read with Spark, the jdbc sink's with psycopg."""
    if sink == "delta":
        path = tmp_path / "lake" / "public" / "items"
        rows = spark.read.format("delta").load(str(path)).selectExpr(*columns.split(", "))
        found = [tuple(r) for r in rows.collect()]
    else:
        query = sql.SQL("SELECT {} FROM {}.items").format(
            sql.SQL(columns), sql.Identifier(database)
        )
        with pg.connection() as conn:
            found = conn.execute(query).fetchall()
    return sorted((int(r[0]), *[None if v is None else str(v) for v in r[1:]]) for r in found)


@pytest.fixture
def sink_schema(pg: DevPostgres, database: str) -> Iterator[None]:
    """The jdbc sink's tables land in a schema of ``sink_db`` named as the source database."""
    yield
    with pg.connection() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(database)))


@pytest.mark.parametrize("sink", ["delta", "jdbc"])
@pytest.mark.usefixtures("sink_schema")
def test_a_postgres_pipeline_equals_the_source(
    spark: Any,
    pg: DevPostgres,
    database: str,
    tmp_path: Path,
    sink: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pg.connection(database) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty numeric(10,2))")
        conn.execute(
            "INSERT INTO items SELECT i, 'item ' || i, i * 1.25 FROM generate_series(1, 300) i"
        )
    env = {**os.environ, "PG_TEST_PASSWORD": pg.settings.password}
    config = parse_pipeline(config_text(pg, database, tmp_path, sink), env=env, base_dir=tmp_path)
    first = run_pipeline(config, available_now=True, spark=spark)
    assert first.batches >= 1
    columns = "id, name, qty"
    assert sink_rows(spark, pg, sink, database, tmp_path, columns) == source_rows(
        pg, database, columns
    )

    with pg.connection(database) as conn:
        # a column added while no run reads, before any row change of the table: the WAL
        # tells it only as the next run's first column list (DESIGN.md §12.2)
        conn.execute("ALTER TABLE items ADD COLUMN early int")
        conn.execute("INSERT INTO items SELECT i, 'new ' || i, 1 FROM generate_series(301, 320) i")
        conn.execute("UPDATE items SET id = 1000 + id, name = 'moved' WHERE id <= 10")
        conn.execute("UPDATE items SET qty = qty + 1 WHERE id BETWEEN 50 AND 60")
        conn.execute("DELETE FROM items WHERE id BETWEEN 100 AND 120")
        # a column added mid-stream: the rows it finds hold its DEFAULT, which the WAL lacks
        conn.execute("ALTER TABLE items ADD COLUMN note text DEFAULT 'old'")
        conn.execute(
            "INSERT INTO items (id, name, qty, note, early) VALUES (2000, 'after', 3, 'fresh', 7)"
        )
        conn.execute("UPDATE items SET note = 'changed' WHERE id = 200")
    run_pipeline(config, available_now=True, spark=spark)

    columns = "id, name, qty, note, early"
    expected = source_rows(pg, database, columns)
    assert len(expected) == 300 + 20 - 21 + 1
    assert sink_rows(spark, pg, sink, database, tmp_path, columns) == expected
    report = verify_pipeline(config, spark=spark, timeout_s=30)
    assert report.equal, report.text(20)

    # status reads the committed WAL position with the source's own offset key
    file = tmp_path / "pipeline.yaml"
    file.write_text(config_text(pg, database, tmp_path, sink))
    monkeypatch.setenv("PG_TEST_PASSWORD", pg.settings.password)
    assert status(str(file)) == 0
    shown = capsys.readouterr().out
    assert "phase: wal" in shown and "wal position: " in shown and "bytes)" in shown, shown


def test_an_unknown_postgres_option_is_named(pg: DevPostgres, tmp_path: Path) -> None:
    text = config_text(pg, "shop", tmp_path, **{"slot.nmae": "x"})
    with pytest.raises(
        ConfigError, match=r"source\.slot\.nmae: unknown key\. Did you mean 'slot\.name'"
    ):
        parse_pipeline(text, env={"PG_TEST_PASSWORD": "x"}, base_dir=tmp_path)


def test_check_validates_a_postgres_source(
    pg: DevPostgres,
    database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pg.connection(database) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        conn.execute("ALTER TABLE items REPLICA IDENTITY FULL")
    file = tmp_path / "pipeline.yaml"
    file.write_text(config_text(pg, database, tmp_path))
    monkeypatch.setenv("PG_TEST_PASSWORD", pg.settings.password)
    assert validate(str(file)) == 0
    s = pg.settings
    shown = capsys.readouterr().out
    assert f"source {s.user}@{s.host}:{s.port}/{database}: ready for CDC" in shown, shown
    assert "public.items <- public.items: key (id)" in shown
