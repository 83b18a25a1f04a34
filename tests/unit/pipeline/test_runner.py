from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcdc.model.position import BinlogPosition
from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.progress import Progress, lag_text, offset_caught_up
from sparkcdc.pipeline.run_plan import pipeline_session
from sparkcdc.pipeline.runner import _offset_dict

positions = st.builds(
    BinlogPosition,
    st.integers(1, 5).map(lambda n: f"mysql-bin.{n:06d}"),
    st.integers(4, 10_000),
)
progress = st.fixed_dictionaries(
    {"next": st.integers(0, 6), "prev": st.integers(0, 6), "total": st.none() | st.integers(0, 6)}
)
snapshots = st.dictionaries(st.sampled_from(["a.t1", "a.t2", "b.t3"]), progress, max_size=3)


def offset(position: BinlogPosition, snapshot: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"binlog": position.to_offset(), "snapshot": snapshot or {}}


AT = BinlogPosition("mysql-bin.000002", 500)


# --------------------------------------------------------------------- offset_caught_up


@pytest.mark.parametrize(
    ("snapshot", "binlog", "expected"),
    [
        ({}, AT, True),
        ({}, BinlogPosition("mysql-bin.000002", 499), False),
        ({}, BinlogPosition("mysql-bin.000003", 4), True),  # a later file beats any offset
        ({}, BinlogPosition("mysql-bin.000001", 9999), False),
        ({"a.t": {"next": 3, "prev": 3, "total": 3}}, AT, True),
        ({"a.t": {"next": 4, "prev": 3, "total": 3}}, AT, True),
        ({"a.t": {"next": 2, "prev": 2, "total": 3}}, AT, False),  # a chunk still to read
        ({"a.t": {"next": 3, "prev": 3, "total": None}}, AT, False),  # still splitting
        ({"a.t": {"next": 0, "prev": 0, "total": 0}}, AT, True),  # an empty table
        (
            {"a.t": {"next": 3, "prev": 3, "total": 3}, "a.u": {"next": 1, "prev": 1, "total": 2}},
            AT,
            False,
        ),
    ],
)
def test_caught_up_needs_every_chunk_and_the_target(
    snapshot: dict[str, Any], binlog: BinlogPosition, expected: bool
) -> None:
    assert offset_caught_up(offset(binlog, snapshot), AT) is expected


@pytest.mark.parametrize("value", [None, {}, {"snapshot": {}}])
def test_no_binlog_offset_is_never_caught_up(value: dict[str, Any] | None) -> None:
    assert offset_caught_up(value, AT) is False


def test_caught_up_with_null_snapshot_and_gtids() -> None:
    binlog = {"file": AT.file, "pos": AT.pos, "gtids": "0-1-5", "gtid_flavor": "mariadb"}
    assert offset_caught_up({"binlog": binlog, "snapshot": None}, AT) is True
    assert offset_caught_up({"binlog": binlog, "snapshot": None}, AT.with_gtids(None)) is True


def test_caught_up_reads_text_numbers() -> None:
    snapshot = {"a.t": {"next": "3", "prev": "2", "total": "3"}}
    assert offset_caught_up(offset(AT, snapshot), AT) is True
    snapshot = {"a.t": {"next": "2", "prev": "2", "total": "10"}}  # "2" < "10" as numbers
    assert offset_caught_up(offset(AT, snapshot), AT) is False


def caught_up_model(
    position: BinlogPosition, snapshot: dict[str, Any], target: BinlogPosition
) -> bool:
    """The rule another way: each table's plan is known and every chunk number in it is
    among those read (``0 .. next-1``), and the binlog's (file number, byte) pair is at
    or past the target's."""
    for progress in snapshot.values():
        if progress["total"] is None:  # the plan is still growing: chunks may be left
            return False
        if set(range(progress["total"])) - set(range(progress["next"])):
            return False

    def place(p: BinlogPosition) -> tuple[int, int]:
        return int(p.file.rsplit(".", 1)[1]), p.pos

    return place(position) >= place(target)


@given(positions, snapshots, positions)
def test_caught_up_is_all_chunks_read_and_binlog_past_target(
    position: BinlogPosition, snapshot: dict[str, Any], target: BinlogPosition
) -> None:
    expected = caught_up_model(position, snapshot, target)
    value = offset(position, snapshot)
    assert offset_caught_up(value, target) is expected
    # the same through what query progress carries: JSON text or a Python repr
    assert offset_caught_up(_offset_dict(json.dumps(value)), target) is expected
    assert offset_caught_up(_offset_dict(repr(value)), target) is expected


# -------------------------------------------------------------------------- _offset_dict


