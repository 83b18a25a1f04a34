"""Flink CDC 3.x's documentation examples, ported unchanged (issue 16, part 3).

Each pipeline YAML below is an example from Flink CDC's documentation
(docs/content/docs/core-concept/transform.md, route.md, data-pipeline.md,
connectors/pipeline-connectors/mysql.md and the MySQL-to-Doris quickstart), with the same YAML
spellings (``\\*``, ``replace-symbol: <>``, metadata columns, ``description`` ...), rewritten
to this test's data: the databases are prefixed ``fcdc_`` (``mydb`` → ``fcdc_mydb``), the
source's hostname, port and password are the private test server's, and **the sink is swapped**:
the examples write to Doris; here a Delta sink (``type: delta``) under the test's directory
takes its place, read back with delta-rs. Every example is loaded and validated; those whose
features sparkcdc has run against the private MariaDB, and the others must stop with an error
that names the unsupported Flink CDC feature.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.config import PipelineConfig, load_pipeline
from sparkcdc.pipeline.runner import run_pipeline
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.integration

PROVINCES = ["shanghai", "beijing", "hangzhou"]


def source(tables: str) -> str:
    """Flink CDC's source block (data-pipeline.md), the host being the private server."""
    settings = DevServer.from_env().start()
    return (
        "source:\n"
        "  type: mysql\n"
        f"  hostname: {settings.host}\n"
        f"  port: {settings.port}\n"
        "  username: cdc\n"
        "  password: ${FCDC_PASSWORD}\n"
        f"  tables: {tables}\n"
        "  server-id: 5400-5404\n"
    )


def sink(lake: Path) -> str:
    # the examples' `type: doris` / `fenodes: ...` block, swapped for a Delta sink
    return f"sink:\n  type: delta\n  path: {lake}\n"


@pytest.fixture(scope="module")
def databases() -> None:
    server = DevServer.from_env()
    server.start()
    with server.root_connection() as conn, conn.cursor() as cur:
        for db in ("fcdc_mydb", "fcdc_app_db", "fcdc_source_db"):
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"CREATE DATABASE {db}")
        for table in ("web_order", "app_order"):
            cur.execute(
                f"CREATE TABLE fcdc_mydb.{table} (id INT PRIMARY KEY, order_id INT NOT NULL, "
                "product_name VARCHAR(30), province VARCHAR(20), UNIQUE KEY (order_id))"
            )
            cur.executemany(
                f"INSERT INTO fcdc_mydb.{table} VALUES (%s, %s, %s, %s)",
                [(i, 90 + i, f"p{i}", PROVINCES[i % 3]) for i in range(1, 25)],
            )
        # the quickstart's app_db, with two shards of orders for the sharding route
        cur.execute("CREATE TABLE fcdc_app_db.orders (id INT PRIMARY KEY, price DECIMAL(10,2))")
        cur.execute("CREATE TABLE fcdc_app_db.order01 (id INT PRIMARY KEY, price DECIMAL(10,2))")
        cur.execute("CREATE TABLE fcdc_app_db.order02 (id INT PRIMARY KEY, price DECIMAL(10,2))")
        cur.execute("CREATE TABLE fcdc_app_db.shipments (id INT PRIMARY KEY, city VARCHAR(20))")
        cur.execute("CREATE TABLE fcdc_app_db.products (id INT PRIMARY KEY, product VARCHAR(20))")
        cur.execute("INSERT INTO fcdc_app_db.orders VALUES (1, 4.00), (2, 100.00)")
        cur.execute("INSERT INTO fcdc_app_db.order01 VALUES (101, 1.50), (102, 2.50)")
        cur.execute("INSERT INTO fcdc_app_db.order02 VALUES (201, 3.50)")
        cur.execute("INSERT INTO fcdc_app_db.shipments VALUES (1, 'beijing'), (2, 'xian')")
        cur.execute("INSERT INTO fcdc_app_db.products VALUES (1, 'Beer'), (2, 'Cap'), (3, 'Pea')")
        for table in ("alpha", "beta"):
            cur.execute(f"CREATE TABLE fcdc_source_db.{table} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO fcdc_source_db.{table} VALUES (1, 10), (2, 20)")


def write(tmp_path: Path, text: str) -> PipelineConfig:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return load_pipeline(path, env={"FCDC_PASSWORD": DEV_PASSWORD})


def run(spark: Any, tmp_path: Path, text: str) -> None:
    run_pipeline(write(tmp_path, text), available_now=True, spark=spark)


def rows(lake: Path, table: str, *columns: str) -> list[tuple[Any, ...]]:
    import deltalake
    import pyarrow as pa

    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(lake / table)))
    names = ", ".join(f'"{c}"' for c in columns)
    result = pa.table(reader.execute(f"SELECT {names} FROM t ORDER BY 1").read_all())
    return [tuple(r.values()) for r in result.to_pylist()]


