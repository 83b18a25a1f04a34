"""``value.format: canal-json``: an update's halves as one message with ``data`` and
``old``, Canal's type names."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sparkcdc.model.changelog import EnvelopeOp
from sparkcdc.sinks.base import SinkTable
from sparkcdc.sinks.kafka.encoding import JsonEncoding, json_array, json_string
from sparkcdc.sinks.kafka.pairing import PairedChange

if TYPE_CHECKING:
    from pyspark.sql import Column


def canal_value(table: SinkTable, change: PairedChange, encoding: JsonEncoding) -> Column:
    """The message's value over a row of the paired frame."""
    from pyspark.sql import functions as F

    kind = change.kind
    update, delete = EnvelopeOp.UPDATE.value, EnvelopeOp.DELETE.value
    kind_name = F.when(kind == update, "UPDATE").when(kind == delete, "DELETE").otherwise("INSERT")
    return encoding.obj(
        [
            ("data", json_array(F.coalesce(change.after, change.before))),
            ("old", F.when(kind == update, json_array(change.before))),
            ("type", json_string(kind_name)),
            ("database", change.namespace),
            ("table", change.short_name),
            ("pkNames", F.lit(json.dumps(list(table.primary_key), ensure_ascii=False))),
            ("ts", change.write_ms),
            ("es", change.binlog_ms),
        ]
    )
