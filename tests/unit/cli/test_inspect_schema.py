"""`sparkcdc status`'s schema section: what it says about the sink tables' marks."""

from __future__ import annotations

from typing import Any

from sparkcdc.cli.inspect import _print_schema, _schema_report
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.pipeline.evolution.state import SchemaState, SinkTableState, SourceVersion
from sparkcdc.sinks.base import SinkColumn, SinkTable

SCHEMA = TableSchema("db", "t", (Column.from_mysql("id", "bigint", "bigint", False),), ("id",))
TABLE = SinkTable("db.t", (SinkColumn("id", "BIGINT", nullable=False),), ("id",), ("db.t",))


def test_a_stale_sink_table_is_reported_with_what_it_means(capsys: Any) -> None:
    fresh = SchemaState(
        {"db.t": [SourceVersion(-1, SCHEMA)]}, {"db.t": SinkTableState.fresh(TABLE)}
    )
    report = _schema_report(fresh)
    assert report is not None
    assert report["sinks"]["db.t"]["stale"] is False
    _print_schema(report)
    assert "db.t" not in capsys.readouterr().out  # nothing changed, nothing to say

    stale = SchemaState(
        {"db.t": [SourceVersion(-1, SCHEMA)]},
        {"db.t": SinkTableState(TABLE, TABLE, {"id": "id"}, stale=True)},
    )
    report = _schema_report(stale)
    assert report is not None
    assert report["sinks"]["db.t"]["stale"] is True
    _print_schema(report)
    out = capsys.readouterr().out
    assert "sink table db.t: keeps rows a truncate, drop or rename removed" in out
    assert "inserts are merged by key, not appended" in out
