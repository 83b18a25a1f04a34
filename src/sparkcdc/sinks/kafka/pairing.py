"""An update's two halves as one message (debezium-json, canal-json): the window that pairs
them, and the parts of the one change each remaining row is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcdc.model.changelog import EnvelopeOp, RowKind
from sparkcdc.sinks.base import SinkTable
from sparkcdc.sinks.kafka.steps import FrameStep, selected

if TYPE_CHECKING:
    from pyspark.sql import Column


@dataclass(frozen=True)
class PairedChange:
    """The parts of one message's change, over a row of the paired frame, as JSON texts (a
    NULL text is JSON ``null``) but ``kind``: its Debezium op code (``r``, ``c``, ``u``,
    ``d``). A ``-U`` whose ``+U`` follows is left out, the ``+U`` carries its image as
    ``before``; a lone ``-U`` (a transform filter let the row out) is a delete, a lone
    ``+U`` (let in) an insert."""

    kind: Column
    before: Column
    after: Column
    namespace: Column  # of the sink table
    short_name: Column
    binlog_ms: Column  # when the source logged the change; NULL for a snapshot row
    write_ms: Column  # now


def paired(table: SinkTable, inserts: bool = False) -> tuple[list[FrameStep], PairedChange]:
    """The steps that leave one row per message, an update's two halves as one, and the
    parts of the change over such a row."""
    from pyspark.sql import functions as F

    op = F.col("op")
    steps: list[FrameStep] = []
    if inserts:  # every row a '+I': no halves to pair
        after_half, prev_image = F.lit(False), F.lit(None)
    else:
        pairing, after_half = _pair_halves()
        steps += pairing
        prev_image = F.col("prev_image")
    read, create, update = EnvelopeOp.READ.value, EnvelopeOp.CREATE.value, EnvelopeOp.UPDATE.value
    kind = (
        F.when(op == RowKind.INSERT.value, F.when(F.col("op_ts").isNull(), read).otherwise(create))
        .when(op == RowKind.UPDATE_AFTER.value, F.when(after_half, update).otherwise(create))
        .otherwise(EnvelopeOp.DELETE.value)  # '-D' and a lone '-U'
    )
    image = F.col("image")  # JSON text (message_steps)
    # expressions in the value, not columns of a step of their own: each only picks a text
    # the first step made, so naming one twice costs nothing (see message_steps' last step)
    before = F.when(after_half, prev_image).when(
        op.isin(RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value), image
    )
    after = F.when(op.isin(RowKind.INSERT.value, RowKind.UPDATE_AFTER.value), image)
    change = PairedChange(
        kind=kind,
        before=before,
        after=after,
        namespace=F.lit(json.dumps(table.namespace or None, ensure_ascii=False)),
        short_name=F.lit(json.dumps(table.short_name, ensure_ascii=False)),
        binlog_ms=F.unix_millis(F.col("op_ts")).cast("string"),
        write_ms=F.unix_millis(F.current_timestamp()).cast("string"),
    )
    return steps, change


def _pair_halves() -> tuple[list[FrameStep], Column]:
    """The steps that leave out the ``-U`` halves that pair with a ``+U`` (which gains their
    image as ``prev_image``), and the condition that tells such a ``+U``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # The halves are neighbours among the changes of their key: they share _seq (the sink
    # interface) or the '+U' follows at _seq + 1 (the binlog reader numbers each row image);
    # any other change of that key is at least one event (many positions) away. A window
    # per key, not per table, spreads the work over Spark's tasks; and as its neighbours
    # are of the same key, a key-changing update (its halves under two keys) stays two
    # messages (delete the old key, insert the new one). The key's hash leads the window's
    # keys so that its sort is the messages' (message_steps says why it goes first).
    order = Window.partitionBy("key_hash", "db", "tbl", "pk").orderBy("seq", "rank")
    op, seq = F.col("op"), F.col("seq")
    neighbours = selected(
        "*",
        F.lag("op").over(order).alias("prev_op"),
        F.lag("seq").over(order).alias("prev_seq"),
        F.lag("image").over(order).alias("prev_image"),
        F.lead("op").over(order).alias("next_op"),
        F.lead("seq").over(order).alias("next_seq"),
    )
    before_op, after_op = RowKind.UPDATE_BEFORE.value, RowKind.UPDATE_AFTER.value
    after_half = (op == after_op) & (F.col("prev_op") == before_op) & (seq - F.col("prev_seq") <= 1)
    before_half = (
        (op == before_op) & (F.col("next_op") == after_op) & (F.col("next_seq") - seq <= 1)
    )
    kept = ~F.coalesce(before_half, F.lit(False))
    return [neighbours, lambda frame: frame.where(kept)], after_half