def columns(lake: Path, table: str) -> list[str]:
    import deltalake

    return [f.name for f in deltalake.DeltaTable(str(lake / table)).schema().fields]


def web_orders() -> list[tuple[int, int, str, str]]:
    return [(i, 90 + i, f"p{i}", PROVINCES[i % 3]) for i in range(1, 25)]


# ---------------------------------------------------------------- data-pipeline.md, route.md


def test_data_pipeline_only_required(spark: Any, tmp_path: Path, databases: None) -> None:
    """data-pipeline.md "Only required": routes to ods_db, transforms of tables that are not
    captured (a warning), a pipeline name with spaces."""
    lake = tmp_path / "lake"
    run(
        spark,
        tmp_path,
        source(r"fcdc_app_db.\.*")
        + sink(lake)
        + r"""
transform:
  - source-table: adb.web_order01
    projection: \*, UPPER(product_name) as product_name
    filter: id > 10 AND order_id > 100
    description: project fields and filter
  - source-table: adb.web_order02
    projection: \*, UPPER(product_name) as product_name
    filter: id > 20 AND order_id > 200
    description: project fields and filter

route:
  - source-table: fcdc_app_db.orders
    sink-table: ods_db.ods_orders
  - source-table: fcdc_app_db.shipments
    sink-table: ods_db.ods_shipments
  - source-table: fcdc_app_db.products
    sink-table: ods_db.ods_products

pipeline:
  name: Sync MySQL Database to Doris
  parallelism: 2
""",
    )
    assert rows(lake, "ods_db/ods_orders", "id", "price") == [
        (1, Decimal("4.00")),
        (2, Decimal("100.00")),
    ]
    assert rows(lake, "ods_db/ods_shipments", "id", "city") == [(1, "beijing"), (2, "xian")]
    assert rows(lake, "ods_db/ods_products", "id", "product") == [
        (1, "Beer"),
        (2, "Cap"),
        (3, "Pea"),
    ]
    assert rows(lake, "fcdc_app_db/order01", "id") == [(101,), (102,)]  # unrouted: its own name


def test_route_sharded_tables_into_one(spark: Any, tmp_path: Path, databases: None) -> None:
    """The quickstart's sharding route: ``order\\.*`` (orders, order01, order02) → one table."""
    lake = tmp_path / "lake"
    run(
        spark,
        tmp_path,
        source(r"fcdc_app_db.order\.*")
        + sink(lake)
        + r"""
route:
  - source-table: fcdc_app_db.order\.*
    sink-table: ods_db.ods_orders
""",
    )
    assert [r[0] for r in rows(lake, "ods_db/ods_orders", "id")] == [1, 2, 101, 102, 201]


def test_route_with_replace_symbol(spark: Any, tmp_path: Path, databases: None) -> None:
    """route.md "Pattern Replacement in routing rules"."""
    lake = tmp_path / "lake"
    run(
        spark,
        tmp_path,
        source(r"fcdc_source_db.\.*")
        + sink(lake)
        + r"""
route:
  - source-table: fcdc_source_db.\.*
    sink-table: sink_db.<>
    replace-symbol: <>
    description: route all tables in source_db to sink_db
""",
    )
    for table in ("alpha", "beta"):
        assert rows(lake, f"sink_db/{table}", "id", "v") == [(1, 10), (2, 20)]


# ------------------------------------------------------------------- schema-evolution.md


def test_schema_evolution_per_event_type_example(spark: Any, tmp_path: Path) -> None:
    """schema-evolution.md "Per-Event Type Control": the example's include / exclude lists,
    verbatim, under ``evolve``: an ADD COLUMN (a ``column`` event) reaches the Delta table with
    its values; a DROP COLUMN (excluded) leaves the column in it. Before, ``column`` and
    ``create.table.event`` named nothing and the added column was logged "not applied"."""
    server = DevServer.from_env()
    server.start()
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS fcdc_evolve_db")
        cur.execute("CREATE DATABASE fcdc_evolve_db")
        cur.execute("CREATE TABLE fcdc_evolve_db.orders (id INT PRIMARY KEY, note VARCHAR(10))")
        cur.execute("INSERT INTO fcdc_evolve_db.orders VALUES (1, 'a')")
    lake = tmp_path / "lake"
    text = (
        source(r"fcdc_evolve_db.\.*")
        + sink(lake)
        + """
  include.schema.changes: [create.table.event, column]
  exclude.schema.changes: [drop.column]

pipeline:
  schema.change.behavior: evolve
"""
    )
    run(spark, tmp_path, text)
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("ALTER TABLE fcdc_evolve_db.orders ADD COLUMN price DECIMAL(10, 2)")
        cur.execute("INSERT INTO fcdc_evolve_db.orders VALUES (2, 'b', 9.50)")
        cur.execute("ALTER TABLE fcdc_evolve_db.orders DROP COLUMN note")
        cur.execute("INSERT INTO fcdc_evolve_db.orders VALUES (3, 12.25)")
    run(spark, tmp_path, text)
    table = "fcdc_evolve_db/orders"
    assert columns(lake, table)[:3] == ["id", "note", "price"]
    assert rows(lake, table, "id", "note", "price") == [
        (1, "a", None),
        (2, "b", Decimal("9.50")),
        (3, None, Decimal("12.25")),
    ]


