"""The iceberg sink against a hadoop catalog in a temporary warehouse (and a jdbc one on MariaDB).

Change frames are built by hand; what the sink wrote is read back with Spark and, independently,
with pyiceberg from the table's metadata file (``StaticTable``), which does not go through
Spark or Iceberg's Java code at all.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import StaticTable
from tests.harness.moved_files import files_moved_away

from sparkcdc.errors import ConfigError, SinkError
from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.sinks.base import SinkColumn, SinkContext, SinkTable, sink_class
from sparkcdc.sinks.iceberg import (
    BATCH_PROPERTY,
    IcebergOptions,
    IcebergSink,
    safe_uri,
)

pytestmark = [pytest.mark.integration, pytest.mark.iceberg]

META = "_op STRING, _op_ts TIMESTAMP, _seq BIGINT, _database STRING, _table STRING"
ORDERS_COLUMNS = (
    SinkColumn("id", "BIGINT", nullable=False),
    SinkColumn("name", "STRING"),
    SinkColumn("amount", "DECIMAL(10,2)"),
    SinkColumn("ts", "TIMESTAMP"),
    SinkColumn("d", "DATE"),
    SinkColumn("flag", "BOOLEAN"),
)
ORDERS_DDL = "id BIGINT, name STRING, amount DECIMAL(10,2), ts TIMESTAMP, d DATE, flag BOOLEAN"
T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
D0 = date(2024, 5, 6)


# -- helpers ---------------------------------------------------------------------------


def make_sink(
    spark: Any, warehouse: Path | str, pipeline: str = "orders_pipeline", **extra: Any
) -> IcebergSink:
    """A hadoop-catalog sink; every call gets a catalog of its own unless ``catalog.name``."""
    options = IcebergOptions.model_validate(
        {
            "type": "iceberg",
            "catalog.properties.warehouse": str(warehouse),
            "catalog.name": f"ice_{uuid.uuid4().hex[:8]}",
        }
        | extra
    )
    return IcebergSink(options, spark, SinkContext(pipeline, "/nonexistent/checkpoint"))


def orders_table(name: str = "app_db.orders") -> SinkTable:
    return SinkTable(name, ORDERS_COLUMNS, ("id",), ("app_db.orders",))


def orders_frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """A change frame of the orders columns; each row is (op, seq, id, name, amount, ...)."""
    full = []
    for op, seq, *values in rows:
        values += [None] * (len(ORDERS_COLUMNS) - len(values))
        op_ts = None if op == "+I" else T0
        full.append((op, op_ts, seq, "app_db", "orders", *values))
    return spark.createDataFrame(full, f"{META}, {ORDERS_DDL}")


def arrow_rows(arrow: Any, table: SinkTable) -> list[tuple[Any, ...]]:
    """An Arrow table's rows in sink-column order, sorted by key."""
    names = table.column_names
    rows = [tuple(r[c] for c in names) for r in arrow.select(list(names)).to_pylist()]
    index = [names.index(k) for k in table.primary_key]
    return sorted(rows, key=lambda r: tuple(r[i] for i in index))


def hadoop_metadata(sink: IcebergSink, table: SinkTable) -> Path:
    """The current metadata file of a hadoop-catalog table (its version-hint.text says which)."""
    folder = Path(
        sink._options.warehouse_location(), *sink.namespace(table), table.short_name, "metadata"
    )
    version = (folder / "version-hint.text").read_text().strip()
    return folder / f"v{version}.metadata.json"


def read_back(
    spark: Any, sink: IcebergSink, table: SinkTable, metadata: Path | str | None = None
) -> list[tuple[Any, ...]]:
    """The table's rows read with Spark and with pyiceberg (they must agree)."""
    spark_rows = arrow_rows(spark.table(sink.identifier(table)).toArrow(), table)
    location = str(metadata or hadoop_metadata(sink, table))
    independent = arrow_rows(StaticTable.from_metadata(location).scan().to_arrow(), table)
    assert independent == spark_rows, "pyiceberg and Spark disagree on the table's rows"
    return spark_rows


def snapshots(spark: Any, sink: IcebergSink, table: SinkTable) -> list[dict[str, str]]:
    """Summaries of the table's snapshots, oldest first."""
    rows = spark.sql(
        f"SELECT summary FROM {sink.identifier(table)}.snapshots ORDER BY committed_at"
    ).collect()
    return [dict(r.summary) for r in rows]


