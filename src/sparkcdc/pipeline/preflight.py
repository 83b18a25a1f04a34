"""What ``sparkcdc validate`` and ``sparkcdc run`` both check before a pipeline reads a row.

One list of findings serves both, so a file that validates is one that runs, and both stop
with the same exit code for the same cause: an *error* is a configuration error (exit 2) in
either command; a *warning* is printed by ``validate`` and logged by ``run``.

- A route or transform whose ``source-table`` matches none of the captured tables is unused
  (a typo, or a table not captured): a warning.
- The locations a run writes to (the checkpoint, the state location, a Delta sink's path)
  are probed: a file written, read back and deleted there (:func:`probe_locations`).
- A transform's ``primary-keys`` that no unique index of the source table covers may collapse
  distinct rows into one sink row. Where the table is small enough to look
  (:data:`DUPLICATE_SCAN_ROWS`), rows that share the key are searched for: finding some is an
  error naming them; otherwise, and for larger tables, a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from sparkcdc.errors import ConfigError
from sparkcdc.locations import open_location
from sparkcdc.model.dialect import SourceDialect
from sparkcdc.model.schema import TableSchema
from sparkcdc.pipeline.config import PipelineConfig

DUPLICATE_SCAN_ROWS = 1_000_000  # tables up to this size are searched for duplicate keys


@dataclass(frozen=True)
class Finding:
    severity: Literal["error", "warning"]
    message: str

    def __str__(self) -> str:
        return self.message


def check_pipeline(
    config: PipelineConfig, tables: Sequence[TableSchema], dialect: SourceDialect[Any]
) -> list[Finding]:
    """Every finding about ``config`` against the captured ``tables``."""
    findings = list(unused_rules(config, tables))
    declared = [
        (i, schema, keys)
        for schema in tables
        for i, rule in enumerate(config.transform)
        if rule is config.transform_for(schema.database, schema.table)
        and (keys := rule.key_columns())
        and set(keys) <= set(schema.column_names)  # else named by a projection: not checked
    ]
    if declared:
        session = dialect.session()
        try:
            for i, schema, keys in declared:
                check = partial(declared_key_findings, dialect, where=f"transform[{i}]")
                findings.extend(session.run(partial(check, schema=schema, keys=keys)))
        finally:
            session.close()
    return findings


def unused_rules(config: PipelineConfig, tables: Sequence[TableSchema]) -> list[Finding]:
    captured = ", ".join(t.qualified_name for t in tables[:10]) or "none"
    rules = [("route", r) for r in config.route] + [("transform", t) for t in config.transform]
    counters = {"route": 0, "transform": 0}
    found = []
    for kind, rule in rules:
        where = f"{kind}[{counters[kind]}]"
        counters[kind] += 1
        if not any(rule.matches(t.database, t.table) for t in tables):
            found.append(
                Finding(
                    "warning",
                    f"{where}: source-table {rule.source_table!r} matches none of the captured "
                    f"tables ({captured}); the rule is unused. Check its pattern (a regular "
                    "expression per part: escape the dot between database and table as it is "
                    "written in source.tables)",
                )
            )
    return found


def declared_key_findings(
    dialect: SourceDialect[Any],
    conn: Any,
    *,
    where: str,
    schema: TableSchema,
    keys: tuple[str, ...],
) -> list[Finding]:
    """Whether ``keys`` identify the rows of ``schema``: a unique index of NOT NULL columns
    within them says so; else the rows are searched for a shared key, where cheap."""
    nullable = {c.name for c in schema.columns if c.nullable}
    for index in dialect.unique_keys(conn, schema.database, schema.table):
        if set(index) <= set(keys) and not set(index) & nullable:
            return []
    name = schema.qualified_name
    listed = ", ".join(keys)
    if dialect.estimated_rows(conn, schema.database, schema.table) <= DUPLICATE_SCAN_ROWS:
        shared = dialect.shared_keys(conn, schema.database, schema.table, keys, 3)
        if shared:
            examples = "; ".join(
                f"({', '.join(map(repr, row[:-1]))}) in {row[-1]} rows" for row in shared
            )
            return [
                Finding(
                    "error",
                    f"{where}: primary-keys ({listed}) do not identify the rows of {name}: "
                    f"rows share them ({examples}), and each group would collapse into one "
                    "sink row. Declare columns that are unique at the source (its primary key "
                    f"is ({', '.join(schema.primary_key) or 'none'}))",
                )
            ]
    return [
        Finding(
            "warning",
            f"{where}: primary-keys ({listed}) of {name} are not known to be unique (no "
            "unique index of NOT NULL columns within them); rows that share them would "
            "collapse into one sink row",
        )
    ]


def raise_errors(findings: Sequence[Finding]) -> None:
    errors = [f.message for f in findings if f.severity == "error"]
    if errors:
        raise ConfigError("; ".join(errors))


def run_locations(config: PipelineConfig) -> list[str]:
    """Where a run of ``config`` writes: its checkpoint, its state location, and a Delta
    sink's path (a sink in a catalog writes where the catalog says), each once."""
    locations = [config.checkpoint, config.state_location]
    path = getattr(config.sink, "path", None) if config.sink.type == "delta" else None
    if path:
        locations.append(path)
    return list(dict.fromkeys(locations))


def probe_locations(config: PipelineConfig, hadoop: Mapping[str, str]) -> list[str]:
    """Probe every :func:`run_locations` entry as a run reaches it, with the Hadoop
    settings ``hadoop`` (a run's session's, or the file's ``spark.conf``): ConfigError
    (exit 2) naming the first one a run could not write to. The locations probed.

    >>> probe_locations(config, {})  # doctest: +SKIP
    ['/data/cdc/orders', '/data/cdc/orders/source-state', '/data/lake']
    """
    locations = run_locations(config)
    for location in locations:
        open_location(location, hadoop).probe()
    return locations
