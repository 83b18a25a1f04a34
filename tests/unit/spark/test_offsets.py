"""The plan of a batch's partitions (spark/offsets.py): how many binlog shares decode its
range, and how its snapshot chunks are cut into tasks. Table-driven, without Spark."""

from __future__ import annotations

import json

import pytest

from sparkcdc.model.dialect import dialect_for, options_for
from sparkcdc.model.options import ServerIdRange
from sparkcdc.model.position import BinlogPosition
from sparkcdc.postgres.lsn import Lsn
from sparkcdc.spark.offsets import (
    binlog_shares,
    make_offset,
    offset_databases,
    offset_position,
    offset_tables,
    spread,
    tasks_per_table,
)

MIB = 1 << 20
START = BinlogPosition("mysql-bin.000001", 4)


def ids(count: int) -> ServerIdRange:
    return ServerIdRange(5400, 5400 + count - 1)


def ahead(nbytes: int) -> BinlogPosition:
    """A position ``nbytes`` after START, in the same file."""
    return BinlogPosition(START.file, START.pos + nbytes)


NEXT_FILE = BinlogPosition("mysql-bin.000002", 4)


@pytest.mark.parametrize(
    ("setting", "stop", "parallelism", "server_ids", "shares"),
    [
        # auto with the pure-Python decoder: one partition per 4 MiB of binlog ...
        pytest.param("auto", ahead(0), 8, ids(9), 1, id="empty-range"),
        pytest.param("auto", ahead(1), 8, ids(9), 1, id="one-byte"),
        pytest.param("auto", ahead(4 * MIB - 1), 8, ids(9), 1, id="under-4MiB"),
        pytest.param("auto", ahead(4 * MIB), 8, ids(9), 1, id="4MiB"),
        pytest.param("auto", ahead(8 * MIB - 1), 8, ids(9), 1, id="under-8MiB"),
        pytest.param("auto", ahead(8 * MIB), 8, ids(9), 2, id="8MiB"),
        pytest.param("auto", ahead(20 * MIB), 8, ids(9), 5, id="20MiB"),
        # ... up to the session's parallelism ...
        pytest.param("auto", ahead(100 * MIB), 4, ids(9), 4, id="parallelism-caps"),
        pytest.param("auto", ahead(100 * MIB), 1, ids(9), 1, id="one-core"),
        # ... and the server-id range (each share is a replica of its own)
        pytest.param("auto", ahead(100 * MIB), 8, ids(3), 3, id="server-ids-cap"),
        pytest.param("auto", ahead(100 * MIB), 8, ids(1), 1, id="one-server-id"),
        # a range over several binlog files counts as large
        pytest.param("auto", NEXT_FILE, 4, ids(9), 4, id="next-file"),
        pytest.param("auto", NEXT_FILE, 4, ids(2), 2, id="next-file-few-ids"),
        # a number is taken as it is, whatever the range's size, within the server ids
        pytest.param("3", ahead(0), 1, ids(9), 3, id="fixed-small-range"),
        pytest.param("3", ahead(100 * MIB), 8, ids(9), 3, id="fixed-large-range"),
        pytest.param("3", ahead(100 * MIB), 8, ids(2), 2, id="fixed-server-ids-cap"),
        pytest.param("1", NEXT_FILE, 8, ids(9), 1, id="fixed-one"),
    ],
)
def test_binlog_shares(
    setting: str, stop: BinlogPosition, parallelism: int, server_ids: ServerIdRange, shares: int
) -> None:
    assert binlog_shares(setting, START, stop, parallelism, server_ids, False) == shares


@pytest.mark.parametrize(
    ("stop", "parallelism", "shares"),
    [
        pytest.param(ahead(8 * MIB - 1), 8, 1, id="under-8MiB"),
        pytest.param(ahead(8 * MIB), 8, 1, id="8MiB"),
        pytest.param(ahead(16 * MIB - 1), 8, 1, id="under-16MiB"),
        pytest.param(ahead(16 * MIB), 8, 2, id="16MiB"),
        pytest.param(ahead(33 * MIB), 2, 2, id="catch-up-two-cores"),
        pytest.param(ahead(100 * MIB), 8, 8, id="parallelism-caps"),
        pytest.param(NEXT_FILE, 4, 4, id="next-file"),
    ],
)
def test_auto_shares_per_8MiB_where_the_compiled_decoder_decodes(
    stop: BinlogPosition, parallelism: int, shares: int
) -> None:
    """The kernel decodes faster than Python: a share takes twice the binlog, so that a
    streaming batch of a few seconds of writes stays one partition. A number is still taken
    as it is."""
    assert binlog_shares("auto", START, stop, parallelism, ids(9), True) == shares
    assert binlog_shares("3", START, stop, parallelism, ids(9), True) == 3


