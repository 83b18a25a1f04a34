"""What a run is resolved to at its start: the source's settings, the sink class, the Spark
session's master and settings, and a session made or set up for the pipeline.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from sparkcdc.errors import ConfigError
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.position import BinlogPosition
from sparkcdc.pipeline.config import PipelineConfig
from sparkcdc.sinks.base import sink_class

# Each micro-batch is cached once and read back once or twice (batch_writer.BatchWriter), and a
# binlog batch is cached by one task: compressing the cache costs more than it saves
UNCOMPRESSED_CACHE = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}


# pyspark (4.x) records where each Column and DataFrame call was made, for its error messages,
# at a py4j round trip and a walk up the Python stack per call. A pipeline builds its
# DataFrames in our code, not the user's: the call sites would name sparkcdc's lines
NO_CALL_SITES = {"spark.python.sql.dataFrameDebugging.enabled": "false"}


# Spark's checkpoint logs and Delta's log on a local path are written through Hadoop's
# FileContext, whose default local file system keeps a checksum file beside each file and
# renames both, in every micro-batch. Only local paths, and only FileContext's: Hadoop's
# FileSystem API (Parquet files) keeps its checksums. docs/benchmarks.md has the figures
RAW_LOCAL_CONTEXT = {
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs"
}


# what a pipeline's new session has unless its file or spark-submit says otherwise
PIPELINE_DEFAULTS = {**UNCOMPRESSED_CACHE, **NO_CALL_SITES, **RAW_LOCAL_CONTEXT}


def source_settings(config: PipelineConfig) -> tuple[SourceOptions, Any]:
    from sparkcdc.mysql.dialect import connection_settings

    options = SourceOptions.from_options(config.source_options())
    return options, connection_settings(options)


def server_position(settings: Any) -> BinlogPosition:
    from sparkcdc.mysql.admin import server
    from sparkcdc.mysql.protocol.connection import sql_connection

    with sql_connection(settings) as conn:
        return server.current_position(conn, server.server_info(conn), with_gtids=False)


def session_master(config: PipelineConfig, flag: str | None, configured: str | None) -> str:
    """The master of a pipeline's new session: ``flag`` (``sparkcdc run --master``), else
    the file's ``pipeline.spark.master``, else ``configured`` (spark-submit's master, or
    ``SPARK_MASTER``), else ``local[pipeline.parallelism]``. A file and a spark-submit that
    name different masters are a ConfigError: which one was meant is not ours to guess.

    >>> session_master(config, "spark://10.0.0.5:7077", "yarn")  # doctest: +SKIP
    'spark://10.0.0.5:7077'
    """
    chosen = config.pipeline.master
    if flag:
        return flag
    if chosen and configured and chosen != configured:
        raise ConfigError(
            f"pipeline.spark.master is {chosen!r} but this process runs under the master "
            f"{configured!r} (spark-submit's --master, spark.master or SPARK_MASTER): remove "
            "one of them, or give `sparkcdc run --master` to choose"
        )
    return chosen or configured or f"local[{config.pipeline.parallelism}]"


def pipeline_conf(config: PipelineConfig) -> dict[str, str]:
    """The Spark settings a pipeline's session gets: its sink's, then the file's
    ``spark.conf`` (the master aside: ``session_master`` chooses it)."""
    sink_conf = sink_class(config.sink.type).spark_conf(config.sink)
    conf = {**sink_conf, **config.pipeline.session_conf()}
    conf.pop("spark.master", None)
    return conf


def session_connectors(config: PipelineConfig) -> tuple[str, ...]:
    """The connectors a pipeline's session needs: its sink's, and S3A where a location of
    the file (checkpoint, state, sink tables, warehouse) is an ``s3a://`` path."""
    from sparkcdc.spark.connectors import pipeline_connectors

    return pipeline_connectors(
        config.sink.type,
        [config.checkpoint, config.state_location, *_strings(config.sink.model_dump())],
    )


def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (nested dicts, lists and tuples)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def pipeline_session(
    config: PipelineConfig,
    spark: Any = None,
    log_file: str | None = None,
    *,
    master: str | None = None,
    py_files: Sequence[str] = (),
    available_now: bool = False,
) -> Any:
    """``spark`` (or a new session on ``session_master``'s choice) set up for the pipeline:
    the mysql-cdc source registered, the sink's and the file's Spark settings applied,
    ``py_files`` added to ``spark.submit.pyFiles``.

    A new session's console progress bars are off when stderr is not a terminal: they
    rewrite their line several times a second, a flood in a log (the pipeline's own progress
    says where it is); the file's ``spark.conf`` may turn them on again. A new session
    caches the micro-batches uncompressed, does not record the Python call site of each
    DataFrame call and writes local checkpoint and Delta log files without Hadoop's checksum
    files (``PIPELINE_DEFAULTS``) unless the file's ``spark.conf`` or spark-submit says
    otherwise, and its JVM is tuned as a pipeline's driver:
    it maps the class-data archive ``sparkcdc prepare`` wrote, if there is one
    (``spark/classdata.py``), and compiles with C2 later, or with C1 alone for a run
    ``available_now`` (``spark/jit.py``)."""
    from sparkcdc.spark.jvm import configured_master
    from sparkcdc.spark.masters import connect_refusal, is_connect_session
    from sparkcdc.spark.session import register, spark_session

    sink_conf = sink_class(config.sink.type).spark_conf(config.sink)
    user_conf = config.pipeline.session_conf()
    conf = pipeline_conf(config)
    if py_files:
        listed = [conf.get("spark.submit.pyFiles", ""), *py_files]
        conf["spark.submit.pyFiles"] = ",".join(p for p in listed if p)
    if spark is None:
        bars = "true" if sys.stderr.isatty() else "false"
        spark = spark_session(
            config.pipeline.name,
            session_master(config, master, None if master else configured_master()),
            connectors=session_connectors(config),
            conf={"spark.ui.showConsoleProgress": bars, **conf},
            log_file=log_file,
            defaults=PIPELINE_DEFAULTS,
            pipeline_driver=True,
            available_now=available_now,
        )
        spark.sparkContext.setLogLevel("WARN")
    elif is_connect_session(spark):
        raise connect_refusal("the session given is a Spark Connect client's")
    else:
        register(spark)
        for key, value in conf.items():
            # a sink's default of a setting fixed when a session starts is for new sessions
            if key in sink_conf and key not in user_conf and not spark.conf.isModifiable(key):
                continue
            spark.conf.set(key, value)
    return spark
