"""Pipeline definitions: Flink CDC 3.x YAML, parsed once into frozen typed models.

A Flink CDC user ports a file by changing its ``sink`` block::

    source:
      type: mysql
      hostname: 127.0.0.1
      port: 3306
      username: cdc
      password: ${MYSQL_PASSWORD}
      tables: app_db.\\.*
    sink:
      type: delta
      path: /data/lake
    route:
      - source-table: app_db.orders_\\.*
        sink-table: app_db.orders
    transform:
      - source-table: app_db.orders
        projection: "*, UPPER(customer) AS customer_uc"
        filter: amount > 0
    pipeline:
      name: orders-to-delta

Every key is checked; an error names its YAML path (``sink.pth``) and the closest valid key.
``${VAR}`` and ``${VAR:-default}`` in any string are replaced from the environment.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sparkcdc.errors import ConfigError, did_you_mean
from sparkcdc.locations import Location, hadoop_settings, open_location, supported_location
from sparkcdc.model.dialect import dialect_class
from sparkcdc.model.options import SourceOptions, parse_duration
from sparkcdc.model.tables import Pattern, parse_table_patterns
from sparkcdc.model.text import redacted_uri, split_top_level
from sparkcdc.sinks.base import SinkOptions, sink_class

SchemaChangeBehavior = Literal["exception", "evolve", "try_evolve", "lenient", "ignore"]
ExistingSinkRows = Literal["fail", "truncate", "keep"]
SNAPSHOT_BATCH_ROWS = 1_000_000  # snapshot rows a pipeline batch reads when not told otherwise
# binlog a pipeline batch reads when not told otherwise (the source's own default is 256m):
# the first batch of a run reads an eighth, 8 MiB, ~80,000 changes (spark/compat.py)
BINLOG_BATCH_BYTES = 64 << 20
# set by the pipeline, never by the user: pipelines read the typed many-table shape
_SOURCE_RESERVED = ("changelog.shape",)
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)

# Flink CDC 3.x keys that sparkcdc does not take as they are. A file ported from Flink CDC
# meets them; each gets its reason and what to do instead of "unknown key" (Flink CDC's
# docs: core-concept/transform.md, data-pipeline.md, pipeline-connectors/mysql.md).
_FLINK_ONLY: dict[str, dict[str, str]] = {
    "source": {
        "debezium.": "sparkcdc reads the binlog itself, without Debezium; remove the "
        "debezium.* options",
        "jdbc.properties.": "sparkcdc connects with its own client, not JDBC; remove the "
        "jdbc.properties.* options",
        "scan.binlog.newly-added-table.enabled": "use scan.newly-added-table.enabled: new "
        "tables are snapshotted and then followed while the query runs",
        "include-comments.enabled": "table and column comments are not carried to sinks; "
        "remove the option",
        "use.legacy.json.format": "JSON values are delivered as the server prints them; "
        "remove the option",
        "scan.incremental.snapshot.unbounded-chunk-first.enabled": "chunks are read in key "
        "order; remove the option",
        "scan.incremental.snapshot.backfill.skip": "every chunk is made exact by its "
        "backfill (exactly-once); remove the option",
        "scan.startup.specific-offset.skip-events": "start at the position after the events "
        "to skip instead (scan.startup.specific-offset.file / .pos)",
        "scan.startup.specific-offset.skip-rows": "start at the position after the rows to "
        "skip instead (scan.startup.specific-offset.file / .pos)",
    },
    "transform": {
        "partition-keys": "sinks create unpartitioned tables; remove it (partition a "
        "table you create yourself before the first run)",
        "table-options": "sinks create tables with their own table.properties.* options "
        "(sink block); remove it",
        "converter-after-transform": "SOFT_DELETE is not supported: deletes delete the "
        "sink row; remove it (project __data_event_type__ to see the kind of each change)",
    },
    "pipeline": {
        "user-defined-function": "transforms are Spark SQL: use Spark's built-in functions "
        "or register Python UDFs on the session (sparkcdc.pipeline.runner.run_pipeline "
        "takes a session); Java UDF classes are not loaded",
        "model": "AI model functions are not supported in transforms; remove the block",
        "flink-conf": "there is no Flink here: put Spark settings under pipeline.spark.conf",
        "schema-operator.rpc-timeout": "there is no schema operator here; remove it",
    },
}
# Flink CDC source options that tune its reader and mean nothing to sparkcdc's: accepted
# (a ported file runs) and logged as ignored
_FLINK_TUNING = {
    "scan.snapshot.fetch.size": "chunks are read whole (scan.incremental.snapshot.chunk.size)",
    "connection.pool.size": "each task opens the connections it needs",
    "scan.incremental.close-idle-reader.enabled": "Spark ends idle tasks itself",
}


def _flink_only(block: Mapping[str, Any], area: str, path: str) -> None:
    """A Flink CDC key sparkcdc does not support: a ConfigError naming the feature."""
    for key in block:
        for name, reason in _FLINK_ONLY[area].items():
            if key == name or (name.endswith(".") and str(key).startswith(name)):
                raise ConfigError(
                    f"{path}.{key}: Flink CDC's {name.rstrip('.')} is not supported by "
                    f"sparkcdc: {reason}"
                )


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _checked_patterns(value: str) -> str:
    try:
        parse_table_patterns(value, option="source-table")
    except ConfigError as exc:  # a ValueError gets the YAML path added by _validate
        raise ValueError(str(exc).removeprefix("source-table: ")) from None
    return value


_LOCALTIMESTAMP = re.compile(r"(?<![\w`.])localtimestamp\b(?!\s*\()", re.IGNORECASE)
_LITERAL = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")


def _outside_literals(text: str, change: Callable[[str], str]) -> str:
    """``change`` applied to the parts of a SQL text outside quotes and backticks.

    >>> _outside_literals("a || 'a'", str.upper)
    "A || 'a'"
    """
    out, at = [], 0
    for match in _LITERAL.finditer(text):
        out += [change(text[at : match.start()]), match.group()]
        at = match.end()
    return "".join([*out, change(text[at:])])


class RouteRule(_Block):
    """``route`` entry: tables matching ``source-table`` go to ``sink-table``."""

    source_table: str = Field(alias="source-table")
    sink_table: str = Field(alias="sink-table")
    replace_symbol: str | None = Field(None, alias="replace-symbol")
    description: str | None = None

    @field_validator("source_table")
    @classmethod
    def _patterns(cls, value: str) -> str:
        return _checked_patterns(value)

    def patterns(self) -> tuple[Pattern, ...]:
        return parse_table_patterns(self.source_table, option="source-table")

    def matches(self, database: str, table: str) -> bool:
        return any(d.fullmatch(database) and t.fullmatch(table) for d, t in self.patterns())

    def target(self, database: str, table: str) -> str:
        """The sink table for a matching source table (``replace-symbol`` → its name).

        >>> RouteRule.model_validate({"source-table": "db.t_\\\\.*",
        ...     "sink-table": "ods.<>_v", "replace-symbol": "<>"}).target("db", "t_1")
        'ods.t_1_v'
        """
        if self.replace_symbol:
            return self.sink_table.replace(self.replace_symbol, table)
        return self.sink_table


class TransformRule(_Block):
    """``transform`` entry: Spark SQL projection / filter and key override for some tables."""

    source_table: str = Field(alias="source-table")
    projection: str | None = None
    filter: str | None = None
    primary_keys: str | None = Field(None, alias="primary-keys")
    description: str | None = None

    @field_validator("source_table")
    @classmethod
    def _patterns(cls, value: str) -> str:
        return _checked_patterns(value)

    @field_validator("projection")
    @classmethod
    def _unescaped_star(cls, value: str | None) -> str | None:
        """Flink CDC's documentation writes the star as ``\\*`` (a plain ``*`` starts a YAML
        alias): the same projection here."""
        if value is None or "\\*" not in value:
            return value
        return ", ".join("*" if item == "\\*" else item for item in split_top_level(value))

    @field_validator("projection", "filter")
    @classmethod
    def _niladic(cls, value: str | None) -> str | None:
        """Flink SQL's LOCALTIMESTAMP takes no parentheses; Spark's needs them."""
        if value is None:
            return value
        return _outside_literals(value, lambda part: _LOCALTIMESTAMP.sub("localtimestamp()", part))

    def matches(self, database: str, table: str) -> bool:
        patterns = parse_table_patterns(self.source_table, option="source-table")
        return any(d.fullmatch(database) and t.fullmatch(table) for d, t in patterns)

    def key_columns(self) -> tuple[str, ...] | None:
        if not self.primary_keys:
            return None
        return tuple(k.strip() for k in self.primary_keys.split(",") if k.strip())


class PipelineBlock(_Block):
    """``pipeline`` block."""

    name: str = "sparkcdc-pipeline"
    parallelism: int = Field(2, ge=1)
    # sink tables one batch writes at once, each in a session of its own (sinks that allow
    # it: Delta); 1 writes them one after the other
    table_writes_parallelism: int = Field(4, ge=1, alias="table-writes.parallelism")
    schema_change_behavior: SchemaChangeBehavior = Field("lenient", alias="schema.change.behavior")
    checkpoint: str | None = None  # default: .sparkcdc/<name> beside the YAML file
    trigger_interval_s: float = Field(1.0, alias="trigger.interval", ge=0)
    spark_conf: dict[str, str] = Field(default_factory=dict, alias="spark.conf")
    # any Spark master URL (spark://, yarn, k8s://, local[n]); `sparkcdc run --master`
    # wins over it; unset: the master spark-submit configured, else local[parallelism]
    spark_master: str | None = Field(None, alias="spark.master")
    # a new checkpoint (a new stream) whose sink tables hold rows already: stop (fail),
    # empty them before the new snapshot (truncate), or write over them by key (keep)
    existing_sink_rows: ExistingSinkRows = Field("fail", alias="existing-sink-rows")
    # Flink CDC's pipeline options: the session time zone of transforms (Spark's
    # spark.sql.session.timeZone, UTC by default), and the runtime mode (STREAMING only:
    # `sparkcdc run --available-now` is the bounded run)
    local_time_zone: str | None = Field(None, alias="local-time-zone")
    runtime_mode: Literal["STREAMING", "streaming"] = Field(
        "STREAMING", alias="execution.runtime-mode"
    )

    @field_validator("runtime_mode", mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if isinstance(value, str) and value.upper() == "BATCH":
            raise ValueError(
                "BATCH is not a mode of the pipeline; run `sparkcdc run FILE --available-now` "
                "to copy what there is and stop (and remove the option)"
            )
        return value

    @model_validator(mode="after")
    def _one_master(self) -> PipelineBlock:
        given = self.spark_conf.get("spark.master")
        if given and self.spark_master and given != self.spark_master:
            raise ValueError(
                f"spark.master is {self.spark_master!r} but spark.conf's spark.master is "
                f"{given!r}: keep one of them"
            )
        return self

    @property
    def master(self) -> str | None:
        """The Spark master this file chooses (``spark.master``, or ``spark.conf``'s)."""
        return self.spark_master or self.spark_conf.get("spark.master") or None

    def session_conf(self) -> dict[str, str]:
        """The Spark settings of this block: ``spark.conf``, with ``local-time-zone`` as
        the session time zone unless ``spark.conf`` sets one."""
        conf = dict(self.spark_conf)
        if self.local_time_zone:
            conf.setdefault("spark.sql.session.timeZone", self.local_time_zone)
        return conf

    @field_validator("checkpoint")
    @classmethod
    def _reachable_checkpoint(cls, value: str | None) -> str | None:
        return None if value is None else supported_location(value, "the checkpoint")

    @field_validator("trigger_interval_s", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value) if isinstance(value, str) else value

    @field_validator("spark_conf", mode="before")
    @classmethod
    def _conf_text(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): str(v) for k, v in value.items()}
        return value

    def checkpoint_dir(self, base: Path) -> str:
        if self.checkpoint:
            return self.checkpoint
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.name).strip("-.") or "pipeline"
        return str(base / ".sparkcdc" / slug)


