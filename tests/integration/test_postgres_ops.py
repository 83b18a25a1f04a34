"""Operating a PostgreSQL source's server side from the command line (issue 59): ``sparkcdc
status`` shows the WAL a slot retains, also for a pipeline whose checkpoint is gone, and
``sparkcdc cleanup`` drops the slot and the publication sparkcdc made (refused while the slot
is streamed or the checkpoint holds committed batches)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sparkcdc.cli.main import main
from sparkcdc.model.dialect import dialect_for, options_for
from sparkcdc.model.options import ServerIdRange
from sparkcdc.postgres.dialect import PostgresDialect
from sparkcdc.postgres.replication import ReplicationConnection
from sparkcdc.postgres.slots import drop_slot, slot_info
from sparkcdc_dev.devpostgres import DevPostgres

pytestmark = pytest.mark.integration

PIPELINE = """
source:
  type: postgres
  hostname: {host}
  port: {port}
  username: {user}
  password: {password}
  database-name: {database}
  tables: public.items
  slot.name: {slot}
  debezium.publication.name: {slot}_pub
  scan.startup.mode: latest-offset
sink:
  type: console
pipeline:
  name: pg-ops
  checkpoint: {checkpoint}
"""


class Ops:
    def __init__(self, pg: DevPostgres, database: str, tmp: Path) -> None:
        s = pg.settings
        self.slot = f"ops_{uuid.uuid4().hex[:8]}"
        self.file = tmp / "pipeline.yaml"
        self.checkpoint = tmp / "checkpoint"
        self.file.write_text(
            PIPELINE.format(
                host=s.host,
                port=s.port,
                user=s.user,
                password=s.password,
                database=database,
                slot=self.slot,
                checkpoint=self.checkpoint,
            )
        )
        raw = {
            "hostname": s.host,
            "port": str(s.port),
            "username": s.user,
            "password": s.password,
            "database-name": database,
            "tables": "public.items",
            "slot.name": self.slot,
            "debezium.publication.name": f"{self.slot}_pub",
            "scan.startup.mode": "latest-offset",
        }
        dialect = dialect_for(options_for("postgres-cdc", raw), "postgres-cdc")
        assert isinstance(dialect, PostgresDialect)
        self.dialect = dialect

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, str(self.file)])
        out, err = capsys.readouterr()
        return code, out, err

    def publication(self, sql: psycopg.Connection[Any]) -> bool:
        found = sql.execute(
            "SELECT 1 FROM pg_publication WHERE pubname = %s", [f"{self.slot}_pub"]
        ).fetchone()
        return found is not None


@pytest.fixture
def database(pg: DevPostgres) -> Iterator[tuple[str, psycopg.Connection[Any]]]:
    with pg.scratch_database("pgops") as name, pg.connection(name) as sql:
        sql.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        yield name, sql


def test_status_shows_a_left_slot_and_cleanup_drops_it_with_its_publication(
    pg: DevPostgres,
    database: tuple[str, psycopg.Connection[Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, sql = database
    ops = Ops(pg, name, tmp_path)
    try:
        # what a run leaves: the slot and the publication it created; then WAL written
        ops.dialect.claim_readers(ServerIdRange(1, 1))
        assert ops.publication(sql)
        sql.execute("INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 500) g")
        code, out, _ = ops.run(capsys, "status")
        assert code == 0
        assert "never run (no checkpoint at" in out
        assert f"replication slot {ops.slot}: retains " in out and "active pid none" in out

        # refused while a reader streams the slot: nothing dropped
        with ReplicationConnection.open(ops.dialect.settings) as conn:
            conn.start_replication(ops.slot, ops.dialect.current_position(sql), [f"{ops.slot}_pub"])
            code, _, err = ops.run(capsys, "cleanup")
            assert code == 3
            assert f"replication slot {ops.slot!r}" in err and f"(pid {conn.backend_pid})" in err
        with ReplicationConnection.open(ops.dialect.settings) as conn:
            assert slot_info(conn, ops.slot) is not None

        code, out, _ = ops.run(capsys, "cleanup")
        assert code == 0
        assert f"replication slot {ops.slot}: dropped (" in out
        assert f"publication {ops.slot}_pub: dropped" in out
        with ReplicationConnection.open(ops.dialect.settings) as conn:
            assert slot_info(conn, ops.slot) is None
        assert not ops.publication(sql)
        code, out, _ = ops.run(capsys, "status")
        assert "replication slot" not in out  # nothing kept: nothing shown

        # a publication sparkcdc did not create is kept, with the statement that drops it
        sql.execute(f'CREATE PUBLICATION "{ops.slot}_pub" FOR TABLE items')
        ops.dialect.claim_readers(ServerIdRange(1, 1))
        code, out, _ = ops.run(capsys, "cleanup")
        assert code == 0 and f"replication slot {ops.slot}: dropped" in out
        kept = "kept (not created by sparkcdc); if nothing reads through it: DROP PUBLICATION"
        assert f'{kept} "{ops.slot}_pub"' in out
        assert ops.publication(sql)
    finally:
        with ReplicationConnection.open(ops.dialect.settings) as conn:
            drop_slot(conn, ops.slot)


def test_cleanup_is_refused_while_the_checkpoint_holds_committed_batches(
    pg: DevPostgres,
    database: tuple[str, psycopg.Connection[Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, _ = database
    ops = Ops(pg, name, tmp_path)
    # a committed batch as Spark records it: commits/0 and its offset
    spark = ops.checkpoint / "spark"
    (spark / "commits").mkdir(parents=True)
    (spark / "offsets").mkdir()
    (spark / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    (spark / "offsets" / "0").write_text('v1\n{}\n{"wal": {"lsn": "0/16B3748"}}')
    code, _, err = ops.run(capsys, "cleanup")
    assert code == 2, err
    assert "has a checkpoint with committed batches" in err and "Delete the checkpoint first" in err
