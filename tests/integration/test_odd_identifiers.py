"""Tables and columns named with backticks, quotes, dots, spaces, unicode, ``%``, braces and
``../``: snapshotted and followed through the binlog by a pipeline into Delta, PostgreSQL (jdbc)
and the console, each sink's tables equal to the source (read back independently: delta-rs,
psycopg), nothing written outside the lake or the checkpoint, and the local state private.

Keys grow as n**4, so the splitter cuts the chunks by queries (``MAX(k) ... LIMIT``), not
arithmetically: every SQL statement of the snapshot meets the names.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipelines import fresh_database, iceberg_block, pipeline_env
from psycopg import sql as pgsql

from sparkcdc.model.identifiers import quote_mysql, quote_spark
from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc.pipeline.status import STATUS_FILE
from sparkcdc.pipeline.verify.run import verify_pipeline
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

DATABASE = "odd_names"
PG_SCHEMA = "odd_names_sink"
TABLES = (
    "back`tick",
    "quo'te\"d",
    "dot.ted",
    "sp ace",
    "ünï€ode",
    "../../escape",
    "pct%s{where}",
)
KEY, VALUE, NUMBER, WORD = "k`ey", "va'l.ue", 'sp ace "x"', "ünï"
COLUMNS = (KEY, VALUE, NUMBER, WORD)
ROWS = 30
CHUNK_SIZE = 7


def q(name: str) -> str:
    return quote_mysql(name, pyformat=True)  # these statements run with parameters


def create_source(server: DevServer) -> Any:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        for i, table in enumerate(TABLES):
            cur.execute(
                f"CREATE TABLE {q(table)} ({q(KEY)} BIGINT NOT NULL PRIMARY KEY, "
                f"{q(VALUE)} VARCHAR(40) NOT NULL, {q(NUMBER)} INT, {q(WORD)} VARCHAR(20)) "
                "CHARACTER SET utf8mb4",
                (),
            )
            cur.executemany(
                f"INSERT INTO {q(table)} VALUES (%s, %s, %s, %s)",
                [(n**4, f"{i}:{n}", n * 10, f"wört{n}") for n in range(1, ROWS + 1)],
            )
    return conn


def change_source(conn: Any) -> None:
    """Inserts, updates, deletes and a key change on every table (read from the binlog)."""
    with conn.cursor() as cur:
        for i, table in enumerate(TABLES):
            t = q(table)
            cur.executemany(
                f"INSERT INTO {t} VALUES (%s, %s, %s, %s)",
                [(10**7 + n, f"{i}:new{n}", None, "nëu") for n in range(3)],
            )
            cur.execute(f"UPDATE {t} SET {q(NUMBER)} = -{q(NUMBER)} WHERE {q(KEY)} < %s", (5**4,))
            cur.execute(f"DELETE FROM {t} WHERE {q(KEY)} IN (%s, %s)", (6**4, 20**4))
            cur.execute(f"UPDATE {t} SET {q(KEY)} = %s WHERE {q(KEY)} = %s", (10**8, 7**4))


def source_rows(conn: Any) -> dict[int, list[tuple[Any, ...]]]:
    """Table index → its rows, sorted."""
    out = {}
    with conn.cursor() as cur:
        for i, table in enumerate(TABLES):
            cur.execute(f"SELECT {', '.join(map(q, COLUMNS))} FROM {q(table)}", ())
            out[i] = sorted(tuple(row) for row in cur.fetchall())
        assert all(len(rows) == ROWS + 3 - 2 for rows in out.values()), out
    return out


def by_table(rows: list[tuple[Any, ...]]) -> dict[int, list[tuple[Any, ...]]]:
    """Rows of one sink table, under the index of the source table they came from."""
    tables = {int(str(row[1]).split(":")[0]) for row in rows}
    assert len(tables) == 1, f"one sink table holds rows of several source tables: {tables}"
    return {tables.pop(): sorted(rows)}


def pipeline(server: DevServer, tmp_path: Path, name: str, sink: str) -> PipelineConfig:
    settings = server.start()
    text = f"""
