"""``sparkcdc prepare``: write this machine's class-data archive (``spark/classdata.py``).

A driver JVM is started as a pipeline's is (the connector jars on it, a local master) but
with ``-XX:ArchiveClassesAtExit``, runs ``_exercise`` (what a pipeline's batches do, on a
few generated rows in a temporary folder: a Python streaming source read with
``foreachBatch``, the batch cached, counted, paired by key in a window, merged into a Delta
table made with deletion vectors, appended to it, spelled as JSON, its history read), and
exits; the archive it wrote is published only then (``classdata.publish``).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from sparkcdc.errors import SparkCdcError
from sparkcdc.spark.classdata import (
    archive_path,
    pending_path,
    prepare_dir,
    publish,
    user_shares_classes,
    with_java_option,
)

_ROWS = 2_000
_SOURCE = "sparkcdc-prepare"


class _ExerciseStreamReader(DataSourceStreamReader):
    """Two offsets of ``_ROWS`` generated rows each, as Arrow batches (as the binlog's)."""

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:
        return {"batch": 2}  # PySpark 4.1 passes neither, 4.2 both

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(b) for b in range(start["batch"], end["batch"])]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        base = partition.value * _ROWS
        ids = [(base + i) % (_ROWS + _ROWS // 2) for i in range(_ROWS)]
        yield pa.RecordBatch.from_pydict(
            {
                "id": pa.array(ids, pa.int64()),
                "op": pa.array(["d" if i % 7 == 0 else "u" for i in ids], pa.string()),
                "v": pa.array([f"value {i}" for i in ids], pa.string()),
                "amount": pa.array([i * 1.5 for i in ids], pa.float64()),
            }
        )

    def commit(self, end: dict[str, int]) -> None:
        pass


class ExerciseDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return _SOURCE

    def schema(self) -> str:
        return "id bigint, op string, v string, amount double"

    def streamReader(self, schema: Any) -> _ExerciseStreamReader:
        return _ExerciseStreamReader()


def _exercise(spark: Any, folder: Path) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    table = f"delta.`{folder / 'table'}`"
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT NOT NULL, v STRING, amount DOUBLE, at TIMESTAMP) "
        "USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )

    def batch(frame: Any, batch_id: int) -> None:
        frame = frame.withColumn("at", F.current_timestamp()).persist()
        frame.groupBy("op").count().collect()
        last = Window.partitionBy("id").orderBy(F.desc("amount"))
        changes = frame.withColumn("n", F.row_number().over(last)).where("n = 1").drop("n")
        changes.select(F.to_json(F.struct("id", "v", "amount", "at")).alias("value")).write.format(
            "noop"
        ).mode("append").save()
        changes.createOrReplaceTempView("prepare_changes")
        frame.sparkSession.sql(
            f"MERGE INTO {table} t USING prepare_changes s ON t.id = s.id "
            "WHEN MATCHED AND s.op = 'd' THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET v = s.v, amount = s.amount, at = s.at "
            "WHEN NOT MATCHED AND s.op != 'd' THEN INSERT (id, v, amount, at) "
            "VALUES (s.id, s.v, s.amount, s.at)"
        )
        frame.where("op = 'u'").select("id", "v", "amount", "at").write.format("delta").mode(
            "append"
        ).save(str(folder / "appended"))
        frame.unpersist()

    spark.dataSource.register(ExerciseDataSource)
    query = (
        spark.readStream.format(_SOURCE)
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.sql(f"DESCRIBE HISTORY {table}").collect()
    spark.read.format("delta").load(str(folder / "table")).count()


def write_class_archive(
    conf: Mapping[str, str] | None = None, *, force: bool = False
) -> tuple[Path, float | None]:
    """Write the archive a pipeline's driver JVM maps (``conf``: settings as a pipeline's
    ``spark.conf`` gives them; the jars among them name the archive): its path and the
    seconds it took, None when it was there already (``force`` writes it again). The JVM
    must be one this process starts."""
    from sparkcdc.spark.jvm import jvm_running, start_jvm, stop_jvm
    from sparkcdc.spark.python_env import ensure_python_env
    from sparkcdc.spark.session import started_session
    from sparkcdc.spark.session_plan import plan_session

    if jvm_running():
        raise SparkCdcError(
            "sparkcdc prepare starts a Spark JVM of its own: run it as a command of its own, "
            "not under spark-submit or in a Python process that runs Spark already"
        )
    started = time.monotonic()
    directory = prepare_dir()
    log_file = directory / "prepare.log"
    plan = plan_session(
        "sparkcdc-prepare",
        "local[2]",
        conf={**(conf or {}), "spark.ui.showConsoleProgress": "false"},
        connectors=True,
        log_file=str(log_file),
        configured={},
    )
    if user_shares_classes(plan.settings):
        raise SparkCdcError(
            "spark.driver.extraJavaOptions has class-data sharing options of its own "
            "(-Xshare, -XX:SharedArchiveFile, ...): sparkcdc's archive would not be used; "
            "remove them to use it"
        )
    final = archive_path(plan.settings)
    if final.is_file() and not force:
        return final, None
    pending = pending_path(final)
    ensure_python_env(plan.master)
    # the classes it cannot archive (generated, signed, old) it names one by one: thousands
    start_jvm(
        with_java_option(plan.settings, f"-XX:ArchiveClassesAtExit={pending} -Xlog:cds=error")
    )
    try:
        spark = started_session(plan.settings)
        spark.sparkContext.setLogLevel("WARN")
        with tempfile.TemporaryDirectory(prefix="sparkcdc-prepare-") as folder:
            _exercise(spark, Path(folder))
    finally:
        code = stop_jvm()
    if not publish(pending, final, code):
        raise SparkCdcError(
            f"the JVM that was to write the class-data archive exited with code {code} and "
            f"no whole archive ({final}); nothing changes for pipelines (they start as they "
            f"did). Spark's log: {log_file}"
        )
    return final, time.monotonic() - started
