"""Compressed binlog payloads: MariaDB's zlib-compressed events and MySQL 8.0's zstd
transaction payloads."""

from __future__ import annotations

import zlib

import zstandard

from sparkcdc.errors import ProtocolError

# MariaDB compressed payload: header byte 0b1AAA0LLL (A = algorithm, 0 = zlib;
# L = bytes of the big-endian uncompressed length that follow), then the zlib stream.
_COMPRESSED_MARK_MASK = 0xE0
_COMPRESSED_MARK = 0x80
_COMPRESSED_LEN_BYTES_MASK = 0x07


def decompress_mariadb(data: bytes) -> bytes:
    """Inflate a MariaDB compressed payload (compressed QUERY text or ROWS data).

    >>> payload = b"hello" * 10
    >>> decompress_mariadb(bytes([0x81, len(payload)]) + zlib.compress(payload)) == payload
    True
    """
    if not data or data[0] & _COMPRESSED_MARK_MASK != _COMPRESSED_MARK:
        raise ProtocolError(
            f"compressed MariaDB event payload has header byte "
            f"{data[:1].hex() or '(none)'}, expected 0b100xxxxx (zlib)"
        )
    len_bytes = data[0] & _COMPRESSED_LEN_BYTES_MASK
    expected = int.from_bytes(data[1 : 1 + len_bytes], "big")
    try:
        out = zlib.decompress(data[1 + len_bytes :])
    except zlib.error as exc:
        raise ProtocolError(f"cannot inflate compressed MariaDB event payload: {exc}") from None
    if len(out) != expected:
        raise ProtocolError(
            f"compressed MariaDB event payload inflated to {len(out)} bytes, header says {expected}"
        )
    return out


def zstd_decompress(payload: bytes, uncompressed: int, where: str) -> bytes:
    """Inflate a zstd payload that must yield exactly ``uncompressed`` bytes.

    Frames are read one after the other, as MySQL's streaming decompressor does; reading
    stops one byte past the announced size, so a wrong header cannot make us inflate more.
    """
    try:
        with zstandard.ZstdDecompressor().stream_reader(payload, read_across_frames=True) as r:
            raw = r.read(uncompressed + 1)
    except zstandard.ZstdError as exc:
        raise ProtocolError(
            f"{where}: cannot decompress its {len(payload)}-byte ZSTD payload: {exc}"
        ) from None
    if len(raw) != uncompressed:
        raise ProtocolError(
            f"{where}: its {len(payload)}-byte ZSTD payload inflates to "
            f"{'more than ' if len(raw) > uncompressed else ''}{len(raw)} bytes, its header "
            f"says {uncompressed}; the payload is truncated or corrupt"
        )
    return raw
