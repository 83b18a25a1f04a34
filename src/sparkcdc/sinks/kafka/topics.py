"""Topic administration through the JVM's kafka-clients (as Spark's Kafka writer uses them):
fail fast when no bootstrap server answers, create the topics a pipeline sends to."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

from sparkcdc.errors import SinkError
from sparkcdc.sinks.kafka.options import KafkaOptions

REACHABLE_TIMEOUT_S = 10.0


def check_reachable(servers: str) -> None:
    """Fail fast when no bootstrap server accepts a TCP connection."""
    addresses = [_host_port(s) for s in servers.split(",") if s.strip()]
    problems = []
    for address in addresses:
        if address is None:
            return  # a form we do not parse: let the Kafka client judge it
        try:
            with socket.create_connection(address, timeout=3.0):
                return
        except OSError as exc:
            problems.append(f"{address[0]}:{address[1]}: {exc.strerror or exc}")
    raise SinkError(_unreachable(servers, "; ".join(problems) or "no address given"))


def _host_port(server: str) -> tuple[str, int] | None:
    text = server.strip().rpartition("://")[2]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _unreachable(servers: str, reason: str) -> str:
    return (
        f"Kafka at {servers} is not reachable: {reason}. Start it (for the private "
        "development broker: python -m sparkcdc_dev.devkafka start) or fix "
        "properties.bootstrap.servers"
    )


def ensure_topics(spark: Any, options: KafkaOptions, topics: Sequence[str]) -> None:
    """Create the topics that do not exist yet (1 partition, the broker's replication)."""
    jvm = spark._jvm
    admin_pkg = jvm.org.apache.kafka.clients.admin
    known = set(admin_pkg.AdminClientConfig.configNames())
    props = jvm.java.util.Properties()
    for key, value in options.client_properties().items():
        if key in known:  # producer-only properties would be logged as unknown
            props.setProperty(key, value)
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    timeout_ms = int(REACHABLE_TIMEOUT_S * 1000)
    admin = admin_pkg.AdminClient.create(props)
    try:
        try:
            listing = admin_pkg.ListTopicsOptions().timeoutMs(timeout_ms)
            existing = set(admin.listTopics(listing).names().get(timeout_ms + 2000, seconds))
        except Py4JJavaError as exc:
            raise SinkError(_unreachable(options.bootstrap_servers, java_cause(exc))) from None
        missing = [t for t in topics if t not in existing]
        if not missing:
            return
        optional = jvm.java.util.Optional
        new_topics = jvm.java.util.ArrayList()
        for topic in missing:
            new_topics.add(admin_pkg.NewTopic(topic, optional.of(1), optional.empty()))
        futures = admin.createTopics(new_topics).values()
        for topic in missing:
            try:
                futures.get(topic).get(timeout_ms, seconds)
            except Py4JJavaError as exc:
                cause = java_cause(exc)
                if "TopicExistsException" in cause:  # created meanwhile: fine
                    continue
                raise SinkError(
                    f"creating Kafka topic {topic!r} at {options.bootstrap_servers} failed: "
                    f"{cause}. Create it yourself, or grant this client the right to"
                ) from None
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(2))


def java_cause(exc: Any) -> str:
    """``Class: message`` of the innermost cause of a Py4JJavaError."""
    throwable = exc.java_exception
    while throwable.getCause() is not None:
        throwable = throwable.getCause()
    return f"{throwable.getClass().getSimpleName()}: {throwable.getMessage()}"
