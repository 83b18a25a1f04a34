"""The kafka sink's options: Flink CDC's Kafka pipeline-sink names, the options of the chosen
JSON format, the producer's defaults, and the topic names a table is sent to."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sparkcdc.sinks.base import SinkOptions, SinkTable, gather_prefixed

ValueFormat = Literal["debezium-json", "canal-json", "changelog-json"]
# commit: a topic's messages of a batch in _seq order (one task sends them); per-key: each
# key's in _seq order, keys spread over tasks (DESIGN.md §6.5)
MessageOrder = Literal["commit", "per-key"]
FORMATS: tuple[str, ...] = ("debezium-json", "canal-json", "changelog-json")
# Flink's JsonFormatOptions 'timestamp-format.standard'
TimestampStandard = Literal["SQL", "ISO-8601"]

PROPERTIES_PREFIX = "properties."

# Kafka's own rule for topic names (org.apache.kafka.common.internals.Topic)
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class JsonFormatOptions(BaseModel):
    """Flink's JSON format options of the chosen ``value.format``, given in the sink block
    with the format's name as prefix (``debezium-json.timestamp-format.standard: ISO-8601``),
    as Flink CDC's Kafka sink takes them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timestamp_format: TimestampStandard = Field("SQL", alias="timestamp-format.standard")
    ignore_null_fields: bool = Field(False, alias="encode.ignore-null-fields")
    decimal_as_plain_number: bool = Field(True, alias="encode.decimal-as-plain-number")
    include_schema: bool = Field(False, alias="include-schema.enabled")
    map_null_key_mode: str | None = Field(None, alias="map-null-key.mode")
    map_null_key_literal: str | None = Field(None, alias="map-null-key.literal")

    @field_validator("decimal_as_plain_number")
    @classmethod
    def _plain_decimals(cls, value: bool) -> bool:
        if not value:
            raise ValueError(
                "sparkcdc always writes decimals as plain JSON numbers (18446744073709551615, "
                "0.0000000000: the source's digits, never 0E-10); remove the option"
            )
        return value

    @field_validator("map_null_key_mode", "map_null_key_literal")
    @classmethod
    def _no_maps(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                "no column from MySQL or MariaDB is a MAP, so there are no map keys to "
                "write; remove the option"
            )
        return value


