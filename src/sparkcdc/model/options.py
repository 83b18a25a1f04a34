"""Source options, parsed once at the edge into a frozen typed model.

Option names are Flink CDC's MySQL connector names (kebab-case / dotted), so a
Flink CDC user recognises every one. Unknown names are rejected with the closest
valid name suggested.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from sparkcdc.errors import ConfigError, did_you_mean
from sparkcdc.model.tables import TableFilter
from sparkcdc.model.tls import DEFAULT_SSL_MODE, TlsSettings

StartupMode = Literal[
    "initial", "snapshot", "latest-offset", "earliest-offset", "specific-offset", "timestamp"
]
SNAPSHOT_MODES = ("initial", "snapshot")
STATE_FS_PREFIX = "state.fs."  # + a Hadoop filesystem key: the state location's settings

DEFAULT_SERVER_ID_LOW = 5400
DEFAULT_SERVER_ID_HIGH = 6400
DEFAULT_BINLOG_MAX_BYTES_PER_BATCH = 256 << 20

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | float | int) -> float:
    """Seconds from a Flink-style duration: ``30s``, ``500ms``, ``1min``, or a number of seconds.

    >>> parse_duration("500ms")
    0.5
    """
    if isinstance(text, int | float):
        return float(text)
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration; use e.g. '30s', '500ms' or '1min'")
    return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]


_BYTES_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_bytes(text: str | int) -> int:
    """Bytes from a Spark-style size: ``256m``, ``1g``, ``64mb``, ``512MiB`` (powers of
    1024, as Spark's byte settings), or a number of bytes.

    >>> parse_bytes("256m")
    268435456
    """
    if isinstance(text, int):
        return text
    match = _BYTES_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size; use e.g. '256m', '1g' or a number of bytes")
    return int(match.group(1)) << (10 * " kmgt".index((match.group(2) or " ").lower()))


@dataclass(frozen=True)
class ServerIdRange:
    """Replication server ids for one job: one per concurrent binlog connection.

    >>> ServerIdRange.parse("5400-5403").size
    4
    """

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None, default_size: int = 1) -> ServerIdRange:
        if text is None or not str(text).strip():
            # As Flink CDC: random ids from 5400..6400 when none is configured.
            chosen = random.randint(DEFAULT_SERVER_ID_LOW, DEFAULT_SERVER_ID_HIGH)
            return cls(chosen, chosen + max(1, default_size) - 1)
        lo, sep, hi = str(text).strip().partition("-")
        try:
            low, high = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ConfigError(
                f"server-id {text!r} is not a number or range; use e.g. '5400' or '5400-5408'"
            ) from None
        if not 1 <= low <= high <= 2**32 - 1:
            raise ConfigError(
                f"server-id {text!r} must be 1 .. 4294967295 with low <= high, e.g. '5400-5408'"
            )
        return cls(low, high)

    @property
    def size(self) -> int:
        return self.high - self.low + 1

    def pick(self, slot: int) -> int:
        """The id for connection number ``slot`` of a batch (0-based).

        Slots past the range wrap around: at most as many connections run at once as
        Spark has task slots, so a range of 1 + cores ids never collides.
        """
        return self.low + slot % self.size

    def __str__(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


class SourceOptions(BaseModel):
    """The options of ``spark.readStream.format("mysql-cdc")`` (Flink CDC names).

    Another source's options are a subclass (``sparkcdc.postgres.options``): its own
    options added, the ones it has no use for in ``not_options``, its name in
    ``format_name`` (both for ``from_options``' messages)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    format_name: ClassVar[str] = "mysql-cdc"
    not_options: ClassVar[frozenset[str]] = frozenset()

    hostname: str
    port: int = Field(3306, ge=1, le=65535)
    username: str
    password: SecretStr = SecretStr("")
    database_name: str | None = Field(None, alias="database-name")
    table_name: str = Field(".*", alias="table-name")
    tables: str | None = None
    tables_exclude: str | None = Field(None, alias="tables.exclude")
    changelog_shape: Literal["auto", "typed", "tables", "envelope"] = Field(
        "auto", alias="changelog.shape"
    )
    server_id: str | None = Field(None, alias="server-id")
    server_time_zone: str = Field("UTC", alias="server-time-zone")
    scan_startup_mode: StartupMode = Field("initial", alias="scan.startup.mode")
    specific_offset_file: str | None = Field(None, alias="scan.startup.specific-offset.file")
    specific_offset_pos: int | None = Field(None, alias="scan.startup.specific-offset.pos", ge=0)
    specific_offset_gtid_set: str | None = Field(
        None, alias="scan.startup.specific-offset.gtid-set"
    )
    startup_timestamp_millis: int | None = Field(None, alias="scan.startup.timestamp-millis", ge=0)
    connect_timeout_s: float = Field(30.0, alias="connect.timeout")
    heartbeat_interval_s: float = Field(30.0, alias="heartbeat.interval")
    # attempts of a read to connect again after its connection was lost or refused
    connect_max_retries: int = Field(3, alias="connect.max-retries", ge=0)
    state_location: str | None = Field(None, alias="state.location")
    # Hadoop's S3A settings for an s3a:// or s3:// state.location, as options 'state.fs.s3a.*'
    # (executors have no Spark session to read them from; sparkcdc/locations.py)
    state_fs: dict[str, SecretStr] = Field(default_factory=dict, alias="state.fs.")
    chunk_size: int = Field(8096, alias="scan.incremental.snapshot.chunk.size", ge=1)
    chunk_key_column: str | None = Field(None, alias="scan.incremental.snapshot.chunk.key-column")
    chunks_per_batch: int = Field(8, alias="scan.incremental.snapshot.chunks-per-batch", ge=0)
    # None: spread a batch's chunks over the session's parallelism (spark/source.py)
    chunks_per_partition: int | None = Field(
        None, alias="scan.incremental.snapshot.chunks-per-partition", ge=1
    )
    newly_added_table: bool = Field(False, alias="scan.newly-added-table.enabled")
    # tables (db.table, comma-separated) whose snapshot is taken again, once per query start,
    # as pending chunks (spark/source.py _resnapshot); `sparkcdc run --resnapshot` sets it
    resnapshot_tables: str | None = Field(None, alias="scan.resnapshot.tables")
    # Spark partitions that decode one batch's binlog range: a number, or "auto" (by the
    # range's size and the session's parallelism; spark/source.py binlog_shares)
    binlog_partitions: str = Field("1", alias="scan.binlog.partitions")
    # binlog bytes one batch reads at most (0: no bound), cut at a transaction boundary
    # (spark/source.py latestOffset); a backlog is read in bounded batches
    binlog_max_bytes_per_batch: int = Field(
        DEFAULT_BINLOG_MAX_BYTES_PER_BATCH, alias="scan.binlog.max-bytes-per-batch", ge=0
    )
    # the first batch a query plans reads one N-th of those budgets (chunks and binlog
    # bytes; never below 8 chunks, 8 MiB), so that a backlog's first rows reach the sink
    # sooner, at the cost of a batch more (spark/compat.py opening_budget); 1: as any batch
    first_batch_share: int = Field(8, alias="scan.first-batch.share", ge=1)
    # an ALTER TABLE that adds or removes rows with no row image (DROP / TRUNCATE / EXCHANGE
    # PARTITION, DISCARD TABLESPACE): stop the stream, or deliver the statement and go on
    # (the sink keeps its rows; mysql/stream/binlog_range.py refuse_row_changing_ddl)
    ddl_row_changes: Literal["fail", "continue"] = Field("fail", alias="ddl.row-changes")
    # DDL on gh-ost / pt-online-schema-change copies of captured tables (_t_gho, _t_new)
    # delivered too, so a pipeline applies them to t when the tool swaps the copy in
    online_schema_changes: bool = Field(False, alias="scan.parse.online.schema.changes.enabled")
    # TINYINT(1) as BOOLEAN (0 false, else true), or kept a number (model/schema.py)
    tinyint1_as_boolean: bool = Field(True, alias="treat-tinyint1-as-boolean.enabled")
    factor_lower: float = Field(0.05, alias="chunk-key.even-distribution.factor.lower-bound", ge=0)
    factor_upper: float = Field(
        1000.0, alias="chunk-key.even-distribution.factor.upper-bound", ge=0
    )

    # TLS (model/tls.py): MySQL's --ssl-mode values; Connector/J's VERIFY_CA spelling too
    ssl_mode: str = Field(DEFAULT_SSL_MODE, alias="ssl-mode")
    ssl_ca: str | None = Field(None, alias="ssl-ca")
    ssl_cert: str | None = Field(None, alias="ssl-cert")
    ssl_key: str | None = Field(None, alias="ssl-key")
    ssl_key_password: SecretStr | None = Field(None, alias="ssl-key-password")
    server_public_key_path: str | None = Field(None, alias="server-public-key-path")
    allow_public_key_retrieval: bool = Field(False, alias="allow-public-key-retrieval")

    @model_validator(mode="before")
    @classmethod
    def _durations(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("connect.timeout", "heartbeat.interval"):
                if key in data and isinstance(data[key], str):
                    data = {**data, key: parse_duration(data[key])}
        return data

    @model_validator(mode="before")
    @classmethod
    def _state_fs(cls, data: Any) -> Any:
        # 'state.fs.s3a.endpoint' (one option each) is fs.s3a.endpoint of state_fs
        if isinstance(data, dict) and any(str(k).startswith(STATE_FS_PREFIX) for k in data):
            fs = {
                str(k)[len("state.") :]: v
                for k, v in data.items()
                if str(k).startswith(STATE_FS_PREFIX)
            }
            data = {k: v for k, v in data.items() if not str(k).startswith(STATE_FS_PREFIX)}
            data[STATE_FS_PREFIX] = fs
        return data

    @field_validator("binlog_max_bytes_per_batch", mode="before")
    @classmethod
    def _bytes_text(cls, value: Any) -> Any:
        return parse_bytes(value) if isinstance(value, str) else value

    @field_validator("binlog_partitions", mode="before")
    @classmethod
    def _partitions_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _startup(self) -> SourceOptions:
        mode = self.scan_startup_mode
        if mode == "specific-offset" and not (
            self.specific_offset_gtid_set
            or (self.specific_offset_file and self.specific_offset_pos is not None)
        ):
            raise ValueError(
                "scan.startup.mode=specific-offset needs scan.startup.specific-offset.file and "
                ".pos, or scan.startup.specific-offset.gtid-set"
            )
        if mode == "timestamp" and self.startup_timestamp_millis is None:
            raise ValueError("scan.startup.mode=timestamp needs scan.startup.timestamp-millis")
        if mode in SNAPSHOT_MODES and not self.state_location:
            raise ValueError(
                f"scan.startup.mode={mode} reads a snapshot and needs 'state.location': a "
                "directory (or filesystem URI) of its own for this query, where chunk plans and "
                "read chunks are kept so that a replayed batch yields the same rows. Set it, "
                "or use scan.startup.mode=latest-offset to stream only new changes"
            )
        ServerIdRange.parse(self.server_id)  # fail early on a bad range
        if self.binlog_partitions != "auto" and not (
            self.binlog_partitions.isdigit() and int(self.binlog_partitions) >= 1
        ):
            raise ValueError(
                f"scan.binlog.partitions={self.binlog_partitions!r}: use a number of Spark "
                "partitions (1 or more) or 'auto'"
            )
        try:
            self.tls_settings()  # fail early on a bad mode or a missing file
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        try:
            self.table_filter()  # fail early on a bad or missing pattern
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def tls_settings(self) -> TlsSettings:
        """How every source connection negotiates TLS (model/tls.py)."""
        return TlsSettings.parse(
            mode=self.ssl_mode,
            ca=self.ssl_ca,
            cert=self.ssl_cert,
            key=self.ssl_key,
            key_password=(
                self.ssl_key_password.get_secret_value() if self.ssl_key_password else None
            ),
            server_public_key=self.server_public_key_path,
            allow_public_key_retrieval=self.allow_public_key_retrieval,
        )

    def state_hadoop(self) -> dict[str, str]:
        """The Hadoop settings of ``state.location`` (``fs.s3a.*`` keys)."""
        return {k: v.get_secret_value() for k, v in self.state_fs.items()}

    def table_filter(self) -> TableFilter:
        return TableFilter.from_options(
            tables=self.tables,
            tables_exclude=self.tables_exclude,
            database_name=self.database_name,
            table_name=self.table_name,
        )

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceOptions:
        """Validate raw string options (from Spark or YAML) into the model.

        >>> SourceOptions.from_options({"hostname": "h", "username": "u",
        ...     "database-name": "app", "scan.startup.mode": "latest-offset"}).port
        3306
        """
        known = cls.option_names()
        # Spark lower-cases option keys; Flink CDC's names are lower-case already.
        data: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known and not key.startswith(STATE_FS_PREFIX):
                raise ConfigError(
                    f"unknown option '{key}' for format '{cls.format_name}'."
                    f"{did_you_mean(key, known)} "
                    f"Valid options: {', '.join(sorted(known))}"
                )
            data[key] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ConfigError(f"invalid {cls.format_name} options: {problems}") from None

    @classmethod
    def option_names(cls) -> set[str]:
        """Every option name this source type accepts (its fields' aliases)."""
        names = {field.alias or name for name, field in cls.model_fields.items()}
        return names - cls.not_options


def option_names() -> set[str]:
    """Every option name SourceOptions accepts (its aliases)."""
    return SourceOptions.option_names()