def row(*values: Any) -> tuple[Any, ...]:
    """An expected orders row, padded with NULLs."""
    return (*values, *([None] * (len(ORDERS_COLUMNS) - len(values))))


# -- behaviour -------------------------------------------------------------------------


def test_registered_under_iceberg() -> None:
    assert sink_class("iceberg") is IcebergSink
    assert IcebergSink.guarantee == "exactly-once"


def test_inserts_updates_and_deletes(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    assert read_back(spark, sink, table) == []

    sink.write(
        table,
        orders_frame(
            spark,
            [
                ("+I", 1, 1, "one", Decimal("1.50"), T0, D0, True),
                ("+I", 2, 2, "two", Decimal("-2.25"), None, None, False),
                ("+I", 3, 3, None),
            ],
        ),
        0,
    )
    assert read_back(spark, sink, table) == [
        row(1, "one", Decimal("1.50"), T0, D0, True),
        row(2, "two", Decimal("-2.25"), None, None, False),
        row(3),
    ]

    later = T0 + timedelta(days=1, microseconds=1)
    sink.write(
        table,
        orders_frame(
            spark,
            [
                ("-U", 10, 1, "one", Decimal("1.50"), T0, D0, True),
                ("+U", 10, 1, "uno", Decimal("9.99"), later, D0 + timedelta(days=1), False),
                ("-D", 11, 2, "two", Decimal("-2.25"), None, None, False),
                ("+I", 12, 4, "four"),
            ],
        ),
        1,
    )
    assert read_back(spark, sink, table) == [
        row(1, "uno", Decimal("9.99"), later, D0 + timedelta(days=1), False),
        row(3),
        row(4, "four"),
    ]
    # the table is what the docs promise: format 2, merge-on-read, batch ids in the summaries
    props = {
        r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {sink.identifier(table)}").collect()
    }
    assert props["format-version"] == "2"
    assert props["write.merge.mode"] == "merge-on-read"
    summaries = snapshots(spark, sink, table)
    assert [s.get(sink.batch_property) for s in summaries] == ["0", "1"]
    assert summaries[-1]["added-position-deletes"] == "2"  # merge-on-read: no file rewritten


def test_key_changing_update(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]), 0)
    # UPDATE orders SET id = 10 WHERE id = 1: '-U' of the old key, '+U' of the new, one _seq
    sink.write(table, orders_frame(spark, [("-U", 5, 1, "a"), ("+U", 5, 10, "a2")]), 1)
    assert read_back(spark, sink, table) == [row(2, "b"), row(10, "a2")]


def test_latest_change_of_a_key_wins(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]), 0)
    changes = orders_frame(
        spark,
        [  # deliberately out of order: _seq decides, not the row order
            ("+U", 7, 1, "a3"),
            ("-U", 7, 1, "a2"),
            ("-U", 3, 1, "a"),
            ("+U", 3, 1, "a2"),
            ("-D", 4, 2, "b"),
            ("+I", 6, 2, "b again"),
            ("+I", 5, 3, "c"),  # inserted and deleted within the batch: never lands
            ("-D", 8, 3, "c"),
            ("+I", 9, 4, "d"),
            ("-U", 10, 4, "d"),
            ("+U", 10, 4, "d2"),
        ],
    )
    sink.write(table, changes, 1)
    assert read_back(spark, sink, table) == [row(1, "a3"), row(2, "b again"), row(4, "d2")]