class KafkaOptions(SinkOptions):
    """The kafka sink block; any ``properties.<name>`` is a Kafka producer property, any
    ``<value.format>.<name>`` an option of that JSON format (Flink's names)."""

    # pipeline/config.py accepts any key with one of these prefixes
    passthrough_prefixes: ClassVar[frozenset[str]] = frozenset(
        {PROPERTIES_PREFIX, *(f"{f}." for f in FORMATS)}
    )

    bootstrap_servers: str = Field(alias="properties.bootstrap.servers", min_length=1)
    topic: str | None = None
    table_id_to_topic: dict[str, str] = Field(
        default_factory=dict, alias="sink.tableId-to-topic.mapping"
    )
    value_format: ValueFormat = Field("debezium-json", alias="value.format")
    key_format: str = Field("json", alias="key.format")
    partition_strategy: Literal["all-to-zero", "hash-by-key"] = Field(
        "all-to-zero", alias="partition.strategy"
    )
    delivery_guarantee: Literal["at-least-once", "none", "exactly-once"] = Field(
        "at-least-once", alias="sink.delivery-guarantee"
    )
    message_order: MessageOrder = Field("commit", alias="sink.message-order")
    add_table_id_to_header: bool = Field(False, alias="sink.add-tableId-to-header-enabled")
    custom_headers: tuple[tuple[str, str], ...] = Field((), alias="sink.custom-header")
    json_format: JsonFormatOptions = Field(JsonFormatOptions.model_validate({}), alias="format")
    # 'properties.linger.ms: 5' arrives here as {'linger.ms': '5'}
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_properties(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return _gather_format(gather_prefixed(data, PROPERTIES_PREFIX, ("bootstrap.servers",)))

    @field_validator("topic")
    @classmethod
    def _check_topic(cls, value: str | None) -> str | None:
        if value is not None:
            check_topic_name(value)
        return value

    @field_validator("table_id_to_topic", mode="before")
    @classmethod
    def _parse_mapping(cls, value: Any) -> Any:
        return parse_topic_mapping(value) if isinstance(value, str) else value

    @field_validator("table_id_to_topic")
    @classmethod
    def _check_mapping(cls, value: dict[str, str]) -> dict[str, str]:
        for topic in value.values():
            check_topic_name(topic)
        return value

    @field_validator("custom_headers", mode="before")
    @classmethod
    def _parse_headers(cls, value: Any) -> Any:
        return parse_custom_headers(value) if isinstance(value, str) else value

    @field_validator("key_format")
    @classmethod
    def _check_key_format(cls, value: str) -> str:
        if value != "json":
            raise ValueError(
                f"key.format {value!r} is not supported; only 'json' (the primary-key columns "
                "as a JSON object) is"
            )
        return value

    @field_validator("delivery_guarantee")
    @classmethod
    def _check_guarantee(cls, value: str) -> str:
        if value == "exactly-once":
            raise ValueError(
                "exactly-once needs Kafka transactions, which Spark's Kafka writer does not "
                "use; the sink is at-least-once, and the sparkcdc.seq header lets a consumer "
                "skip repeats. Use 'at-least-once'"
            )
        return value

    @model_validator(mode="after")
    def _schema_only_for_debezium(self) -> KafkaOptions:
        if self.json_format.include_schema and self.value_format != "debezium-json":
            raise ValueError(
                f"include-schema.enabled is a debezium-json option; value.format is "
                f"{self.value_format}: write debezium-json.include-schema.enabled with "
                "value.format debezium-json"
            )
        return self

    def topic_for(self, table: SinkTable) -> str:
        """``topic``, else the table's mapping entry, else the sink table's name."""
        if self.topic:
            return self.topic
        return self.table_id_to_topic.get(table.name, table.name)

    def client_properties(self) -> dict[str, str]:
        """The Kafka client properties (Java names), bootstrap servers included: the
        user's ``properties.*`` over ``PRODUCER_DEFAULTS``."""
        return {**PRODUCER_DEFAULTS, **self.properties, "bootstrap.servers": self.bootstrap_servers}


# The producer tuned for throughput as Kafka's documentation advises (batches of up to
# 256 KiB, waiting up to 20 ms to fill them, compressed with lz4): a sink batch sends its
# messages at once (docs/benchmarks.md). Any of them can be set with properties.*
# (properties.compression.type: none)
PRODUCER_DEFAULTS = {"linger.ms": "20", "batch.size": "262144", "compression.type": "lz4"}


def _gather_format(data: dict[str, Any]) -> dict[str, Any]:
    """The ``<value.format>.*`` keys gathered under ``format``; another format's keys are
    refused, as Flink CDC refuses them (they would silently do nothing)."""
    chosen = str(data.get("value.format", data.get("value_format", "debezium-json")))
    out: dict[str, Any] = {}
    gathered: dict[str, Any] = {}
    for key, value in data.items():
        fmt = next((f for f in FORMATS if isinstance(key, str) and key.startswith(f"{f}.")), None)
        if fmt is None:
            out[key] = value
        elif fmt == chosen:
            gathered[key.removeprefix(f"{fmt}.")] = value
        else:
            raise ValueError(
                f"{key!r} is an option of value.format {fmt}, but value.format is {chosen}: "
                f"write it as {chosen}.{key.removeprefix(f'{fmt}.')} or remove it"
            )
    if gathered:
        out["format"] = gathered
    return out


def parse_topic_mapping(text: str) -> dict[str, str]:
    """Flink CDC's ``sink.tableId-to-topic.mapping``: ``db.t1:topicA;db.t2:topicB``.

    >>> parse_topic_mapping("app_db.orders:orders; app_db.items:items")
    {'app_db.orders': 'orders', 'app_db.items': 'items'}
    """
    mapping: dict[str, str] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        table_id, sep, topic = entry.partition(":")
        table_id, topic = table_id.strip(), topic.strip()
        if not sep or not table_id or not topic:
            raise ValueError(
                f"entry {entry.strip()!r} is not 'table-id:topic'; write the mapping as "
                "'db.t1:topicA;db.t2:topicB'"
            )
        if table_id in mapping:
            raise ValueError(f"table {table_id!r} is mapped twice")
        mapping[table_id] = topic
    return mapping


def parse_custom_headers(text: str) -> tuple[tuple[str, str], ...]:
    """Flink CDC's ``sink.custom-header``: ``key1:value1,key2:value2``, sent with every message.

    >>> parse_custom_headers("team:data, env:prod")
    (('team', 'data'), ('env', 'prod'))
    """
    headers = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, sep, value = entry.partition(":")
        if not sep or not name.strip():
            raise ValueError(
                f"entry {entry.strip()!r} is not 'key:value'; write the headers as "
                "'key1:value1,key2:value2'"
            )
        headers.append((name.strip(), value.strip()))
    return tuple(headers)


def check_topic_name(topic: str) -> None:
    """Raise ValueError unless Kafka accepts ``topic`` as a topic name."""
    if topic in (".", "..") or not _TOPIC_RE.match(topic):
        raise ValueError(
            f"{topic!r} is not a valid Kafka topic name (1-249 characters of a-z, A-Z, 0-9, "
            "'.', '_', '-'; not '.' or '..')"
        )
