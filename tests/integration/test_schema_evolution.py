"""Schema evolution end to end: DDL on the source while a pipeline runs, into a real sink.

One scenario drives every column change (add, rename, type change, drop) with rows written
before and after each statement in the same batch (one AvailableNow run is one batch) and
across batches; each test states the sink table it expects — columns and rows — for one
behaviour and one sink, read back independently of the sink (delta-rs, psycopg, a consumer).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pipelines import fresh_database
from psycopg import sql

from sparkcdc.errors import SinkError, SparkCdcError
from sparkcdc.pipeline.config import PipelineConfig, parse_pipeline
from sparkcdc.pipeline.runner import RunSummary, run_pipeline
from sparkcdc_dev.devpostgres import DEV_PASSWORD as PG_PASSWORD
from sparkcdc_dev.devpostgres import DevPostgres
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

DATABASE = "evolve_db"
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: {password}
  tables: {database}.ev
  server-id: 5900-5909
sink:
{sink}
pipeline:
  name: evolve-{behavior}
  checkpoint: {checkpoint}
  trigger.interval: 200ms
  schema.change.behavior: {behavior}
"""
Row = tuple[Any, ...]

# (statements, then run a batch): rows before and after each DDL inside one batch, then a DDL
# whose rows come in the next batch
STEPS: list[list[str]] = [
    [
        "INSERT INTO ev VALUES (3, 'b3', 3, 3)",
        "ALTER TABLE ev ADD COLUMN e INT",
        "INSERT INTO ev VALUES (4, 'b4', 4, 4, 40)",
        "UPDATE ev SET e = 10 WHERE id = 1",
        "ALTER TABLE ev RENAME COLUMN b TO bb",
        "UPDATE ev SET bb = 'x2' WHERE id = 2",
        "ALTER TABLE ev MODIFY c BIGINT",
        "INSERT INTO ev VALUES (5, 'b5', 5000000000, 5, 50)",
        "ALTER TABLE ev DROP COLUMN d",
        "INSERT INTO ev VALUES (6, 'b6', 6, 60)",
    ],
    ["ALTER TABLE ev ADD COLUMN f VARCHAR(5)"],
    ["INSERT INTO ev VALUES (7, 'b7', 7, 70, 'f7')", "UPDATE ev SET f = 'f1' WHERE id = 1"],
]

# What the sink holds at the end, per behaviour: its columns (in order), then its rows.
EXPECTED: dict[str, tuple[list[str], list[Row]]] = {
    # the sink follows the source exactly
    "evolve": (
        ["id", "bb", "c", "e", "f"],
        [
            (1, "b1", 1, 10, "f1"),
            (2, "x2", 2, None, None),
            (3, "b3", 3, None, None),
            (4, "b4", 4, 40, None),
            (5, "b5", 5000000000, 50, None),
            (6, "b6", 6, 60, None),
            (7, "b7", 7, 70, "f7"),
        ],
    ),
    # nothing is dropped: b and d stay and get NULLs from rows written after their change; the
    # type change of c adds c_bigint, which rows written after it fill
    "lenient": (
        ["id", "b", "c", "d", "e", "bb", "c_bigint", "f"],
        [
            (1, None, None, None, 10, "b1", 1, "f1"),
            (2, None, 2, 2, None, "x2", None, None),
            (3, "b3", 3, 3, None, None, None, None),
            (4, "b4", 4, 4, 40, None, None, None),
            (5, None, None, 5, 50, "b5", 5000000000, None),
            (6, None, None, None, 60, "b6", 6, None),
            (7, None, None, None, 70, "b7", 7, "f7"),
        ],
    ),
    # the sink keeps its first shape; a renamed or dropped column gets NULLs, a value that no
    # longer fits the old type too
    "ignore": (
        ["id", "b", "c", "d"],
        [
            (1, None, 1, None),
            (2, None, 2, 2),
            (3, "b3", 3, 3),
            (4, "b4", 4, 4),
            (5, None, None, 5),
            (6, None, 6, None),
            (7, None, 7, None),
        ],
    ),
}
EXPECTED["try_evolve"] = EXPECTED["evolve"]  # every change here is one the sinks can make
INITIAL: tuple[list[str], list[Row]] = (["id", "b", "c", "d"], [(1, "b1", 1, 1), (2, "b2", 2, 2)])


