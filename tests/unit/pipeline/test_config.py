from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcdc.errors import ConfigError
from sparkcdc.model.options import SourceOptions
from sparkcdc.pipeline.config import PipelineConfig, load_pipeline, parse_pipeline

SECRET = "s3cret-value"
SOURCE: dict[str, Any] = {
    "type": "mysql",
    "hostname": "db.example.com",
    "username": "cdc",
    "password": SECRET,
    "tables": r"app.\.*",
}


def pipeline(
    source: dict[str, Any] | None = None, sink: dict[str, Any] | None = None, **blocks: Any
) -> str:
    """Pipeline YAML text from blocks (the defaults: SOURCE and a console sink)."""
    data = {"source": SOURCE if source is None else source, "sink": sink or {"type": "console"}}
    return yaml.safe_dump({**data, **blocks}, sort_keys=False)


def parse(text: str, env: dict[str, str] | None = None, base: str = "/base") -> PipelineConfig:
    return parse_pipeline(text, base_dir=Path(base), env=env or {})


def config_error(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text, env)
    return str(info.value)


def without(block: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k not in keys}


# ---------------------------------------------------------------------------------- shape


def test_minimal_pipeline_defaults() -> None:
    c = parse(pipeline())
    assert c.source.hostname == "db.example.com" and c.source.port == 3306
    assert c.source.password.get_secret_value() == SECRET
    assert c.sink.type == "console"
    assert c.route == () and c.transform == ()
    assert c.pipeline.name == "sparkcdc-pipeline"
    assert c.pipeline.parallelism == 2
    assert c.pipeline.table_writes_parallelism == 4
    assert c.pipeline.schema_change_behavior == "lenient"
    assert c.checkpoint == "/base/.sparkcdc/sparkcdc-pipeline"
    assert c.state_location == "/base/.sparkcdc/sparkcdc-pipeline/source-state"


def test_module_docstring_example_parses() -> None:
    text = r"""
source:
  type: mysql
  hostname: 127.0.0.1
  port: 3306
  username: cdc
  password: ${MYSQL_PASSWORD}
  tables: app_db.\.*
sink:
  type: delta
  path: /data/lake
route:
  - source-table: app_db.orders_\.*
    sink-table: app_db.orders
transform:
  - source-table: app_db.orders
    projection: "*, UPPER(customer) AS customer_uc"
    filter: amount > 0
pipeline:
  name: orders-to-delta
"""
    c = parse(text, env={"MYSQL_PASSWORD": SECRET})
    assert c.source.password.get_secret_value() == SECRET
    assert c.sink.path == "/data/lake"  # type: ignore[attr-defined]
    assert c.route_for("app_db", "orders_7") == "app_db.orders"
    rule = c.transform_for("app_db", "orders")
    assert rule is not None and rule.filter == "amount > 0"
    assert c.checkpoint == "/base/.sparkcdc/orders-to-delta"


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("orders-to-delta", "orders-to-delta"),
        ("My Orders / v2!", "My-Orders-v2"),
        ("a_b.c-d", "a_b.c-d"),
        ("!!!", "pipeline"),
        ("../../etc", "etc"),
    ],
)
def test_checkpoint_defaults_to_slugified_name_beside_the_file(name: str, slug: str) -> None:
    c = parse(pipeline(pipeline={"name": name}))
    assert c.checkpoint == f"/base/.sparkcdc/{slug}"
    assert c.state_location == f"/base/.sparkcdc/{slug}/source-state"


@pytest.mark.parametrize("name", [".", ".."])
def test_checkpoint_of_dot_names_stays_under_sparkcdc(name: str) -> None:
    checkpoint = Path(parse(pipeline(pipeline={"name": name})).checkpoint)
    assert checkpoint.name not in {".", ".."}
    assert checkpoint.parent == Path("/base/.sparkcdc")


def test_explicit_checkpoint_and_state_location() -> None:
    c = parse(pipeline(pipeline={"checkpoint": "/cp/"}))
    assert c.checkpoint == "/cp/"
    assert c.state_location == "/cp/source-state"  # no double slash
    c = parse(pipeline({**SOURCE, "state.location": "/state"}, pipeline={"checkpoint": "/cp"}))
    assert c.state_location == "/state"