class PipelineConfig(BaseModel):
    """A whole pipeline file."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    source: SourceOptions
    sink: SinkOptions
    route: tuple[RouteRule, ...] = ()
    transform: tuple[TransformRule, ...] = ()
    pipeline: PipelineBlock = Field(default_factory=lambda: PipelineBlock.model_validate({}))
    base_dir: Path = Path(".")

    @property
    def checkpoint(self) -> str:
        return self.pipeline.checkpoint_dir(self.base_dir)

    def checkpoint_location(self, hadoop: Mapping[str, str] | None = None) -> Location:
        """The checkpoint on its filesystem, reached with ``hadoop`` (a session's Hadoop
        settings) or else the ``spark.hadoop.fs.*`` settings of ``pipeline.spark.conf``."""
        if hadoop is None:
            hadoop = hadoop_settings(self.pipeline.session_conf())
        return open_location(self.checkpoint, hadoop)

    @property
    def state_location(self) -> str:
        assert self.source.state_location is not None  # set by parse_pipeline
        return self.source.state_location

    def source_options(self) -> dict[str, str]:
        """The options of the source block, as the pipeline's reader (``mysql-cdc``,
        ``postgres-cdc``) takes them."""
        options: dict[str, str] = {}
        for name, field in type(self.source).model_fields.items():
            value = getattr(self.source, name)
            if value is None or name not in self.source.model_fields_set or name == "state_fs":
                continue
            if hasattr(value, "get_secret_value"):
                value = value.get_secret_value()
            options[field.alias or name] = str(value)
        if "chunks_per_batch" not in self.source.model_fields_set:
            # snapshot rows are appended, so a batch's cost hardly grows with its rows: read
            # about SNAPSHOT_BATCH_ROWS rows per batch (executors stream them; Spark spills).
            # Each batch costs ~2 s besides its rows (Delta log, planning): a 1,000,000-row
            # table in one batch took 23.7 s, in two 27.9 s (bench/pipeline_throughput.py)
            per_batch = max(8, SNAPSHOT_BATCH_ROWS // self.source.chunk_size)
            options["scan.incremental.snapshot.chunks-per-batch"] = str(per_batch)
        budget = "scan.binlog.max-bytes-per-batch"
        if "binlog_max_bytes_per_batch" not in self.source.model_fields_set and (
            budget not in self.source.not_options
        ):
            # a backlog's first changes reach the sink after 8 MiB of binlog, not 32 MiB;
            # batches of 64 MiB cost little over 256 MiB (DESIGN.md §2.4)
            options[budget] = str(BINLOG_BATCH_BYTES)
        share = "scan.first-batch.share"
        if (
            "first_batch_share" not in self.source.model_fields_set
            and share not in self.source.not_options
            and not sink_class(self.sink.type).short_first_batch
        ):
            # a MERGE sink's first batch as any: a backlog's catch-up into Delta of 300,000
            # changes took 31 s as one batch, 37-41 s with an eighth first (DESIGN.md §2.4)
            options[share] = "1"
        partitions = "scan.binlog.partitions"
        if "binlog_partitions" not in self.source.model_fields_set and (
            partitions not in self.source.not_options
        ):
            # every sink orders a batch's rows of a key by _seq, so the binlog range may be
            # decoded by several partitions (spark/source.py binlog_shares)
            options[partitions] = "auto"
        options["changelog.shape"] = "tables"
        options["state.location"] = self.state_location
        options.update({f"state.{k}": v for k, v in self.source.state_hadoop().items()})
        return options

    def route_for(self, database: str, table: str) -> str:
        """Sink table of a source table: the first matching route, else ``database.table``."""
        for rule in self.route:
            if rule.matches(database, table):
                return rule.target(database, table)
        return f"{database}.{table}"

    def transform_for(self, database: str, table: str) -> TransformRule | None:
        """The first rule matching the table. Flink CDC picks a rule per row (the first
        whose filter the row passes: "classification mapping"); here a table has one rule,
        which is the same unless the first matching rule has a filter and a later one also
        matches: then the rows the first filter leaves out would go nowhere, so it is refused.
        """
        matching = [(i, t) for i, t in enumerate(self.transform) if t.matches(database, table)]
        if not matching:
            return None
        (first, rule), others = matching[0], matching[1:]
        if rule.filter and others:
            raise ConfigError(
                f"transform[{first}] and transform[{others[0][0]}] both match "
                f"{database}.{table}, and transform[{first}] has a filter: Flink CDC's "
                "classification mapping (each row takes the first rule whose filter it passes) "
                "is not supported; one rule applies per table. Write one rule for the table, "
                "with CASE WHEN in the projection for the classes"
            )
        return rule


# ------------------------------------------------------------------------------- loading


def load_pipeline(path: str | Path, env: Mapping[str, str] | None = None) -> PipelineConfig:
    """Read and validate a pipeline YAML file.

    Raises ConfigError with the YAML path of the first problem and what to do.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read pipeline file {file}: {exc.strerror}") from None
    return parse_pipeline(text, base_dir=file.resolve().parent, env=env, origin=str(file))


