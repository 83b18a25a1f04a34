"""What the end-to-end pipeline tests share: the "shop" source database under a random
workload, and reading a pipeline's Spark checkpoint.

The shop: ``items``, ``skus`` and ``order_lines`` (workload.py) plus two shards
``orders_1`` / ``orders_2`` that a route merges into one sink table.
"""

from __future__ import annotations

import json
import os
import random
import threading
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest
from workload import ITEMS_DDL, LINES_DDL, SKUS_DDL, MultiWorkload

from sparkcdc_dev.devpostgres import DEV_PASSWORD as PG_PASSWORD
from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

SHARD_DDL = """
CREATE TABLE {name} (
  id INT NOT NULL PRIMARY KEY,
  customer VARCHAR(30) NOT NULL,
  amount DECIMAL(10,2) NOT NULL,
  placed DATETIME(3)
)
"""


# the repeats too (docs/development.md, "The tests"): more kills, runs and variants than CI has
# time for
THOROUGH = os.environ.get("SPARKCDC_THOROUGH") == "1"


def sink_params(names: Any, thorough: Collection[str] = ()) -> list[Any]:
    """Sink kinds as parameters, the Iceberg ones marked ``iceberg`` (they run on the Spark
    line that has Iceberg's runtime: scripts/test.sh runs them under PySpark 4.1), those in
    ``thorough`` marked ``thorough`` (they run with ``SPARKCDC_THOROUGH=1``)."""
    params = []
    for name in names:
        marks = [pytest.mark.iceberg] if name.startswith("iceberg") else []
        if name in thorough:
            marks.append(pytest.mark.thorough)
        params.append(pytest.param(name, marks=marks))
    return params


def source_block(server: DevServer, tables: str, server_ids: str, **options: object) -> str:
    """A pipeline's ``source:`` block for the private MariaDB, options by their YAML names
    (``**{"scan.incremental.snapshot.chunk.size": 20}``); the password comes from
    ``$SPARKCDC_TEST_PASSWORD`` (see :func:`pipeline_env`)."""
    settings = server.start()
    lines = [
        "source:",
        "  type: mysql",
        f"  hostname: {settings.host}",
        f"  port: {settings.port}",
        "  username: cdc",
        "  password: ${SPARKCDC_TEST_PASSWORD}",
        f"  tables: {tables}",
        f"  server-id: {server_ids}",
        *[f"  {key}: {value}" for key, value in options.items()],
    ]
    return "\n".join(lines) + "\n"


def iceberg_block(tmp_path: Path) -> tuple[str, str]:
    """An iceberg ``sink:`` block's lines with a catalog of its own under ``tmp_path``, and
    the catalog's name (Spark reads the tables as ``<catalog>.<database>.<table>``)."""
    catalog = f"ice_{uuid.uuid4().hex[:8]}"
    block = (
        f"  type: iceberg\n  catalog.name: {catalog}\n"
        f"  catalog.properties.warehouse: {tmp_path / 'warehouse'}"
    )
    return block, catalog


def write_pipeline(
    template: str, tmp_path: Path, server: DevServer, database: str, **fields: object
) -> Path:
    """``tmp_path/pipeline.yaml``: ``template`` (a pipeline's YAML) with ``{host}`` and
    ``{port}`` of the private MariaDB, ``{database}``, a Delta ``{lake}`` and a
    ``{checkpoint}`` under ``tmp_path`` (unless ``fields`` give others), and the template's
    other ``fields``."""
    settings = server.start()
    path = tmp_path / "pipeline.yaml"
    values = {"lake": tmp_path / "lake", "checkpoint": tmp_path / "checkpoint", **fields}
    path.write_text(
        template.format(host=settings.host, port=settings.port, database=database, **values)
    )
    return path


def pipeline_env() -> dict[str, str]:
    """The environment a test pipeline's ``${...}`` passwords are read from."""
    return {
        **os.environ,
        "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD,
        "SPARKCDC_TEST_PG_PASSWORD": PG_PASSWORD,
    }


def fresh_database(server: DevServer, database: str) -> Any:
    """``database`` dropped and created again; an autocommit connection to it."""
    with server.root_connection() as root, root.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {database}")
        cur.execute(f"CREATE DATABASE {database}")
    conn = server.connection(database)
    conn.autocommit(True)
    return conn


def create_shop(server: DevServer, database: str) -> Any:
    """A fresh shop database with a few hundred rows; an autocommit connection to it."""
    conn = fresh_database(server, database)
    with conn.cursor() as cur:
        for ddl in (ITEMS_DDL, SKUS_DDL, LINES_DDL):
            cur.execute(ddl)
        for shard in (1, 2):
            cur.execute(SHARD_DDL.format(name=f"orders_{shard}"))
    burst(conn, seed=11, steps=400)
    return conn


def shard_step(cur: Any, rng: random.Random) -> None:
    """One random change to a shard: upsert, update or delete."""
    shard = rng.choice([1, 2])
    key = rng.randint(1, 120) + (0 if shard == 1 else 1000)
    choice = rng.random()
    table = f"orders_{shard}"
    if choice < 0.5:
        cur.execute(
            f"INSERT INTO {table} VALUES (%s,%s,%s,NOW(3)) ON DUPLICATE KEY UPDATE amount=amount+1",
            (key, rng.choice(["ada", "grace", "ken"]), rng.randint(0, 99999) / 100),
        )
    elif choice < 0.8:
        cur.execute(f"UPDATE {table} SET amount = amount * 2 WHERE id = %s", (key,))
    else:
        cur.execute(f"DELETE FROM {table} WHERE id = %s", (key,))