def test_pipeline_block_values() -> None:
    c = parse(
        pipeline(
            pipeline={
                "parallelism": 4,
                "table-writes.parallelism": 1,
                "schema.change.behavior": "exception",
                "trigger.interval": "500ms",
                "spark.conf": {"spark.sql.shuffle.partitions": 8, "x": True},
            }
        )
    )
    assert c.pipeline.parallelism == 4
    assert c.pipeline.table_writes_parallelism == 1
    assert c.pipeline.schema_change_behavior == "exception"
    assert c.pipeline.trigger_interval_s == 0.5
    assert c.pipeline.spark_conf == {"spark.sql.shuffle.partitions": "8", "x": "True"}


def test_load_pipeline_resolves_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "jobs" / "p.yaml"
    path.parent.mkdir()
    path.write_text(pipeline(pipeline={"name": "p1"}), encoding="utf-8")
    c = load_pipeline(path, env={})
    assert c.base_dir == path.parent.resolve()
    assert c.checkpoint == str(path.parent.resolve() / ".sparkcdc" / "p1")


def test_load_pipeline_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read pipeline file .*nope\.yaml"):
        load_pipeline(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", r"^<pipeline>: expected a mapping with 'source' and 'sink' blocks"),
        ("", r"^<pipeline>: expected a mapping"),
        ("source: [\n", r"^<pipeline> is not valid YAML"),
        (pipeline().replace("sink:", "snk:"), r"^snk: unknown key\. Did you mean 'sink'\?"),
        ("sink: {type: console}\n", r"^source: missing; a pipeline needs a 'source' block"),
        (yaml.safe_dump({"source": SOURCE}), r"^sink: missing; a pipeline needs a 'sink' block"),
        (pipeline(sink={"path": "/x"}), r"^sink\.type: missing; one of console, delta"),
        (pipeline(route={"source-table": "a.b"}), r"^route: expected a list of mappings"),
        (pipeline(route=["a.b"]), r"^route\[0\]: expected a mapping, got str"),
        (pipeline(transform=[{"projection": "*"}]), r"^transform\[0\]\.source-table: Field req"),
        (pipeline(pipeline=[1]), r"^pipeline: expected a mapping, got list"),
        (pipeline(pipeline={"parallelism": 0}), r"^pipeline\.parallelism: .*(got 0)"),
        (
            pipeline(pipeline={"table-writes.parallelism": 0}),
            r"^pipeline\.table-writes\.parallelism: .*(got 0)",
        ),
        (
            pipeline(sink={"type": "console", "exclude.schema.changes": ["drop.colum"]}),
            r"^sink\.exclude\.schema\.changes: unknown schema change type 'drop\.colum'\. "
            r"Did you mean 'drop\.column'\?",
        ),
        (
            pipeline(sink={"type": "console", "include.schema.changes": ["add.column", "colum"]}),
            r"^sink\.include\.schema\.changes: unknown .* 'colum'\. Did you mean 'column'\?",
        ),
    ],
)
def test_shape_errors_name_their_place(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(text)


# ------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("text", "path", "suggestion"),
    [
        (pipeline(sink={"type": "delta", "pth": "/x"}), "sink.pth", "path"),
        (pipeline({**SOURCE, "hostnme": "h"}), "source.hostnme", "hostname"),
        (pipeline({**SOURCE, "tabels": "a.b"}), "source.tabels", "tables"),
        (
            pipeline({**SOURCE, "scan.startup.mod": "initial"}),
            "source.scan.startup.mod",
            "scan.startup.mode",
        ),
        (
            pipeline(route=[{"source-table": "a.b", "sink-tabel": "x"}]),
            r"route\[0\].sink-tabel",
            "sink-table",
        ),
        (
            pipeline(
                route=[
                    {"source-table": "a.b", "sink-table": "x"},
                    {"source-table": "a.c", "sink-table": "y", "replace-simbol": "<>"},
                ]
            ),
            r"route\[1\].replace-simbol",
            "replace-symbol",
        ),
        (
            pipeline(transform=[{"source-table": "a.b", "projecton": "*"}]),
            r"transform\[0\].projecton",
            "projection",
        ),
        (
            pipeline(transform=[{"source-table": "a.b", "primary-key": "id"}]),
            r"transform\[0\].primary-key",
            "primary-keys",
        ),
        (
            pipeline(pipeline={"schema.change.behaviour": "evolve"}),
            "pipeline.schema.change.behaviour",
            "schema.change.behavior",
        ),
        (pipeline(pipeline={"nme": "x"}), "pipeline.nme", "name"),
        (pipeline(sink={"type": "console", "rws": 5}), "sink.rws", "rows"),
        (
            pipeline(
                sink={
                    "type": "kafka",
                    "properties.bootstrap.servers": "k:9092",
                    "value.fromat": "canal-json",
                }
            ),
            "sink.value.fromat",
            "value.format",
        ),
        (
            pipeline(sink={"type": "jdbc", "url": "jdbc:mysql://h/db", "usrname": "u"}),
            "sink.usrname",
            "username",
        ),
        (pipeline(sinks={}), "sinks", "sink"),
    ],
)
def test_unknown_key_names_its_yaml_path_and_the_closest_key(
    text: str, path: str, suggestion: str
) -> None:
    message = config_error(text)
    assert message.startswith(path.replace("\\", "") + ": unknown key.")
    assert f"Did you mean '{suggestion}'?" in message
    assert "Valid keys" in message and suggestion in message.split("Valid keys", 1)[1]
    assert SECRET not in message


