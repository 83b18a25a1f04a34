"""A private single-node Kafka for the kafka sink's tests and the quickstart.

It runs the broker pinned in ``jars/kafka-broker/pom.xml`` (fetched by
``scripts/fetch_kafka.sh``) in KRaft mode, broker and controller in one JVM, on
127.0.0.1 only, with its data, configuration, pid file and logs under
``$SPARKCDC_DEV_DIR/kafka-<port>`` (``/tmp/sparkcdc-dev/kafka-29092`` by default).
Starting it twice is safe: a running broker is reused.

    >>> kafka = DevKafka.from_env()            # doctest: +SKIP
    >>> kafka.start()                          # doctest: +SKIP
    '127.0.0.1:29092'

``python -m sparkcdc_dev.devkafka start|stop|status`` does the same from a shell.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from sparkcdc.errors import SinkError
from sparkcdc_dev import lanes
from sparkcdc_dev.lanes import default_port
from sparkcdc_dev.processes import port_open, recorded_pid, refuse_taken_ports, terminate

DEFAULT_PORT = default_port("SPARKCDC_DEV_KAFKA_PORT")
DEFAULT_DIR = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
# A fixed KRaft cluster id (16 bytes, base64url without padding, as Kafka's Uuid prints them):
# it lets is_running() tell this broker from any other Kafka that answers on the port.
CLUSTER_ID = "c3BhcmtjZGMtZGV2LWtmaw"
NODE_ID = 1
DEFAULT_HEAP_OPTS = "-Xms128m -Xmx512m"

_PROJECT = Path(__file__).resolve().parents[2]  # dev/sparkcdc_dev/devkafka.py
LIB_DIR = _PROJECT / "jars" / "kafka-broker" / "lib"
FETCH_SCRIPT = _PROJECT / "scripts" / "fetch_kafka.sh"

log = logging.getLogger(__name__)


class DevKafka:
    """Start, reuse and stop the private Kafka broker."""

    def __init__(
        self,
        base_dir: Path = DEFAULT_DIR,
        port: int = DEFAULT_PORT,
        controller_port: int | None = None,
    ) -> None:
        self.base_dir = base_dir / f"kafka-{port}"
        self.port = port
        self.controller_port = controller_port if controller_port is not None else port + 1
        self.data_dir = self.base_dir / "data"
        self.config_file = self.base_dir / "server.properties"
        self.log4j_file = self.base_dir / "log4j2.properties"
        self.pid_file = self.base_dir / "kafka.pid"
        self.log_file = self.base_dir / "server.log"  # the broker's log4j output
        self.out_file = self.base_dir / "kafka.out"  # the JVM's stdout and stderr
        self.bootstrap_servers = f"127.0.0.1:{port}"

    @classmethod
    def from_env(cls) -> DevKafka:
        port = int(os.environ.get("SPARKCDC_DEV_KAFKA_PORT", DEFAULT_PORT))
        return cls(DEFAULT_DIR, port)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 90.0) -> str:
        """Start the broker (or reuse a running one); return its bootstrap servers."""
        if self.is_running():
            return self.bootstrap_servers
        java = _java()
        self._ensure_jars()
        process: subprocess.Popen[bytes] | None = None
        if self._pid() is None:  # not ours starting up: the ports must be free
            refuse_taken_ports(
                (self.port, self.controller_port),
                f"the private Kafka of {self.base_dir}",
                "SPARKCDC_DEV_KAFKA_PORT",
                "controller",
            )
            self.base_dir.mkdir(parents=True, exist_ok=True)
            self._write_config()
            if not (self.data_dir / "meta.properties").exists():
                self._format(java)
            process = self._launch(java)
        deadline = time.monotonic() + timeout_s
        retried = False
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None and not retried:
                # seen once in a CI run: a fresh broker exited at once with nothing logged;
                # its data is disposable, so start it over from empty storage one more time
                log.warning(
                    "the private Kafka on port %s exited while starting; starting it again "
                    "from empty storage.%s",
                    self.port,
                    self._log_tails(),
                )
                retried = True
                shutil.rmtree(self.data_dir, ignore_errors=True)
                self._format(java)
                process = self._launch(java)
                continue
            if process is not None and process.poll() is not None:
                raise SinkError(
                    f"the private Kafka on port {self.port} exited with code "
                    f"{process.returncode} while starting.{self._log_tails()}\nIf its data "
                    f"directory is damaged or from another version, remove {self.base_dir} "
                    "and start again"
                )
            if self.is_running():
                return self.bootstrap_servers
            time.sleep(0.25)
        raise SinkError(
            f"the private Kafka on port {self.port} did not answer within {timeout_s:.0f}s; "
            f"run 'python -m sparkcdc_dev.devkafka stop' and start again.{self._log_tails()}"
        )

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the broker this directory's pid file names (nothing else); wait until gone."""
        pid = self._pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return
        terminate(pid, timeout_s, poll_s=0.2)  # the broker shuts down in order on SIGTERM
        self.pid_file.unlink(missing_ok=True)

    def is_running(self) -> bool:
        """True when this broker (its cluster id) answers a metadata request on the port."""
        if not port_open(self.port):
            return False
        return self._cluster_id() == CLUSTER_ID

    # -- internals -------------------------------------------------------------------

    def _cluster_id(self, timeout_s: float = 3.0) -> str | None:
        try:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient
        except ImportError:
            raise SinkError(
                "confluent-kafka is not installed; run \"pip install -e '.[dev]'\" (the private "
                "Kafka is a development tool)"
            ) from None
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        try:
            cluster_id: str | None = admin.list_topics(timeout=timeout_s).cluster_id
        except KafkaException:
            return None
        return cluster_id

    def _ensure_jars(self) -> None:
        if (LIB_DIR / ".complete").exists():
            return
        result = subprocess.run(
            ["bash", str(FETCH_SCRIPT)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise SinkError(
                f"fetching the Kafka broker jars failed (bash {FETCH_SCRIPT}, exit "
                f"{result.returncode}); it needs maven and access to Maven Central:\n"
                f"{(result.stdout + result.stderr)[-2000:]}"
            )

    def _write_config(self) -> None:
        listeners = (
            f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
        )
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{self.controller_port}",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # one node: every internal topic has one replica, and few partitions start fast
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "auto.create.topics.enable": "true",
            "group.initial.rebalance.delay.ms": "0",
        }
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self.log4j_file.write_text(
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {self.log_file}\n"
            "appender.file.append = false\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = file\n"
        )

    def _classpath(self) -> str:
        return str(LIB_DIR / "*")

    def _format(self, java: str) -> None:
        # once per data directory; KRaft refuses to start on an unformatted log dir
        cmd = [
            java,
            "-cp",
            self._classpath(),
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            CLUSTER_ID,
            "--config",
            str(self.config_file),
            "--ignore-formatted",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SinkError(
                f"formatting the private Kafka's storage {self.data_dir} failed (exit "
                f"{result.returncode}); remove {self.base_dir} and start again:\n"
                f"{(result.stdout + result.stderr)[-2000:]}"
            )

    def _launch(self, java: str) -> subprocess.Popen[bytes]:
        heap = os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS).split()
        cmd = [
            java,
            *heap,
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            f"-Dkafka.logs.dir={self.base_dir}",
            "-cp",
            self._classpath(),
            "kafka.Kafka",
            str(self.config_file),
        ]
        # detached: the broker outlives the command that started it (quickstart, tests)
        with self.out_file.open("ab") as out:
            process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{process.pid}\n")
        return process

    def _pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is this broker."""
        return recorded_pid(self.pid_file, b"kafka.Kafka", str(self.config_file).encode())

    def _log_tails(self) -> str:
        parts = []
        for path in (self.out_file, self.log_file):
            if path.exists():
                tail = path.read_text(errors="replace")[-1500:]
                parts.append(f"\n{path} ends with:\n{tail}")
        return "".join(parts)


def _java() -> str:
    found = shutil.which("java")
    if not found:
        raise SinkError(
            "'java' is not installed (the private Kafka needs Java 17 or newer); run "
            "'bash scripts/setup.sh' or 'apt-get install openjdk-17-jre-headless'"
        )
    return found


def main() -> None:
    """``python -m sparkcdc_dev.devkafka [start|stop|status]``."""
    import sys

    kafka = DevKafka.from_env()
    command = sys.argv[1] if len(sys.argv) > 1 else "start"
    if command == "stop":
        kafka.stop()
        print("stopped")
    elif command == "status":
        running = kafka.is_running()
        print(f"Kafka {'running' if running else 'not running'} on {kafka.bootstrap_servers}")
        raise SystemExit(0 if running else 1)
    elif command == "start":
        servers = kafka.start()
        print(f"Kafka running on {servers} (logs in {kafka.base_dir})")
    else:
        raise SystemExit(
            f"usage: python -m sparkcdc_dev.devkafka [start|stop|status], not {command!r}"
        )


if __name__ == "__main__":
    main()
