"""What the end-to-end pipeline tests share: the "shop" source database under a random
workload, and reading a pipeline's Spark checkpoint.

The shop: ``items``, ``skus`` and ``order_lines`` (workload.py) plus two shards
``orders_1`` / ``orders_2`` that a route merges into one sink table.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

from workload import ITEMS_DDL, LINES_DDL, SKUS_DDL, MultiWorkload

from sparkcdc.devserver import DevServer

SHARD_DDL = """
CREATE TABLE {name} (
  id INT NOT NULL PRIMARY KEY,
  customer VARCHAR(30) NOT NULL,
  amount DECIMAL(10,2) NOT NULL,
  placed DATETIME(3)
)
"""


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


def burst(conn: Any, seed: int, steps: int = 100) -> None:
    """A few hundred changes at once, on every table."""
    workload = MultiWorkload(conn, seed, key_space=300)
    rng = random.Random(seed)
    for _ in range(steps):
        workload.step()
        with conn.cursor() as cur:
            shard_step(cur, rng)


class Writer:
    """The workload in a thread, for the span of a ``with`` block: at most
    ``max_operations`` transactions, ``pause_s`` apart (a modest load on a shared machine)."""

    def __init__(
        self,
        server: DevServer,
        database: str,
        seed: int,
        *,
        max_operations: int = 4_000,
        pause_s: float = 0.05,
    ) -> None:
        self.server, self.database, self.seed = server, database, seed
        self.max_operations, self.pause_s = max_operations, pause_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = self.server.connection(self.database)
        conn.autocommit(True)
        rng = random.Random(self.seed)
        workload = MultiWorkload(conn, self.seed, key_space=300)
        try:
            while not self.stop.is_set() and workload.operations < self.max_operations:
                workload.step()
                with conn.cursor() as cur:
                    shard_step(cur, rng)
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
