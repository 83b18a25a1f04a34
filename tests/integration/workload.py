"""A random insert/update/delete workload for consistency tests (bounded in count and time)."""

from __future__ import annotations

import random
import threading
import time
from decimal import Decimal
from typing import Any

import pymysql

ITEMS_DDL = """
CREATE TABLE items (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(40) CHARACTER SET utf8mb4,
  qty INT,
  price DECIMAL(10,2),
  big BIGINT UNSIGNED,
  at DATETIME(3),
  tag ENUM('a','b','c'),
  flag TINYINT(1)
)
"""
NAMES = ["alpha", "beta", "γάμμα", "日本語", "emoji🎉", "", None]


def random_row(rng: random.Random, key: int) -> tuple[Any, ...]:
    return (
        key,
        rng.choice(NAMES),
        rng.randint(-1000, 1000),
        Decimal(rng.randint(-(10**6), 10**6)) / 100,
        rng.choice([0, 2**64 - 1, rng.randint(0, 2**63)]),
        f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 12:34:56.{rng.randint(0, 999):03d}",
        rng.choice(["a", "b", "c", None]),
        rng.choice([0, 1, None]),
    )


class Workload:
    """Random single- and multi-row transactions on ``items``; key-changing updates included."""

    def __init__(self, conn: pymysql.connections.Connection, seed: int, key_space: int = 200):
        self.conn = conn
        self.rng = random.Random(seed)
        self.key_space = key_space
        self.operations = 0

    def step(self) -> None:
        rng, cur = self.rng, self.conn.cursor()
        self.conn.begin()
        for _ in range(rng.choice([1, 1, 1, 3, 8])):
            key = rng.randint(1, self.key_space)
            choice = rng.random()
            if choice < 0.45:
                cur.execute(
                    "INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s) "
                    "ON DUPLICATE KEY UPDATE qty = qty + 1",
                    random_row(rng, key),
                )
            elif choice < 0.75:
                cur.execute(
                    "UPDATE items SET name=%s, qty=qty-1, price=%s WHERE id=%s",
                    (rng.choice(NAMES), Decimal(rng.randint(0, 9999)) / 100, key),
                )
            elif choice < 0.82:
                new_key = rng.randint(1, self.key_space)
                cur.execute("UPDATE IGNORE items SET id=%s WHERE id=%s", (new_key, key))
            else:
                cur.execute("DELETE FROM items WHERE id=%s", (key,))
            self.operations += 1
        self.conn.commit()

    def run(self, seconds: float, stop: threading.Event, max_ops: int = 100_000) -> None:
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline and self.operations < max_ops:
            self.step()
            time.sleep(0.005)  # a steady load, not a flood: the binlog stays small


def source_state(
    conn: pymysql.connections.Connection, table: str
) -> dict[tuple[Any, ...], dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM {table}")
        return {(row["id"],): _normalise(row) for row in cur.fetchall()}


def _normalise(row: dict[str, Any]) -> dict[str, Any]:
    # TINYINT(1) arrives as BOOLEAN from the stream (Flink CDC's mapping)
    if "flag" in row and row["flag"] is not None:
        row["flag"] = bool(row["flag"])
    return row
