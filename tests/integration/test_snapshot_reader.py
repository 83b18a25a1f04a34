"""Chunk reads against the private MariaDB: value fidelity, exactness under writes, speed."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import connectorx  # noqa: F401  (a dependency: a broken install fails here, never skips)
import pytest
from workload import ITEMS_DDL, Workload, random_row

from sparkcdc.model.dialect import ChunkSelect
from sparkcdc.model.events import RowChanges
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.tls import TlsSettings
from sparkcdc.mysql.admin.catalog import load_schema
from sparkcdc.mysql.admin.server import current_position, server_info
from sparkcdc.mysql.chunks import reads
from sparkcdc.mysql.chunks.select import select_pymysql
from sparkcdc.mysql.dialect import MySqlDialect
from sparkcdc.mysql.protocol.connection import ConnectionSettings, KeptConnection, sql_connection
from sparkcdc.mysql.stream.binlog_range import read_range
from sparkcdc.snapshot.chunks import ChunkRange
from sparkcdc.snapshot.keys import in_range, key_sort_key
from sparkcdc.snapshot.reader import (
    ChunkRead,
    ChunkResult,
    apply_backfill,
    read_chunk,
    read_chunks,
)
from sparkcdc.snapshot.splitter import ChunkSplitter
from sparkcdc_dev.devserver import DevServer

pytestmark = pytest.mark.integration

SERVER_ID = 5611
READERS = ["pymysql", "text", "connectorx"]

TYPES_DDL = """
CREATE TABLE typed (
  id INT NOT NULL PRIMARY KEY,
  ti TINYINT, tb TINYINT(1), si SMALLINT UNSIGNED, mi MEDIUMINT, bi BIGINT,
  bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(10,2), dec2 DECIMAL(40,12),
  dec3 DECIMAL(28,10), dec4 DECIMAL(12,11),
  dt DATETIME(3), ts TIMESTAMP(6) NULL, da DATE, tm TIME(2), y YEAR,
  c CHAR(5), vc VARCHAR(20), tx TEXT, bn BINARY(3), vb VARBINARY(8), bl BLOB,
  e ENUM('x','y','z'), st SET('a','b','c'), j JSON, bt BIT(10)
)
"""
TYPED_ROWS = [
    "(1, -128, 1, 65535, -8388608, -9223372036854775808, 18446744073709551615, 1.1, 2.5e300,"
    " -12345678.91, 1234567890123456789012345678.123456789012, 999999999999999999.9999999999,"
    " -9.87654321098, '2026-01-02 03:04:05.678',"
    " '2026-03-04 05:06:07.123456', '2024-02-29', '-838:59:59.00', 2026, 'ab', 'héllo ✓',"
    " 'long text', x'0102', x'00ff00', x'deadbeef', 'z', 'a,c', '{\"k\": [1, 2]}', b'1010101010')",
    "(2" + ", NULL" * 27 + ")",
    "(3, 127, 0, 0, 8388607, 9223372036854775807, 0, -0.5, 0, 0.01, 0, -0.0000000001,"
    " 0.00000000001, '1000-01-01 00:00:00',"
    " '1970-01-01 00:00:01', '9999-12-31', '12:00:01.50', 1901, '', 'emoji 🎉', '', x'000000',"
    " x'', x'', 'x', '', '[]', b'0')",
]


def rows_of(result: ChunkResult) -> list[tuple[Any, ...]]:
    """The chunk's rows as tuples in the table's column order."""
    return [tuple(row.values()) for row in result.rows.to_pylist()]


def settings_of(server: DevServer, reader: str = "") -> ConnectionSettings:
    """The dev server's settings; for the connectorx reader without TLS (connectorx reads
    only what a plain connection would: see mysql/chunks/select.py ``_select``)."""
    s = server.settings
    tls = TlsSettings(mode="disabled") if reader == "connectorx" else TlsSettings()
    return ConnectionSettings(s.host, s.port, s.user, s.password, tls=tls)


def dialect_of(server: DevServer, reader: str = "") -> MySqlDialect:
    """The MySQL source of the dev server, connecting as ``settings_of`` says."""
    s = server.settings
    options = {"hostname": s.host, "port": str(s.port), "username": s.user}
    options.update({"database-name": "x", "scan.startup.mode": "latest-offset"})
    dialect = MySqlDialect(SourceOptions.from_options({**options, "password": s.password}))
    dialect.settings = settings_of(server, reader)
    return dialect


def whole(table: str) -> ChunkRange:
    return ChunkRange(table, 0, None, None)


@pytest.mark.parametrize("reader", READERS)
def test_snapshot_rows_look_like_binlog_rows(
    dev_server: DevServer, database: str, sql: Any, reader: str
) -> None:
    settings = settings_of(dev_server, reader)
    sql.execute(TYPES_DDL)
    conn = sql_connection(settings, database)
    info = server_info(conn)
    start = current_position(conn, info)
    sql.execute("INSERT INTO typed VALUES " + ", ".join(TYPED_ROWS))
    end = current_position(conn, info)
    schema = load_schema(conn, database, "typed")
    decoded: dict[int, tuple[Any, ...]] = {}
    for change in read_range(settings, SERVER_ID, start, end, lambda d, t: d == database):
        assert isinstance(change, RowChanges)
        names = list(change.columns.names)
        assert names == list(schema.column_names)
        for _, after in change.rows:
            assert after is not None
            decoded[after[0]] = tuple(after)
    result = read_chunk(
        dialect_of(dev_server, reader),
        ChunkRead(
            schema,
            key_column="id",
            collation=None,
            server_id=SERVER_ID,
            skip=frozenset({"connectorx", "text"} - {reader}),
        ),
        whole("x"),
    )
    assert result.reader == reader
    snap = {row[0]: row for row in rows_of(result)}
    assert set(snap) == {1, 2, 3}
    for key, row in decoded.items():
        for name, want, got in zip(schema.column_names, row, snap[key], strict=True):
            assert got == want, (key, name, got, want)
            assert want is None or type(got) is type(want) or name == "ts", (name, got, want)
    conn.close()


def _write_inside_the_window(conn: Any, chunk: ChunkRange, rng: Any) -> None:
    """Changes to a chunk committed after its SELECT and before its HW: only backfill sees them."""
    lo = 1 if chunk.start is None else chunk.start
    hi = lo + 200 if chunk.end is None else chunk.end
    with conn.cursor() as cur:
        conn.begin()
        cur.execute("UPDATE items SET qty = qty + 1000 WHERE id >= %s AND id < %s", (lo, hi))
        cur.execute("DELETE FROM items WHERE id = %s", (rng.randrange(lo, hi),))
        cur.execute(
            "INSERT IGNORE INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
            random_row(rng, rng.randrange(lo, hi)),
        )
        # a key-changing update out of this chunk (and one into it)
        cur.execute(
            "UPDATE IGNORE items SET id = id + 5000 WHERE id = %s", (rng.randrange(lo, hi),)
        )
        cur.execute(
            "UPDATE IGNORE items SET id = %s WHERE id > 5000 LIMIT 1", (rng.randrange(lo, hi),)
        )
        conn.commit()


@pytest.mark.parametrize("group", [1, 3])
def test_chunk_reads_are_exact_under_concurrent_writes(
    dev_server: DevServer, database: str, sql: Any, monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    """Every chunk + the binlog after its HW, per chunk, rebuilds the table exactly; also
    when adjacent chunks are read together (read_chunks) and split again."""
    import random

    injector = dev_server.connection(database)
    inject_rng = random.Random(3)
    original_select = reads.MySqlChunkReader.select

    def select_then_write(reader: reads.MySqlChunkReader, spec: ChunkSelect) -> Any:
        out = original_select(reader, spec)
        if spec.index % 2 == 0:
            chunk = ChunkRange(spec.schema.qualified_name, spec.index, spec.start, spec.end)
            _write_inside_the_window(injector, chunk, inject_rng)
        return out

    monkeypatch.setattr(reads.MySqlChunkReader, "select", select_then_write)

    settings = settings_of(dev_server)
    sql.execute(ITEMS_DDL)
    rng = random.Random(7)
    key_space = 3000
    rows = [random_row(rng, k) for k in range(1, key_space + 1, 2)]
    sql.executemany("INSERT INTO items VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", rows)

    stop = threading.Event()
    workload = Workload(dev_server.connection(database), seed=11, key_space=key_space)
    worker = threading.Thread(target=workload.run, args=(30.0, stop, 20_000), daemon=True)
    conn = sql_connection(settings, database)
    schema = load_schema(conn, database, "items")
    dialect = dialect_of(dev_server)
    splitter = ChunkSplitter.for_table(dialect, KeptConnection.over(conn), schema, chunk_size=60)
    results: list[ChunkResult] = []
    planned = 0
    worker.start()
    try:
        while batch := splitter.chunks(planned, 4):
            planned += len(batch)
            # the workload keeps pace however fast chunks are read: 5 operations a batch
            seen = workload.operations
            while workload.operations < seen + 5 and worker.is_alive():
                time.sleep(0.005)
            for i in range(0, len(batch), group):
                results += read_chunks(
                    dialect,
                    ChunkRead(schema, key_column="id", collation=None, server_id=SERVER_ID),
                    batch[i : i + group],
                )
    finally:
        stop.set()
        worker.join(timeout=60)
    info = server_info(conn)
    final = current_position(conn, info)
    assert len(results) >= 20
    assert [r.chunk.index for r in results] == list(range(len(results)))
    if group > 1:  # chunks read together share their watermarks
        shared = sum(1 for a, b in itertools.pairwise(results) if a.high == b.high)
        assert shared >= len(results) // 2
    assert sum(1 for r in results if r.backfill_changes) >= len(results) // 2
    assert workload.operations > 100

    # per chunk, the binlog after its HW up to the end, keys judged by that chunk's range
    k = key_sort_key(None)
    union: dict[int, tuple[Any, ...]] = {}
    earliest = min(r.high for r in results)
    changes: list[tuple[Any, Any, Any]] = []
    for item in read_range(settings, SERVER_ID, earliest, final, lambda d, t: d == database):
        assert isinstance(item, RowChanges)
        for before, after in item.rows:
            changes.append((item.position, before, after))
    for r in results:
        c = r.chunk
        later = [(b, a) for p, b, a in changes if p >= r.high]
        rows = {row[0]: row for row in rows_of(r)}
        assert all(in_range(key, c.start, c.end, k) for key in rows)
        rows = apply_backfill(
            rows, later, lambda row, c=c: in_range(row[0], c.start, c.end, k), lambda row: row[0]
        )
        assert not set(rows) & set(union), "a key in two chunks"
        union.update(rows)
    table = select_pymysql(conn, ChunkSelect(schema, "id"))
    columns = [col.to_pylist() for col in table.columns]
    want = {row[0]: row for row in zip(*columns, strict=True)}
    assert union.keys() == want.keys()
    assert union == want
    conn.close()


def test_a_chunk_read_after_a_ddl_its_batch_has_not_reached_carries_it(
    dev_server: DevServer, database: str, sql: Any
) -> None:
    from sparkcdc.mysql.admin.server import current_position, server_info

    settings = settings_of(dev_server)
    sql.execute("CREATE TABLE ev (id INT PRIMARY KEY, b VARCHAR(10))")
    sql.execute("INSERT INTO ev VALUES (1, 'x'), (2, 'y')")
    conn = sql_connection(settings, database)
    planned = load_schema(conn, database, "ev")
    batch_end = current_position(conn, server_info(conn), with_gtids=False)
    sql.execute("ALTER TABLE ev RENAME COLUMN b TO bb")
    sql.execute("ALTER TABLE ev ADD COLUMN c INT")
    sql.execute("UPDATE ev SET c = 7 WHERE id = 2")
    chunk = ChunkRange(f"{database}.ev", 0, None, None)
    dialect = dialect_of(dev_server)
    result = read_chunk(
        dialect,
        ChunkRead(planned, key_column="id", collation=None, server_id=SERVER_ID, since=batch_end),
        chunk,
    )
    # read with the table as it is now, and carrying the two statements that made it so
    assert result.schema.column_names == ("id", "bb", "c")
    assert sorted(rows_of(result)) == [(1, "x", None), (2, "y", 7)]
    assert [d.statement for d in result.ddl] == [
        "ALTER TABLE ev RENAME COLUMN b TO bb",
        "ALTER TABLE ev ADD COLUMN c INT",
    ]
    assert all(batch_end <= d.position < result.low for d in result.ddl)
    # the same chunk planned with the current schema carries nothing
    again = read_chunk(
        dialect,
        ChunkRead(
            result.schema, key_column="id", collation=None, server_id=SERVER_ID, since=batch_end
        ),
        chunk,
    )
    assert again.ddl == ()
    conn.close()