@pytest.fixture
def source(server: DevServer) -> Iterator[Any]:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE ev (id INT PRIMARY KEY, b VARCHAR(20), c INT, d INT)")
        cur.execute("INSERT INTO ev VALUES (1, 'b1', 1, 1), (2, 'b2', 2, 2)")
    yield conn
    conn.close()


def make_config(
    server: DevServer,
    tmp_path: Path,
    sink: str,
    behavior: str,
    extra_sink: str = "",
    extra_source: str = "",
    tables: str = "ev",
) -> PipelineConfig:
    settings = server.start()
    block = "\n".join(f"  {line}" for line in (sink + extra_sink).strip().splitlines())
    text = PIPELINE.replace("  server-id:", f"{extra_source}  server-id:").format(
        host=settings.host,
        port=settings.port,
        password=DEV_PASSWORD,
        database=DATABASE,
        sink=block,
        behavior=behavior,
        checkpoint=tmp_path / f"checkpoint-{behavior}",
    )
    captured = ",".join(f"{DATABASE}.{t}" for t in tables.split(","))
    text = text.replace(f"tables: {DATABASE}.ev\n", f"tables: {captured}\n")
    return parse_pipeline(text, env=dict(os.environ))


def execute(conn: Any, statements: list[str]) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def run_steps(
    spark: Any, config: PipelineConfig, conn: Any, steps: list[list[str]] = STEPS
) -> RunSummary:
    summary = run_pipeline(config, available_now=True, spark=spark)  # the snapshot
    for statements in steps:
        execute(conn, statements)
        summary = run_pipeline(config, available_now=True, spark=spark)
    return summary


def plain(value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, bytes | str):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


# ----------------------------------------------------------------------------- delta


def delta_table(path: Path) -> tuple[list[str], list[Row]]:
    """Columns and rows of a Delta table, read with delta-rs (not with Spark); its
    DataFusion reader knows column mapping, which renaming and dropping columns turn on."""
    import deltalake

    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
    table = pa.table(reader.execute("SELECT * FROM t").read_all())
    columns = table.column_names
    rows = sorted(tuple(plain(v) for v in row.values()) for row in table.to_pylist())
    return columns, rows


DELTA_SINK = "type: delta\npath: {lake}\n"


@pytest.mark.parametrize("behavior", ["evolve", "try_evolve", "lenient", "ignore"])
def test_delta_follows_column_changes_by_behavior(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, behavior: str
) -> None:
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), behavior)
    last = run_steps(spark, config, source)
    assert delta_table(lake / DATABASE / "ev") == EXPECTED[behavior]
    # the last run wrote binlog changes committed moments before
    assert last.event_lag_s is not None and 0 <= last.event_lag_s < 120


def test_delta_exception_stops_before_writing_the_batch_and_evolve_goes_on(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), "exception")
    run_pipeline(config, available_now=True, spark=spark)
    execute(source, STEPS[0])
    with pytest.raises(SinkError, match=r"evolve_db\.ev at seq \d+ .*ADD COLUMN e.*'exception'"):
        run_pipeline(config, available_now=True, spark=spark)
    # nothing of the batch that holds the change reached the sink
    assert delta_table(lake / DATABASE / "ev") == INITIAL
    # the same checkpoint, now with evolve: the batch is replayed and the sink catches up
    evolving = config.model_copy(
        update={"pipeline": config.pipeline.model_copy(update={"schema_change_behavior": "evolve"})}
    )
    run_pipeline(evolving, available_now=True, spark=spark)  # the batch left open
    run_pipeline(evolving, available_now=True, spark=spark)
    for statements in STEPS[1:]:
        execute(source, statements)
        run_pipeline(evolving, available_now=True, spark=spark)
    assert delta_table(lake / DATABASE / "ev") == EXPECTED["evolve"]


# ------------------------------------------------------------------------------ jdbc


def pg_table(pg: DevPostgres, schema: str, table: str) -> tuple[list[str], list[Row]]:
    """Columns (in order) and rows of a PostgreSQL table, read with psycopg (none and none:
    no such table)."""
    with pg.connection() as conn:
        columns = [
            str(r[0])
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s ORDER BY ordinal_position",
                (schema, table),
            ).fetchall()
        ]
        if not columns:
            return [], []  # no such table
        query = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        rows = sorted(tuple(plain(v) for v in row) for row in conn.execute(query).fetchall())
    return columns, rows