def test_unknown_key_without_anything_close_lists_the_valid_keys() -> None:
    message = config_error(pipeline(sink={"type": "delta", "zzzzzzzz": 1}))
    assert message.startswith("sink.zzzzzzzz: unknown key. Valid keys in sink: ")
    assert "Did you mean" not in message
    assert "path" in message


# ------------------------------------------------------------------------- source block


@pytest.mark.parametrize("kind", ["postgresql", "mariadb", "MySQL", None])
def test_source_type_must_be_mysql_or_postgres(kind: str | None) -> None:
    source = {**SOURCE, "type": kind} if kind else without(SOURCE, "type")
    message = config_error(pipeline(source))
    assert message.startswith("source.type: ") and "Use 'mysql'" in message
    assert "'postgres' (PostgreSQL)" in message


PG_SOURCE = {
    "type": "postgres",
    "hostname": "db",
    "username": "cdc",
    "password": "secret",
    "database-name": "shop",
    "tables": "public.orders_\\.*",
    "slot.name": "orders_cdc",
}


def test_a_postgres_source_reads_postgres_options() -> None:
    config = parse_pipeline(yaml.safe_dump({"source": PG_SOURCE, "sink": {"type": "console"}}))
    options = config.source_options()
    assert config.source.format_name == "postgres-cdc"
    assert options["slot.name"] == "orders_cdc" and options["database-name"] == "shop"
    # the binlog's partitions are MySQL's: not set for a PostgreSQL source
    assert "scan.binlog.partitions" not in options


@pytest.mark.parametrize(
    ("key", "named"),
    [("slot.nme", "Did you mean 'slot.name'?"), ("server-id", "source.server-id: unknown key")],
)
def test_an_unknown_postgres_option_is_named(key: str, named: str) -> None:
    message = config_error(pipeline({**PG_SOURCE, key: "x"}))
    assert message.startswith(f"source.{key}: unknown key") and named in message


def test_changelog_shape_is_reserved_for_the_pipeline() -> None:
    message = config_error(pipeline({**SOURCE, "changelog.shape": "typed"}))
    assert message == "source.changelog.shape: set by the pipeline itself; remove it"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (without(SOURCE, "hostname"), r"^source\.hostname: Field required$"),
        (without(SOURCE, "username"), r"^source\.username: Field required$"),
        ({**SOURCE, "port": 99999}, r"^source\.port: .*65535 \(got 99999\)$"),
        ({**SOURCE, "port": "abc"}, r"^source\.port: .*integer.*\(got 'abc'\)$"),
        ({**SOURCE, "scan.startup.mode": "newest"}, r"^source\.scan\.startup\.mode: .*latest-"),
        (without(SOURCE, "tables"), r"^source: no tables to capture"),
        ({**SOURCE, "tables": "a.("}, r"^source: tables: table pattern '\(' is not a valid"),
        ({**SOURCE, "scan.startup.mode": "timestamp"}, r"needs scan\.startup\.timestamp-millis"),
    ],
)
def test_bad_source_values_name_the_key(source: dict[str, Any], message: str) -> None:
    text = config_error(pipeline(source))
    assert re.search(message, text), text
    assert SECRET not in text