def test_replayed_and_older_batches_are_skipped(spark: Any, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    sink, table = make_sink(spark, warehouse), orders_table()
    sink.open([table])
    assert sink.created == {table.name}  # new: the pipeline need not look for rows in it
    sink.write(table, orders_frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]), 0)
    batch_1 = orders_frame(spark, [("+U", 3, 1, "a2"), ("-D", 4, 2, "b")])
    sink.write(table, batch_1, 1)
    after = read_back(spark, sink, table)
    assert after == [row(1, "a2")]
    assert sink.applied_batch(spark, table) == 1
    committed = len(snapshots(spark, sink, table))

    # Spark replays the last batch after a crash: skipped, not merged again
    sink.write(table, batch_1, 1)
    # a different frame under a committed batch id proves it is skipped, not re-applied
    sink.write(table, orders_frame(spark, [("+I", 9, 9, "must not land")]), 1)
    sink.write(table, orders_frame(spark, [("-D", 9, 1, "a2")]), 0)
    # a new sink of the same pipeline (a restarted run) finds the record in the table
    restarted = make_sink(spark, warehouse, **{"catalog.name": sink._options.catalog_name})
    restarted.open([table])
    assert restarted.created == set()  # it was there: has_rows must be asked
    assert restarted.has_rows(table)
    restarted.write(table, orders_frame(spark, [("+I", 9, 9, "must not land")]), 1)
    assert read_back(spark, sink, table) == after
    assert len(snapshots(spark, sink, table)) == committed

    # the fallback when the record is gone (another pipeline's id stands in for that):
    # re-applying a batch's final states adds a snapshot and leaves every row as it was
    other = make_sink(
        spark, warehouse, "other_pipeline", **{"catalog.name": sink._options.catalog_name}
    )
    other.write(table, batch_1, 1)
    assert read_back(spark, sink, table) == after
    summaries = snapshots(spark, sink, table)
    assert len(summaries) == committed + 1
    assert summaries[-1].get(BATCH_PROPERTY + "other_pipeline") == "1"

    # the next batch goes in
    sink.write(table, orders_frame(spark, [("+I", 10, 3, "c")]), 2)
    assert read_back(spark, sink, table) == [row(1, "a2"), row(3, "c")]
    assert sink.applied_batch(spark, table) == 2


def test_composite_key_and_a_table_without_database(spark: Any, tmp_path: Path) -> None:
    columns = (
        SinkColumn("tenant", "STRING", nullable=False),
        SinkColumn("id", "INT", nullable=False),
        SinkColumn("v", "STRING"),
    )
    table = SinkTable("items", columns, ("tenant", "id"), ("app_db.items",))
    sink = make_sink(spark, tmp_path / "wh")
    sink.open([table])
    assert sink.identifier(table).endswith(".`default`.`items`")

    def frame(rows: list[tuple[Any, ...]]) -> Any:
        full = [(op, None, seq, "app_db", "items", *values) for op, seq, *values in rows]
        return spark.createDataFrame(full, f"{META}, tenant STRING, id INT, v STRING")

    sink.write(table, frame([("+I", 1, "a", 1, "a1"), ("+I", 2, "b", 1, "b1")]), 0)
    sink.write(
        table,
        frame(
            [
                ("+U", 3, "a", 1, "a1'"),  # same id, other tenant untouched
                ("-U", 4, "b", 1, "b1"),  # key change: (b, 1) -> (b, 2)
                ("+U", 4, "b", 2, "b2"),
                ("+I", 5, "a", 2, "a2"),
            ]
        ),
        1,
    )
    assert read_back(spark, sink, table) == [("a", 1, "a1'"), ("a", 2, "a2"), ("b", 2, "b2")]


def test_every_type_round_trips(spark: Any, tmp_path: Path) -> None:
    columns = (
        SinkColumn("id", "BIGINT", nullable=False),
        SinkColumn("tiny", "TINYINT"),
        SinkColumn("small", "SMALLINT"),
        SinkColumn("i", "INT"),
        SinkColumn("f", "FLOAT"),
        SinkColumn("dbl", "DOUBLE"),
        SinkColumn("dec", "DECIMAL(38,10)"),
        SinkColumn("s", "STRING"),
        SinkColumn("raw", "BINARY"),
        SinkColumn("ts", "TIMESTAMP"),
        SinkColumn("ntz", "TIMESTAMP_NTZ"),
        SinkColumn("d", "DATE"),
        SinkColumn("flag", "BOOLEAN"),
    )
    table = SinkTable("app_db.types", columns, ("id",), ("app_db.types",))
    sink = make_sink(spark, tmp_path / "wh")
    sink.open([table])
    values = (
        1,
        -128,
        -32768,
        2**31 - 1,
        1.5,
        -2.5e300,
        Decimal("1234567890123456789012345678.0123456789"),
        "ünïcödé ✓ 𝄞",
        b"\x00\xff\x10",
        T0,
        datetime(2024, 1, 2, 3, 4, 5, 6),
        date(1, 1, 1),
        True,
    )
    nulls = (2, *([None] * (len(columns) - 1)))
    rows = [("+I", None, 1, "app_db", "types", *values), ("+I", None, 2, "app_db", "types", *nulls)]
    ddl = ", ".join(f"`{c.name}` {c.spark_type}" for c in columns)
    sink.write(table, spark.createDataFrame(rows, f"{META}, {ddl}"), 0)
    assert read_back(spark, sink, table) == [values, nulls]