JDBC_SINK = """type: jdbc
url: jdbc:postgresql://127.0.0.1:{port}/sink_db
username: cdc
password: {password}
schema: {schema}
"""


def jdbc_sink(pg: DevPostgres, schema: str) -> str:
    """The sink block for a fresh (dropped) PostgreSQL schema."""
    with pg.connection() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return JDBC_SINK.format(port=pg.settings.port, password=PG_PASSWORD, schema=schema)


@pytest.mark.parametrize("behavior", ["evolve", "lenient", "ignore"])
def test_jdbc_postgresql_follows_column_changes_by_behavior(
    spark: Any, server: DevServer, source: Any, pg: DevPostgres, tmp_path: Path, behavior: str
) -> None:
    schema = f"evolve_{behavior}"
    block = jdbc_sink(pg, schema)
    config = make_config(server, tmp_path, block, behavior)
    run_steps(spark, config, source)
    assert pg_table(pg, schema, "ev") == EXPECTED[behavior]


# --------------------------------------------------------------------------- iceberg


def iceberg_table(warehouse: Path, table: str) -> tuple[list[str], list[Row]]:
    """Columns and rows of a hadoop-catalog Iceberg table, read with pyiceberg."""
    from pyiceberg.table import StaticTable

    folder = warehouse / DATABASE / table / "metadata"
    version = (folder / "version-hint.text").read_text().strip()
    arrow = StaticTable.from_metadata(str(folder / f"v{version}.metadata.json")).scan().to_arrow()
    rows = sorted(tuple(plain(v) for v in row.values()) for row in arrow.to_pylist())
    return arrow.column_names, rows


ICEBERG_SINK = """type: iceberg
catalog.name: {catalog}
catalog.properties.warehouse: {warehouse}
"""


@pytest.mark.iceberg
@pytest.mark.parametrize("behavior", ["evolve", "lenient"])
def test_iceberg_follows_column_changes_by_behavior(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, behavior: str
) -> None:
    warehouse = tmp_path / "warehouse"
    block = ICEBERG_SINK.format(catalog=f"evolve_{behavior}", warehouse=warehouse)
    config = make_config(server, tmp_path, block, behavior)
    run_steps(spark, config, source)
    assert iceberg_table(warehouse, "ev") == EXPECTED[behavior]


# ----------------------------------------------------------------------------- kafka


KAFKA_SINK = """type: kafka
properties.bootstrap.servers: {servers}
value.format: changelog-json
topic: {topic}
"""


def replayed(messages: list[Any], columns: list[str]) -> list[Row]:
    """The rows the changelog leaves, each in ``columns`` (a column a message lacks: NULL)."""
    state: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.value["op"] in ("+I", "+U"):
            state[message.key] = message.value["data"]
        else:
            state.pop(message.key, None)
    return sorted(tuple(plain(data.get(c)) for c in columns) for data in state.values())


@pytest.mark.parametrize("behavior", ["evolve", "lenient"])
def test_kafka_messages_carry_the_new_shape(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, behavior: str
) -> None:
    from test_pipeline_kafka import consume

    from sparkcdc_dev.devkafka import DevKafka

    servers = DevKafka.from_env().start()
    topic = f"evolve-{behavior}-{uuid.uuid4().hex[:8]}"
    config = make_config(
        server, tmp_path, KAFKA_SINK.format(servers=servers, topic=topic), behavior
    )
    run_steps(spark, config, source)
    messages = consume(servers, topic)
    columns, rows = EXPECTED[behavior]
    assert replayed(messages, columns) == rows
    # the first batch's messages have the first shape, the last one's the final shape
    assert set(messages[0].value["data"]) == {"id", "b", "c", "d"}
    assert set(messages[-1].value["data"]) == set(columns)


# ------------------------------------------------------------- DDL during the snapshot

SNAPSHOT_DDL = [
    "ALTER TABLE snap ADD COLUMN e INT",
    "ALTER TABLE snap RENAME COLUMN b TO bb",
    "ALTER TABLE snap DROP COLUMN c",
    "ALTER TABLE snap MODIFY e BIGINT",
]


