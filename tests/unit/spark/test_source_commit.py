"""Spark's commit of a batch reaches the dialect as the position it ended at, so a source
whose server keeps its stream (a PostgreSQL slot) lets go of exactly what was committed."""

from __future__ import annotations

from typing import Any

from sparkcdc.model.position import BinlogPosition
from sparkcdc.spark.source import MySqlCdcStreamReader


class _Recorder:
    offset_key = "binlog"

    def __init__(self) -> None:
        self.committed: list[BinlogPosition] = []

    def position_from_offset(self, offset: dict[str, Any]) -> BinlogPosition:
        return BinlogPosition.from_offset(offset)

    def commit(self, position: BinlogPosition) -> None:
        self.committed.append(position)


def test_commit_gives_the_dialect_the_batch_end() -> None:
    reader = MySqlCdcStreamReader.__new__(MySqlCdcStreamReader)
    recorder = _Recorder()
    reader.dialect = recorder  # type: ignore[assignment]
    reader._schemas_at = None  # a stream that carries its DDL keeps no start schemas
    end = BinlogPosition("mysql-bin.000003", 154)
    reader.commit({"binlog": end.to_offset()})
    assert recorder.committed == [end]
