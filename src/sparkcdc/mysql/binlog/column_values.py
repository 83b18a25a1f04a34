"""Column value decoders for row images: binary DECIMAL, temporal types, SET.

What each column type becomes (the generated row decoders in :mod:`sparkcdc.mysql.binlog.rowcodec`
inline the simple ones and call these for the rest):

- NEWDECIMAL -> ``decimal.Decimal`` with the column's scale
- DATE -> ``datetime.date``; TIME/TIME2 -> ``datetime.timedelta`` (may be negative);
  DATETIME/DATETIME2 -> naive ``datetime.datetime``; TIMESTAMP/TIMESTAMP2 -> aware UTC
  ``datetime.datetime``. Zero dates and dates with a zero part (``2020-00-00``) -> None.
- YEAR -> int (0 for ``0000``); SET -> labels joined by ',' in definition order.

Byte layouts: https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html
and MySQL ``strings/decimal.cc`` (``decimal2bin``), ``mysys/my_time.cc``
(``my_datetime_packed_from_binary`` and friends).

>>> size, dec = decimal_decoder(5, 2)
>>> dec(bytes([0x7F, 0x84, 0xD2]))      # every bit of 0x80 0x7B 0x2D inverted
Decimal('-123.45')
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Context, Decimal

from sparkcdc.errors import ProtocolError

# ---------------------------------------------------------------------------- DECIMAL

# decimal2bin packs 9 decimal digits in 4 bytes; a leftover of k digits takes this many bytes
_DIGITS_PER_GROUP = 9
_GROUP_BYTES = 4
_GROUP_BITS = 8 * _GROUP_BYTES
_GROUP_MASK = (1 << _GROUP_BITS) - 1
_GROUP_RADIX = 10**_DIGITS_PER_GROUP
_LEFTOVER_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
# wide enough for DECIMAL(65, 30): scaling by a power of ten stays exact
_EXACT = Context(prec=100)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a binary DECIMAL(precision, scale) value.

    >>> decimal_size(10, 2), decimal_size(65, 30)
    (5, 30)
    """
    intg = precision - scale
    return (
        (intg // _DIGITS_PER_GROUP) * _GROUP_BYTES
        + _LEFTOVER_BYTES[intg % _DIGITS_PER_GROUP]
        + (scale // _DIGITS_PER_GROUP) * _GROUP_BYTES
        + _LEFTOVER_BYTES[scale % _DIGITS_PER_GROUP]
    )


def decimal_decoder(precision: int, scale: int) -> tuple[int, Callable[[bytes], Decimal]]:
    """``(size, decode)`` for binary DECIMAL(precision, scale); ``decode`` takes exactly
    ``size`` bytes.

    Layout: big-endian digit groups (leading partial integer group, full integer groups,
    full fraction groups, trailing partial fraction group) with the top bit flipped; a
    negative number is stored with every bit inverted.

    >>> size, dec = decimal_decoder(10, 2)
    >>> size, dec(bytes([0x80, 0x00, 0x04, 0xD2, 0x2D]))
    (5, Decimal('1234.45'))
    """
    size = decimal_size(precision, scale)
    intg = precision - scale
    int_groups = intg // _DIGITS_PER_GROUP
    frac_groups, frac_left = divmod(scale, _DIGITS_PER_GROUP)
    frac_left_bits = 8 * _LEFTOVER_BYTES[frac_left]
    frac_left_mask = (1 << frac_left_bits) - 1
    frac_bits = frac_groups * _GROUP_BITS + frac_left_bits
    frac_mask = (1 << frac_bits) - 1
    frac_left_radix = 10**frac_left
    top = 1 << (8 * size - 1)
    flip = ((1 << (8 * size)) - 1) ^ top
    simple = int_groups == 0 and frac_groups == 0
    scale_radix = 10**scale
    limit = 10**precision
    exponent = -scale
    context = _EXACT

    def decode(raw: bytes) -> Decimal:
        v = int.from_bytes(raw, "big")
        negative = not v & top
        v ^= flip if negative else top
        if simple:
            unscaled = (v >> frac_bits) * scale_radix + (v & frac_mask)
        else:
            p = v >> frac_bits
            ival = 0
            mult = 1
            for _ in range(int_groups):
                ival += (p & _GROUP_MASK) * mult
                p >>= _GROUP_BITS
                mult *= _GROUP_RADIX
            ival += p * mult
            f = v & frac_mask
            fval = f & frac_left_mask
            f >>= frac_left_bits
            mult = frac_left_radix
            for _ in range(frac_groups):
                fval += (f & _GROUP_MASK) * mult
                f >>= _GROUP_BITS
                mult *= _GROUP_RADIX
            unscaled = ival * scale_radix + fval
        if unscaled >= limit:  # a digit group out of range: bytes MySQL never writes
            raise ProtocolError(
                f"binary DECIMAL({precision},{scale}) bytes {raw.hex()} hold more than "
                f"{precision} digits: they are not a value of the column"
            )
        if negative:
            unscaled = -unscaled
        if exponent:
            return Decimal(unscaled).scaleb(exponent, context)
        return Decimal(unscaled)

    return size, decode


# ---------------------------------------------------------------------------- temporal

_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# DATETIME2: 1 sign bit, 17 bits year*13+month, 5 day, 5 hour, 6 minute, 6 second (5 bytes)
_DATETIME2_INT_BYTES = 5
_DATETIME2_OFFSET = 0x8000000000
# TIME2: 1 sign bit, 1 unused, 10 bits hour, 6 minute, 6 second (3 bytes)
_TIME2_INT_BYTES = 3
_TIME2_OFFSET = 0x800000
_TIMESTAMP2_INT_BYTES = 4
_DAY_BITS, _MONTH_SHIFT, _YMD_SHIFT = 5, 5, 17
_HOUR_SHIFT, _MINUTE_SHIFT, _SIX_BITS = 12, 6, 0x3F
_HMS_BITS = (1 << _YMD_SHIFT) - 1
_TIME_HOUR_BITS = 0x3FF
_MONTHS_PER_YEAR_PACKED = 13


def fsp_bytes(fsp: int) -> int:
    """Bytes of the fractional-second part for precision ``fsp`` (0..6).

    >>> [fsp_bytes(n) for n in range(7)]
    [0, 1, 1, 2, 2, 3, 3]
    """
    return (fsp + 1) // 2


def fsp_multiplier(fsp: int) -> int:
    """Microseconds per unit of the stored fraction: hundredths (1 byte), 1/10000 s (2
    bytes) or microseconds (3 bytes)."""
    return (0, 10_000, 100, 1)[fsp_bytes(fsp)]


def datetime2_decoder(fsp: int) -> tuple[int, Callable[[bytes, int], dt.datetime | None]]:
    """``(size, decode(buf, pos))`` for DATETIME2(fsp); zero dates decode to None.

    >>> size, dec = datetime2_decoder(0)
    >>> dec(bytes.fromhex("99a7dec1c5"), 0)
    datetime.datetime(2020, 11, 15, 12, 7, 5)
    """
    fbytes = fsp_bytes(fsp)
    size = _DATETIME2_INT_BYTES + fbytes
    fbits = 8 * fbytes
    fmask = (1 << fbits) - 1
    mult = fsp_multiplier(fsp)
    datetime = dt.datetime

    def decode(buf: bytes, pos: int) -> dt.datetime | None:
        raw = int.from_bytes(buf[pos : pos + size], "big")
        us = (raw & fmask) * mult
        ip = (raw >> fbits) - _DATETIME2_OFFSET
        ymd = ip >> _YMD_SHIFT
        year, month = divmod(ymd >> _MONTH_SHIFT, _MONTHS_PER_YEAR_PACKED)
        hms = ip & _HMS_BITS
        try:
            return datetime(
                year,
                month,
                ymd & 0x1F,
                hms >> _HOUR_SHIFT,
                (hms >> _MINUTE_SHIFT) & _SIX_BITS,
                hms & _SIX_BITS,
                us,
            )
        except ValueError:  # zero date or a zero part (allowed without NO_ZERO_IN_DATE)
            return None

    return size, decode


def timestamp2_decoder(fsp: int) -> tuple[int, Callable[[bytes, int], dt.datetime | None]]:
    """``(size, decode(buf, pos))`` for TIMESTAMP2(fsp): big-endian epoch seconds + fraction.

    >>> size, dec = timestamp2_decoder(3)
    >>> dec(bytes.fromhex("5fb1181d") + (123 * 10).to_bytes(2, "big"), 0)
    datetime.datetime(2020, 11, 15, 11, 59, 25, 123000, tzinfo=datetime.timezone.utc)
    """
    fbytes = fsp_bytes(fsp)
    size = _TIMESTAMP2_INT_BYTES + fbytes
    mult = fsp_multiplier(fsp)
    epoch = _EPOCH_UTC
    timedelta = dt.timedelta

    def decode(buf: bytes, pos: int) -> dt.datetime | None:
        secs = int.from_bytes(buf[pos : pos + _TIMESTAMP2_INT_BYTES], "big")
        us = int.from_bytes(buf[pos + _TIMESTAMP2_INT_BYTES : pos + size], "big") * mult
        if not secs and not us:
            return None  # '0000-00-00 00:00:00'
        return epoch + timedelta(0, secs, us)

    return size, decode


def time2_decoder(fsp: int) -> tuple[int, Callable[[bytes, int], dt.timedelta]]:
    """``(size, decode(buf, pos))`` for TIME2(fsp) -> timedelta (negative allowed).

    The integer and fraction parts together form one offset-binary number, so a negative
    time is simply that number below the offset.

    >>> size, dec = time2_decoder(2)
    >>> dec(bytes.fromhex("7fffff") + bytes([0xFF]), 0)       # -00:00:00.01
    datetime.timedelta(days=-1, seconds=86399, microseconds=990000)
    """
    fbytes = fsp_bytes(fsp)
    size = _TIME2_INT_BYTES + fbytes
    fbits = 8 * fbytes
    fmask = (1 << fbits) - 1
    offset = _TIME2_OFFSET << fbits
    mult = fsp_multiplier(fsp)
    timedelta = dt.timedelta

    def decode(buf: bytes, pos: int) -> dt.timedelta:
        v = int.from_bytes(buf[pos : pos + size], "big") - offset
        negative = v < 0
        if negative:
            v = -v
        ip = v >> fbits
        value = timedelta(
            hours=(ip >> _HOUR_SHIFT) & _TIME_HOUR_BITS,
            minutes=(ip >> _MINUTE_SHIFT) & _SIX_BITS,
            seconds=ip & _SIX_BITS,
            microseconds=(v & fmask) * mult,
        )
        return -value if negative else value

    return size, decode


def decode_date(v: int) -> dt.date | None:
    """DATE from its 3-byte little-endian value ``year << 9 | month << 5 | day``.

    >>> decode_date(2020 << 9 | 11 << 5 | 15), decode_date(0)
    (datetime.date(2020, 11, 15), None)
    """
    try:
        return dt.date(v >> 9, (v >> _MONTH_SHIFT) & 0xF, v & 0x1F)
    except ValueError:
        return None


def decode_time_v1(v: int) -> dt.timedelta:
    """Old TIME (type 11): signed ``HHMMSS`` as a decimal number.

    >>> decode_time_v1(-123456)
    datetime.timedelta(days=-1, seconds=41104)
    """
    sign = -1 if v < 0 else 1
    hh, rest = divmod(abs(v), 10_000)
    mm, ss = divmod(rest, 100)
    return sign * dt.timedelta(hours=hh, minutes=mm, seconds=ss)


def decode_datetime_v1(v: int) -> dt.datetime | None:
    """Old DATETIME (type 12): ``YYYYMMDDhhmmss`` as a decimal number.

    >>> decode_datetime_v1(20201115120705)
    datetime.datetime(2020, 11, 15, 12, 7, 5)
    """
    date_part, time_part = divmod(v, 1_000_000)
    year, md = divmod(date_part, 10_000)
    month, day = divmod(md, 100)
    hour, ms = divmod(time_part, 10_000)
    minute, second = divmod(ms, 100)
    try:
        return dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None


def decode_timestamp_v1(secs: int) -> dt.datetime | None:
    """Old TIMESTAMP (type 7): little-endian epoch seconds; 0 is the zero timestamp.

    >>> decode_timestamp_v1(1)
    datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc)
    """
    if not secs:
        return None
    return _EPOCH_UTC + dt.timedelta(seconds=secs)


# --------------------------------------------------------------------------------- SET


def set_decoder(labels: tuple[str, ...]) -> Callable[[int], str]:
    """Turn a SET bitmask into its labels joined by ',' in definition order.

    >>> set_decoder(("a", "b", "c"))(0b101)
    'a,c'
    """
    cache: dict[int, str] = {}
    limit = 4096  # distinct masks remembered per column

    def decode(mask: int) -> str:
        text = cache.get(mask)
        if text is None:
            text = ",".join(label for i, label in enumerate(labels) if mask >> i & 1)
            if len(cache) < limit:
                cache[mask] = text
        return text

    return decode
