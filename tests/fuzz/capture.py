"""Capture the seed corpus of the fuzz targets from the private MariaDB (run again only when
the cases change): ``SPARKCDC_DEV_DIR=... SPARKCDC_DEV_PORT=... python -m tests.fuzz.capture``.

binlog seeds: for each column type of the decoder's table-driven tests
(tests/integration/test_decoder_types.py ``CASES``), each transaction of its inserts,
updates and deletes as the server's binlog file holds it (the FORMAT_DESCRIPTION first;
checksums stripped, and the header's size with them), under binlog_row_metadata FULL,
MINIMAL and NO_LOG and with log_bin_compress on; and MySQL 8's TRANSACTION_PAYLOAD and
PARTIAL_UPDATE_ROWS events, which no server here writes, from the unit tests' byte fixtures.

textrows seeds: the bytes MariaDB sends after the column definitions of ``SELECT * FROM t``
of each case's rows, behind the three set-up bytes of ``targets.textrows_input``.

Seeds over ``MAX_SEED`` bytes are left out (the corpus stays small and the fuzzer fast).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

from tests.harness.binlog_file import split_binlog_file
from tests.integration.test_decoder_types import CASES, Case, _file_slice, _write_case

from sparkcdc.mysql.chunks import textrows
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EventType
from sparkcdc_dev.devserver import DevServer

CORPUS = Path(__file__).parent / "corpus"
MAX_SEED = 6 << 10
_TRANSACTION_START = (EventType.MARIA_GTID, EventType.GTID)
_DATABASE = "fuzz_corpus"
_SIZE, _SIZE_AT = struct.Struct("<I"), 9  # the event header's event_size


def save(target: str, seed: bytes) -> None:
    if len(seed) > MAX_SEED:
        return
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


def transactions(server: DevServer, start: tuple[str, int], end: tuple[str, int]) -> list[bytes]:
    """The FORMAT_DESCRIPTION, then each transaction's events, of one file's range."""
    assert start[0] == end[0], "the range crossed a binlog rotation; capture again"
    data = _file_slice(server.datadir / start[0], start[1], end[1])
    # each event's header says its size without the checksum it no longer has
    events = [
        raw[:_SIZE_AT] + _SIZE.pack(len(raw)) + raw[_SIZE_AT + _SIZE.size :]
        for raw in split_binlog_file(data)
    ]
    fde, rest = events[0], events[1:]
    out: list[bytes] = []
    current: list[bytes] = []
    for raw in rest:
        if EVENT_HEADER.unpack_from(raw)[1] in _TRANSACTION_START and current:
            out.append(fde + b"".join(current))
            current = []
        current.append(raw)
    if current:
        out.append(fde + b"".join(current))
    return out


def text_result(settings: ConnectionSettings, columns: int) -> bytes:
    """The rows of SELECT * FROM t as the connection delivers them, with the set-up bytes."""
    assert textrows._textrows is not None
    conn: Any = sql_connection(settings, _DATABASE)
    try:
        _result, seq = conn.start_result("SELECT * FROM t ORDER BY id")
        raw = b""
        while True:  # until the splitter finds the end of the rows
            raw += conn.read_some(1 << 16)
            splitter = textrows._textrows.Splitter(columns, seq)
            _pos, state, *_ = splitter.feed(raw, 0)
            if state == textrows._textrows.END:
                break
    finally:
        conn.close()
    return bytes([columns - 1, seq, 7]) + raw


def capture_case(server: DevServer, cur: Any, case: Case, settings: ConnectionSettings) -> None:
    cur.execute("DROP TABLE IF EXISTS t")
    start, end, _, _ = _write_case(cur, case)
    for seed in transactions(server, start, end):
        save("binlog", seed)
    for i, literal in enumerate(case.values):
        cur.execute(f"INSERT INTO t VALUES ({i}, {literal})")
    save("textrows", text_result(settings, 2))


def mysql8_seeds() -> None:
    """MySQL 8's events no server here writes, from the unit tests' byte fixtures."""
    from tests.unit.mysql.test_decoder_mysql8 import (
        BEFORE_DOC,
        REPLACE,
        after_image,
        before_image,
        diff,
        diff_cell,
        docs_table_map,
        event,
        mysql8_fde,
        partial_rows,
        payload_event,
        transaction,
    )

    fde = mysql8_fde()
    save("binlog", fde + payload_event(transaction(rows=3)))
    save("binlog", fde + payload_event(transaction(), compression=255))
    images = before_image(BEFORE_DOC) + after_image(
        [struct.pack("<q", 1), diff_cell(diff(REPLACE, "$.price", 2.5)), b"\x01n", None],
        partial_bits=0b01,
    )
    save(
        "binlog",
        fde
        + event(EventType.TABLE_MAP, docs_table_map())
        + event(EventType.PARTIAL_UPDATE_ROWS, partial_rows(images)),
    )


def main() -> None:
    server = DevServer.from_env()
    server.start()
    s = server.settings
    settings = ConnectionSettings(s.host, s.port, s.user, s.password)
    with server.root_connection() as root, root.cursor() as admin:
        admin.execute("FLUSH BINARY LOGS")
        admin.execute(f"DROP DATABASE IF EXISTS {_DATABASE}")
        admin.execute(f"CREATE DATABASE {_DATABASE} CHARACTER SET utf8mb4")
        try:
            for metadata, compress in (
                ("FULL", "OFF"),
                ("MINIMAL", "OFF"),
                ("NO_LOG", "OFF"),
                ("FULL", "ON"),
            ):
                admin.execute(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
                admin.execute(f"SET GLOBAL log_bin_compress = {compress}")
                with server.connection(_DATABASE) as conn, conn.cursor() as cur:
                    for case in CASES:
                        admin.execute("FLUSH BINARY LOGS")  # every case's range in one file
                        capture_case(server, cur, case, settings)
        finally:
            admin.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
            admin.execute("SET GLOBAL log_bin_compress = OFF")
            admin.execute(f"DROP DATABASE IF EXISTS {_DATABASE}")
    mysql8_seeds()
    sizes = {p.parent.name: 0 for p in CORPUS.rglob("*") if p.is_file()}
    for p in CORPUS.rglob("*"):
        if p.is_file():
            sizes[p.parent.name] += p.stat().st_size
    print({k: f"{v} bytes" for k, v in sizes.items()})


if __name__ == "__main__":
    main()