def test_write_uses_the_frames_session(spark: Any, tmp_path: Path) -> None:
    # foreachBatch hands the sink frames of a cloned session; the catalog must be set up there
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    other = spark.newSession()
    assert other.conf.get(f"spark.sql.catalog.{sink._options.catalog_name}", None) is None
    sink.write(table, orders_frame(other, [("+I", 1, 1, "a")]), 0)
    # read through the first session: with Iceberg's table cache on, it would not see the row
    assert read_back(spark, sink, table) == [row(1, "a")]


def test_foreach_batch_stream(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    source = tmp_path / "changes"
    batches = [
        [("+I", 1, 1, "a"), ("+I", 2, 2, "b")],
        [("+U", 3, 1, "a2"), ("-D", 4, 2, "b"), ("+I", 5, 3, "c")],
    ]
    for i, rows in enumerate(batches):  # one file per micro-batch (maxFilesPerTrigger)
        orders_frame(spark, rows).coalesce(1).write.parquet(str(source / f"part{i}"))
        for data in (source / f"part{i}").glob("*.parquet"):
            data.rename(source / f"{i}.parquet")
    schema = orders_frame(spark, []).schema
    query = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .writeStream.foreachBatch(lambda frame, batch_id: sink.write(table, frame, batch_id))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    assert read_back(spark, sink, table) == [row(1, "a2"), row(3, "c")]
    assert [s.get(sink.batch_property) for s in snapshots(spark, sink, table)] == ["0", "1"]


def test_pyiceberg_reads_what_spark_wrote(spark: Any, tmp_path: Path) -> None:
    """Every read_back above compares with pyiceberg; this one checks a position delete."""
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    sink.write(table, orders_frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]), 0)
    sink.write(table, orders_frame(spark, [("-D", 3, 1, "a")]), 1)  # a position delete
    scanned = StaticTable.from_metadata(str(hadoop_metadata(sink, table))).scan().to_arrow()
    assert arrow_rows(scanned, table) == [row(2, "b")]


# -- catalogs and failures -------------------------------------------------------------


def test_jdbc_catalog_on_mariadb(spark: Any, tmp_path: Path) -> None:
    from sparkcdc_dev.devserver import DevServer

    server = DevServer.from_env()
    settings = server.start()
    database = f"iceberg_catalog_{uuid.uuid4().hex[:8]}"
    with server.root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {database}")
        cur.execute(f"GRANT ALL PRIVILEGES ON {database}.* TO 'cdc'@'127.0.0.1'")
    try:
        sink = make_sink(
            spark,
            tmp_path / "wh",
            **{
                "catalog.properties.type": "jdbc",
                "catalog.properties.uri": (
                    f"jdbc:mariadb://{settings.host}:{settings.port}/{database}"
                ),
                "catalog.properties.jdbc.user": settings.user,
                "catalog.properties.jdbc.password": settings.password,
            },
        )
        table = orders_table()
        sink.open([table])
        sink.write(table, orders_frame(spark, [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]), 0)
        sink.write(table, orders_frame(spark, [("-D", 3, 2, "b")]), 1)
        with server.root_connection() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT metadata_location FROM {database}.iceberg_tables "
                "WHERE table_namespace = 'app_db' AND table_name = 'orders'"
            )
            metadata = cur.fetchone()[0]
        assert read_back(spark, sink, table, metadata) == [row(1, "a")]
        assert sink.applied_batch(spark, table) == 1
    finally:
        with server.root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")


def test_jdbc_catalog_without_its_driver(spark: Any, tmp_path: Path) -> None:
    sink = make_sink(
        spark,
        tmp_path / "wh",
        **{
            "catalog.properties.type": "jdbc",
            "catalog.properties.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}?password=s3cret",
            "catalog.properties.jdbc.password": "s3cret",
        },
    )
    with pytest.raises(SinkError) as raised:
        sink.open([orders_table()])
    message = str(raised.value)
    assert "No suitable driver" in message
    assert "driver must be on Spark's classpath" in message
    assert "s3cret" not in message