def parse_pipeline(
    text: str,
    *,
    base_dir: Path = Path("."),
    env: Mapping[str, str] | None = None,
    origin: str = "<pipeline>",
) -> PipelineConfig:
    """Validate pipeline YAML text (see the module docstring for the shape).

    >>> parse_pipeline("source: {type: mysql, hostname: h, username: u, tables: a.b}\\n"
    ...                "sink: {type: console}").route_for("a", "b")
    'a.b'
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # only the problem and where: PyYAML's own text quotes the line (maybe a password)
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise ConfigError(f"{origin} is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a mapping with 'source' and 'sink' blocks")
    _numbers_as_written(text, data)
    data = _interpolate(data, os.environ if env is None else env, "")
    top = {"source", "sink", "route", "transform", "pipeline"}
    _check_keys(data, top, "")
    for block in ("source", "sink"):
        if not isinstance(data.get(block), dict):
            raise ConfigError(f"{block}: missing; a pipeline needs a '{block}' block (a mapping)")
    if isinstance(data.get("pipeline"), dict):
        _flink_only(data["pipeline"], "pipeline", "pipeline")
    for i, item in enumerate(_list(data, "transform")):
        if isinstance(item, dict):
            _flink_only(item, "transform", f"transform[{i}]")
    pipeline = _validate(PipelineBlock, data.get("pipeline") or {}, "pipeline")
    checkpoint = pipeline.checkpoint_dir(base_dir)
    return PipelineConfig(
        source=_source(data["source"], f"{checkpoint.rstrip('/')}/source-state"),
        sink=_sink(data["sink"]),
        route=tuple(
            _validate(RouteRule, item, f"route[{i}]") for i, item in enumerate(_list(data, "route"))
        ),
        transform=tuple(
            _validate(TransformRule, item, f"transform[{i}]")
            for i, item in enumerate(_list(data, "transform"))
        ),
        pipeline=pipeline,
        base_dir=base_dir,
    )


def _numbers_as_written(text: str, data: dict[str, Any]) -> None:
    """Text options YAML read as numbers, back to the text the file has. Flink CDC's docs
    write ``password: 123456``; YAML makes that an int, and ``007`` or ``1e3`` would come
    back as other text (7, 1000.0), so the scalar's own characters are taken."""
    textual = ("hostname", "username", "password")
    if not any(
        isinstance(block, dict) and isinstance(block.get(k), int | float)
        for block in (data.get("source"), data.get("sink"))
        for k in textual
    ):
        return
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return
    for block_key, block_node in root.value:
        block = data.get(block_key.value)
        if block_key.value not in ("source", "sink") or not isinstance(block, dict):
            continue
        for key_node, value_node in block_node.value:
            key, value = key_node.value, block.get(key_node.value)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if key in textual and number and isinstance(value_node, yaml.ScalarNode):
                block[key] = value_node.value