@pytest.mark.parametrize(
    ("counts", "parallelism", "per_task", "runs"),
    [
        # by default a batch's chunks are spread over the session's cores ...
        pytest.param([248], 2, None, [[124, 124]], id="one-table-two-cores"),
        pytest.param([100, 100], 4, None, [[50, 50], [50, 50]], id="two-tables-share-cores"),
        pytest.param([200, 48, 1, 0], 2, None, [[100, 100], [48], [1], []], id="uneven-tables"),
        # ... never a task without a chunk ...
        pytest.param([3], 8, None, [[1, 1, 1]], id="fewer-chunks-than-cores"),
        # ... and no task over 128 chunks
        pytest.param([1000], 2, None, [[125] * 8], id="128-chunks-a-task-at-most"),
        pytest.param([1000, 10], 4, None, [[125] * 8, [10]], id="big-and-small-table"),
        # chunks-per-partition fixes a task's size
        pytest.param([248, 5, 0], 2, 16, [[16] * 8 + [15] * 8, [5], []], id="per-task-16"),
        pytest.param([5], 8, 2, [[2, 2, 1]], id="per-task-2"),
    ],
)
def test_chunk_tasks(
    counts: list[int], parallelism: int, per_task: int | None, runs: list[list[int]]
) -> None:
    tasks = tasks_per_table(counts, parallelism, per_task)
    chunks = [list(range(n)) for n in counts]
    got = [spread(c, t) for c, t in zip(chunks, tasks, strict=True)]
    assert [[len(run) for run in table] for table in got] == runs
    # each table's runs are its chunks, in order, each once
    assert [[c for run in table for c in run] for table in got] == chunks


def test_an_offset_names_the_tables_it_was_planned_for() -> None:
    """What a restarted query learns from its start offset about the tables it captured:
    which they were (a DROP TABLE of one reaches the sink, a row change of one stops it,
    a DROP DATABASE of theirs stops it, even when no table matches now)."""
    plain = make_offset(
        START, key="binlog", tables=[("shop", "orders"), ("crm", "people"), ("shop", "orders")]
    )
    assert plain["tables"] == [["crm", "people"], ["shop", "orders"]]
    assert offset_tables(plain) == {("crm", "people"), ("shop", "orders")}
    assert offset_databases(plain) == {"crm", "shop"}
    # the offset round-trips through Spark's JSON offset log
    assert offset_tables(json.loads(json.dumps(plain))) == offset_tables(plain)
    # snapshot progress names the tables: they come from there
    progress = {"shop.orders": {"next": 1, "prev": 0}, "hr.staff": {"next": 0, "prev": 0}}
    snapshotting = make_offset(START, progress, key="binlog", tables=[("shop", "orders")])
    assert "tables" not in snapshotting
    assert offset_tables(snapshotting) == {("shop", "orders"), ("hr", "staff")}
    assert offset_databases(snapshotting) == {"shop", "hr"}
    assert offset_databases({"binlog": START.to_offset()}) == set()


def test_a_snapshot_key_with_a_dotted_name_stands_for_the_tables_the_patterns_match() -> None:
    """``a.b.t`` is `a`.`b.t` or `a.b`.`t`: the patterns say which. Split at the first dot
    alone, a database `a.b` dropped while the query was stopped was not found, and its DROP
    DATABASE went by."""
    offset = make_offset(START, {"a.b.t": {"next": 1, "prev": 0}}, key="binlog")
    in_a_b = lambda db, t: db == "a.b"  # noqa: E731
    assert offset_tables(offset, in_a_b) == {("a.b", "t")}
    assert offset_databases(offset, in_a_b) == {"a.b"}
    # without patterns, every reading
    assert offset_tables(offset) == {("a", "b.t"), ("a.b", "t")}
    plain = make_offset(START, key="binlog", tables=[("a.b", "t"), ("c", "u")])
    assert offset_tables(plain, in_a_b) == {("a.b", "t")}


def test_each_dialect_keeps_its_position_under_its_own_key() -> None:
    """A MySQL offset is as it always was (``binlog``: checkpoints written before load); a
    PostgreSQL one holds its LSN under ``wal``, and its stream is read in one partition (a
    slot has one reader)."""
    mysql = dialect_for(
        options_for(
            "mysql-cdc",
            {
                "hostname": "h",
                "username": "u",
                "database-name": "app",
                "scan.startup.mode": "latest-offset",
            },
        )
    )
    postgres = dialect_for(
        options_for(
            "postgres-cdc",
            {
                "hostname": "h",
                "username": "u",
                "database-name": "shop",
                "schema-name": "public",
                "slot.name": "s",
                "scan.startup.mode": "latest-offset",
            },
        )
    )
    old = {"binlog": {"file": "mysql-bin.000001", "pos": 4}, "tables": [["app", "t"]]}
    assert make_offset(START, key=mysql.offset_key, tables=[("app", "t")]) == old
    assert offset_position(json.loads(json.dumps(old)), mysql) == START
    lsn = Lsn.parse("0/16B3748")
    offset = make_offset(lsn, key=postgres.offset_key, tables=[("public", "t")])
    assert offset == {"wal": {"lsn": "0/16B3748"}, "tables": [["public", "t"]]}
    assert offset_position(json.loads(json.dumps(offset)), postgres) == lsn
    assert binlog_shares("auto", lsn, Lsn(lsn.value + (1 << 30)), 8, ids(9), True) == 1