def test_source_options_are_what_the_mysql_cdc_source_reads() -> None:
    source = {
        **SOURCE,
        "port": 3307,
        "connect.timeout": "10s",
        "connect.max-retries": 5,
        "scan.incremental.snapshot.chunk.size": 100,
        "server-id": "5400-5404",
    }
    c = parse(pipeline(source, pipeline={"name": "p"}))
    options = c.source_options()
    assert options == {
        "hostname": "db.example.com",
        "port": "3307",
        "username": "cdc",
        "password": SECRET,  # the source needs the secret itself
        "tables": r"app.\.*",
        "connect.timeout": "10.0",
        "connect.max-retries": "5",
        "scan.incremental.snapshot.chunk.size": "100",
        "server-id": "5400-5404",
        # ~1,000,000 snapshot rows per batch unless the file says otherwise
        "scan.incremental.snapshot.chunks-per-batch": "10000",
        # 64 MiB of binlog per batch, the first batch of a run 8 MiB (spark/compat.py)
        "scan.binlog.max-bytes-per-batch": str(64 << 20),
        # every sink orders a key's rows by _seq: the binlog may be decoded in parallel
        "scan.binlog.partitions": "auto",
        "changelog.shape": "tables",
        "state.location": "/base/.sparkcdc/p/source-state",
    }
    assert all(isinstance(v, str) for v in options.values())
    again = SourceOptions.from_options(options)
    assert again == c.source.model_copy(
        update={
            "changelog_shape": "tables",
            "chunks_per_batch": 10000,
            "binlog_max_bytes_per_batch": 64 << 20,
            "binlog_partitions": "auto",
        }
    )
    told = {
        **source,
        "scan.incremental.snapshot.chunks-per-batch": 3,
        "scan.binlog.partitions": 1,
        "scan.binlog.max-bytes-per-batch": "32m",
    }
    options = parse(pipeline(told, pipeline={"name": "p"})).source_options()
    assert options["scan.incremental.snapshot.chunks-per-batch"] == "3"
    assert options["scan.binlog.partitions"] == "1"
    assert options["scan.binlog.max-bytes-per-batch"] == str(32 << 20)


@pytest.mark.parametrize(
    ("sink", "share"),
    [
        ({"type": "delta", "path": "/lake"}, "1"),
        ({"type": "iceberg", "catalog.properties.warehouse": "/wh"}, "1"),
        ({"type": "kafka", "properties.bootstrap.servers": "k:9092"}, None),
        ({"type": "console"}, None),
    ],
)
def test_a_merge_sinks_first_batch_reads_whole_budgets(
    sink: dict[str, Any], share: str | None
) -> None:
    """A batch into Delta or Iceberg is a MERGE that reads the table whatever the batch's
    size, so their pipelines read the first batch as any other; a topic's first messages
    come sooner from a first batch of an eighth (the source's default)."""
    options = parse(pipeline(sink=sink, pipeline={"name": "p"})).source_options()
    assert options.get("scan.first-batch.share") == share
    told = {**SOURCE, "scan.first-batch.share": 4}
    options = parse(pipeline(told, sink=sink, pipeline={"name": "p"})).source_options()
    assert options["scan.first-batch.share"] == "4"


def test_source_options_leave_out_unset_options() -> None:
    options = parse(pipeline(without(SOURCE, "password"))).source_options()
    assert "password" not in options and "port" not in options
    assert set(options) == {
        "hostname",
        "username",
        "tables",
        "scan.incremental.snapshot.chunks-per-batch",  # the pipeline's own default
        "scan.binlog.partitions",  # the pipeline's own default too
        "scan.binlog.max-bytes-per-batch",  # and this
        "changelog.shape",
        "state.location",
    }


# ------------------------------------------------------------------------------ ${ENV}


