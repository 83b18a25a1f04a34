"""The documentation's recipes run as printed (issue 62, item 5).

Each code block of README.md and docs/ marked ``<!-- tested: tests/integration/test_recipes.py,
recipe NAME -->`` is taken from the page (``sparkcdc_dev.recipes``) and run against the private
servers; the test replaces only the documented addresses and paths it must give
(``127.0.0.1:9092`` the broker, ``3306`` / ``23306`` the MariaDB port, ``/data/...`` and
``/tmp/sparkcdc-demo`` folders), and each replaced text must be in the block. Python blocks
run in a process of their own, as a user's script; after the block the test's own lines read
what it made. ``tests/unit/test_recipes_marked.py`` keeps every marked block run here.

The recipes use the names they print: the database ``app_db`` (made afresh by each test in
the private MariaDB) and the topic ``app_db.orders`` (deleted before each test that writes it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from flink_consumer import flink_rows_of_ddl
from pipelines import fresh_database, pipeline_env, source_block

from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc_dev.devkafka import DevKafka
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer
from sparkcdc_dev.recipes import recipe

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)

DATABASE = "app_db"
TOPIC = "app_db.orders"
ENV = {**os.environ, "MYSQL_PASSWORD": DEV_PASSWORD}


def run_python(code: str, epilogue: str, cwd: Path, timeout_s: float = 600) -> Any:
    """``code`` (a recipe as printed, placeholders replaced), then the test's ``epilogue``,
    as a user's script in a Python process of its own; the JSON its last line prints."""
    script = cwd / "recipe.py"
    script.write_text(code + "\n# -- the test's lines, after the recipe --\n" + epilogue)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=timeout_s,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(0.5)


# -- the Kafka topics: Flink SQL's table and Spark's reader (docs/sinks.md) --------------------

ORDERS = """CREATE TABLE orders (
  id BIGINT PRIMARY KEY, amount DECIMAL(10, 2), placed DATETIME(3), paid_at TIMESTAMP(6),
  ready TIME
)"""
PAID = dt.datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=dt.UTC)


def paid_micros(seconds: int) -> int:
    return int((PAID + dt.timedelta(seconds=seconds)).timestamp() * 1_000_000)


@pytest.fixture
def kafka() -> str:
    """The private broker, without the recipes' topic (a test's sink creates it afresh)."""
    bootstrap = DevKafka.from_env().start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if TOPIC in admin.list_topics(timeout=30).topics:
        admin.delete_topics([TOPIC])[TOPIC].result(timeout=60)
        wait_for(lambda: TOPIC not in admin.list_topics(timeout=30).topics, 60, "topic deleted")
    return bootstrap


def kafka_pipeline(
    spark: Any, server: DevServer, kafka: str, tmp_path: Path, value_format: str
) -> Callable[[], Any]:
    """``app_db.orders`` into its topic ``app_db.orders`` in ``value_format``; a function
    that runs the pipeline once (--available-now)."""
    text = (
        source_block(server, f"{DATABASE}.orders", "6150-6159")
        + f"sink:\n  type: kafka\n  properties.bootstrap.servers: {kafka}\n"
        + f"  value.format: {value_format}\n"
        + f"pipeline:\n  name: recipes-{value_format}\n  checkpoint: {tmp_path / 'checkpoint'}\n"
    )
    config = parse_pipeline(text, env=pipeline_env(), base_dir=tmp_path)
    return lambda: run_pipeline(config, available_now=True, spark=spark)


def orders_table(server: DevServer) -> Any:
    conn = fresh_database(server, DATABASE)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(ORDERS)
        cur.executemany(
            "INSERT INTO orders VALUES (%s, %s, %s, %s, %s)",
            [
                (i, f"{i}0.50", f"2024-05-0{i} 12:00:00.500", f"2024-05-01 12:00:0{i}.5", "12:30")
                for i in (1, 2, 3)
            ],
        )
    return conn


# what Flink SQL's table holds at the end: TIMESTAMP / TIMESTAMP_LTZ as the harness spells them
FLINK_ROWS = [
    {
        "id": "1",
        "amount": "10.50",
        "placed": "2024-05-01T12:00:00.500000000",
        "paid_at": "2024-05-01T12:00:01.500000000Z",
        "ready": "12:30:00",
    },
    {
        "id": "2",
        "amount": "99.99",
        "placed": "2024-05-02T12:00:00.500000000",
        "paid_at": "2024-05-01T12:00:02.500000000Z",
        "ready": "08:00:00",
    },
    {
        "id": "4",
        "amount": "40.50",
        "placed": "2024-05-04T12:00:00.500000000",
        "paid_at": "2024-05-01T12:00:04.500000000Z",
        "ready": "12:30:00",
    },
]