def snapshot_writer(
    server: DevServer, batches: threading.Semaphore, stop: threading.Event, seed: int
) -> None:
    """Random writes all along; after every second batch, at a random moment, the next DDL
    (so it lands sometimes before a batch is planned, sometimes between planning and the
    chunk reads, sometimes during them)."""
    rng = random.Random(seed)
    conn = server.connection(DATABASE)
    conn.autocommit(True)
    pending = list(SNAPSHOT_DDL)
    seen = 0
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                if pending and batches.acquire(timeout=0.01):
                    seen += 1
                    if seen % 2 == 0:
                        stop.wait(rng.random() * 0.4)
                        cur.execute(pending.pop(0))
                cur.execute("SHOW COLUMNS FROM snap")
                columns = {r[0] for r in cur.fetchall()}
                key = rng.randint(1, 400)
                value = rng.randint(0, 10**6)
                sets = [f"{c} = %s" for c in ("c", "e") if c in columns]
                text = "bb" if "bb" in columns else "b"
                choice = rng.random()
                if choice < 0.6 and sets:
                    cur.execute(
                        f"UPDATE snap SET {', '.join(sets)}, {text} = %s WHERE id = %s",
                        (*[value] * len(sets), f"v{value}", key),
                    )
                elif choice < 0.9:
                    cur.execute(
                        f"INSERT IGNORE INTO snap (id, {text}) VALUES (%s, %s)", (key, f"n{key}")
                    )
                else:
                    cur.execute("DELETE FROM snap WHERE id = %s", (key,))
                stop.wait(0.01)
    finally:
        conn.close()


def test_ddl_during_the_snapshot_comes_out_right(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    with source.cursor() as cur:
        cur.execute("CREATE TABLE snap (id INT PRIMARY KEY, b VARCHAR(20), c INT)")
        cur.executemany(
            "INSERT INTO snap VALUES (%s, %s, %s)", [(i, f"b{i}", i) for i in range(1, 301)]
        )
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), "evolve")
    config = config.model_copy(
        update={
            "source": config.source.model_copy(
                update={"tables": f"{DATABASE}.snap", "chunk_size": 20, "chunks_per_batch": 1}
            )
        }
    )
    batches = threading.Semaphore(0)
    stop = threading.Event()
    writer = threading.Thread(target=snapshot_writer, args=(server, batches, stop, 7))
    writer.start()
    try:
        run_pipeline(
            config, available_now=True, spark=spark, on_batch=lambda b, r: batches.release()
        )
    finally:
        stop.set()
        writer.join()
    run_pipeline(config, available_now=True, spark=spark)
    with source.cursor() as cur:
        cur.execute("SHOW COLUMNS FROM snap")
        columns = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT * FROM snap")
        rows = sorted(tuple(r) for r in cur.fetchall())
    assert columns == ["id", "bb", "e"], "the writer did not get to every DDL"
    assert delta_table(lake / DATABASE / "snap") == (columns, rows)


