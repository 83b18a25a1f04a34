from __future__ import annotations

import dataclasses
import os
import stat
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from sparkcdc.errors import SnapshotError
from sparkcdc.model.position import BinlogPosition
from sparkcdc.model.row_values import arrow_schema
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.reader import ChunkResult
from sparkcdc.snapshot.staging import ChunkStaging
from sparkcdc.snapshot.storage import StateStore

SCHEMA = TableSchema(
    "db",
    "t",
    (
        Column.from_mysql("id", "int", "int", False),
        Column.from_mysql("s", "varchar", "varchar(9)", True),
    ),
    ("id",),
)


def result(hw: int, n: int) -> ChunkResult:
    rows = pa.Table.from_pylist(
        [{"id": i, "s": f"v{hw}"} for i in range(n)], schema=arrow_schema(SCHEMA.columns)
    )
    chunk = ChunkRange("db.t", 3, 10, "x")
    return ChunkResult(
        chunk,
        SCHEMA,
        rows,
        BinlogPosition("mysql-bin.000001", 4),
        BinlogPosition("mysql-bin.000001", hw),
    )


def test_first_writer_wins_and_replay_reads_the_staged_rows(tmp_path: Path) -> None:
    staging = ChunkStaging(StateStore.open(str(tmp_path), "s"))
    first = staging.stage(result(100, 3))
    second = staging.stage(result(200, 5))  # a retried / speculative attempt
    assert second.high.pos == 100 and second.rows is not None
    assert second.rows.num_rows == 3 and first.meta == second.meta
    loaded = staging.load(result(0, 0).chunk)
    assert loaded is not None and loaded.rows is not None
    assert loaded.rows.to_pylist() == first.rows.to_pylist()  # type: ignore[union-attr]
    assert loaded.meta.schema == SCHEMA and loaded.meta.row_count == 3


def test_release_deletes_rows_and_keeps_metadata(tmp_path: Path) -> None:
    staging = ChunkStaging(StateStore.open(str(tmp_path), "s"))
    staged = staging.stage(result(100, 3))
    staging.release(staged.meta.chunk)
    again = staging.load(staged.meta.chunk)
    assert again is not None and again.rows is None and again.meta == staged.meta
    files = sorted(p.name for p in (tmp_path / "s" / "chunks" / "db.t").iterdir())
    assert files == ["000003.meta.json"]
    assert staging.load(ChunkRange("db.t", 4, "x", None)) is None


def test_concurrent_stagers_agree_on_one_winner(tmp_path: Path) -> None:
    staging = ChunkStaging(StateStore.open(str(tmp_path), "s"))
    winners: list[int] = []
    barrier = threading.Barrier(8)

    def attempt(hw: int) -> None:
        barrier.wait()
        winners.append(staging.stage(result(hw, hw % 7)).high.pos)

    threads = [threading.Thread(target=attempt, args=(100 + i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(winners)) == 1 and len(winners) == 8
    assert not [p for p in (tmp_path / "s" / "chunks" / "db.t").iterdir() if "tmp" in p.name]


def test_state_location_is_required() -> None:
    with pytest.raises(SnapshotError, match=r"state\.location"):
        StateStore.open("", "s")


def test_pyarrow_filesystem_uri(tmp_path: Path) -> None:
    store = StateStore.open(f"file://{tmp_path}", "s")
    assert store.write_once(store.path("a", "b.json"), b"1")
    assert not store.write_once(store.path("a", "b.json"), b"2")
    assert store.read(store.path("a", "b.json")) == b"1"


def test_staged_chunks_are_private_files_in_private_directories(tmp_path: Path) -> None:
    previous = os.umask(0)  # the modes must not depend on a lenient umask
    try:
        staging = ChunkStaging(StateStore.open(str(tmp_path / "state"), "s"))
        staging.stage(result(100, 3))
    finally:
        os.umask(previous)
    chunks = tmp_path / "state" / "s" / "chunks" / "db.t"
    assert sorted(p.name for p in chunks.iterdir()) == ["000003.arrow", "000003.meta.json"]
    for path in chunks.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for path in (tmp_path / "state", tmp_path / "state" / "s", chunks.parent, chunks):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_a_table_named_to_climb_out_stays_in_its_state_directory(tmp_path: Path) -> None:
    staging = ChunkStaging(StateStore.open(str(tmp_path / "state"), "s"))
    staging.stage(result(100, 3))
    escaping = ChunkRange("db.../../../../x", 3, 10, "x")
    staging.stage(dataclasses.replace(result(100, 3), chunk=escaping))
    assert staging.load(escaping) is not None
    tables = sorted(p.name for p in (tmp_path / "state" / "s" / "chunks").iterdir())
    assert tables == ["db...~2F..~2F..~2F..~2Fx", "db.t"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_a_state_location_that_cannot_be_opened_is_named_without_its_credentials() -> None:
    location = "s3a://AKIAEXAMPLE:s3cr3t-value@bucket/state?secret_key=another-secret"
    with pytest.raises(SnapshotError) as caught:
        StateStore.open(location, "s1")
    message = str(caught.value)
    assert "s3cr3t-value" not in message and "another-secret" not in message
    assert "s3a://AKIAEXAMPLE:***@bucket/state" in message