def test_unwritable_warehouse(spark: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    sink = make_sink(spark, blocker / "wh")
    with pytest.raises(SinkError) as raised:
        sink.open([orders_table()])
    message = str(raised.value)
    assert str(blocker / "wh") in message
    assert "Not a directory" in message
    assert "catalog.properties.warehouse" in message
    assert blocker.read_text() == "not a directory"


def test_catalog_set_up_before_with_another_warehouse(spark: Any, tmp_path: Path) -> None:
    first = make_sink(spark, tmp_path / "one", **{"catalog.name": f"ice_{uuid.uuid4().hex[:8]}"})
    first.open([orders_table()])
    second = make_sink(spark, tmp_path / "two", **{"catalog.name": first._options.catalog_name})
    with pytest.raises(SinkError, match=r"Use another catalog\.name, or a new session"):
        second.open([orders_table()])


# -- options ---------------------------------------------------------------------------


def test_options_and_spark_conf(tmp_path: Path) -> None:
    options = IcebergOptions.model_validate(
        {
            "type": "iceberg",
            "catalog.properties.warehouse": "relative/wh",
            "catalog.properties.cache-enabled": False,
            "catalog.properties.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        }
    )
    assert options.catalog_name == "sparkcdc_iceberg"
    assert options.catalog_type == "hadoop"
    assert options.properties == {
        "cache-enabled": "false",
        "io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
    }
    assert IcebergSink.spark_conf(options) == {
        "spark.sql.catalog.sparkcdc_iceberg": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.sparkcdc_iceberg.type": "hadoop",
        "spark.sql.catalog.sparkcdc_iceberg.warehouse": str(Path("relative/wh").resolve()),
        "spark.sql.catalog.sparkcdc_iceberg.cache-enabled": "false",
        "spark.sql.catalog.sparkcdc_iceberg.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
    }
    # a nested mapping under 'catalog.properties' says the same
    nested = IcebergOptions.model_validate(
        {
            "type": "iceberg",
            "catalog.name": "lake",
            "catalog.properties": {
                "type": "jdbc",
                "warehouse": "s3a://bucket/wh",
                "uri": "jdbc:mariadb://db/cat",
                "jdbc.user": "u",
            },
        }
    )
    assert nested.catalog_type == "jdbc"
    assert nested.warehouse_location() == "s3a://bucket/wh"
    assert nested.local_warehouse() is None
    assert IcebergSink.spark_conf(nested)["spark.sql.catalog.lake.uri"] == "jdbc:mariadb://db/cat"
    assert IcebergSink.spark_conf(nested)["spark.sql.catalog.lake.jdbc.user"] == "u"
    assert IcebergSink.spark_conf(nested)["spark.sql.catalog.lake.cache-enabled"] == "false"
    file_uri = IcebergOptions.model_validate(
        {"type": "iceberg", "catalog.properties.warehouse": f"file://{tmp_path}"}
    )
    assert file_uri.local_warehouse() == tmp_path


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"catalog.properties.type": "jdbc"}, "a jdbc catalog needs catalog.properties.uri"),
        (
            {"catalog.properties.type": "jdbc", "catalog.properties.uri": "mariadb://db/c"},
            "a jdbc catalog needs catalog.properties.uri",
        ),
        ({"catalog.properties.uri": "jdbc:mariadb://db/c"}, "for catalog.properties.type"),
        ({"catalog.properties.type": "hive"}, "'hadoop' or 'jdbc'"),
        ({"catalog.name": "spark_catalog"}, "Spark's session catalog"),
        ({"catalog.name": "my-lake"}, "not a plain identifier"),
    ],
)
def test_bad_options_are_config_errors(extra: dict[str, str], says: str) -> None:
    block = {"type": "iceberg", "catalog.properties.warehouse": "/tmp/wh"} | extra
    with pytest.raises(ConfigError, match=says):
        _parse_sink(block)


def test_unknown_option_is_named() -> None:
    block = {"type": "iceberg", "catalog.properties.warehouse": "/tmp/wh", "catalog.nme": "x"}
    with pytest.raises(ConfigError) as raised:
        _parse_sink(block)
    message = str(raised.value)
    assert "sink.catalog.nme: unknown key" in message
    assert "Did you mean 'catalog.name'?" in message
    with pytest.raises(ConfigError, match=r"sink\.catalog\.properties\.warehouse"):
        _parse_sink({"type": "iceberg"})  # the warehouse is required


def test_safe_uri_drops_credentials() -> None:
    assert safe_uri("jdbc:mariadb://u:pw@db:3306/cat?password=pw") == "jdbc:mariadb://db:3306/cat"
    assert safe_uri("jdbc:sqlite:/tmp/c.db") == "jdbc:sqlite:/tmp/c.db"


