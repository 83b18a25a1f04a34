"""``value.format: debezium-json``: an update's halves as one message with ``before`` and
``after``, Debezium's op codes, and with ``include-schema.enabled`` the Kafka Connect schema
beside the payload."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sparkcdc.sinks.base import SinkTable
from sparkcdc.sinks.kafka.connect_schema import debezium_schema
from sparkcdc.sinks.kafka.encoding import JsonEncoding, json_string
from sparkcdc.sinks.kafka.pairing import PairedChange

if TYPE_CHECKING:
    from pyspark.sql import Column


def debezium_value(table: SinkTable, change: PairedChange, encoding: JsonEncoding) -> Column:
    """The message's value over a row of the paired frame."""
    from pyspark.sql import functions as F

    source = encoding.obj(
        [("db", change.namespace), ("table", change.short_name), ("ts_ms", change.binlog_ms)]
    )
    text = encoding.obj(
        [
            ("before", change.before),
            ("after", change.after),
            ("op", json_string(change.kind)),
            ("source", source),
            ("ts_ms", change.write_ms),
        ]
    )
    if not encoding.schemas:
        return text
    schema = json.dumps(debezium_schema(table), separators=(",", ":"), ensure_ascii=False)
    return F.concat(F.lit(f'{{"schema":{schema},"payload":'), text, F.lit("}"))
