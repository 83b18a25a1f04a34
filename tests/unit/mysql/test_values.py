"""Column value decoders: DECIMAL, temporal types, SET (edge cases from hand-built bytes)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog import column_values as values

_LEFTOVER = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def encode_decimal(text: str, precision: int, scale: int) -> bytes:
    """Independent encoder following MySQL decimal2bin (the layout the decoder reads)."""
    negative = text.startswith("-")
    digits = text.lstrip("-")
    int_part, _, frac_part = digits.partition(".")
    frac_part = frac_part.ljust(scale, "0")
    intg = precision - scale
    int_part = int_part.rjust(intg, "0")
    out = b""
    lead = intg % 9
    if lead:
        out += int(int_part[:lead]).to_bytes(_LEFTOVER[lead], "big")
    for i in range(lead, intg, 9):
        out += int(int_part[i : i + 9]).to_bytes(4, "big")
    full = scale // 9
    for i in range(full):
        out += int(frac_part[9 * i : 9 * i + 9]).to_bytes(4, "big")
    tail = scale % 9
    if tail:
        out += int(frac_part[9 * full :]).to_bytes(_LEFTOVER[tail], "big")
    raw = bytearray(out)
    raw[0] |= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    return bytes(raw)


@pytest.mark.parametrize(
    ("text", "precision", "scale"),
    [
        ("0.00", 5, 2),
        ("123.45", 5, 2),
        ("-123.45", 5, 2),
        ("-0.01", 5, 2),
        ("999.99", 5, 2),
        ("1234.45", 10, 2),
        ("-99999999.99", 10, 2),
        ("1234567890.12", 12, 2),
        ("12345678901234567890123456.1234567890", 38, 10),
        ("-12345678901234567890123456.1234567890", 38, 10),
        ("0.0000000001", 38, 10),
        (
            "-12345678901234567890123456789012345.123456789012345678901234567890",
            65,
            30,
        ),
        ("99999999999999999999999999999999999.999999999999999999999999999999", 65, 30),
        ("42", 10, 0),
        ("-42", 10, 0),
        ("-1234567890123456789", 19, 0),
        ("0.123456789", 9, 9),
        ("-0.5", 1, 1),
    ],
)
def test_decimal_round_trip(text: str, precision: int, scale: int) -> None:
    size, decode = values.decimal_decoder(precision, scale)
    raw = encode_decimal(text, precision, scale)
    assert len(raw) == size == values.decimal_size(precision, scale)
    result = decode(raw)
    assert result == Decimal(text)
    assert result.as_tuple().exponent == -scale  # the column's scale is kept


def test_decimal_keeps_trailing_zeros() -> None:
    _, decode = values.decimal_decoder(10, 4)
    assert str(decode(encode_decimal("1.5000", 10, 4))) == "1.5000"


def _datetime2(
    year: int, month: int, day: int, h: int, m: int, s: int, frac: int, fsp: int
) -> bytes:
    ip = ((year * 13 + month) << 5 | day) << 17 | h << 12 | m << 6 | s
    raw = (ip + 0x8000000000).to_bytes(5, "big")
    nbytes = (fsp + 1) // 2
    return raw + frac.to_bytes(nbytes, "big") if nbytes else raw


@pytest.mark.parametrize(
    ("fsp", "frac", "micro"),
    [
        (0, 0, 0),
        (1, 50, 500000),
        (2, 99, 990000),
        (3, 1234, 123400),
        (4, 1234, 123400),
        (6, 654321, 654321),
    ],
)
def test_datetime2_fractions(fsp: int, frac: int, micro: int) -> None:
    size, decode = values.datetime2_decoder(fsp)
    raw = _datetime2(2024, 2, 29, 23, 59, 58, frac, fsp)
    assert len(raw) == size
    assert decode(raw, 0) == dt.datetime(2024, 2, 29, 23, 59, 58, micro)


def test_datetime2_zero_and_zero_in_part_are_none() -> None:
    _, decode = values.datetime2_decoder(0)
    assert decode(_datetime2(0, 0, 0, 0, 0, 0, 0, 0), 0) is None
    assert decode(_datetime2(2020, 0, 0, 1, 2, 3, 0, 0), 0) is None
    assert decode(_datetime2(9999, 12, 31, 23, 59, 59, 0, 0), 0) == dt.datetime(
        9999, 12, 31, 23, 59, 59
    )


def _time2(seconds_total_us: int, fsp: int) -> bytes:
    """Encode like MySQL: packed = sign * (hms << 24 | us), stored offset-binary."""
    negative = seconds_total_us < 0
    total = abs(seconds_total_us)
    secs, us = divmod(total, 1_000_000)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    hms = h << 12 | m << 6 | s
    nbytes = (fsp + 1) // 2
    unit = (1, 10_000, 100, 1)[nbytes]
    frac = us // unit if nbytes else 0
    v = hms << (8 * nbytes) | frac
    if negative:
        v = -v
    return (v + (0x800000 << (8 * nbytes))).to_bytes(3 + nbytes, "big")


@pytest.mark.parametrize(
    ("fsp", "value_us"),
    [
        (0, 0),
        (0, -1_000_000),
        (0, 838 * 3600_000_000 + 59 * 60_000_000 + 59_000_000),
        (0, -(838 * 3600_000_000 + 59 * 60_000_000 + 59_000_000)),
        (2, -10_000),
        (1, -1_500_000),
        (3, -3_723_456_000),
        (4, 1_234_500),
        (6, -1),
        (6, -(3600_000_000 + 999_999)),
        (5, 12_345_670),
    ],
)
def test_time2_negative_and_fractions(fsp: int, value_us: int) -> None:
    size, decode = values.time2_decoder(fsp)
    raw = _time2(value_us, fsp)
    assert len(raw) == size
    assert decode(raw, 0) == dt.timedelta(microseconds=value_us)


def test_timestamp2() -> None:
    size, decode = values.timestamp2_decoder(6)
    raw = (1_700_000_000).to_bytes(4, "big") + (123456).to_bytes(3, "big")
    assert size == 7
    assert decode(raw, 0) == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    assert decode(bytes(7), 0) is None
    _, decode0 = values.timestamp2_decoder(0)
    assert decode0((2**31 - 1).to_bytes(4, "big"), 0) == dt.datetime(
        2038, 1, 19, 3, 14, 7, tzinfo=dt.UTC
    )


def test_date_and_old_formats() -> None:
    assert values.decode_date(1000 << 9 | 1 << 5 | 1) == dt.date(1000, 1, 1)
    assert values.decode_date(2021 << 9 | 2 << 5 | 30) is None  # invalid day
    assert values.decode_date(2021 << 9) is None  # zero in part
    assert values.decode_time_v1(-8385959) == -dt.timedelta(hours=838, minutes=59, seconds=59)
    assert values.decode_datetime_v1(0) is None
    assert values.decode_timestamp_v1(0) is None


def test_set_decoder_definition_order() -> None:
    decode = values.set_decoder(("a", "b", "c", "d"))
    assert decode(0) == ""
    assert decode(0b1010) == "b,d"
    assert decode(0b1111) == "a,b,c,d"


@pytest.mark.parametrize(
    ("precision", "scale", "raw"),
    [
        (10, 2, b"\xff" * 5),  # the integer groups at their bit maximum
        (5, 2, bytes([0x80 | 0x7F, 0xFF, 0x63])),  # 3 integer digits in 2 bytes: 32767
    ],
)
def test_decimal_bytes_of_more_digits_than_the_column_are_refused(
    precision: int, scale: int, raw: bytes
) -> None:
    """Digit groups out of range (bytes no server writes) that make more digits than the
    column has are not read as some number."""
    size, decode = values.decimal_decoder(precision, scale)
    assert len(raw) == size
    with pytest.raises(ProtocolError, match=f"DECIMAL[(]{precision},{scale}[)]"):
        decode(raw)