def test_a_chunk_that_brings_a_schema_change_stops_the_one_pass_append(
    spark: Any, server: DevServer, source: Any, tmp_path: Path, caplog: Any
) -> None:
    """A batch the source planned as one table's snapshot chunks alone is appended in one
    pass, its rows counted as they are written. In snapshot mode the binlog position never
    moves, so each chunk read after an ALTER brings the ALTER with it, which only the read
    finds: the one-pass append stops before it commits, and the batch is written the general
    way (the column added, then the rows). The Delta table equals the source."""
    import logging

    caplog.set_level(logging.DEBUG, logger="sparkcdc.pipeline.batch_writer")
    with source.cursor() as cur:
        cur.execute("CREATE TABLE onepass (id INT PRIMARY KEY, b VARCHAR(20))")
        cur.executemany(
            "INSERT INTO onepass VALUES (%s, %s)", [(i, f"b{i}") for i in range(1, 101)]
        )
    lake = tmp_path / "lake"
    config = make_config(
        server,
        tmp_path,
        DELTA_SINK.format(lake=lake),
        "evolve",
        extra_source="  scan.startup.mode: snapshot\n"
        "  scan.incremental.snapshot.chunk.size: 20\n"
        "  scan.incremental.snapshot.chunks-per-batch: 1\n",
        tables="onepass",
    )
    counted: dict[int, dict[str, int]] = {}

    def on_batch(batch_id: int, rows: dict[str, int]) -> None:
        counted[batch_id] = rows
        if batch_id == 1:
            with source.cursor() as cur:
                cur.execute("ALTER TABLE onepass ADD COLUMN c INT NOT NULL DEFAULT 7")
                cur.execute("UPDATE onepass SET c = id WHERE id > 90")

    run_pipeline(config, available_now=True, spark=spark, on_batch=on_batch)
    with source.cursor() as cur:
        cur.execute("SELECT * FROM onepass")
        rows = sorted(tuple(r) for r in cur.fetchall())
    assert delta_table(lake / DATABASE / "onepass") == (["id", "b", "c"], rows)
    assert sum(n for batch in counted.values() for n in batch.values()) == 100
    one_pass = {
        r.getMessage().split(":")[0] for r in caplog.records if "one pass" in r.getMessage()
    }
    stopped = [r.getMessage() for r in caplog.records if "one-pass append" in r.getMessage()]
    assert one_pass == {"batch 0", "batch 1"}, "only the batches before the ALTER took one pass"
    assert stopped, "a batch after it began one pass and was written the general way"


# ---------------------------------------------------------- truncate, drop and create


@pytest.mark.parametrize(
    ("behavior", "exclude", "expected"),
    [
        ("evolve", "", [(10, "b10", 10, 10)]),
        # lenient does not forward truncate.table by default ...
        ("lenient", "", [(1, "b1", 1, 1), (2, "b2", 2, 2), (3, "b3", 3, 3), (10, "b10", 10, 10)]),
        # ... unless exclude.schema.changes is set: then it excludes only what it names
        ("lenient", "exclude.schema.changes: [drop.table]\n", [(10, "b10", 10, 10)]),
        # and evolve forwards everything but what is excluded
        (
            "evolve",
            "exclude.schema.changes: [truncate]\n",
            [(1, "b1", 1, 1), (2, "b2", 2, 2), (3, "b3", 3, 3), (10, "b10", 10, 10)],
        ),
    ],
    ids=["evolve", "lenient", "lenient-exclude-drop-table", "evolve-exclude-truncate"],
)
def test_delta_truncate_by_behavior(
    spark: Any,
    server: DevServer,
    source: Any,
    tmp_path: Path,
    behavior: str,
    exclude: str,
    expected: list[Row],
) -> None:
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), behavior, exclude)
    steps = [
        [
            "INSERT INTO ev VALUES (3, 'b3', 3, 3)",
            "TRUNCATE TABLE ev",
            "INSERT INTO ev VALUES (10, 'b10', 10, 10)",
        ]
    ]
    run_steps(spark, config, source, steps)
    assert delta_table(lake / DATABASE / "ev") == (INITIAL[0], expected)


RECREATE = "CREATE TABLE ev (id INT PRIMARY KEY, z VARCHAR(5))"


@pytest.mark.parametrize(
    ("behavior", "recreate", "expected"),
    [
        ("evolve", ["DROP TABLE ev", RECREATE], (["id", "z"], [(1, "z1")])),
        # the captured table is the second one the statement drops
        ("evolve", ["DROP TABLE aux, ev", RECREATE], (["id", "z"], [(1, "z1")])),
        # MariaDB's CREATE OR REPLACE: a drop and a create in one statement
        (
            "evolve",
            ["CREATE OR REPLACE TABLE ev (id INT PRIMARY KEY, z VARCHAR(5))"],
            (["id", "z"], [(1, "z1")]),
        ),
        # the drop is not forwarded (every row stays); the re-created table's columns are
        # added to the old ones
        (
            "lenient",
            ["DROP TABLE ev", RECREATE],
            (
                ["id", "b", "c", "d", "z"],
                [(1, None, None, None, "z1"), (2, "b2", 2, 2, None), (3, "b3", 3, 3, None)],
            ),
        ),
    ],
    ids=["evolve-drop", "evolve-drop-second", "evolve-create-or-replace", "lenient-drop"],
)
def test_jdbc_drop_and_create_table_by_behavior(
    spark: Any,
    server: DevServer,
    source: Any,
    pg: DevPostgres,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    behavior: str,
    recreate: list[str],
    expected: tuple[list[str], list[Row]],
) -> None:
    schema = "recreate_" + request.node.callspec.id.replace("-", "_")
    block = jdbc_sink(pg, schema)
    config = make_config(server, tmp_path, block, behavior)
    steps = [
        [
            "CREATE TABLE IF NOT EXISTS aux (id INT PRIMARY KEY)",  # not captured
            "INSERT INTO ev VALUES (3, 'b3', 3, 3)",
            *recreate,
            "INSERT INTO ev VALUES (1, 'z1')",
        ]
    ]
    run_steps(spark, config, source, steps)
    assert pg_table(pg, schema, "ev") == expected