def test_route_without_a_database_part_names_the_problem(tmp_path: Path) -> None:
    """route.md's sharding example writes ``mydb\\.*``: no unescaped dot, so no database part
    (Flink CDC matches no MySQL table with it). Refused, saying how to write it."""
    text = (
        source(r"fcdc_mydb.\.*")
        + sink(tmp_path)
        + (
            "route:\n  - source-table: fcdc_mydb\\.*\n    sink-table: fcdc_mydb.ods_web_order\n"
            "    description: sync sharding tables to one destination table\n"
        )
    )
    with pytest.raises(ConfigError, match=r"route\[0\]\.source-table: .* has no database part"):
        write(tmp_path, text)


# ---------------------------------------------------------------------------- transform.md


TRANSFORMS: dict[str, str] = {
    "computed": """
  - source-table: fcdc_mydb.web_order
    projection: id, order_id, UPPER(product_name) as product_name, localtimestamp as new_timestamp
    description: append calculated columns based on source table
""",
    "metadata": """
  - source-table: fcdc_mydb.web_order
    projection: id, order_id, __namespace_name__ || '.' || __schema_name__ || '.' || __table_name__ identifier_name
    description: access metadata columns from source table
  - source-table: fcdc_mydb.app_order
    projection: id, __schema_name__ || '.' || __table_name__ identifier_name, __data_event_type__ AS op_type
""",  # noqa: E501  (the documentation's line)
    "wildcard": r"""
  - source-table: fcdc_mydb.web_order
    projection: \*, UPPER(product_name) as product_name
    description: project fields with wildcard character from source table
  - source-table: fcdc_mydb.app_order
    projection: UPPER(product_name) as product_name, *
    description: project fields with wildcard character from source table
""",
    "filter": """
  - source-table: fcdc_mydb.web_order
    filter: id > 10 AND order_id > 100
    description: filtering rows from source table
""",
    "computed filter": """
  - source-table: fcdc_mydb.web_order
    projection: id, order_id, UPPER(province) as new_province
    filter: new_province = 'SHANGHAI'
    description: filtering rows based on computed columns
""",
    "primary key": """
  - source-table: fcdc_mydb.web_order
    projection: id, order_id
    primary-keys: order_id
    description: reassign primary key example
""",
    "composite key": """
  - source-table: fcdc_mydb.web_order
    projection: id, order_id, UPPER(product_name) as product_name
    primary-keys: order_id, product_name
    description: reassign composite primary keys example
""",
}


@pytest.mark.parametrize("example", list(TRANSFORMS))
def test_transform_examples_run(spark: Any, tmp_path: Path, databases: None, example: str) -> None:
    lake = tmp_path / "lake"
    run(spark, tmp_path, source(r"fcdc_mydb.\.*") + sink(lake) + "transform:" + TRANSFORMS[example])
    web = web_orders()
    table = "fcdc_mydb/web_order"
    if example == "computed":
        assert columns(lake, table) == ["id", "order_id", "product_name", "new_timestamp"]
        got = rows(lake, table, "id", "order_id", "product_name", "new_timestamp")
        assert [r[:3] for r in got] == [(i, o, p.upper()) for i, o, p, _ in web]
        assert all(r[3] is not None for r in got)
    elif example == "metadata":
        # __namespace_name__ is NULL for MySQL (Flink CDC: a MySQL table id is schema.table),
        # and in Spark SQL `NULL || text` is NULL
        assert rows(lake, table, "id", "identifier_name") == [(i, None) for i, *_ in web]
        assert rows(lake, "fcdc_mydb/app_order", "id", "identifier_name", "op_type") == [
            (i, "fcdc_mydb.app_order", "+I") for i, *_ in web
        ]
    elif example == "wildcard":
        # a column the star has and an item redefines is the item's (once)
        assert columns(lake, table) == ["id", "order_id", "province", "product_name"]
        assert rows(lake, table, "id", "order_id", "province", "product_name") == [
            (i, o, c, p.upper()) for i, o, p, c in web
        ]
        app = ["product_name", "id", "order_id", "province"]
        assert columns(lake, "fcdc_mydb/app_order") == app
        assert rows(lake, "fcdc_mydb/app_order", "id", "product_name") == [
            (i, p.upper()) for i, _, p, _ in web
        ]
    elif example == "filter":
        assert rows(lake, table, "id", "order_id", "product_name", "province") == [
            r for r in web if r[0] > 10 and r[1] > 100
        ]
    elif example == "computed filter":
        assert rows(lake, table, "id", "order_id", "new_province") == [
            (i, o, "SHANGHAI") for i, o, _, c in web if c == "shanghai"
        ]
    elif example == "primary key":
        assert rows(lake, table, "order_id", "id") == [(o, i) for i, o, *_ in web]
    elif example == "composite key":
        assert rows(lake, table, "id", "order_id", "product_name") == [
            (i, o, p.upper()) for i, o, p, _ in web
        ]
    else:
        raise AssertionError(example)


