"""What a run is resolved to at its start, once (:class:`RunPlan`): the source's settings,
the sink class, the Spark session's master and settings (:class:`SessionSettings`), and the
locations on the session's filesystems (:class:`RunLocations`); the layers below receive the
plan, or the part of it they need, instead of working it out again.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkcdc.background import Background
from sparkcdc.errors import ConfigError
from sparkcdc.locations import Location, open_location, s3a_settings, session_hadoop_settings
from sparkcdc.model.dialect import SourceDialect, dialect_for
from sparkcdc.model.options import SourceOptions
from sparkcdc.pipeline.config import PipelineConfig
from sparkcdc.sinks.base import Sink, runnable_sink_class, sink_class

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


def source_of(config: PipelineConfig) -> tuple[SourceOptions, SourceDialect[Any]]:
    """The source block's options, parsed, and the source's dialect (how they reach the
    server: its ``settings``)."""
    options = type(config.source).from_options(config.source_options())
    return options, dialect_for(options)


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
    return _session_conf(sink_conf, config.pipeline.session_conf())


def _session_conf(sink_conf: Mapping[str, str], user_conf: Mapping[str, str]) -> dict[str, str]:
    conf = {**sink_conf, **user_conf}
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
    """``spark`` (or a new session) set up for the pipeline: :meth:`SessionSettings.open`
    of the settings ``config`` and the run's flags resolve to."""
    settings = SessionSettings.of(
        config,
        sink_class(config.sink.type),
        master=master,
        py_files=py_files,
        log_file=log_file,
        available_now=available_now,
    )
    return settings.open(spark)


@dataclass(frozen=True)
class SessionSettings:
    """A pipeline's Spark session as its file and the run's flags resolve it: the Spark
    settings (the sink's, then the file's ``spark.conf``, ``py_files`` added to
    ``spark.submit.pyFiles``; the master aside), the connectors, the master flag
    (``sparkcdc run --master``), the JVM's log file, and whether the run is ``available_now``.
    """

    config: PipelineConfig
    conf: Mapping[str, str]
    sink_conf: Mapping[str, str]  # the sink's defaults, under the file's settings in ``conf``
    user_conf: Mapping[str, str]  # the file's ``spark.conf``
    connectors: tuple[str, ...]
    master: str | None = None
    log_file: str | None = None
    available_now: bool = False

    @classmethod
    def of(
        cls,
        config: PipelineConfig,
        sink: type[Sink],
        *,
        master: str | None = None,
        py_files: Sequence[str] = (),
        log_file: str | None = None,
        available_now: bool = False,
    ) -> SessionSettings:
        sink_conf = sink.spark_conf(config.sink)
        user_conf = config.pipeline.session_conf()
        conf = _session_conf(sink_conf, user_conf)
        if py_files:
            listed = [conf.get("spark.submit.pyFiles", ""), *py_files]
            conf["spark.submit.pyFiles"] = ",".join(p for p in listed if p)
        return cls(
            config,
            conf,
            sink_conf,
            user_conf,
            session_connectors(config),
            master,
            log_file,
            available_now,
        )

    def open(self, spark: Any = None) -> Any:
        """``spark`` (or a new session on ``session_master``'s choice) set up for the
        pipeline: the mysql-cdc source registered, ``conf`` applied (:meth:`opening`, its
        sources' registration waited for)."""
        opened = self.opening(spark)
        opened.ready()
        return opened.spark

    def opening(self, spark: Any = None) -> OpenedSession:
        """``spark`` (or a new session) set up for the pipeline as :meth:`open` says, but a
        new session's sources are registered on a thread (``background.Background``:
        Spark's look-up of installed data sources runs while the run takes its lease and
        plans); ``ready`` waits for it and raises its error.

        A new session's console progress bars are off when stderr is not a terminal: they
        rewrite their line several times a second, a flood in a log (the pipeline's own
        progress says where it is); the file's ``spark.conf`` may turn them on again. A new
        session caches the micro-batches uncompressed, does not record the Python call site
        of each DataFrame call and writes local checkpoint and Delta log files without
        Hadoop's checksum files (``PIPELINE_DEFAULTS``) unless the file's ``spark.conf`` or
        spark-submit says otherwise, and its JVM is tuned as a pipeline's driver: it maps
        the class-data archive ``sparkcdc prepare`` wrote, if there is one
        (``spark/classdata.py``), and compiles with C2 later, or with C1 alone for a run
        ``available_now`` (``spark/jit.py``)."""
        from sparkcdc.spark.jvm import configured_master
        from sparkcdc.spark.masters import connect_refusal, is_connect_session
        from sparkcdc.spark.session import register, spark_session

        config = self.config
        if spark is None:
            bars = "true" if sys.stderr.isatty() else "false"
            master = self.master
            spark = spark_session(
                config.pipeline.name,
                session_master(config, master, None if master else configured_master()),
                connectors=self.connectors,
                conf={"spark.ui.showConsoleProgress": bars, **self.conf},
                log_file=self.log_file,
                defaults=PIPELINE_DEFAULTS,
                pipeline_driver=True,
                available_now=self.available_now,
                register_sources=False,
            )
            spark.sparkContext.setLogLevel("WARN")
            registering = Background(functools.partial(register, spark), "sparkcdc-register")
            return OpenedSession(spark, registering.wait)
        if is_connect_session(spark):
            raise connect_refusal("the session given is a Spark Connect client's")
        register(spark)
        for key, value in self.conf.items():
            # a sink's default of a setting fixed when a session starts is for new sessions
            if (
                key in self.sink_conf
                and key not in self.user_conf
                and not spark.conf.isModifiable(key)
            ):
                continue
            spark.conf.set(key, value)
        return OpenedSession(spark, _registered)


