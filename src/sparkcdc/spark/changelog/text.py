"""Decoded values as text: the envelope's JSON row images, and the values the tables shape
carries in ``_text``."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from sparkcdc.model.schema import time_text


def value_text(value: Any) -> str:
    """A decoded value as text, as the envelope's JSON images spell it (what
    ``pipeline.change_frames`` turns back into the value of any column type).

    >>> value_text(Decimal("1.50")), value_text(b"\\x00"), value_text(dt.timedelta(hours=-1))
    ('1.50', 'AA==', '-01:00:00')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return str(json_default(value))


def json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return time_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def image_json(names: Sequence[str], image: Sequence[Any]) -> str:
    """A row image as JSON text (decimals as strings, bytes as base64, times ISO).

    >>> image_json(["id", "price"], [1, Decimal("9.50")])
    '{"id":1,"price":"9.50"}'
    """
    return json.dumps(
        dict(zip(names, image, strict=True)),
        default=json_default,
        separators=(",", ":"),
        ensure_ascii=False,
    )
