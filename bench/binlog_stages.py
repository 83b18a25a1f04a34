"""Where a binlog catch-up's time goes, stage by stage, on one range of one server.

Runnable after scripts/test.sh's set-up (it starts the private MariaDB):

    python bench/binlog_stages.py [--changes 200000] [--rounds 3]

Writes bench/binlog_decode.py's workload (the table and changes bench/vs_flinkcdc.py's
catch-up reads) and times, on that one range:
  - ``capture``: the range's events over the replication protocol, kept as bytes;
  - ``decode``: those bytes into the typed changelog's Arrow batches (no network);
  - ``read``: the source's own read of the range in this process (``scan.binlog.partitions=1``:
    network, decode, Arrow batches), with the batches' count and rows;
  - ``jvm_*``: those same Arrow batches handed to Spark by a batch Python data source that only
    reads them from a file, so the time is Spark's: the Python worker's writing, the JVM's
    Arrow-to-row conversion and the consumer (``count``; ``noop``: the no-op sink; ``observe``:
    the no-op sink with an observation counting by ``_op``, bench/vs_flinkcdc.py's consumer);
  - ``stream_*``: ``format("mysql-cdc")`` itself, one Trigger.AvailableNow query, with those
    consumers and ``scan.binlog.partitions`` 1 and ``auto``: the batches' time (the first
    batch's call to the last one's end) and the whole query's.
Each Spark figure is the median of ``--rounds`` runs, the variants alternated, with the CPU
seconds the session's JVM and its Python processes spent (``cpu_jvm_s``, ``cpu_python_s``):
on the shared machine the CPU a stage costs varies far less with the load than its wall time.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
import binlog_decode

KINDS = ("+I", "-U", "+U", "-D")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> collections.Counter[str]:
    """CPU seconds of this process's descendants so far, by ``jvm`` and ``python``."""
    procs: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline") as cmdline:
                program = cmdline.read().split("\0")[0]
        except OSError:
            continue
        kind = "jvm" if "java" in program else "python"
        procs[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, kind)
    me, out = os.getpid(), collections.Counter[str]()
    for pid, (_, seconds, kind) in procs.items():
        parent = pid
        while parent in procs and parent != me:
            parent = procs[parent][0]
        if parent == me:
            out[kind] += seconds
    return out


class _Whole(InputPartition):  # type: ignore[misc]
    def __init__(self, path: str) -> None:
        self.path = path