def test_env_interpolation() -> None:
    source = {
        **SOURCE,
        "hostname": "${HOST}",
        "password": "${PW}",
        "username": "${USER:-cdc_default}",
        "server-time-zone": "${TZ_UNSET:-}UTC",
    }
    text = pipeline(
        source,
        route=[{"source-table": "app.${T}", "sink-table": "${SCHEMA}.${T}_all"}],
    )
    c = parse(text, env={"HOST": "db1", "PW": SECRET, "T": "orders", "SCHEMA": "ods"})
    assert c.source.hostname == "db1"
    assert c.source.password.get_secret_value() == SECRET
    assert c.source.username == "cdc_default"
    assert c.source.server_time_zone == "UTC"
    assert c.route_for("app", "orders") == "ods.orders_all"
    # a set variable wins over the default, even when empty
    c = parse(
        text.replace("cdc_default", "x"),
        env={"HOST": "h", "PW": "", "T": "t", "SCHEMA": "s", "USER": ""},
    )
    assert c.source.username == ""


def test_env_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKCDC_TEST_HOST", "from-env")
    text = pipeline({**SOURCE, "hostname": "${SPARKCDC_TEST_HOST}"})
    assert parse_pipeline(text, env=None).source.hostname == "from-env"
    with pytest.raises(ConfigError, match="SPARKCDC_TEST_HOST is not set"):
        parse_pipeline(text, env={})  # an explicit env replaces the process environment


@pytest.mark.parametrize(
    ("blocks", "path", "name"),
    [
        ({"source": {**SOURCE, "password": "${PW}"}}, "source.password", "PW"),
        ({"sink": {"type": "delta", "path": "/lake/${ENV_NAME}"}}, "sink.path", "ENV_NAME"),
        ({"route": [{"source-table": "a.b", "sink-table": "${T}"}]}, r"route[0].sink-table", "T"),
        ({"pipeline": {"spark.conf": {"k": "${K}"}}}, "pipeline.spark.conf.k", "K"),
    ],
)
def test_missing_env_var_names_path_and_variable(
    blocks: dict[str, Any], path: str, name: str
) -> None:
    message = config_error(pipeline(**{"source": SOURCE, **blocks}))
    assert message.startswith(f"{path}: environment variable {name} is not set")
    assert f"${{{name}:-default}}" in message


@settings(max_examples=50)
@given(
    st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=20).filter(
        lambda s: "${" not in s
    )
)
def test_values_without_references_are_kept(value: str) -> None:
    c = parse(pipeline({**SOURCE, "username": value, "password": value}))
    assert c.source.username == value
    assert c.source.password.get_secret_value() == value


# ---------------------------------------------------------------------- route, transform


def route_config() -> PipelineConfig:
    return parse(
        pipeline(
            route=[
                {"source-table": r"app.orders_\.*", "sink-table": "app.orders"},
                {"source-table": r"app.\.*", "sink-table": "ods.<>_v", "replace-symbol": "<>"},
                {"source-table": r"shop.items, shop.stock", "sink-table": "shop.catalog"},
            ],
            transform=[
                {"source-table": "app.orders_1", "primary-keys": " id , region ,"},
                {"source-table": r"app.\.*", "projection": "*", "filter": "id > 0"},
                {"source-table": "app.users", "primary-keys": "uid"},  # behind a filtered rule
            ],
        )
    )


@pytest.mark.parametrize(
    ("database", "table", "target"),
    [
        ("app", "orders_1", "app.orders"),  # first matching route wins
        ("app", "orders_", "app.orders"),
        ("app", "users", "ods.users_v"),  # replace-symbol → the source table's name
        ("shop", "stock", "shop.catalog"),
        ("shop", "other", "shop.other"),  # unmatched: the source's own name
        ("xapp", "orders_1", "xapp.orders_1"),  # patterns match whole names
    ],
)
def test_route_for(database: str, table: str, target: str) -> None:
    assert route_config().route_for(database, table) == target


def test_flink_cdcs_escaped_star_is_the_star() -> None:
    """Flink CDC's documentation writes ``projection: \\*, UPPER(name) AS name_upper``
    unquoted (a plain ``*`` would start a YAML alias)."""
    text = (
        "source: {type: mysql, hostname: h, username: u, tables: app.t}\n"
        "sink: {type: console}\n"
        "transform:\n"
        "  - source-table: app.t\n"
        "    projection: \\*, UPPER(name) AS name_upper, concat('\\*', name) AS starred\n"
    )
    rule = parse_pipeline(text).transform[0]
    assert rule.projection == "*, UPPER(name) AS name_upper, concat('\\*', name) AS starred"