class ShopWorkload(MultiWorkload):
    """The shop's random transactions: ``MultiWorkload``'s, then one change to a shard."""

    def __init__(self, conn: Any, seed: int) -> None:
        super().__init__(conn, seed, key_space=300)
        self.shard_rng = random.Random(seed)

    def step(self) -> None:
        super().step()
        with self.conn.cursor() as cur:
            shard_step(cur, self.shard_rng)


def burst(conn: Any, seed: int, steps: int = 100) -> None:
    """A few hundred changes at once, on every table."""
    workload = ShopWorkload(conn, seed)
    for _ in range(steps):
        workload.step()


class Writer:
    """A workload in a thread, for the span of a ``with`` block: at most ``max_operations``
    operations, a transaction each ``pause_s`` (a modest load on a shared machine).

    ``workload`` makes the workload from an autocommit connection and the seed: anything
    with ``step()`` (one transaction) and ``operations`` (done so far); the shop's by default.
    """

    def __init__(
        self,
        server: DevServer,
        database: str,
        seed: int,
        *,
        max_operations: int = 4_000,
        pause_s: float = 0.05,
        workload: Callable[[Any, int], Any] = ShopWorkload,
    ) -> None:
        self.server, self.database, self.seed = server, database, seed
        self.max_operations, self.pause_s = max_operations, pause_s
        self.workload = workload
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = self.server.connection(self.database)
        conn.autocommit(True)
        workload = self.workload(conn, self.seed)
        try:
            while not self.stop.is_set() and workload.operations < self.max_operations:
                workload.step()
                self.stop.wait(self.pause_s)
        finally:
            conn.close()

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def uncommitted_batch(checkpoint: Path) -> int | None:
    """The batch Spark planned (offsets/<id>) but did not commit (no commits/<id>)."""
    root = checkpoint / "spark"
    planned = {int(p.name) for p in (root / "offsets").glob("[0-9]*") if p.name.isdigit()}
    done = {int(p.name) for p in (root / "commits").glob("[0-9]*") if p.name.isdigit()}
    pending = planned - done
    return max(pending) if pending else None


def planned_offsets(checkpoint: Path) -> dict[int, dict[str, Any]]:
    """Batch id → the source offset Spark planned for it (offsets/<id>: a version line, the
    batch metadata, then the source's offset as JSON)."""
    root = checkpoint / "spark" / "offsets"
    return {
        int(p.name): json.loads(p.read_text().splitlines()[2])
        for p in root.glob("[0-9]*")
        if p.name.isdigit()
    }


class RowChanges:
    """Random inserts, updates and deletes on a table ``t (id INT PRIMARY KEY, v INT,
    s VARCHAR)``, keys 1..3000, one a ``step``: a workload for ``Writer``."""

    def __init__(self, conn: Any, seed: int) -> None:
        self.conn, self.rng, self.operations = conn, random.Random(seed), 0

    def step(self) -> None:
        key, choice = self.rng.randint(1, 3000), self.rng.random()
        with self.conn.cursor() as cur:
            if choice < 0.5:
                cur.execute("UPDATE t SET v = v + 1, s = %s WHERE id = %s", (f"u{key}", key))
            elif choice < 0.8:
                cur.execute("REPLACE INTO t (id, v, s) VALUES (%s, %s, 'new')", (key, key))
            else:
                cur.execute("DELETE FROM t WHERE id = %s", (key,))
        self.operations += 1


def delta_rows(minio: Any, table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The sorted rows (``columns``) of the Delta table at ``s3://<table>`` on the private
    MinIO, read by delta-rs (deletion vectors included), not by Spark."""
    import deltalake
    import pyarrow as pa

    conf = minio.spark_conf()
    storage = {
        "AWS_ENDPOINT_URL": conf["spark.hadoop.fs.s3a.endpoint"],
        "AWS_ACCESS_KEY_ID": conf["spark.hadoop.fs.s3a.access.key"],
        "AWS_SECRET_ACCESS_KEY": conf["spark.hadoop.fs.s3a.secret.key"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    reader = deltalake.QueryBuilder().register(
        "t", deltalake.DeltaTable(f"s3://{table}", storage_options=storage)
    )
    frame = pa.table(reader.execute(f"SELECT {', '.join(columns)} FROM t").read_all())
    return sorted(tuple(row.values()) for row in frame.to_pylist())


def chunks_left(checkpoint: Any) -> bool:
    """Whether the newest batch committed in ``checkpoint`` (a path or Location) left
    snapshot chunks unread: a run stopped then was stopped mid-snapshot."""
    from sparkcdc.pipeline.status import committed_offset
    from sparkcdc.snapshot.coordinator import SnapshotProgress

    committed = committed_offset(checkpoint)
    assert committed is not None, f"no batch committed in {checkpoint}"
    progress = (committed[1].get("snapshot") or {}).values()
    return any(not SnapshotProgress.from_offset(p).read_all for p in progress)
