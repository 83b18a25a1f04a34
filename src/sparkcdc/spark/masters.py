"""Spark masters: which run executors on this machine, where a master listens, whether it
answers, and what asks for Spark Connect (which sparkcdc's sessions refuse).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from sparkcdc.errors import ConfigError, SparkMasterError

# a standalone master's port when its URL names none (Spark's own default)
STANDALONE_PORT = 7077


def is_one_jvm_master(master: str) -> bool:
    """True for masters whose executor is the driver's own JVM (``local``, ``local[n]``;
    ``local-cluster`` starts executor JVMs of its own).

    >>> is_one_jvm_master("local[*]"), is_one_jvm_master("local-cluster[2,1,1024]")
    (True, False)
    """
    return master == "local" or master.startswith("local[")


def is_local_master(master: str) -> bool:
    """True for masters whose executors run on this machine, beside the driver.

    >>> is_local_master("local[4]"), is_local_master("spark://10.0.0.5:7077")
    (True, False)
    """
    return is_one_jvm_master(master) or master.startswith("local-cluster[")


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs a master URL names where a TCP connection tells whether it
    is up: standalone masters (``spark://h1:p1,h2:p2``) and Kubernetes API servers
    (``k8s://https://h:p``). Empty for local masters, ``yarn`` and anything else.

    >>> master_endpoints("spark://a:7077,b")
    [('a', 7077), ('b', 7077)]
    >>> master_endpoints("k8s://https://api.example:6443")
    [('api.example', 6443)]
    """
    if master.startswith("spark://"):
        found = []
        for part in master[len("spark://") :].split(","):
            url = urlsplit(f"//{part.strip()}")
            if url.hostname:
                found.append((url.hostname, url.port or STANDALONE_PORT))
        return found
    if master.startswith("k8s://"):
        inner = master[len("k8s://") :]
        url = urlsplit(inner if "://" in inner else f"https://{inner}")
        if url.hostname:
            return [(url.hostname, url.port or (80 if url.scheme == "http" else 443))]
    return []


def _shown(master: str) -> str:
    """``master`` without user:password (a Kubernetes URL may carry them)."""
    scheme, sep, rest = master.partition("://")
    if not sep:
        return master
    inner = rest.partition("://")
    if inner[1]:  # k8s://https://user:pw@host
        return f"{scheme}://{inner[0]}://{_shown_host(inner[2])}"
    return f"{scheme}://{','.join(_shown_host(p) for p in rest.split(','))}"


def _shown_host(part: str) -> str:
    return part.rpartition("@")[2]


def connect_request(
    master: str, settings: Mapping[str, str], environ: Mapping[str, str]
) -> str | None:
    """What asks for a Spark Connect session instead of a classic one, shown without
    credentials (an ``sc://`` URL's parameters may hold a token), or None: a master
    ``sc://...``, ``spark.remote``, ``spark.api.mode=connect`` (Spark 4: a local Connect
    server) or the ``SPARK_REMOTE`` variable.

    >>> connect_request("local[2]", {}, {"SPARK_REMOTE": "sc://h:15002/;token=x"})
    'SPARK_REMOTE=sc://h:15002'
    >>> connect_request("local[2]", {"spark.api.mode": "classic"}, {}) is None
    True
    """
    if master.startswith("sc://"):
        return f"the master {_shown_remote(master)}"
    if settings.get("spark.remote"):
        return f"spark.remote={_shown_remote(settings['spark.remote'])}"
    if settings.get("spark.api.mode", "classic").strip().lower() == "connect":
        return "spark.api.mode=connect"
    if environ.get("SPARK_REMOTE"):
        return f"SPARK_REMOTE={_shown_remote(environ['SPARK_REMOTE'])}"
    return None


def _shown_remote(url: str) -> str:
    """A Spark Connect URL as ``sc://host:port`` (its ``/;key=value`` parameters, which
    may hold a token, and any user part left out)."""
    if "://" not in url:
        return url  # "local[2]": Spark starts a Connect server of its own
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}" if parts.scheme and host else "a Spark Connect URL"


def connect_refusal(received: str) -> ConfigError:
    """The error of a Spark Connect session where sparkcdc needs a classic one
    (``received`` says what asked for it); DESIGN.md §7.3 says why."""
    return ConfigError(
        f"{received}, but sparkcdc needs a classic one: a pipeline drives its sinks, its "
        "checkpoint lease and its location checks through the Spark driver's JVM, which a "
        "Connect client cannot reach. Unset it and run sparkcdc where a Spark driver may "
        "run, with --master (or pipeline.spark.master) naming the cluster; a Connect session "
        'reads the source itself: sparkcdc.register(spark), then spark.readStream.format("'
        'mysql-cdc") (docs/connect.md)'
    )


def is_connect_session(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Raise SparkMasterError when no endpoint of ``master`` accepts a TCP connection.

    A standalone client that cannot register keeps trying for a minute and then leaves
    the session without executors; this says at once what is wrong and what to do."""
    endpoints = master_endpoints(master)
    failures = []
    for host, port in endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc.strerror or exc}")
    if endpoints:
        raise SparkMasterError(
            f"the Spark master {_shown(master)} cannot be reached ({'; '.join(failures)}); "
            "start it (a standalone master: $SPARK_HOME/sbin/start-master.sh, port 7077 by "
            "default), or correct `sparkcdc run --master` / pipeline.spark.master (or "
            "spark-submit's --master); `--master local[2]` runs on this machine"
        )