def test_transform_for_and_key_columns() -> None:
    c = route_config()
    first = c.transform_for("app", "orders_1")
    assert first is not None and first.key_columns() == ("id", "region")
    other = c.transform_for("app", "other")
    assert other is not None and other.filter == "id > 0" and other.key_columns() is None
    assert c.transform_for("shop", "items") is None
    # a filtered rule shadowing another: Flink CDC would send the rows its filter leaves out
    # to the next rule (classification by row); one rule per table here, so it is refused
    both = r"transform\[1\] and transform\[2\] both match app.users"
    with pytest.raises(ConfigError, match=both):
        c.transform_for("app", "users")


@pytest.mark.parametrize(
    ("keys", "expected"), [(None, None), ("", None), ("id", ("id",)), ("a,b , c", ("a", "b", "c"))]
)
def test_key_columns(keys: str | None, expected: tuple[str, ...] | None) -> None:
    rule: dict[str, Any] = {"source-table": "a.b"}
    if keys is not None:
        rule["primary-keys"] = keys
    (transform,) = parse(pipeline(transform=[rule])).transform
    assert transform.key_columns() == expected


def test_bad_route_pattern_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"source-table: table pattern '\(' is not a valid"):
        parse(pipeline(route=[{"source-table": "a.(", "sink-table": "x"}]))


@pytest.mark.parametrize(
    ("blocks", "path"),
    [
        ({"route": [{"source-table": "a.(", "sink-table": "x"}]}, "route[0].source-table"),
        (
            {"transform": [{"source-table": "a.b"}, {"source-table": "nodot"}]},
            "transform[1].source-table",
        ),
    ],
)
def test_bad_route_pattern_names_its_yaml_path(blocks: dict[str, Any], path: str) -> None:
    assert config_error(pipeline(**blocks)).startswith(path)


# --------------------------------------------------------------------------- sink blocks


def test_unknown_sink_type_suggests_the_closest() -> None:
    message = config_error(pipeline(sink={"type": "deltaa", "path": "/x"}))
    assert message.startswith("sink.type: unknown sink type 'deltaa'. Did you mean 'delta'?")
    assert "console, delta, iceberg, jdbc, kafka" in message


def test_console_sink() -> None:
    sink = parse(pipeline(sink={"type": "console", "rows": 5, "truncate": False})).sink
    assert (sink.rows, sink.truncate) == (5, False)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"^sink\.rows: .*greater than or equal to 1 \(got 0\)"):
        parse(pipeline(sink={"type": "console", "rows": 0}))


def test_delta_sink() -> None:
    assert parse(pipeline(sink={"type": "delta", "path": "/lake"})).sink.path == "/lake"  # type: ignore[attr-defined]
    assert parse(pipeline(sink={"type": "delta"})).sink.path is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("blocks", "where", "scheme"),
    [
        (
            {"pipeline": {"checkpoint": "ftp://AKIA:s3cret-value@host/cp"}},
            "pipeline.checkpoint",
            "ftp",
        ),
        (
            {"sink": {"type": "delta", "path": "wasbs://c@acct.blob.core.windows.net/x"}},
            "sink.path",
            "wasbs",
        ),
    ],
    ids=["checkpoint-ftp", "delta-wasbs"],
)
def test_locations_sparkcdc_cannot_reach_are_refused(
    blocks: dict[str, Any], where: str, scheme: str
) -> None:
    """Before the filesystem layer they became directories named after the scheme under the
    working directory (the schema history and status.json of a checkpoint among them)."""
    message = config_error(pipeline(**blocks))
    assert message.startswith(f"{where}: ")
    assert f"a {scheme}: URI" in message and "s3a" in message
    assert SECRET not in message


def test_object_store_locations_are_kept_as_written() -> None:
    """Spark's Hadoop and sparkcdc's own files reach them as users spell them for Spark;
    the default source state lives in the checkpoint, on the same store."""
    config = parse(
        pipeline(
            sink={"type": "delta", "path": "s3a://lake/tables"},
            pipeline={"checkpoint": "s3a://lake/cdc/orders"},
        )
    )
    assert config.sink.path == "s3a://lake/tables"  # type: ignore[attr-defined]
    assert config.checkpoint == "s3a://lake/cdc/orders"
    assert config.state_location == "s3a://lake/cdc/orders/source-state"


