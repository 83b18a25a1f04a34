"""Read limits as chunk counts (spark/compat.py), on whichever PySpark line is installed."""

from __future__ import annotations

import pytest

from sparkcdc.spark import compat


def test_without_a_limit_the_configured_chunks_hold() -> None:
    assert compat.chunk_budget(None, 8, 400) == 8
    assert compat.chunk_budget(None, 0, 400) == 0


def test_without_a_limit_the_binlog_is_not_cut() -> None:
    # PySpark 4.1 runs an AvailableNow query as one batch: a bound would end it short
    assert compat.binlog_budget(None, 1 << 20) == 0


needs_42 = pytest.mark.skipif(
    not compat.ADMISSION_CONTROL, reason="read limits arrived in PySpark 4.2"
)


@needs_42
def test_the_default_limit_reads_back_as_the_configured_chunks() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    assert compat.default_read_limit(8, 400, 0) == ReadMaxRows(3_200)
    assert compat.default_read_limit(0, 400, 0) == ReadAllAvailable()
    for chunks in (1, 3, 8, 61):
        limit = compat.default_read_limit(chunks, 400, 1 << 20)
        assert compat.chunk_budget(limit, 8, 400) == chunks
        assert compat.binlog_budget(limit, 1 << 20) == 1 << 20


@needs_42
def test_the_default_limit_of_a_stream_past_its_snapshot_is_its_binlog_bound() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

    assert compat.default_read_limit(0, 400, 4_096) == ReadMaxBytes(4_096)
    assert compat.binlog_budget(ReadMaxBytes(4_096), 1 << 20) == 4_096
    assert compat.chunk_budget(ReadMaxBytes(4_096), 0, 400) == 0  # every remaining chunk
    # Trigger.Once reads all available; so does a stream whose bound is 0
    assert compat.binlog_budget(ReadAllAvailable(), 4_096) == 0
    assert compat.binlog_budget(compat.default_read_limit(0, 400, 0), 0) == 0


@needs_42
def test_spark_limits_as_chunks() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

    assert compat.chunk_budget(ReadAllAvailable(), 8, 400) == 0  # Trigger.Once: all of it
    assert compat.chunk_budget(ReadMaxRows(100), 8, 400) == 1  # never a batch without progress
    assert compat.chunk_budget(ReadMaxRows(1_000), 8, 400) == 2
    assert compat.chunk_budget(ReadMaxBytes(10), 5, 400) == 5  # no meaning for chunks


def test_the_reader_is_an_available_now_source_where_spark_has_them() -> None:
    from sparkcdc.spark.source import MySqlCdcStreamReader

    if compat.ADMISSION_CONTROL:
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

        assert issubclass(MySqlCdcStreamReader, SupportsTriggerAvailableNow)
    else:
        assert compat.AvailableNowBase.__name__ == "_NoAvailableNow"