def test_offset_dict_accepts_dict_json_and_python_repr() -> None:
    value = offset(AT, {"a.t": {"next": 1, "prev": 0, "total": None}})
    assert _offset_dict(value) is value
    assert _offset_dict(json.dumps(value)) == value
    assert _offset_dict(repr(value)) == value  # None, single quotes: not JSON
    assert "None" in repr(value)


@pytest.mark.parametrize("value", [None, 7, "", "[1, 2]", "{not json", "{'a': }", " x", "null"])
def test_offset_dict_gives_none_for_what_is_no_offset(value: Any) -> None:
    assert _offset_dict(value) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_offset_dict_round_trips_json_and_repr(value: dict[str, Any]) -> None:
    assert _offset_dict(json.dumps(value)) == value
    assert _offset_dict(repr(value)) == value


# ------------------------------------------------------------------------------ lag_text


@pytest.mark.parametrize(
    ("position", "server", "expected"),
    [
        (BinlogPosition("b.000002", 10), BinlogPosition("b.000002", 1_234_577), "1,234,567 bytes"),
        (BinlogPosition("b.000002", 10), BinlogPosition("b.000002", 10), "0 bytes"),
        (BinlogPosition("b.000002", 900), BinlogPosition("b.000002", 10), "0 bytes"),  # never < 0
        (
            BinlogPosition("b.000001", 900),
            BinlogPosition("b.000004", 10),
            "3 binlog file(s)",
        ),
    ],
)
def test_lag_text(position: BinlogPosition, server: BinlogPosition, expected: str) -> None:
    assert lag_text(position, server) == expected


# ------------------------------------------------------------------------------ Progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def snapshot_offset(chunks_done: int, total: int = 100) -> dict[str, Any]:
    return offset(AT, {"a.t": {"next": chunks_done, "prev": chunks_done, "total": total}})


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "sparkcdc.pipeline.runner"]