@pytest.mark.parametrize(
    ("sink", "defaults", "clause"),
    [
        (
            {"type": "delta", "table.properties.delta.enableDeletionVectors": True},
            {"delta.enableDeletionVectors": "false"},
            "'delta.enableDeletionVectors' = 'true'",
        ),
        (
            {
                "type": "iceberg",
                "catalog.properties.warehouse": "/wh",
                "catalog.properties.cache-enabled": "true",
                "table.properties": {"write.merge.mode": "copy-on-write", "note": "it's"},
            },
            {"format-version": "2", "write.merge.mode": "merge-on-read"},
            "'format-version' = '2', 'write.merge.mode' = 'copy-on-write', 'note' = 'it\\'s'",
        ),
    ],
    ids=["delta", "iceberg"],
)
def test_table_properties_go_over_the_sinks_defaults(
    sink: dict[str, Any], defaults: dict[str, str], clause: str
) -> None:
    options: Any = parse(pipeline(sink=sink)).sink
    assert options.tblproperties(defaults) == clause
    if sink["type"] == "iceberg":  # the catalog's properties stay the catalog's
        assert options.properties == {"cache-enabled": "true"}


def test_kafka_sink_properties_pass_through() -> None:
    sink: Any = parse(
        pipeline(
            sink={
                "type": "kafka",
                "properties.bootstrap.servers": "k1:9092,k2:9092",
                "properties.linger.ms": 5,
                "properties.compression.type": "zstd",
                "value.format": "canal-json",
                "topic": "changes",
            }
        )
    ).sink
    assert sink.bootstrap_servers == "k1:9092,k2:9092"
    assert sink.properties == {"linger.ms": "5", "compression.type": "zstd"}
    assert sink.value_format == "canal-json"
    assert sink.topic == "changes"