SPARK_EPILOGUE = """
import json
query = changes.writeStream.format("memory").queryName("recipe").trigger(availableNow=True).start()
query.awaitTermination()
rows = spark.sql(
    "SELECT op, id, CAST(amount AS STRING) AS amount, CAST(placed AS STRING) AS placed, "
    "unix_micros(paid_at) AS paid_at, ready FROM recipe"
).collect()
print(json.dumps([list(r) for r in rows]))
"""


def test_the_topics_read_by_flink_sql_and_spark_as_the_docs_print_them(
    spark: Any, server: DevServer, kafka: str, tmp_path: Path
) -> None:
    """A snapshot of three orders, then an insert, an update and a delete, into the topic in
    debezium-json. Flink SQL's table of the docs ends equal to the source; Spark's reader,
    in the session it makes itself, reads every change, and the delete keeps its key and
    the row it removed (before: an all-NULL row, its key lost; and no kafka data source)."""
    conn = orders_table(server)
    run = kafka_pipeline(spark, server, kafka, tmp_path, "debezium-json")
    run()
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(
            "INSERT INTO orders VALUES "
            "(4, 40.50, '2024-05-04 12:00:00.500', '2024-05-01 12:00:04.5', '12:30')"
        )
        cur.execute("UPDATE orders SET amount = 99.99, ready = '08:00' WHERE id = 2")
        cur.execute("DELETE FROM orders WHERE id = 3")
    run()

    ddl = recipe("flink-sql-table").given({"127.0.0.1:9092": kafka})
    assert sorted(flink_rows_of_ddl(ddl), key=lambda r: r["id"] or "") == FLINK_ROWS

    code = recipe("kafka-spark-reader").given({"127.0.0.1:9092": kafka})
    changes = run_python(code, SPARK_EPILOGUE, tmp_path)

    def row(op: str, key: int, amount: str, ready: str) -> list[Any]:
        placed = f"2024-05-0{key} 12:00:00.5"
        return [op, key, amount, placed, paid_micros(key), ready]

    assert sorted(changes) == sorted(
        [
            row("r", 1, "10.50", "12:30:00"),
            row("r", 2, "20.50", "12:30:00"),
            row("r", 3, "30.50", "12:30:00"),
            row("c", 4, "40.50", "12:30:00"),
            row("u", 2, "99.99", "08:00:00"),
            row("d", 3, "30.50", "12:30:00"),  # the row the delete removed, its key first
        ]
    )


def test_the_flink_sql_table_reads_canal_json_as_its_comment_says(
    spark: Any, server: DevServer, kafka: str, tmp_path: Path
) -> None:
    """The DDL's comment: "or 'canal-json', as the sink's value.format". With that one word
    changed, Flink reads a canal-json topic (before: an option of the other format made
    Flink refuse the table)."""
    orders_table(server)
    kafka_pipeline(spark, server, kafka, tmp_path, "canal-json")()
    printed = "'format' = 'debezium-json'    -- or 'canal-json', as the sink's value.format"
    ddl = recipe("flink-sql-table").given(
        {"127.0.0.1:9092": kafka, printed: "'format' = 'canal-json'"}
    )
    rows = sorted(flink_rows_of_ddl(ddl), key=lambda r: r["id"] or "")
    assert [r["id"] for r in rows] == ["1", "2", "3"]
    assert rows[0] == {**FLINK_ROWS[0]}


# -- the streaming source (README.md, docs/source.md) ----------------------------------------

STREAM_EPILOGUE = """
import json
import time
deadline = time.monotonic() + 300
seen = 0
while seen < 3 and time.monotonic() < deadline and query.isActive:
    query.awaitTermination(1)
    seen = sum(p["numInputRows"] for p in query.recentProgress)
failure = query.exception()
query.stop()
print(json.dumps({"rows": seen, "failure": str(failure) if failure else None}))
"""


def test_the_streaming_source_as_printed(server: DevServer, tmp_path: Path) -> None:
    """README.md's and docs/source.md's reader (the same block) reads a three-row table's
    snapshot to the console, with the password from ``MYSQL_PASSWORD``."""
    readme, page = recipe("streaming-source-readme"), recipe("streaming-source")
    assert readme.text == page.text, "README.md and docs/source.md print the same reader"
    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(20))")
        cur.executemany("INSERT INTO orders VALUES (%s, %s)", [(1, "tea"), (2, "cake"), (3, "jam")])
    code = page.given(
        {
            '"3306"': f'"{server.start().port}"',
            "/data/cdc/orders-state": str(tmp_path / "orders-state"),
            "/tmp/orders-ckpt": str(tmp_path / "orders-ckpt"),
        }
    )
    assert run_python(code, STREAM_EPILOGUE, tmp_path) == {"rows": 3, "failure": None}


