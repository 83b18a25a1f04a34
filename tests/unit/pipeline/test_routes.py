"""plan_pipeline: a run whose transforms have no Spark SQL asks its session for nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.routes import plan_pipeline


class UntouchedSession:
    """A session that must not be used: any attribute asked of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"plan_pipeline asked the session for {name!r}")


def test_a_plan_without_spark_sql_transforms_asks_its_session_nothing() -> None:
    config = parse_pipeline(
        yaml.safe_dump(
            {
                "source": {"type": "mysql", "hostname": "h", "username": "u", "tables": "db.t"},
                "sink": {"type": "console"},
                "transform": [{"source-table": "db.t", "primary-keys": "id"}],
            }
        ),
        base_dir=Path("/base"),
        env={},
    )
    columns = (
        Column.from_mysql("id", "int", "int(11)", False),
        Column.from_mysql("v", "varchar", "varchar(10)", True),
    )
    schema = TableSchema("db", "t", columns, ("id",))
    plan = plan_pipeline(config, [schema], UntouchedSession())  # type: ignore[arg-type]
    (table,) = plan.sink_tables
    assert [(c.name, c.spark_type) for c in table.columns] == [("id", "INT"), ("v", "STRING")]
    assert table.primary_key == ("id",)