def _parse_sink(block: dict[str, Any]) -> Any:
    source = {"type": "mysql", "hostname": "h", "username": "u", "tables": "app_db.orders"}
    text = json.dumps({"source": source, "sink": block})  # JSON is YAML
    return parse_pipeline(text).sink


# -- appends (snapshot rows of keys the table does not hold) ---------------------------

SNAPSHOT_ROWS = [("+I", 1, k, f"n{k}") for k in range(1, 6)]
BATCH_ONE_CHANGES = [("-U", 10, 2, "n2"), ("+U", 10, 2, "two"), ("-D", 11, 3, "n3"), ("+I", 12, 6)]
AFTER_BATCH_ONE = [row(1, "n1"), row(2, "two"), row(4, "n4"), row(5, "n5"), row(6)]


def test_append_then_write_in_one_batch(spark: Any, tmp_path: Path) -> None:
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    assert IcebergSink.appends
    assert sink.append(table, orders_frame(spark, SNAPSHOT_ROWS), 1)
    assert sink.write(table, orders_frame(spark, BATCH_ONE_CHANGES), 1)
    assert read_back(spark, sink, table) == AFTER_BATCH_ONE
    operations = spark.sql(
        f"SELECT operation FROM {sink.identifier(table)}.snapshots ORDER BY committed_at"
    ).collect()
    assert operations[0].operation == "append"  # no MERGE for the snapshot rows
    assert sink.applied_batch(spark, table, sink.append_property) == 1


def test_replayed_append_and_write_are_skipped(spark: Any, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    sink, table = make_sink(spark, warehouse), orders_table()
    sink.open([table])
    sink.append(table, orders_frame(spark, SNAPSHOT_ROWS), 1)
    sink.write(table, orders_frame(spark, BATCH_ONE_CHANGES), 1)
    committed = len(snapshots(spark, sink, table))
    # a restarted run replays batch 1 (other content proves a skip, not a re-apply)
    again = make_sink(spark, warehouse, **{"catalog.name": sink._options.catalog_name})
    assert not again.append(table, orders_frame(spark, [("+I", 1, 9, "nine")]), 1)
    assert not again.write(table, orders_frame(spark, [("-D", 20, 1, "n1")]), 1)
    assert read_back(spark, sink, table) == AFTER_BATCH_ONE
    assert len(snapshots(spark, sink, table)) == committed


def test_crash_between_append_and_write(spark: Any, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    sink, table = make_sink(spark, warehouse), orders_table()
    sink.open([table])
    sink.append(table, orders_frame(spark, SNAPSHOT_ROWS), 1)  # ... and the process dies
    again = make_sink(spark, warehouse, **{"catalog.name": sink._options.catalog_name})
    assert not again.append(table, orders_frame(spark, SNAPSHOT_ROWS), 1)
    assert again.write(table, orders_frame(spark, BATCH_ONE_CHANGES), 1)
    assert read_back(spark, sink, table) == AFTER_BATCH_ONE


def test_a_merge_reads_only_the_files_its_keys_can_be_in(spark: Any, tmp_path: Path) -> None:
    """The MERGE's condition bounds the target to the batch's key range, so Iceberg plans no
    file outside it: with the data files of keys 1..100 moved away, a batch of keys
    150..250 still merges (a MERGE that scanned every file would fail to read them)."""
    sink, table = make_sink(spark, tmp_path / "wh"), orders_table()
    sink.open([table])
    sink.append(table, orders_frame(spark, [("+I", 1, k, f"n{k}") for k in range(1, 101)]), 1)
    sink.append(table, orders_frame(spark, [("+I", 1, k, f"n{k}") for k in range(101, 201)]), 2)
    low = [
        Path(r.file_path.removeprefix("file:"))
        for r in spark.sql(
            f"SELECT file_path, readable_metrics.id.upper_bound AS top "
            f"FROM {sink.identifier(table)}.files"
        ).collect()
        if r.top <= 100
    ]
    changes = orders_frame(
        spark, [("-U", 10, 150, "n150"), ("+U", 10, 150, "x"), ("+I", 11, 250, "y")]
    )
    table_read = spark.sql(f"SELECT name FROM {sink.identifier(table)}").collect
    with files_moved_away(low, tmp_path / "away", table_read):
        sink.write(table, changes, 3)
    expected = {k: f"n{k}" for k in range(1, 201)} | {150: "x", 250: "y"}
    assert [(r[0], r[1]) for r in read_back(spark, sink, table)] == sorted(expected.items())
