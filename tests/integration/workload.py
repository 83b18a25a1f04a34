"""A random insert/update/delete workload for consistency tests (bounded in count and time)."""

from __future__ import annotations

import datetime
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


SKUS_DDL = """
CREATE TABLE skus (
  sku VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,
  qty INT NOT NULL,
  note VARCHAR(30)
)
"""
LINES_DDL = """
CREATE TABLE order_lines (
  order_id INT NOT NULL,
  line INT NOT NULL,
  amount DECIMAL(8,2),
  PRIMARY KEY (order_id, line)
)
"""
SKU_PREFIXES = ["a", "B", "c", "Ä", "ab", "Zz", "m-", "é", "日"]


def random_sku(rng: random.Random) -> str:
    return f"{rng.choice(SKU_PREFIXES)}{rng.randint(0, 400)}"


class MultiWorkload(Workload):
    """Random transactions over ``items`` (int key), ``skus`` (case-insensitive string key)
    and ``lines`` (composite key), key-changing updates included."""

    def step(self) -> None:
        rng, cur = self.rng, self.conn.cursor()
        self.conn.begin()
        for _ in range(rng.choice([1, 1, 2, 5])):
            table = rng.random()
            if table < 0.4:
                self.conn.commit()
                super().step()
                self.conn.begin()
                continue
            choice = rng.random()
            if table < 0.7:
                sku = random_sku(rng)
                if choice < 0.5:
                    cur.execute(
                        "INSERT INTO skus VALUES (%s,%s,%s) ON DUPLICATE KEY UPDATE qty=qty+1",
                        (sku, rng.randint(0, 99), rng.choice(NAMES)),
                    )
                elif choice < 0.75:
                    cur.execute(
                        "UPDATE skus SET qty=qty+1, note=%s WHERE sku=%s", (rng.choice(NAMES), sku)
                    )
                elif choice < 0.85:
                    cur.execute(
                        "UPDATE IGNORE skus SET sku=%s WHERE sku=%s", (random_sku(rng), sku)
                    )
                else:
                    cur.execute("DELETE FROM skus WHERE sku=%s", (sku,))
            else:
                order, line = rng.randint(1, 150), rng.randint(1, 5)
                if choice < 0.5:
                    cur.execute(
                        "INSERT INTO order_lines VALUES (%s,%s,%s) "
                        "ON DUPLICATE KEY UPDATE amount=%s",
                        (order, line, rng.randint(0, 9999) / 100, rng.randint(0, 9999) / 100),
                    )
                elif choice < 0.7:
                    cur.execute(
                        "UPDATE order_lines SET amount=amount+1 WHERE order_id=%s", (order,)
                    )
                elif choice < 0.8:
                    cur.execute(
                        "UPDATE IGNORE order_lines SET order_id=%s WHERE order_id=%s AND line=%s",
                        (rng.randint(1, 150), order, line),
                    )
                else:
                    cur.execute(
                        "DELETE FROM order_lines WHERE order_id=%s AND line=%s", (order, line)
                    )
            self.operations += 1
        self.conn.commit()


TABLE_KEYS = {"items": ["id"], "skus": ["sku"], "order_lines": ["order_id", "line"]}


def background_writes(
    conn: pymysql.connections.Connection, *, seed: int, key_space: int, seconds: float
) -> tuple[threading.Thread, threading.Event]:
    """A ``MultiWorkload`` writing on a thread of its own, started: for up to ``seconds``,
    until the event is set (join the thread after setting it)."""
    stop = threading.Event()
    writer = threading.Thread(
        target=MultiWorkload(conn, seed=seed, key_space=key_space).run,
        args=(seconds, stop, 1_000_000),
        daemon=True,
    )
    writer.start()
    return writer, stop


def json_state(
    conn: pymysql.connections.Connection, table: str
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A table as the envelope shows it: rows as decoded JSON images, keyed by primary key.

    Built from the SELECT result by ``_json_value`` alone (README: decimals as strings,
    temporal values ISO-8601), never by the implementation's own serialiser.
    """
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        out = {}
        for values in cur.fetchall():
            image = {name: _json_value(value) for name, value in zip(names, values, strict=True)}
            out[tuple(image[k] for k in TABLE_KEYS[table])] = image
    return out


def _json_value(value: Any) -> Any:
    """A value pymysql returns for the workload's columns, as a JSON image holds it."""
    if value is None or isinstance(value, int | str):
        return value
    if isinstance(value, Decimal):
        return str(value)  # DECIMAL(p,s) comes back with its s digits, never as an exponent
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    raise TypeError(f"the workload's tables hold no {type(value).__name__}: extend _json_value")


def envelope_to_changelog(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """Envelope rows of one table as typed-changelog rows for the oracle."""
    import json

    out: list[dict[str, Any]] = []
    for row in rows:
        if row["table"] != table:
            continue
        before = json.loads(row["before"]) if row["before"] else None
        after = json.loads(row["after"]) if row["after"] else None
        parts = {
            "r": [("+I", after)],
            "c": [("+I", after)],
            "d": [("-D", before)],
            "u": [("-U", before), ("+U", after)],
        }[row["op"]]
        for op, image in parts:
            assert image is not None
            out.append({"_op": op, "_seq": row["seq"], **image})
    return out