def _registered() -> None:
    """The ``ready`` of a session whose sources were registered at once."""


@dataclass(frozen=True)
class OpenedSession:
    """A pipeline's session (:meth:`SessionSettings.opening`) and what waits until its
    sources are registered: nothing may read them before."""

    spark: Any
    ready: Callable[[], None]


@dataclass(frozen=True)
class RunLocations:
    """A run's checkpoint and state on their filesystems, reached with the Hadoop settings
    of the run's session (``s3a://`` endpoints and keys), once."""

    hadoop: Mapping[str, str]  # the session's S3A settings
    checkpoint: Location
    state: Location
    state_hadoop: Mapping[str, str]  # what executors are given to open the state location
    spark_checkpoint: str  # the streaming query's checkpointLocation

    @classmethod
    def of(cls, config: PipelineConfig, hadoop: Mapping[str, str]) -> RunLocations:
        return cls(
            hadoop,
            config.checkpoint_location(hadoop),
            open_location(config.state_location, hadoop),
            s3a_settings(config.state_location, hadoop),
            f"{config.checkpoint.rstrip('/')}/spark",
        )


@dataclass(frozen=True)
class RunPlan:
    """What a run of a pipeline is resolved to at its start, once: the source's options
    (as the source's reader is given them, and parsed), the source's dialect, the sink
    class (checked to run here), and the session's settings. The locations need the
    session: :meth:`locations`."""

    config: PipelineConfig
    source_options: Mapping[str, str]
    options: SourceOptions
    dialect: SourceDialect[Any]  # the source behind the source interface
    sink_class: type[Sink]
    session: SessionSettings

    @classmethod
    def build(
        cls,
        config: PipelineConfig,
        *,
        available_now: bool = False,
        master: str | None = None,
        py_files: Sequence[str] = (),
        spark_log: str | None = None,
    ) -> RunPlan:
        sink = runnable_sink_class(config.sink.type)  # a sink that cannot run stops first
        source_options = config.source_options()
        options = type(config.source).from_options(source_options)
        session = SessionSettings.of(
            config,
            sink,
            master=master,
            py_files=py_files,
            log_file=spark_log,
            available_now=available_now,
        )
        return cls(config, source_options, options, dialect_for(options), sink, session)

    @property
    def available_now(self) -> bool:
        return self.session.available_now

    def hadoop(self, spark: Any) -> dict[str, str]:
        """The Hadoop settings of the run's session: sparkcdc's own files reach the
        checkpoint and the state as Spark's Hadoop does."""
        return session_hadoop_settings(spark)

    def locations(self, hadoop: Mapping[str, str]) -> RunLocations:
        return RunLocations.of(self.config, hadoop)