@pytest.mark.parametrize("behavior", ["evolve", "lenient"])
def test_jdbc_a_table_dropped_while_the_pipeline_was_stopped_is_dropped_by_behavior(
    spark: Any,
    server: DevServer,
    source: Any,
    pg: DevPostgres,
    tmp_path: Path,
    behavior: str,
) -> None:
    """A captured table dropped between two runs is in neither the next run's capture nor
    its plan: its DROP reaches its sink table all the same, as if the pipeline had run
    (evolve drops it, lenient keeps its rows), and later runs go on. Before, the sink table
    stayed, rows and all, under every behaviour."""
    schema = f"gone_{behavior}"
    execute(
        source, ["CREATE TABLE gone (id INT PRIMARY KEY, v INT)", "INSERT INTO gone VALUES (1, 1)"]
    )
    config = make_config(server, tmp_path, jdbc_sink(pg, schema), behavior, tables="ev,gone")
    steps = [
        ["DROP TABLE gone", "INSERT INTO ev VALUES (3, 'b3', 3, 3)"],
        ["INSERT INTO ev VALUES (4, 'b4', 4, 4)"],
    ]
    run_steps(spark, config, source, steps)
    rows = [(1, "b1", 1, 1), (2, "b2", 2, 2), (3, "b3", 3, 3), (4, "b4", 4, 4)]
    assert pg_table(pg, schema, "ev") == (["id", "b", "c", "d"], rows)
    kept = pg_table(pg, schema, "gone")
    assert kept == ((["id", "v"], [(1, 1)]) if behavior == "lenient" else ([], []))


# ------------------------------------------------ a change the sink refuses: try_evolve

RETYPE = [
    ["ALTER TABLE ev MODIFY c VARCHAR(20)", "INSERT INTO ev VALUES (3, 'b3', 'x3', 3)"],
]


