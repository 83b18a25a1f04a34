"""The JVM connectors sparkcdc's sinks need, pinned per Spark line: the one place.

A session sparkcdc starts gets each connector a pipeline needs in the first of these ways:

1. a folder of jars, ``SPARKCDC_JARS_DIR`` (the offline route; a development checkout's
   ``jars/lib/spark-<line>``, which ``scripts/fetch_jars.sh`` fills from ``jars/pom.xml``,
   serves the same way);
2. already on the class path (the JVM's Spark jars, ``$SPARK_HOME/jars`` on a cluster whose
   admin put them there, ``spark.jars`` / ``spark.driver.extraClassPath``): used as it is;
3. else Spark resolves its Maven coordinates (``spark.jars.packages``, cached by Spark's
   Ivy in ``~/.ivy2``), as delta-spark's ``configure_spark_with_delta_pip`` does.

``tests/unit/spark/test_connectors.py`` keeps ``jars/pom.xml`` equal to this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sparkcdc.errors import ConfigError
from sparkcdc.spark.compat import SPARK_LINE


@dataclass(frozen=True)
class Connector:
    """One connector: Maven coordinates, the jar file name it is known by on a class path
    (``<prefix><version>.jar``, as Maven and Ivy name files), and a class of it that a
    running JVM loads when it has the connector under another name (Databricks' Delta)."""

    name: str
    packages: tuple[str, ...]
    jar_prefix: str
    probe_class: str


_MARIADB_JDBC = "org.mariadb.jdbc:mariadb-java-client:3.5.6"
_POSTGRESQL_JDBC = "org.postgresql:postgresql:42.7.8"
_DELTA = "4.4.0"
_ICEBERG = "1.11.0"
_DELTA_CLASS = "io.delta.sql.DeltaSparkSessionExtension"
_KAFKA_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def _s3a(hadoop: str, aws_sdk: str, *extra: str) -> Connector:
    return Connector(
        "s3a",
        (
            f"org.apache.hadoop:hadoop-aws:{hadoop}",
            f"software.amazon.awssdk:s3:{aws_sdk}",
            f"software.amazon.awssdk:s3-transfer-manager:{aws_sdk}",
            *extra,
        ),
        "hadoop-aws-",
        "org.apache.hadoop.fs.s3a.S3AFileSystem",
    )


def _line(*connectors: Connector) -> dict[str, Connector]:
    jdbc = Connector(
        "jdbc", (_MARIADB_JDBC, _POSTGRESQL_JDBC), "postgresql-", "org.postgresql.Driver"
    )
    return {c.name: c for c in (*connectors, jdbc)}


# Per Spark line (Scala 2.13). Delta publishes delta-spark_<line>; Iceberg's Spark runtime
# exists for 4.1 only (its 4.1 runtime does not load on 4.2). hadoop-aws is pyspark's
# Hadoop, with the AWS SDK modules S3A uses (not the 640 MB SDK bundle: EXCLUDES).
LINES: dict[str, dict[str, Connector]] = {
    "4.2": _line(
        Connector(
            "delta", (f"io.delta:delta-spark_4.2_2.13:{_DELTA}",), "delta-spark_", _DELTA_CLASS
        ),
        Connector(
            "kafka",
            ("org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",),
            "spark-sql-kafka-0-10_",
            _KAFKA_CLASS,
        ),
        _s3a(
            "3.5.0",
            "2.35.4",
            # S3AFileSystem of Hadoop 3.5 loads its classes even with the stream off
            "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1",
        ),
    ),
    "4.1": _line(
        Connector(
            "delta", (f"io.delta:delta-spark_4.1_2.13:{_DELTA}",), "delta-spark_", _DELTA_CLASS
        ),
        Connector(
            "iceberg",
            (f"org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:{_ICEBERG}",),
            "iceberg-spark-runtime-",
            "org.apache.iceberg.spark.SparkCatalog",
        ),
        Connector(
            "kafka",
            ("org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1",),
            "spark-sql-kafka-0-10_",
            _KAFKA_CLASS,
        ),
        _s3a("3.4.2", "2.29.52"),
    ),
}

# what no connector needs from its dependencies (spark.jars.excludes, groupId:artifactId):
# the whole AWS SDK (S3A needs the modules above), OpenSSL for S3A's TLS (off by default),
# commons-logging (pyspark's jcl-over-slf4j has its classes)
EXCLUDES = (
    "software.amazon.awssdk:bundle",
    "org.wildfly.openssl:wildfly-openssl",
    "commons-logging:commons-logging",
)

# the connectors of each sink type (its own; an s3a:// location adds "s3a")
SINK_CONNECTORS: Mapping[str, tuple[str, ...]] = {
    "delta": ("delta",),
    "iceberg": ("iceberg", "jdbc"),
    "kafka": ("kafka",),
    "jdbc": ("jdbc",),
    "console": (),
}


def line_connectors(line: str = SPARK_LINE) -> dict[str, Connector]:
    """The connectors pinned for Spark ``line`` (empty for a line sparkcdc pins none for)."""
    return LINES.get(line, {})


def has_connector(name: str, line: str = SPARK_LINE) -> bool:
    """Whether sparkcdc pins connector ``name`` for Spark ``line``.

    >>> has_connector("iceberg", "4.1"), has_connector("iceberg", "4.2")
    (True, False)
    """
    return name in line_connectors(line)


def jars_folder(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder of jars that serves every connector, if there is one: ``SPARKCDC_JARS_DIR``,
    else a development checkout's ``jars/lib/spark-<line>`` when it holds jars."""
    environ = os.environ if environ is None else environ
    given = environ.get("SPARKCDC_JARS_DIR")
    if given:
        return Path(given)
    checkout = Path(__file__).resolve().parents[3] / "jars" / "lib" / f"spark-{SPARK_LINE}"
    if (checkout / ".complete").is_file() and any(checkout.glob("*.jar")):
        return checkout
    return None


def class_path_jars(
    spark_home: Path | None, settings: Mapping[str, str], separators: Mapping[str, str]
) -> list[str]:
    """The jar file names a JVM started with ``settings`` has on its class path: Spark's own
    (``spark_home/jars``), ``spark.jars`` and ``spark.driver.extraClassPath`` entries (a
    folder entry ``dir/*`` counts each jar in it)."""
    names: list[str] = []
    if spark_home is not None:
        names += [p.name for p in (spark_home / "jars").glob("*.jar")]
    for key in ("spark.jars", "spark.driver.extraClassPath"):
        for entry in (settings.get(key) or "").split(separators[key]):
            entry = entry.strip().removeprefix("file:")
            if not entry:
                continue
            path = Path(entry)
            if path.name == "*" or path.is_dir():
                folder = path.parent if path.name == "*" else path
                names += [p.name for p in folder.glob("*.jar")]
            else:
                names.append(path.name)
    return names


def missing(
    needs: Iterable[str],
    jar_names: Sequence[str],
    line: str = SPARK_LINE,
    loadable: Callable[[str], bool] | None = None,
) -> list[str]:
    """The connectors of ``needs`` (pinned for ``line``) that no jar of ``jar_names`` is,
    and whose probe class ``loadable`` (a running JVM's class loader, if there is one) does
    not load.

    >>> missing(["delta", "kafka"], ["delta-spark_4.2_2.13-4.4.0.jar"], "4.2")
    ['kafka']
    """
    pinned = line_connectors(line)
    return [
        name
        for name in dict.fromkeys(needs)
        if name in pinned
        and not any(j.startswith(pinned[name].jar_prefix) for j in jar_names)
        and not (loadable is not None and loadable(pinned[name].probe_class))
    ]


def packages(names: Iterable[str], line: str = SPARK_LINE) -> list[str]:
    """The Maven coordinates of connectors ``names`` on ``line``, in order, each once.

    >>> packages(["kafka"], "4.2")
    ['org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0']
    """
    pinned = line_connectors(line)
    return list(dict.fromkeys(p for name in names if name in pinned for p in pinned[name].packages))


def pipeline_connectors(sink_type: str, locations: Iterable[str]) -> tuple[str, ...]:
    """What a pipeline into ``sink_type`` needs, with ``locations`` (its checkpoint, state,
    tables, warehouse) deciding whether S3A is among it.

    >>> pipeline_connectors("delta", ["s3a://b/lake", "/tmp/cp"])
    ('delta', 's3a')
    """
    needs = SINK_CONNECTORS.get(sink_type, ())
    if any(str(loc).startswith("s3a://") for loc in locations):
        needs = (*needs, "s3a")
    return needs


ICEBERG_RUNTIME = "iceberg-spark-runtime"


def connector_folder() -> Path | None:
    """The folder of jars that serves every connector, if there is one
    (``sparkcdc.spark.connectors.jars_folder``)."""
    return jars_folder()


def connector_jars() -> list[str]:
    """The jars of the connector folder (``SPARKCDC_JARS_DIR``, or a development checkout's
    ``jars/lib/spark-<line>``). Without one, sessions ask Spark for the pinned Maven
    coordinates instead (``spark.jars.packages``) and this raises ConfigError."""
    folder = connector_folder()
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder is not None else []
    if not jars:
        where = f"no jars in SPARKCDC_JARS_DIR ({folder})" if folder else "no folder of jars"
        raise ConfigError(
            f"connector jars for Spark {SPARK_LINE}: {where}. Point SPARKCDC_JARS_DIR at a "
            "folder that has the Delta / Iceberg / Kafka jars, or unset it: sparkcdc's "
            "sessions then have Spark fetch them from Maven Central (spark.jars.packages; "
            "`sparkcdc package` prints them for spark-submit --packages)"
        )
    return jars


def has_iceberg_runtime(jars: Sequence[str] | None = None) -> bool:
    """Whether ``jars`` (default: the connector folder's, else the pinned coordinates of
    this Spark line) hold Iceberg's Spark runtime."""
    if jars is None:
        if connector_folder() is None:
            return has_connector("iceberg")
        jars = connector_jars()
    return any(Path(j).name.startswith(ICEBERG_RUNTIME) for j in jars)


def require_iceberg_runtime() -> None:
    """Stop with what to do where Iceberg has no runtime for this Spark line (4.2)."""
    if not has_iceberg_runtime():
        folder = connector_folder()
        where = f"among the connector jars in {folder}" if folder else "available"
        raise ConfigError(
            f"sink.type iceberg: Iceberg's Spark runtime is not {where} for Spark "
            f"{SPARK_LINE}: Iceberg publishes no iceberg-spark-runtime-{SPARK_LINE} yet, and "
            "its 4.1 runtime does not load on Spark 4.2. Run Iceberg pipelines on PySpark "
            "4.1: `pip install 'pyspark>=4.1.4,<4.2'` (docs: Spark lines)"
        )