# pipeline ``source.type`` -> the streaming format (``SourceDialect.type_name``) it reads
PIPELINE_SOURCES = {"mysql": "mysql-cdc", "postgres": "postgres-cdc"}


def _source(block: dict[str, Any], state_location: str) -> SourceOptions:
    kind = block.get("type")
    if kind not in PIPELINE_SOURCES:
        raise ConfigError(
            f"source.type: {kind!r} is not supported.{did_you_mean(str(kind), PIPELINE_SOURCES)}"
            " Use 'mysql' (MySQL and MariaDB) or 'postgres' (PostgreSQL)"
        )
    model = dialect_class(PIPELINE_SOURCES[kind]).options_type
    # Flink CDC's source 'name' is a display name
    options = {k: v for k, v in block.items() if k not in ("type", "name")}
    # a source's own options first (PostgreSQL's debezium.publication.name, as Flink CDC's)
    _flink_only(
        {k: v for k, v in options.items() if k not in model.option_names()}, "source", "source"
    )
    for key in [k for k in options if k in _FLINK_TUNING]:
        log.warning("source.%s: no effect in sparkcdc (%s); ignored", key, _FLINK_TUNING[key])
        del options[key]
    metadata = options.pop("metadata.list", None)
    if metadata is not None and {m.strip() for m in str(metadata).split(",")} - {"op_ts"}:
        raise ConfigError(
            f"source.metadata.list: {metadata!r}: the only metadata column is op_ts, which "
            "transforms always have; remove the option"
        )
    if options.get("schema-change.enabled") is not None:
        enabled = options.pop("schema-change.enabled")
        if str(enabled).lower() != "true":
            raise ConfigError(
                "source.schema-change.enabled: schema changes always travel in the stream; to "
                "keep them from the sink set sink.exclude.schema.changes (e.g. [add, alter, "
                "drop, rename, truncate]) or pipeline.schema.change.behavior: ignore"
            )
    for key in _SOURCE_RESERVED:
        if key in options:
            raise ConfigError(f"source.{key}: set by the pipeline itself; remove it")
    known = model.option_names() - set(_SOURCE_RESERVED)
    _check_keys(options, known | {"type"}, "source")
    # the snapshot's state lives in the pipeline's checkpoint unless the file says otherwise
    options.setdefault("state.location", state_location)
    return _validate(model, options, "source")