@pytest.mark.iceberg
def test_iceberg_refusing_a_type_change_stops_evolve_with_what_to_do(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    block = ICEBERG_SINK.format(catalog="retype_evolve", warehouse=tmp_path / "warehouse")
    config = make_config(server, tmp_path, block, "evolve")
    with pytest.raises(
        SinkError,
        match=r"cannot change column c from INT to STRING in evolve_db\.ev.*lenient or try_evolve",
    ):
        run_steps(spark, config, source, RETYPE)


@pytest.mark.iceberg
def test_iceberg_refusing_a_type_change_is_lenient_under_try_evolve(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    block = ICEBERG_SINK.format(catalog="retype_try", warehouse=warehouse)
    config = make_config(server, tmp_path, block, "try_evolve")
    run_steps(spark, config, source, RETYPE)
    assert iceberg_table(warehouse, "ev") == (
        ["id", "b", "c", "d", "c_string"],
        [(1, "b1", 1, 1, None), (2, "b2", 2, 2, None), (3, "b3", None, 3, "x3")],
    )


def test_kafka_debezium_json_with_schema_carries_each_change(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    from test_pipeline_kafka import consume

    from sparkcdc_dev.devkafka import DevKafka

    servers = DevKafka.from_env().start()
    topic = f"evolve-schema-{uuid.uuid4().hex[:8]}"
    block = (
        KAFKA_SINK.format(servers=servers, topic=topic).replace("changelog-json", "debezium-json")
        + "debezium-json.include-schema.enabled: true\n"
    )
    config = make_config(server, tmp_path, block, "evolve")
    run_steps(spark, config, source)
    messages = consume(servers, topic)

    def fields(value: dict[str, Any]) -> dict[str, str]:
        after = next(f for f in value["schema"]["fields"] if f["field"] == "after")
        return {f["field"]: f["type"] for f in after["fields"]}

    state: dict[str, dict[str, Any]] = {}
    for message in messages:
        payload = message.value["payload"]
        if payload["after"] is not None:
            # the schema describes exactly the columns the payload has
            assert set(payload["after"]) == set(fields(message.value))
            state[message.key] = payload["after"]
        else:
            state.pop(message.key, None)
    columns, rows = EXPECTED["evolve"]
    assert sorted(tuple(plain(d.get(c)) for c in columns) for d in state.values()) == rows
    assert fields(messages[0].value) == {"id": "int32", "b": "string", "c": "int32", "d": "int32"}
    assert fields(messages[-1].value) == {
        "id": "int32",
        "bb": "string",
        "c": "int64",
        "e": "int32",
        "f": "string",
    }


# --------------------------------------------------------------- typed single-table streams


def test_a_typed_stream_stops_at_a_schema_change_and_restarts_itself_on_the_new_schema(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    from sparkcdc.spark.streams import await_restarting

    settings = server.start()
    opts = {
        "hostname": settings.host,
        "port": str(settings.port),
        "username": "cdc",
        "password": DEV_PASSWORD,
        "database-name": DATABASE,
        "table-name": "ev",
        "server-id": "5910-5914",
        "scan.startup.mode": "latest-offset",
    }
    seen: list[dict[str, Any]] = []
    starts: list[list[str]] = []
    moved = threading.Event()

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend(r.asDict() for r in batch.collect())
        if seen and not moved.is_set():
            moved.set()
            execute(
                source,
                ["ALTER TABLE ev ADD COLUMN e INT", "INSERT INTO ev VALUES (9, 'b9', 9, 9, 90)"],
            )

    def start() -> Any:
        frame = spark.readStream.format("mysql-cdc").options(**opts).load()
        starts.append(frame.columns)
        return (
            frame.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "typed-checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def stop_when_done() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(r.get("e") == 90 for r in seen):
            time.sleep(0.2)
        for query in spark.streams.active:
            query.stop()

    execute(source, ["INSERT INTO ev VALUES (8, 'b8', 8, 8)"])
    watcher = threading.Thread(target=stop_when_done, daemon=True)
    watcher.start()
    # the first start waits for data; write once it runs
    threading.Timer(3.0, lambda: execute(source, ["UPDATE ev SET b = 'x' WHERE id = 1"])).start()
    await_restarting(start, timeout_s=150)
    watcher.join()
    metadata = ["_op", "_op_ts", "_seq", "_database", "_table"]
    assert starts[0] == [*metadata, "id", "b", "c", "d"]
    assert starts[-1] == [*metadata, "id", "b", "c", "d", "e"], "no restart on the new schema"
    assert any(r["_op"] == "+I" and r["id"] == 9 and r["e"] == 90 for r in seen)


# ------------------------------------------------ tables that join a running pipeline


def test_a_table_created_while_the_pipeline_runs_is_snapshotted_and_followed(
    spark: Any, server: DevServer, source: Any, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    config = make_config(server, tmp_path, DELTA_SINK.format(lake=lake), "lenient")
    config = config.model_copy(
        update={
            "source": config.source.model_copy(
                update={
                    "tables": f"{DATABASE}.(ev|new_\\.*)",  # Flink 3.x: '\\.' is regex '.'
                    "newly_added_table": True,
                    "chunk_size": 10,
                    "chunks_per_batch": 1,
                }
            )
        }
    )
    created = threading.Event()
    stop = threading.Event()

    def on_batch(batch_id: int, rows: dict[str, int]) -> None:
        if batch_id == 1 and not created.is_set():
            execute(
                source,
                [
                    "CREATE TABLE new_1 (id INT PRIMARY KEY, v VARCHAR(10), n INT)",
                    "INSERT INTO new_1 VALUES "
                    + ", ".join(f"({i}, 'v{i}', {i})" for i in range(1, 61)),
                ],
            )
            created.set()  # after its rows: the writer's keys would collide with them

    def keep_writing() -> None:
        rng = random.Random(3)
        created.wait(120)
        conn = server.connection(DATABASE)
        conn.autocommit(True)
        with conn.cursor() as cur:
            for _ in range(150):  # while new_1's chunks are read, one at a time
                key = rng.randint(1, 80)
                if rng.random() < 0.7:
                    cur.execute(
                        "INSERT INTO new_1 VALUES (%s, 'w', %s) ON DUPLICATE KEY UPDATE n = n + 1",
                        (key, key),
                    )
                else:
                    cur.execute("DELETE FROM new_1 WHERE id = %s", (key,))
                time.sleep(0.02)
        conn.close()
        stop.set()

    def stop_when_equal() -> None:
        stop.wait(180)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if delta_table(lake / DATABASE / "new_1")[1] == new_rows():
                    break
            except Exception:  # not created yet
                pass
            time.sleep(0.5)
        for query in spark.streams.active:
            query.stop()

    def new_rows() -> list[Row]:
        with source.cursor() as cur:
            cur.execute("SELECT * FROM new_1")
            return sorted(tuple(r) for r in cur.fetchall())

    writer = threading.Thread(target=keep_writing, daemon=True)
    stopper = threading.Thread(target=stop_when_equal, daemon=True)
    writer.start()
    stopper.start()
    run_pipeline(config, spark=spark, on_batch=on_batch, max_seconds=400)
    stopper.join()
    assert created.is_set()
    columns, rows = delta_table(lake / DATABASE / "new_1")
    assert columns == ["id", "v", "n"]
    assert rows == new_rows() and rows
    assert delta_table(lake / DATABASE / "ev") == INITIAL


# ------------------------------------- an online schema change tool's copy swapped in

GH_OST_STEPS = [
    [
        "INSERT INTO ev VALUES (3, 'b3', 3, 3)",
        # gh-ost: a copy in the likeness of the table, altered while empty, filled with the
        # table's rows, the table's changes applied to it as they come, then swapped in
        "CREATE TABLE _ev_gho LIKE ev",
        "ALTER TABLE _ev_gho ADD COLUMN e INT NOT NULL DEFAULT 7, DROP COLUMN d",
        "INSERT INTO _ev_gho (id, b, c) SELECT id, b, c FROM ev",
        "UPDATE ev SET c = 30 WHERE id = 3",
        "UPDATE _ev_gho SET c = 30 WHERE id = 3",
    ],
    [
        "RENAME TABLE ev TO _ev_del, _ev_gho TO ev",
        "INSERT INTO ev VALUES (4, 'b4', 4, 9)",
        "UPDATE ev SET e = 8 WHERE id = 1",
        "DROP TABLE _ev_del",
    ],
]


@pytest.mark.parametrize("follow", [True, False], ids=["followed", "not-followed"])
def test_jdbc_a_gh_ost_migration_reaches_the_sink_at_its_cut_over(
    spark: Any,
    server: DevServer,
    source: Any,
    pg: DevPostgres,
    tmp_path: Path,
    follow: bool,
) -> None:
    """With scan.parse.online.schema.changes.enabled the copy's ALTER is applied to the table
    at the swap, and the sink equals the source (the existing rows get the copy's DEFAULT);
    without it the run stops at the swap rather than drop the rows after it."""
    schema = f"gh_ost_{follow}".lower()
    option = f"  scan.parse.online.schema.changes.enabled: {str(follow).lower()}\n"
    config = make_config(server, tmp_path, jdbc_sink(pg, schema), "evolve", extra_source=option)
    if not follow:
        with pytest.raises(SparkCdcError, match=r"was replaced at seq \d+ by 'RENAME TABLE ev"):
            run_steps(spark, config, source, GH_OST_STEPS)
        return
    run_steps(spark, config, source, GH_OST_STEPS)
    with source.cursor() as cur:
        cur.execute("SELECT id, b, c, e FROM ev")
        expected = sorted(cur.fetchall())
    assert expected == [(1, "b1", 1, 8), (2, "b2", 2, 7), (3, "b3", 30, 7), (4, "b4", 4, 9)]
    assert pg_table(pg, schema, "ev") == (["id", "b", "c", "e"], expected)
