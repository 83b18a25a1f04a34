"""The splitter and the key order on the private MariaDB, for every kind of chunk key."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_snapshot_reader import dialect_of

from sparkcdc.errors import ConfigError
from sparkcdc.mysql.admin.catalog import load_schema
from sparkcdc.mysql.chunks.queries import column_collation
from sparkcdc.mysql.chunks.select import chunk_where
from sparkcdc.mysql.chunks.sql_values import sql_converter
from sparkcdc.mysql.protocol.connection import KeptConnection
from sparkcdc.snapshot.keys import chunk_membership, key_order, key_sort_key, python_orders
from sparkcdc.snapshot.splitter import ChunkSplitter, all_chunks
from sparkcdc.snapshot.storage import StateStore
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

WORDS = [
    "a",
    "A",
    "b",
    "B ",
    "é",
    "E",
    "e",
    "ß",
    "s",
    "S",
    "_",
    "-",
    "1",
    "10",
    "9",
    "ab",
    "aB",
    "Ab",
    "a b",
    "z",
    "Z",
    "ñ",
    "N",
    "o",
    "ö",
    "",
    " ",
    "x y",
    "X",
    "abc",
    "ABD",
]
rng = random.Random(5)
STRINGS = sorted({"".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))) for _ in range(400)})

CASES: dict[str, tuple[str, str, list[str], str | None]] = {
    # name: (DDL, INSERT, extra statements, configured chunk key)
    "int": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t SELECT seq, seq FROM seq_1_to_300",
        [],
        None,
    ),
    "skewed-int": (
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)",
        "INSERT INTO t SELECT seq, seq FROM seq_1_to_200",
        ["INSERT INTO t VALUES (9000000000000, 0), (-9000000000000, 0)"],
        None,
    ),
    "varchar-ci": (
        "CREATE TABLE t (id VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY)",
        "",
        [],
        None,
    ),
    "varchar-bin": (
        "CREATE TABLE t (id VARCHAR(20) COLLATE utf8mb4_bin PRIMARY KEY)",
        "",
        [],
        None,
    ),
    "uuid": ("CREATE TABLE t (id CHAR(36) PRIMARY KEY, v INT)", "", [], None),
    "composite": (
        "CREATE TABLE t (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
        "INSERT INTO t SELECT seq % 13, CONCAT('k', seq), seq FROM seq_1_to_250",
        [],
        None,
    ),
    "non-unique-nullable": (
        "CREATE TABLE t (v INT, w INT, KEY (v))",
        "INSERT INTO t SELECT IF(seq % 9 = 0, NULL, seq % 20), seq FROM seq_1_to_250",
        [],
        "v",
    ),
    "empty": ("CREATE TABLE t (id INT PRIMARY KEY)", "", [], None),
    "single-row": ("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (42)", [], None),
}


def fill(sql: Any, case: str) -> None:
    ddl, insert, extra, _ = CASES[case]
    sql.execute(ddl)
    if insert:
        sql.execute(insert)
    for stmt in extra:
        sql.execute(stmt)
    if case.startswith("varchar"):
        for s in STRINGS:  # IGNORE: values the collation deems duplicates
            sql.execute("INSERT IGNORE INTO t VALUES (%s)", (s,))
    if case == "uuid":
        sql.executemany(
            "INSERT INTO t VALUES (%s, 1)",
            [(str(uuid.UUID(int=rng.getrandbits(128))),) for _ in range(300)],
        )


@pytest.mark.parametrize("case", sorted(CASES))
def test_chunks_cover_the_table_exactly_once(
    dev_server: DevServer, database: str, sql: Any, case: str, tmp_path: Path
) -> None:
    fill(sql, case)
    conn = dev_server.connection(database)
    schema = load_schema(conn, database, "t")
    store = StateStore.open(str(tmp_path), "s")
    dialect, kept = dialect_of(dev_server), KeptConnection.over(conn)
    splitter = ChunkSplitter.for_table(
        dialect, kept, schema, chunk_key=CASES[case][3], chunk_size=7, store=store
    )
    key = splitter.key_column
    collation = column_collation(conn, database, "t", key)
    order = key_order(collation, dialect.key_ranking(conn))
    convert = sql_converter(next(c for c in schema.columns if c.name == key))
    chunks = all_chunks(splitter, step=5)
    sql.execute("SELECT COUNT(*) FROM t")
    total = sql.fetchone()[0]
    seen = 0
    for chunk in chunks:
        where, params = chunk_where(key, chunk.start, chunk.end)
        sql.execute(f"SELECT `{key}` FROM t {where}", params)
        keys = [r[0] if r[0] is None or convert is None else convert(r[0]) for r in sql.fetchall()]
        seen += len(keys)
        # the chunk's SELECT and the membership the filter and backfill use agree
        member = chunk_membership(order, chunk.start, chunk.end, keys)
        assert all(member.values()), (chunk, keys)
    assert seen == total
    expected_mode = {"int": "even", "empty": "empty"}.get(case, "query")
    if case != "single-row":
        assert splitter.mode == expected_mode
    if total > 50 and case not in ("composite", "non-unique-nullable"):
        assert len(chunks) >= total // 15  # chunk size honoured, roughly
    # a restart plans the very same chunks
    again = ChunkSplitter.for_table(
        dialect, kept, schema, chunk_key=CASES[case][3], chunk_size=7, store=store
    )
    assert again.chunks(0, len(chunks) + 5) == chunks
    conn.close()


def test_table_without_primary_key_needs_the_chunk_key_option(
    dev_server: DevServer, database: str, sql: Any
) -> None:
    sql.execute("CREATE TABLE t (v INT)")
    conn = dev_server.connection(database)
    schema = load_schema(conn, database, "t")
    with pytest.raises(ConfigError, match=r"scan\.incremental\.snapshot\.chunk\.key-column"):
        ChunkSplitter.for_table(dialect_of(dev_server), KeptConnection.over(conn), schema)
    conn.close()


@pytest.mark.parametrize(
    "collation", ["utf8mb4_bin", "utf8mb4_nopad_bin", "utf8mb3_bin", "ascii_bin"]
)
def test_python_key_order_matches_order_by(sql: Any, collation: str) -> None:
    """The Python fast path (keys.python_orders) is exact: the server's ORDER BY agrees."""
    assert python_orders(collation)
    charset = collation.split("_")[0]
    sql.execute(
        f"CREATE TABLE s (n INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET {charset} "
        f"COLLATE {collation})"
    )
    sample = [*STRINGS, "a\t", "a ", "a", "a  \x01", "😀", "😁", "\ufffd", "\x7f", "~", "_"]
    if charset == "utf8mb3":
        sample = [v for v in sample if all(ord(c) <= 0xFFFF for c in v)]
    if charset == "ascii":
        sample = [v for v in sample if v.isascii()]
    sql.executemany("INSERT INTO s VALUES (%s, %s)", list(enumerate(sample)))
    sql.execute("SELECT v, DENSE_RANK() OVER (ORDER BY v) FROM s")
    server_rank = dict(sql.fetchall())
    k = key_sort_key(collation)
    ordered = sorted(set(map(k, sample)))
    python_rank = {v: ordered.index(k(v)) + 1 for v in sample}
    mismatches = [
        (v, server_rank[v], python_rank[v]) for v in sample if server_rank[v] != python_rank[v]
    ]
    assert not mismatches[:10]


def test_python_order_of_binary_strings_matches_order_by(sql: Any) -> None:
    sql.execute("CREATE TABLE b (n INT PRIMARY KEY, v VARBINARY(8))")
    sample = [b"", b"a", b"a\x00", b"a ", b"A", b"\xff", b"\x00", b"\x7f\x80", b"ab", b"a\t"]
    sql.executemany("INSERT INTO b VALUES (%s, %s)", list(enumerate(sample)))
    sql.execute("SELECT v FROM b ORDER BY v")
    assert [bytes(r[0]) for r in sql.fetchall()] == sorted(sample, key=key_sort_key(None))