def _sink(block: dict[str, Any]) -> SinkOptions:
    kind = block.get("type")
    if not isinstance(kind, str):
        raise ConfigError("sink.type: missing; one of console, delta, iceberg, jdbc, kafka")
    model = sink_class(kind).options_model
    return _validate(model, block, "sink")


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{key}: expected a list of mappings ('- source-table: ...')")
    return value


def _aliases(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def _check_keys(block: Mapping[str, Any], known: set[str], path: str) -> None:
    for key in block:
        if key not in known and not _is_prefixed(key, known):
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(
                f"{where}: unknown key.{did_you_mean(str(key), known)} "
                f"Valid keys{' in ' + path if path else ''}: {', '.join(sorted(known))}"
            )


def _is_prefixed(key: str, known: set[str]) -> bool:
    # 'properties.*' style pass-through options (a model field named 'properties.')
    return any(k.endswith(".") and str(key).startswith(k) for k in known)


def _validate(model: type[M], block: Any, path: str) -> M:
    if not isinstance(block, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(block).__name__}")
    _check_keys(block, _aliases(model) | _extra_keys(model), path)
    try:
        return model.model_validate(block)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        where = f"{path}.{loc}" if loc else path
        message = str(err["msg"]).removeprefix("Value error, ")
        # never echo a whole block (it may hold a password), nor a password itself
        shown = loc and err["type"] != "missing" and "password" not in loc
        given = err.get("input")
        if isinstance(given, str):  # a location URI may carry credentials
            given = redacted_uri(given)
        received = f" (got {given!r})" if shown else ""
        raise ConfigError(f"{where}: {message}{received}") from None


def _extra_keys(model: type[BaseModel]) -> set[str]:
    # e.g. the kafka sink's 'properties.' (any 'properties.*' key is a producer property)
    return set(getattr(model, "passthrough_prefixes", frozenset()))


class LenientEnv(dict[str, str]):
    """Environment variables for reading a pipeline file without its secrets: a variable
    that is not set (and has no default) reads as empty text and is noted in ``missing``,
    instead of stopping. For commands that only look at local files (``sparkcdc status``)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env)
        self.missing: set[str] = set()


def _interpolate(value: Any, env: Mapping[str, str], path: str) -> Any:
    if isinstance(value, dict):
        return {
            k: _interpolate(v, env, f"{path}.{k}" if path else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_interpolate(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            if isinstance(env, LenientEnv):
                env.missing.add(name)
                return ""
            raise ConfigError(
                f"{path}: environment variable {name} is not set (referenced as ${{{name}}}); "
                f"export it, or write ${{{name}:-default}}"
            )

        return _ENV_RE.sub(replace, value)
    return value