@pytest.mark.parametrize(
    ("sink", "message"),
    [
        ({"type": "kafka"}, r"^sink\.properties\.bootstrap\.servers: Field required$"),
        (
            {"type": "kafka", "properties.bootstrap.servers": "k", "value.format": "avro"},
            r"^sink\.value\.format: .*'debezium-json'.*\(got 'avro'\)$",
        ),
        ({"type": "jdbc"}, r"^sink\.url: Field required$"),
        ({"type": "jdbc", "url": "mysql://h/db"}, r"^sink\.url: a JDBC URL starts with 'jdbc:'"),
        ({"type": "jdbc", "url": "jdbc:oracle:thin:@h:1521:x"}, r"^sink\.url: .*'jdbc:oracle'"),
        (
            {"type": "jdbc", "url": "jdbc:mysql://h/db", "schema": "s"},
            r"^sink\.schema applies to PostgreSQL targets only",
        ),
    ],
)
def test_bad_sink_values_name_the_key(sink: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(pipeline(sink=sink))


def test_jdbc_sink() -> None:
    sink: Any = parse(
        pipeline(
            sink={
                "type": "jdbc",
                "url": "jdbc:postgresql://pg:5433/analytics",
                "username": "writer",
                "password": SECRET,
                "schema": "ods",
            }
        )
    ).sink
    assert (sink.url, sink.username, sink.schema_name) == (
        "jdbc:postgresql://pg:5433/analytics",
        "writer",
        "ods",
    )
    assert sink.password.get_secret_value() == SECRET
    assert SECRET not in repr(sink) and SECRET not in str(sink)


def test_iceberg_sink_checks_its_keys() -> None:
    message = config_error(pipeline(sink={"type": "iceberg", "zzzzzzzz": 1}))
    assert message.startswith("sink.zzzzzzzz: unknown key.")


# -------------------------------------------------------------------------- no passwords

JDBC = {"type": "jdbc", "url": "jdbc:mysql://h/db", "username": "u", "password": SECRET}

LEAKY: list[tuple[str, dict[str, Any]]] = [
    ("source without hostname", {"source": without(SOURCE, "hostname")}),
    ("source without username", {"source": without(SOURCE, "username")}),
    ("bad port", {"source": {**SOURCE, "port": 99999}}),
    ("port as text", {"source": {**SOURCE, "port": "x"}}),
    ("unknown source key", {"source": {**SOURCE, "hostnme": "h"}}),
    ("bad source type", {"source": {**SOURCE, "type": "postgres"}}),
    ("reserved key", {"source": {**SOURCE, "changelog.shape": "typed"}}),
    ("bad tables", {"source": {**SOURCE, "tables": "a.("}}),
    ("no tables", {"source": without(SOURCE, "tables")}),
    ("bad startup mode", {"source": {**SOURCE, "scan.startup.mode": "x"}}),
    ("specific offset", {"source": {**SOURCE, "scan.startup.mode": "specific-offset"}}),
    ("bad duration", {"source": {**SOURCE, "connect.timeout": "soon"}}),
    ("bad server id", {"source": {**SOURCE, "server-id": "abc"}}),
    ("missing env", {"source": {**SOURCE, "hostname": "${NOPE}"}}),
    ("jdbc credentials in url", {"sink": {**JDBC, "url": f"jdbc:mysql://u:{SECRET}@h/db"}}),
    ("jdbc password in query", {"sink": {**JDBC, "url": f"jdbc:mysql://h/db?password={SECRET}"}}),
    ("jdbc password in path", {"sink": {**JDBC, "url": f"jdbc:mysql://h/db;password={SECRET}"}}),
    ("jdbc bad port", {"sink": {**JDBC, "url": f"jdbc:mysql://h:{SECRET}/db"}}),
    ("jdbc no database", {"sink": {**JDBC, "url": f"jdbc:postgresql://{SECRET}@h"}}),
    ("jdbc bad scheme", {"sink": {**JDBC, "url": "jdbc:db2://h/db"}}),
    ("jdbc schema on mysql", {"sink": {**JDBC, "schema": "s"}}),
    ("jdbc unknown key", {"sink": {**JDBC, "usr": "u"}}),
    ("jdbc without url", {"sink": without(JDBC, "url")}),
    ("jdbc password as list", {"sink": {**JDBC, "password": [SECRET]}}),
    ("source password as list", {"source": {**SOURCE, "password": [SECRET]}}),
    (
        "kafka jaas property",
        {
            "sink": {
                "type": "kafka",
                "properties.sasl.jaas.config": f'x required password="{SECRET}";',
                "value.format": "avro",
            }
        },
    ),
    ("unknown top-level key", {"sinks": {"password": SECRET}}),
]


@pytest.mark.parametrize(("case", "blocks"), LEAKY, ids=[case for case, _ in LEAKY])
def test_config_errors_never_show_a_password(case: str, blocks: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        parse(pipeline(**{"source": SOURCE, **blocks}))
    exc = info.value
    for text in (str(exc), repr(exc), str(pickle.loads(pickle.dumps(exc)))):
        assert SECRET not in text, case
        assert SECRET[:6] not in text, case


@settings(max_examples=60, deadline=None)
@given(
    st.from_regex(r"[A-Za-z0-9]{10,16}", fullmatch=True),
    st.sampled_from([blocks for _, blocks in LEAKY]),
)
def test_no_error_shows_any_password(password: str, blocks: dict[str, Any]) -> None:
    text = pipeline(**{"source": SOURCE, **blocks}).replace(SECRET, password)
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert password not in str(info.value)


@pytest.mark.parametrize("written", ["123456", "007", "1e3", "0x1F", "1_000"])
def test_a_password_yaml_reads_as_a_number_is_the_text_written(written: str) -> None:
    # Flink CDC's docs write `password: 123456`; YAML makes it a number, which as text
    # would lose a leading zero or respell an exponent
    text = pipeline({**SOURCE, "password": "PW"}, sink={**JDBC, "password": "PW"})
    c = parse(text.replace("password: PW", f"password: {written}"))
    assert c.source.password.get_secret_value() == written
    assert c.sink.password.get_secret_value() == written  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "line", [f"password: {SECRET}: x", f'password: "{SECRET}', f"password: [{SECRET}"]
)
def test_yaml_syntax_error_does_not_show_the_line(line: str) -> None:
    text = "source:\n  type: mysql\n  hostname: h\n  username: u\n"
    text += f"  {line}\nsink: {{type: console}}\n"
    message = config_error(text)
    assert "is not valid YAML" in message and "line " in message  # where, without the text
    assert SECRET not in message


def test_jdbc_url_without_scheme_colon_does_not_show_the_password() -> None:
    url = f"jdbc:mysql//h/db?user=u&password={SECRET}"  # no port: no ':' before the query
    message = config_error(pipeline(sink={**JDBC, "url": url}))
    assert message.startswith("sink.url: ")
    assert SECRET not in message
