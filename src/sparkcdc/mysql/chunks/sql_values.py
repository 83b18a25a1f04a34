"""Values read with SQL (pymysql) in the binlog decoder's value form, whichever client read them.

Snapshot rows and binlog rows must look the same downstream, so values read with SQL
are converted to what :mod:`sparkcdc.mysql.binlog.column_values` / ``rowcodec`` decode from row
images (:mod:`sparkcdc.model.row_values` names the form and its Arrow types): zero dates
become None, TIMESTAMPs aware UTC datetimes, BITs ints, FLOATs their float32 value, TIME
text a timedelta.

SQL sessions run with ``time_zone = '+00:00'`` so TIMESTAMP values (and bounds) are UTC.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from sparkcdc.model.row_values import arrow_type
from sparkcdc.model.schema import PLUGIN_TEXT_TYPES, TEXT_TYPES, Column, plugin_bytes

SESSION_TIME_ZONE_SQL = "SET time_zone = '+00:00'"
_FLOAT = struct.Struct("<f")
_TIME_RE = re.compile(r"^(-)?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
_TEXT_TYPES = TEXT_TYPES

Converter = Callable[[Any], Any]


def _zero_to_none(value: Any) -> Any:
    # pymysql returns the text of dates it cannot represent ('0000-00-00', '2020-00-00')
    return None if isinstance(value, str) else value


def _timestamp_utc(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC)
    return None


def _bit_int(value: Any) -> Any:
    return int.from_bytes(value, "big") if isinstance(value, bytes) else int(value)


def _float32(value: Any) -> float:
    return float(_FLOAT.unpack(_FLOAT.pack(value))[0])


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _binary(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def parse_time(text: str) -> dt.timedelta:
    """A TIME value's text (``-838:59:59.000000`` .. ``838:59:59``) as a timedelta.

    >>> parse_time("-12:00:01.5")
    datetime.timedelta(days=-1, seconds=43198, microseconds=500000)
    """
    match = _TIME_RE.match(text)
    if not match:
        raise ValueError(f"not a TIME value: {text!r}")
    sign, h, m, s, frac = match.groups()
    value = dt.timedelta(
        hours=int(h), minutes=int(m), seconds=int(s), microseconds=int((frac or "0").ljust(6, "0"))
    )
    return -value if sign else value


def sql_converter(column: Column) -> Converter | None:
    """How a pymysql value of ``column`` becomes its decoder form (None: as is)."""
    t = column.data_type
    if t in ("date", "datetime"):
        return _zero_to_none
    if t == "timestamp":
        return _timestamp_utc
    if t == "bit":
        return _bit_int
    if t == "float":
        return _float32
    if t in _TEXT_TYPES:
        return _text
    if t in ("decimal", "numeric"):
        return lambda v: v if isinstance(v, Decimal) else Decimal(v)
    if t in PLUGIN_TEXT_TYPES:
        return lambda v: plugin_bytes(t, _text(v))
    if t == "time":
        return lambda v: parse_time(v) if isinstance(v, str) else v
    if arrow_type(column) == pa.binary():
        return _binary
    return None


def to_sql_param(value: Any) -> Any:
    """A key value ready to bind in a UTC session (aware datetimes become naive UTC)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value