source:
  type: mysql
  hostname: {settings.host}
  port: {settings.port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {DATABASE}.\\.*
  server-id: 5930-5939
  scan.incremental.snapshot.chunk.size: {CHUNK_SIZE}
  scan.incremental.snapshot.chunks-per-batch: 0
sink:
{sink}
pipeline:
  name: {name}
  checkpoint: {tmp_path / "checkpoint"}
  trigger.interval: 200ms
"""
    return parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)


def run_twice(config: PipelineConfig, spark: Any, source: Any) -> None:
    """The snapshot, then the changes from the binlog (each run until caught up)."""
    first = run_pipeline(config, available_now=True, spark=spark)
    assert first.total_rows >= len(TABLES) * ROWS, first
    change_source(source)
    second = run_pipeline(config, available_now=True, spark=spark)
    assert second.total_rows > 0, "the binlog changes never arrived"


def assert_private_state(checkpoint: Path) -> None:
    """Staged chunks, plans, schema history and status: 0600 files in 0700 directories."""
    status = checkpoint / STATUS_FILE
    assert stat.S_IMODE(status.stat().st_mode) == 0o600
    state = checkpoint / "source-state"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" and "chunks" in p.parts for p in files), files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for path in [state, *[p for p in state.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    # every table's state is one directory right under chunks/ and plan/ (no '..' escaped)
    stream = next(p for p in state.iterdir() if p.name.startswith("mysql-cdc_"))
    for area in ("chunks", "plan"):
        names = sorted(p.name for p in (stream / area).iterdir())
        assert len(names) == len(TABLES), names


def assert_nothing_outside(tmp_path: Path, *inside: Path) -> None:
    for path in tmp_path.rglob("*"):
        assert any(path == p or p in path.parents for p in inside), path
    assert not Path("/escape").exists()


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = create_source(server)
    yield conn
    conn.close()


def test_odd_names_into_delta(spark: Any, server: DevServer, source: Any, tmp_path: Path) -> None:
    import deltalake
    import pyarrow as pa

    lake = tmp_path / "lake"
    config = pipeline(server, tmp_path, "odd-delta", f"  type: delta\n  path: {lake}")
    run_twice(config, spark, source)

    tables = sorted(p.parent for p in lake.rglob("_delta_log"))
    assert len(tables) == len(TABLES), tables
    names = ", ".join('"' + c.replace('"', '""') + '"' for c in COLUMNS)
    found: dict[int, list[tuple[Any, ...]]] = {}
    for path in tables:
        assert lake in path.parents
        reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
        frame = pa.table(reader.execute(f"SELECT {names} FROM t").read_all())
        found.update(by_table([tuple(r.values()) for r in frame.to_pylist()]))
    assert found == source_rows(source)
    assert_private_state(tmp_path / "checkpoint")
    assert_nothing_outside(tmp_path, lake, tmp_path / "checkpoint")
    # verify's chunked SQL over the same names agrees (and finds a row taken away)
    report = verify_pipeline(config, spark=spark, timeout_s=30)
    assert report.equal and len(report.to_json(5)["tables"]) == len(TABLES), report.to_json(5)
    spark.sql(
        f"DELETE FROM delta.{quote_spark(str(tables[0]))} WHERE {quote_spark(KEY)} = {ROWS**4}"
    )
    report = verify_pipeline(config, spark=spark, timeout_s=30)
    assert not report.equal


def test_odd_names_into_postgresql(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    pg = DevPostgres.from_env()
    pg.start()
    drop = pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(PG_SCHEMA))
    with pg.connection() as conn:
        conn.execute(drop)
    sink = (
        f"  type: jdbc\n  url: jdbc:postgresql://127.0.0.1:{pg.port}/sink_db\n"
        f"  username: cdc\n  password: ${{SPARKCDC_TEST_PG_PASSWORD}}\n  schema: {PG_SCHEMA}"
    )
    config = pipeline(server, tmp_path, "odd-jdbc", sink)
    run_twice(config, spark, source)

    found: dict[int, list[tuple[Any, ...]]] = {}
    with pg.connection() as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name <> 'sparkcdc_commits'",
                (PG_SCHEMA,),
            ).fetchall()
        ]
        assert len(tables) == len(TABLES), tables
        for table in tables:
            query = pgsql.SQL("SELECT {} FROM {}.{}").format(
                pgsql.SQL(", ").join(pgsql.Identifier(c) for c in COLUMNS),
                pgsql.Identifier(PG_SCHEMA),
                pgsql.Identifier(table),
            )
            found.update(by_table([tuple(r) for r in conn.execute(query).fetchall()]))
        conn.execute(drop)
    assert found == source_rows(source)
    assert_private_state(tmp_path / "checkpoint")


@pytest.mark.iceberg
def test_odd_names_into_iceberg(spark: Any, server: DevServer, source: Any, tmp_path: Path) -> None:
    block, catalog = iceberg_block(tmp_path)
    config = pipeline(server, tmp_path, "odd-iceberg", block)
    run_twice(config, spark, source)

    found: dict[int, list[tuple[Any, ...]]] = {}
    for table in TABLES:
        # the sink table is 'odd_names.<table>': its last dot separates namespace and name
        namespace, _, name = f"{DATABASE}.{table}".rpartition(".")
        parts = (catalog, *[p for p in namespace.split(".") if p], name)
        frame = spark.table(".".join(quote_spark(p) for p in parts))
        found.update(
            by_table([tuple(r) for r in frame.select(*map(quote_spark, COLUMNS)).collect()])
        )
    assert found == source_rows(source)
    warehouse = tmp_path / "warehouse"
    assert_nothing_outside(tmp_path, warehouse, tmp_path / "checkpoint")


def test_odd_names_to_the_console(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, capsys: Any
) -> None:
    config = pipeline(server, tmp_path, "odd-console", "  type: console\n  rows: 100")
    run_twice(config, spark, source)
    shown = capsys.readouterr().out
    for i, table in enumerate(TABLES):
        assert f"{DATABASE}.{table} <- " in shown, table
        # a snapshot row and a binlog row of every table (values are short: shown whole)
        assert f"{i}:{ROWS}" in shown and f"{i}:new2" in shown, (table, shown[-3000:])
    assert_private_state(tmp_path / "checkpoint")
    assert os.path.isdir(tmp_path / "checkpoint")
