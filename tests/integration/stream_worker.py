"""A streaming query in its own process, for kill-and-restart tests.

    python stream_worker.py CONFIG_JSON

The config's ``format`` is the source (``mysql-cdc`` unless given).
The worker signals readiness by writing ``<out>/ready``. Each batch is written to
``<out>/batch-<id>.pkl`` (temp file + rename). If the file of a replayed batch
exists, the replay's rows are compared with it and a ``mismatch-<id>`` file is
left when they differ (a replay must yield the same rows).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any


def main() -> None:
    config = json.loads(sys.argv[1])
    out = Path(config["out"])
    out.mkdir(parents=True, exist_ok=True)

    import logging

    from sparkcdc.spark.session import spark_session

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    conf = {"spark.sql.adaptive.enabled": config["aqe"]} if "aqe" in config else None
    spark = spark_session("stream-worker", "local[2]", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    reader = spark.readStream.format(config.get("format", "mysql-cdc"))
    for key, value in config["options"].items():
        reader = reader.option(key, value)

    restarted = Path(config["checkpoint"]).exists()
    # snapshot queries (and restarts) need no first offset before writes start: ready
    # once a batch ran in this process
    ready_on_batch = restarted or config.get("ready_on_batch", False)

    def write(batch: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in batch.collect()]
        if ready_on_batch:
            (out / "ready").write_text(str(os.getpid()))
        target = out / f"batch-{batch_id:06d}.pkl"
        if target.exists():
            if pickle.loads(target.read_bytes()) != rows:
                (out / f"mismatch-{batch_id:06d}").write_text("replay differs")
            return
        tmp = out / f".tmp-{batch_id}-{os.getpid()}"
        tmp.write_bytes(pickle.dumps(rows))
        tmp.rename(target)

    writer = (
        reader.load()
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", config["checkpoint"])
    )
    if config.get("available_now"):
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        query = writer.trigger(processingTime="300 milliseconds").start()
        if not ready_on_batch:
            # a new query: its first offset is taken once this returns, so writes
            # made afterwards are captured (a restart resumes from its checkpoint)
            query.processAllAvailable()
            (out / "ready").write_text(str(os.getpid()))
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