# Flink CDC features sparkcdc does not have: each is refused, naming the feature
REFUSED: dict[str, tuple[str, str]] = {
    "table options": (
        """transform:
  - source-table: fcdc_mydb.web_order
    projection: id, order_id, UPPER(product_name) as product_name
    table-options: comment=web order
    description: auto creating table options example
""",
        r"transform\[0\]\.table-options: Flink CDC's table-options is not supported",
    ),
    "partition keys": (
        """transform:
  - source-table: fcdc_mydb.web_order
    projection: id, order_id, UPPER(product_name) as product_name
    partition-keys: product_name
    description: reassign partition key example
""",
        r"transform\[0\]\.partition-keys: Flink CDC's partition-keys is not supported",
    ),
    "soft delete": (
        r"""transform:
  - source-table: \.*.\.*
    projection: \*, __data_event_type__ AS op_type
    converter-after-transform: SOFT_DELETE
""",
        r"converter-after-transform: Flink CDC.s converter-after-transform is not supported by "
        "sparkcdc: SOFT_DELETE",
    ),
    "java udf": (
        """pipeline:
  user-defined-function:
    - name: addone
      classpath: org.apache.flink.cdc.udf.examples.java.AddOneFunctionClass
""",
        r"pipeline\.user-defined-function: .* Java UDF classes are not loaded",
    ),
    "batch mode": (
        "pipeline:\n  execution.runtime-mode: BATCH\n",
        r"pipeline\.execution\.runtime-mode: BATCH is not a mode .* --available-now",
    ),
}


@pytest.mark.parametrize("example", list(REFUSED))
def test_unsupported_flink_features_are_named(tmp_path: Path, example: str) -> None:
    text, message = REFUSED[example]
    with pytest.raises(ConfigError, match=message):
        write(tmp_path, source(r"fcdc_mydb.\.*") + sink(tmp_path) + text)


def test_classification_mapping_is_refused_before_reading(
    spark: Any, tmp_path: Path, databases: None
) -> None:
    """transform.md "Classification mapping": Flink CDC gives each row the first rule whose
    filter it passes; one rule per table here, so the rows of BEIJING would be lost: refused."""
    text = (
        source(r"fcdc_mydb.\.*")
        + sink(tmp_path / "lake")
        + """transform:
  - source-table: fcdc_mydb.web_order
    projection: id, order_id
    filter: UPPER(province) = 'SHANGHAI'
    description: classification mapping example
  - source-table: fcdc_mydb.web_order
    projection: order_id as id, id as order_id
    filter: UPPER(province) = 'BEIJING'
    description: classification mapping example
"""
    )
    with pytest.raises(ConfigError, match=r"classification mapping .* is not supported"):
        run(spark, tmp_path, text)
    assert not (tmp_path / "lake").exists()


def test_pipeline_options_and_connector_example_load(tmp_path: Path) -> None:
    """pipeline-connectors/mysql.md's example (source and sink names, a list of table
    patterns with a character class) and the quickstart's ``password: 123456`` and
    ``server-time-zone`` load; data-pipeline.md's ``local-time-zone`` is Spark's session
    time zone."""
    settings = DevServer.from_env().start()
    text = f"""
source:
   type: mysql
   name: MySQL Source
   hostname: {settings.host}
   port: {settings.port}
   username: admin
   password: 123456
   tables: adb.\\.*, bdb.user_table_[0-9]+, [app|web].order_\\.*
   server-id: 5401-5404
   server-time-zone: UTC

sink:
  type: delta
  name: Doris Sink
  path: {tmp_path}

pipeline:
   name: MySQL to Doris Pipeline
   parallelism: 4
   local-time-zone: Asia/Shanghai
   execution.runtime-mode: STREAMING
"""
    config = write(tmp_path, text)
    assert config.source.password.get_secret_value() == "123456"
    assert config.sink.name == "Doris Sink"
    assert config.pipeline.parallelism == 4
    assert config.pipeline.session_conf() == {"spark.sql.session.timeZone": "Asia/Shanghai"}
    patterns = config.source.tables
    assert patterns is not None and "[app|web].order_" in patterns