def test_progress_in_a_log_is_a_line_every_ten_seconds(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sparkcdc.pipeline.runner")
    clock = FakeClock()
    progress = Progress(io.StringIO(), interactive=False, clock=clock)
    for step in range(120):  # a minute of the runner's polls, every one with news
        progress.count(10)
        progress.update(snapshot_offset(step // 2), step, None)
        clock.now += 0.5
    lines = logged(caplog)
    assert len(lines) == 6  # at 0, 10, ..., 50 s
    assert lines[1].startswith("batch 20 | 210 rows")


def test_progress_logs_the_end_of_the_snapshot_and_of_the_run_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "sparkcdc.pipeline.runner")
    clock = FakeClock()
    progress = Progress(io.StringIO(), interactive=False, clock=clock)
    progress.update(snapshot_offset(99), 1, None)
    clock.now += 1
    progress.update(snapshot_offset(100), 2, None)  # the snapshot is done: a new phase
    clock.now += 1
    progress.count(5)
    progress.update(snapshot_offset(100), 3, None)  # held back ...
    assert len(logged(caplog)) == 2
    assert "chunks 100/100" in logged(caplog)[1]
    progress.finish()  # ... until the end
    assert logged(caplog)[-1].startswith("batch 3 | 5 rows")
    progress.finish()
    assert len(logged(caplog)) == 3


def test_progress_on_a_terminal_rewrites_its_line_every_half_second() -> None:
    clock = FakeClock()
    out = io.StringIO()
    progress = Progress(out, interactive=True, clock=clock)
    for step in range(50):  # 5 s of updates every 0.1 s
        progress.count(1)
        progress.update(None, step, None)
        clock.now += 0.1
    progress.finish()
    assert out.getvalue().count("\r\033[K") == 11  # at 0, 0.5, ..., 4.5 s and the end
    assert out.getvalue().endswith("batch 49 | 50 rows\n")


def test_progress_of_a_snapshot_shows_totals_rate_and_eta_with_separators() -> None:
    """Rows per second since the first batch began, chunks of a growing plan against the
    row estimate (``~``), and the time left; after the snapshot no rate (it would sink in
    idle gaps between batches) but the lag."""
    clock = FakeClock()
    progress = Progress(io.StringIO(), interactive=False, clock=clock, chunk_estimates={"a.t": 62})
    assert progress.line(None, -1, None) == (
        "first batch running | 0 rows | snapshot: 0/1 tables, chunks 0/~62"
    )
    clock.now += 30  # the JVM starts, the query plans: not the pipeline's speed

    def write(frame: Any, batch_id: int) -> None:
        clock.now += 2.0  # a batch writes 16,192 rows in 2 s
        progress.count(16_192)

    timed = progress.timed(write)
    timed(None, 0)
    timed(None, 1)
    growing = offset(AT, {"a.t": {"next": 4, "prev": 4, "total": None}})
    assert progress.line(growing, 1, None) == (
        "batch 1 | 32,384 rows, 8,096 rows/s | snapshot: 0/1 tables, chunks 4/~62, ETA ~58s"
        " | binlog mysql-bin.000002:500"
    )
    planned = offset(AT, {"a.t": {"next": 4, "prev": 4, "total": 8}})
    assert progress.line(planned, 1, None).endswith(
        "chunks 4/8, ETA 4s | binlog mysql-bin.000002:500"
    )
    clock.now += 600  # idle: the binlog phase shows no rate
    done = offset(AT, {"a.t": {"next": 8, "prev": 8, "total": 8}})
    server = BinlogPosition(AT.file, AT.pos + 1234)
    assert progress.line(done, 5, server, 0.25) == (
        "batch 5 | 32,384 rows | snapshot: 1/1 tables, chunks 8/8 | "
        "binlog mysql-bin.000002:500, lag 1,234 bytes, 0.2s behind"
    )


# ---------------------------------------------------------------------- pipeline_session

PIPELINE = """
source: {type: mysql, hostname: db, username: cdc, password: pw, tables: app.t}
sink: {type: console}
"""


class TtyText(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stderr", "spark_conf", "bars"),
    [
        (io.StringIO(), "", "false"),  # a log: no console progress bars
        (TtyText(), "", "true"),
        (io.StringIO(), "\n  spark.conf: {spark.ui.showConsoleProgress: 'true'}", "true"),
    ],
)
def test_new_session_has_console_progress_bars_only_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
    new_session: SimpleNamespace,
    stderr: io.StringIO,
    spark_conf: str,
    bars: str,
) -> None:
    made: dict[str, str] = {}

    def spark_session(*args: Any, conf: dict[str, str], **kwargs: Any) -> SimpleNamespace:
        made.update(conf)
        return new_session

    monkeypatch.setattr("sparkcdc.spark.session.spark_session", spark_session)
    monkeypatch.setattr("sys.stderr", stderr)
    config = parse_pipeline(PIPELINE + "pipeline:\n  name: p" + spark_conf, env={})
    pipeline_session(config)
    assert made["spark.ui.showConsoleProgress"] == bars


@pytest.mark.parametrize(
    ("key", "default", "told"),
    [
        ("spark.sql.inMemoryColumnarStorage.compressed", "false", "true"),
        ("spark.python.sql.dataFrameDebugging.enabled", "false", "true"),
        (
            "spark.hadoop.fs.AbstractFileSystem.file.impl",
            "org.apache.hadoop.fs.local.RawLocalFs",
            "org.apache.hadoop.fs.local.LocalFs",
        ),
    ],
)
def test_new_session_has_the_pipeline_defaults_unless_told_and_is_a_pipeline_driver(
    monkeypatch: pytest.MonkeyPatch, new_session: SimpleNamespace, key: str, default: str, told: str
) -> None:
    """The pipeline's own defaults (the cache uncompressed, no call sites recorded, local
    files written without checksum files), which the file's spark.conf (and spark-submit's
    settings, see test_session_plan) replace."""
    from sparkcdc.spark.session_plan import plan_session

    planned: list[dict[str, str]] = []
    archives: list[bool] = []
    short: list[bool] = []
    registered: list[bool] = []  # by spark_session itself

    def spark_session(*args: Any, **kwargs: Any) -> SimpleNamespace:
        archives.append(kwargs.pop("pipeline_driver", False))
        short.append(kwargs.pop("available_now", False))
        registered.append(kwargs.pop("register_sources", True))
        kwargs = {k: v for k, v in kwargs.items() if k != "log_file"}
        planned.append(plan_session(*args, **kwargs, configured={}, environ={}).settings)
        return new_session

    monkeypatch.setattr("sparkcdc.spark.session.spark_session", spark_session)
    for spark_conf in ("", f"\n  spark.conf: {{{key}: '{told}'}}"):
        pipeline_session(parse_pipeline(PIPELINE + "pipeline:\n  name: p" + spark_conf, env={}))
    assert [p[key] for p in planned] == [default, told]
    # and its JVM is tuned as a pipeline's driver (class-data archive, C2 later), as one
    # that ends (C1 alone) when the run is --available-now
    assert archives == [True, True]
    pipeline_session(parse_pipeline(PIPELINE + "pipeline:\n  name: p", env={}), available_now=True)
    assert short == [False, False, True]
    assert registered == [False, False, False]  # the pipeline's thread registers them