# -- the quickstart's pipeline and what to do with it (README.md, docs/sinks.md) -------------


def sparkcdc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )


def shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One command line of a bash recipe, with the test's Python first on PATH (the
    ``sparkcdc`` and ``python`` a user's environment has)."""
    env = {**ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{ENV.get('PATH', '')}"}
    return subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def test_the_quickstart_pipeline_and_what_follows_as_printed(
    server: DevServer, tmp_path: Path
) -> None:
    """README.md's pipeline file (the demo's, its folder /tmp/sparkcdc-demo given by the
    test): ``sparkcdc run`` follows the binlog until Ctrl-C, ``sparkcdc status`` says where it
    is, and polars, delta-rs and docs/sinks.md's lines read the Delta table it wrote."""
    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(20))")
        cur.executemany("INSERT INTO orders VALUES (%s, %s)", [(i, f"item{i}") for i in range(50)])
    demo = {"/tmp/sparkcdc-demo": str(tmp_path)}
    yaml = recipe("quickstart-pipeline").given(
        {"port: 23306": f"port: {server.start().port}", **demo}
    )
    (tmp_path / "pipeline.yaml").write_text(yaml)
    lines = [
        line.split("  #")[0].strip()
        for line in recipe("quickstart-then").given(demo).splitlines()
        if line.strip()
    ]
    follow, *after = lines
    assert follow == f"sparkcdc run {tmp_path}/pipeline.yaml"

    env = {**ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{ENV.get('PATH', '')}"}
    running = subprocess.Popen(
        ["bash", "-c", f"exec {follow}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    table = tmp_path / "lake" / DATABASE / "orders"

    from deltalake import DeltaTable

    def rows() -> int:
        assert running.poll() is None, running.communicate()
        if not DeltaTable.is_deltatable(str(table)):  # not before its first commit
            return 0
        return int(DeltaTable(str(table)).to_pyarrow_table().num_rows)

    try:
        wait_for(lambda: rows() == 50, 300, "Delta table of the 50 rows")
        with server.connection(DATABASE) as live, live.cursor() as cur:  # the binlog
            cur.execute("INSERT INTO orders VALUES (50, 'live')")
            live.commit()
        wait_for(lambda: rows() == 51, 300, "the row inserted while it runs")
    finally:
        running.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = running.communicate(timeout=300)
    assert running.returncode == 130, err[-4000:]

    status, read = (shell(line, tmp_path) for line in after)
    assert status.returncode == 0 and "binlog" in status.stdout, status.stdout + status.stderr
    assert read.returncode == 0 and "live" in read.stdout, read.stderr
    for line in recipe("delta-read-without-spark").given(demo).splitlines():
        done = shell(line, tmp_path)
        assert done.returncode == 0, line + done.stderr
        assert "live" in done.stdout and "item4" in done.stdout, line + done.stdout


# -- the pipeline file of docs/pipelines.md --------------------------------------------------


def test_the_pipeline_file_of_the_pipelines_page_as_printed(
    server: DevServer, tmp_path: Path
) -> None:
    """Sharded orders merged into one sink table, every other table renamed ``ods.ods_<>``,
    and the customers' transform (projection, filter, key), run once with --available-now."""
    from deltalake import DeltaTable

    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        for shard in (1, 2):
            cur.execute(f"CREATE TABLE orders_{shard} (id INT PRIMARY KEY, amount INT)")
            cur.execute(f"INSERT INTO orders_{shard} VALUES ({shard}, {shard * 10})")
        cur.execute(
            "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(20), active TINYINT, "
            "country CHAR(2))"
        )
        cur.execute(
            "INSERT INTO customers VALUES (1, 'ada', 1, 'NO'), (2, 'bob', 0, 'NO'), "
            "(3, 'cy', 1, 'XX')"
        )
    file = tmp_path / "pipeline.yaml"
    file.write_text(
        recipe("pipeline-file").given(
            {"port: 3306": f"port: {server.start().port}", "/data/lake": str(tmp_path / "lake")}
        )
    )
    done = sparkcdc("run", str(file), "--available-now")
    assert done.returncode == 0, done.stderr[-4000:]

    def rows(namespace: str, table: str) -> list[dict[str, Any]]:
        found = DeltaTable(str(tmp_path / "lake" / namespace / table)).to_pyarrow_table()
        return sorted(found.to_pylist(), key=lambda r: r["id"])

    assert rows(DATABASE, "orders") == [{"id": 1, "amount": 10}, {"id": 2, "amount": 20}]
    customers = rows("ods", "ods_customers")
    assert [(r["id"], r["name_uc"], r["source_table"]) for r in customers] == [
        (1, "ADA", "customers")
    ]
