"""``value.format: changelog-json``: one message per change row, ``{"data": {...}, "op":
"+I|-U|+U|-D"}`` (an update as its ``-U`` then its ``+U``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkcdc.sinks.kafka.encoding import JsonEncoding, json_string

if TYPE_CHECKING:
    from pyspark.sql import Column


def changelog_value(encoding: JsonEncoding) -> Column:
    """The message's value over a row of the change frame (``image``: its JSON text)."""
    from pyspark.sql import functions as F

    return encoding.obj([("data", F.col("image")), ("op", json_string(F.col("op")))])