class _ReplayReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, path: str) -> None:
        self.path = path

    def partitions(self) -> list[InputPartition]:
        return [_Whole(self.path)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        with pa.memory_map(partition.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


class ArrowReplay(DataSource):  # type: ignore[misc]
    """The source's Arrow batches, read back from an IPC file: Spark's share alone."""

    @classmethod
    def name(cls) -> str:
        return "arrow-replay"

    def schema(self) -> str:
        return str(self.options["ddl"])

    def reader(self, schema: Any) -> _ReplayReader:
        return _ReplayReader(str(self.options["path"]))


def consume(kind: str, frame: Any) -> int:
    """Runs one consumer over ``frame``; the rows it counted (0 for the bare no-op sink)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    if kind == "count":
        return int(frame.count())
    if kind == "noop":
        frame.write.format("noop").mode("overwrite").save()
        return 0
    observation = Observation(f"kinds-{time.monotonic_ns()}")
    sums = [F.sum(F.when(F.col("_op") == k, 1).otherwise(0)).alias(k) for k in KINDS]
    frame.observe(observation, *sums).write.format("noop").mode("overwrite").save()
    return sum(v or 0 for v in observation.get.values())


def timed(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    cpu_before, began = cpu_seconds(), time.perf_counter()
    out = run()
    took, cpu_after = time.perf_counter() - began, cpu_seconds()
    return {
        "wall_s": took,
        "cpu_jvm_s": cpu_after["jvm"] - cpu_before["jvm"],
        "cpu_python_s": cpu_after["python"] - cpu_before["python"],
        **out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from sparkcdc.model.tls import TlsSettings
    from sparkcdc.mysql.protocol.connection import ConnectionSettings
    from sparkcdc.spark.session import spark_session
    from sparkcdc.spark.source import MySqlCdcDataSource
    from sparkcdc_dev.devserver import DevServer

    server = DevServer.from_env()
    s = server.start()
    start, end, written = binlog_decode.build_binlog(server, args.changes)
    settings = ConnectionSettings(
        host=s.host, port=s.port, user=s.user, password=s.password, tls=TlsSettings("disabled")
    )
    result: dict[str, Any] = {"changes": written}
    if start.file == end.file:
        result["binlog_mb"] = round((end.pos - start.pos) / 1e6, 1)

    began = time.perf_counter()
    events = binlog_decode.capture(settings, start, end)
    result["capture_s"] = round(time.perf_counter() - began, 3)
    decode_s = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        rows = binlog_decode.decode_to_arrow(events, start, end)
        decode_s = min(decode_s, time.perf_counter() - began)
    del events
    result |= {"rows": rows, "decode_s": round(decode_s, 3)}

    options = {
        "hostname": s.host,
        "port": str(s.port),
        "username": s.user,
        "password": s.password,
        "database-name": binlog_decode.DATABASE,
        "table-name": "events",
        "server-id": "6750-6760",
        "ssl-mode": "disabled",
        "scan.startup.mode": "specific-offset",
        "scan.startup.specific-offset.file": start.file,
        "scan.startup.specific-offset.pos": str(start.pos),
    }
    source = MySqlCdcDataSource({**options, "scan.binlog.partitions": "1"})
    reader = source.streamReader(None)
    begin = reader.initialOffset()
    (partition,) = reader.partitions(begin, {**begin, "binlog": end.to_offset()})
    began = time.perf_counter()
    batches = list(reader.read(partition))
    result |= {
        "read_s": round(time.perf_counter() - began, 3),
        "arrow_batches": len(batches),
        "arrow_batch_rows_median": statistics.median(b.num_rows for b in batches),
        "arrow_mb": round(sum(b.nbytes for b in batches) / 1e6, 1),
    }
    assert sum(b.num_rows for b in batches) == rows, "the source read other rows than the decoder"
    workdir = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-stages-"))
    dump = workdir / "batches.arrow"
    with pa.OSFile(str(dump), "wb") as sink, pa.ipc.new_file(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    del batches

    spark = spark_session(
        "bench-binlog-stages", "local[2]", conf={"spark.ui.showConsoleProgress": "false"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ArrowReplay)
    ddl = source.schema()

    def jvm(kind: str) -> dict[str, Any]:
        frame = spark.read.format("arrow-replay").option("path", str(dump)).option("ddl", ddl)
        return {"counted": consume(kind, frame.load())}

    def stream(kind: str, partitions: str) -> dict[str, Any]:
        calls: list[float] = []
        counted = [0]

        def each(batch: Any, _id: int) -> None:
            calls.append(time.perf_counter())
            counted[0] += consume(kind, batch)
            calls.append(time.perf_counter())

        shutil.rmtree(workdir / "query", ignore_errors=True)
        read = spark.readStream.format("mysql-cdc")
        settings = {
            **options,
            "scan.binlog.partitions": partitions,
            "state.location": str(workdir / "query" / "state"),
        }
        for key, value in settings.items():
            read = read.option(key, value)
        began = time.perf_counter()
        query = (
            read.load()
            .writeStream.foreachBatch(each)
            .option("checkpointLocation", str(workdir / "query" / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return {
            "counted": counted[0],
            "batches": len(calls) // 2,
            "batches_s": calls[-1] - calls[0],
            "query_s": time.perf_counter() - began,
        }

    variants: dict[str, Callable[[], dict[str, Any]]] = {
        **{f"jvm_{kind}": (lambda k=kind: jvm(k)) for kind in ("count", "noop", "observe")},
        **{
            f"stream_{kind}_{parts}": (lambda k=kind, p=parts: stream(k, p))
            for kind in ("count", "observe")
            for parts in ("1", "auto")
        },
    }
    for run in variants.values():  # warm-up: the JVM's code, the Python workers
        run()
    runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    order = list(variants)
    for round_ in range(args.rounds):
        for name in order if round_ % 2 == 0 else reversed(order):
            runs[name].append(timed(variants[name]))
            counted = runs[name][-1]["counted"]
            if counted and counted != rows:
                raise SystemExit(f"{name} counted {counted} rows, expected {rows}")
            print(f"  {name}: {runs[name][-1]} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    for name, measured in runs.items():
        result[name] = {
            key: round(statistics.median(m[key] for m in measured), 2)
            for key in measured[0]
            if key != "counted"
        }
    result["load_avg"] = round(os.getloadavg()[0], 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
