from __future__ import annotations

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.model.options import ServerIdRange, SourceOptions, parse_duration

BASE = {
    "hostname": "127.0.0.1",
    "username": "u",
    "password": "p",
    "database-name": "app",
    "state.location": "/tmp/state",
}


def test_defaults_follow_flink_cdc() -> None:
    o = SourceOptions.from_options(BASE)
    assert o.port == 3306
    assert o.table_name == ".*"
    assert o.connect_timeout_s == 30.0
    assert o.connect_max_retries == 3


def test_connect_max_retries_reaches_the_binlog_reads() -> None:
    from sparkcdc.mysql.dialect import connection_settings

    options = SourceOptions.from_options({**BASE, "connect.max-retries": "0"})
    assert connection_settings(options).connect_max_retries == 0
    with pytest.raises(ConfigError, match=r"connect.max-retries"):
        SourceOptions.from_options({**BASE, "connect.max-retries": "-1"})


def test_snapshot_modes_need_a_state_location() -> None:
    without = {k: v for k, v in BASE.items() if k != "state.location"}
    with pytest.raises(ConfigError, match=r"scan.startup.mode=initial .*needs 'state.location'"):
        SourceOptions.from_options(without)
    assert SourceOptions.from_options({**without, "scan.startup.mode": "latest-offset"})


def test_unknown_option_suggests_closest() -> None:
    expected = r"unknown option 'scan.startup.mod'.*'scan.startup.mode'"
    with pytest.raises(ConfigError, match=expected):
        SourceOptions.from_options({**BASE, "scan.startup.mod": "latest-offset"})


def test_bad_startup_mode_lists_choices() -> None:
    with pytest.raises(ConfigError, match=r"scan.startup.mode.*latest-offset"):
        SourceOptions.from_options({**BASE, "scan.startup.mode": "newest"})


def test_specific_offset_needs_file_and_pos() -> None:
    with pytest.raises(ConfigError, match=r"specific-offset.file"):
        SourceOptions.from_options({**BASE, "scan.startup.mode": "specific-offset"})


def test_password_never_shows() -> None:
    o = SourceOptions.from_options({**BASE, "password": "hunter2"})
    assert "hunter2" not in repr(o) and "hunter2" not in str(o)


def test_bad_regex() -> None:
    with pytest.raises(ConfigError, match=r"table-name.*regular expression"):
        SourceOptions.from_options({**BASE, "table-name": "orders("})


def test_server_id_range() -> None:
    r = ServerIdRange.parse("5400-5402")
    assert [r.pick(i) for i in range(3)] == [5400, 5401, 5402]
    assert r.pick(3) == 5400  # wraps around
    with pytest.raises(ConfigError, match=r"5400-5408"):
        ServerIdRange.parse("abc")
    default = ServerIdRange.parse(None, default_size=9)
    assert 5400 <= default.low <= 6400 and default.size == 9


def test_durations() -> None:
    assert parse_duration("1min") == 60.0
    assert parse_duration("250ms") == 0.25
    with pytest.raises(ValueError, match=r"duration"):
        parse_duration("soon")


def test_the_binlog_bound_takes_sizes_as_spark_does() -> None:
    def bound(value: str) -> int:
        return SourceOptions.from_options(
            {**BASE, "scan.binlog.max-bytes-per-batch": value}
        ).binlog_max_bytes_per_batch

    assert SourceOptions.from_options(BASE).binlog_max_bytes_per_batch == 256 << 20
    assert bound("64m") == bound("64MB") == bound("64MiB") == 64 << 20
    assert bound("1g") == 1 << 30
    assert bound("4096") == 4096
    assert bound("0") == 0  # no bound
    for wrong in ("-1", "12 parsecs", "1.5g"):
        with pytest.raises(ConfigError, match=r"scan.binlog.max-bytes-per-batch"):
            bound(wrong)
