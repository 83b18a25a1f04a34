"""The options of ``spark.readStream.format("postgres-cdc")``: Flink CDC's PostgreSQL names.

``database-name`` is the database connected to (one per source, as in Flink CDC);
``schema-name`` and ``table-name`` are patterns of the captured tables, so the
``(database, table)`` pairs the layers above speak are ``(schema, table)`` here. The
MySQL source's options that mean nothing here (server ids, binlog batching, MySQL's TLS
modes, TINYINT(1)) are unknown options of this format.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from sparkcdc.errors import ConfigError, ReplicationSlotError
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.tables import TableFilter
from sparkcdc.postgres.replication import check_slot_name
from sparkcdc.postgres.slots import PLUGIN
from sparkcdc.postgres.types import DecimalHandlingMode

DEFAULT_PORT = 5432
# Debezium's publication name and default (Flink CDC passes it as 'debezium.publication.name')
DEFAULT_PUBLICATION = "dbz_publication"
STARTUP_MODES = ("initial", "snapshot", "latest-offset")

_MYSQL_ONLY = frozenset(
    {
        "server-id",
        "server-time-zone",
        "scan.startup.specific-offset.file",
        "scan.startup.specific-offset.pos",
        "scan.startup.specific-offset.gtid-set",
        "scan.startup.timestamp-millis",
        "scan.binlog.partitions",
        "scan.binlog.max-bytes-per-batch",
        "ddl.row-changes",
        "scan.parse.online.schema.changes.enabled",
        "treat-tinyint1-as-boolean.enabled",
        "ssl-mode",
        "ssl-ca",
        "ssl-cert",
        "ssl-key",
        "ssl-key-password",
        "server-public-key-path",
        "allow-public-key-retrieval",
    }
)


class PostgresSourceOptions(SourceOptions):
    """The PostgreSQL source's options.

    >>> options = PostgresSourceOptions.from_options(
    ...     {"hostname": "db", "username": "u", "database-name": "shop",
    ...      "schema-name": "public", "slot.name": "orders_cdc",
    ...      "scan.startup.mode": "latest-offset"})
    >>> options.port, options.publication_name, options.table_filter().matches("public", "x")
    (5432, 'dbz_publication', True)
    """

    format_name: ClassVar[str] = "postgres-cdc"
    not_options: ClassVar[frozenset[str]] = _MYSQL_ONLY

    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    schema_name: str | None = Field(None, alias="schema-name")
    slot_name: str = Field(alias="slot.name")
    decoding_plugin_name: str = Field(PLUGIN, alias="decoding.plugin.name")
    publication_name: str = Field(DEFAULT_PUBLICATION, alias="debezium.publication.name")
    decimal_handling_mode: DecimalHandlingMode = Field(
        DecimalHandlingMode.PRECISE, alias="debezium.decimal.handling.mode"
    )

    @model_validator(mode="before")
    @classmethod
    def _postgres_startup(cls, data: Any) -> Any:
        # before SourceOptions' own checks, whose state.location demand of a snapshot mode
        # would hide that this source has no earliest-offset, timestamp, ... mode
        if not isinstance(data, dict):
            return data
        mode = data.get("scan.startup.mode", data.get("scan_startup_mode", "initial"))
        if mode not in STARTUP_MODES and isinstance(mode, str):
            raise ValueError(
                f"scan.startup.mode={mode} is not one the PostgreSQL source has: use "
                f"{', '.join(STARTUP_MODES)}"
            )
        plugin = data.get("decoding.plugin.name", data.get("decoding_plugin_name", PLUGIN))
        if plugin != PLUGIN:
            raise ValueError(
                f"decoding.plugin.name={plugin!r}: sparkcdc decodes only PostgreSQL's built-in "
                f"{PLUGIN!r} (no server extension to install); set decoding.plugin.name="
                f"{PLUGIN} and a slot.name of a {PLUGIN} slot (or a new one)"
            )
        return data

    @model_validator(mode="after")
    def _connection(self) -> PostgresSourceOptions:
        if not self.database_name:
            raise ValueError(
                "database-name is the PostgreSQL database to connect to (one per source): "
                "set it, e.g. database-name: shop"
            )
        try:
            check_slot_name(self.slot_name)
        except ReplicationSlotError as error:  # a source error, told as the option's here
            raise ValueError(f"slot.name: {error}") from None
        return self

    def table_filter(self) -> TableFilter:
        """``schema-name`` / ``table-name`` (or ``tables`` as ``schema.table`` patterns)."""
        if not self.tables and not self.schema_name:
            raise ConfigError(
                "no tables to capture: set 'schema-name' (e.g. 'public') and optionally "
                "'table-name', or 'tables' as schema.table patterns (e.g. 'public.orders_.*')"
            )
        return TableFilter.from_options(
            tables=self.tables,
            tables_exclude=self.tables_exclude,
            database_name=self.schema_name,
            table_name=self.table_name,
        )
