"""A private MinIO, the S3-compatible object store behind the tests' ``s3a://`` paths.

It runs the MinIO pinned in ``scripts/fetch_minio.sh`` (built once from the Go module proxy
into ``tools/minio/<version>/``) on 127.0.0.1 only, the S3 API on the port and its console
on port+1, with its data, log and pid file under ``$SPARKCDC_DEV_DIR/minio-<port>``
(``/tmp/sparkcdc-dev/minio-29000`` by default). Starting it twice is safe: a running server
is reused. ``spark_conf()`` gives the Spark settings that point ``s3a://`` at it (with the
S3A jars of ``jars/pom.xml`` among the connector jars ``spark_session(connectors=True)``
adds); ``bucket()`` makes a bucket.

    >>> minio = DevMinio.from_env()            # doctest: +SKIP
    >>> minio.start()                          # doctest: +SKIP
    'http://127.0.0.1:29000'
    >>> minio.bucket("lake")                   # doctest: +SKIP
    's3a://lake'

``python -m sparkcdc_dev.devminio start|stop|status`` does the same from a shell.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from pyarrow.fs import AwsStandardS3RetryStrategy, FileSelector, FileType, S3FileSystem

from sparkcdc.errors import SinkError
from sparkcdc_dev import lanes
from sparkcdc_dev.lanes import default_port
from sparkcdc_dev.processes import recorded_pid, refuse_taken_ports, terminate

DEFAULT_PORT = default_port("SPARKCDC_DEV_MINIO_PORT")
DEFAULT_DIR = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
# Credentials of the private, loopback-only development server (not a secret). MinIO wants
# an access key of at least 3 characters and a secret key of at least 8.
DEV_ACCESS_KEY = "sparkcdc-dev"
DEV_SECRET_KEY = "sparkcdc-dev-secret"
# any region will do for MinIO; S3A and pyarrow must not look one up (that asks AWS)
REGION = "us-east-1"

_PROJECT = Path(__file__).resolve().parents[2]  # dev/sparkcdc_dev/devminio.py
FETCH_SCRIPT = _PROJECT / "scripts" / "fetch_minio.sh"

log = logging.getLogger(__name__)


class DevMinio:
    """Start, reuse and stop the private MinIO."""

    def __init__(
        self,
        base_dir: Path = DEFAULT_DIR,
        port: int = DEFAULT_PORT,
        console_port: int | None = None,
    ) -> None:
        self.base_dir = base_dir / f"minio-{port}"
        self.port = port
        self.console_port = console_port if console_port is not None else port + 1
        self.data_dir = self.base_dir / "data"
        self.certs_dir = self.base_dir / "certs"  # none: plain HTTP; MinIO wants the folder
        self.pid_file = self.base_dir / "minio.pid"
        self.log_file = self.base_dir / "minio.log"  # the server's stdout and stderr
        self.endpoint = f"http://127.0.0.1:{port}"

    @classmethod
    def from_env(cls) -> DevMinio:
        port = int(os.environ.get("SPARKCDC_DEV_MINIO_PORT", DEFAULT_PORT))
        return cls(DEFAULT_DIR, port)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> str:
        """Start the server (or reuse a running one); return its S3 endpoint URL."""
        if self.is_running():
            return self.endpoint
        process: subprocess.Popen[bytes] | None = None
        if self._pid() is None:  # not ours starting up: the ports must be free
            refuse_taken_ports(
                (self.port, self.console_port),
                f"the private MinIO of {self.base_dir}",
                "SPARKCDC_DEV_MINIO_PORT",
                "console",
            )
            process = self._launch(self._binary())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise SinkError(
                    f"the private MinIO on port {self.port} exited with code "
                    f"{process.returncode} while starting.{self._log_tail()}\nIf its data "
                    f"directory is damaged or from another version, remove {self.base_dir} "
                    "and start again"
                )
            if self.is_running():
                return self.endpoint
            time.sleep(0.2)
        raise SinkError(
            f"the private MinIO on port {self.port} did not answer within {timeout_s:.0f}s; "
            f"run 'python -m sparkcdc_dev.devminio stop' and start again.{self._log_tail()}"
        )

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server this directory's pid file names (nothing else); wait until gone."""
        pid = self._pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return
        terminate(pid, timeout_s, poll_s=0.1)  # MinIO finishes its requests on SIGTERM
        self.pid_file.unlink(missing_ok=True)

    def is_running(self) -> bool:
        """True when a MinIO is ready on the port and takes this server's credentials.

        The credentials tell it from any other MinIO there, as devkafka's cluster id does.
        """
        if not self._ready():
            return False
        try:
            self.filesystem(attempts=1).get_file_info(FileSelector("", recursive=False))
        except OSError:  # refused (another server's keys), or gone meanwhile
            return False
        return True

    # -- use -------------------------------------------------------------------------

    def filesystem(self, attempts: int = 3) -> S3FileSystem:
        """pyarrow's S3 filesystem on this server; paths are ``bucket/key``.

        >>> DevMinio.from_env().filesystem().get_file_info("lake/t")  # doctest: +SKIP
        <FileInfo for 'lake/t': type=FileType.Directory>
        """
        return S3FileSystem(
            access_key=DEV_ACCESS_KEY,
            secret_key=DEV_SECRET_KEY,
            region=REGION,
            scheme="http",
            endpoint_override=f"127.0.0.1:{self.port}",
            connect_timeout=2.0,
            request_timeout=10.0,
            retry_strategy=AwsStandardS3RetryStrategy(max_attempts=attempts),
            allow_bucket_creation=True,
        )

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` unless it exists; return its ``s3a://`` URL."""
        fs = self.filesystem()
        try:
            if fs.get_file_info(name).type == FileType.NotFound:
                fs.create_dir(name)
        except OSError as exc:
            raise SinkError(
                f"creating bucket {name!r} on the private MinIO at {self.endpoint} failed: "
                f"{exc}; bucket names are 3-63 lowercase letters, digits, '-' and '.', and "
                "the server must be running ('python -m sparkcdc_dev.devminio start')"
            ) from exc
        return f"s3a://{name}"

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that send ``s3a://`` paths to this server.

        Give them to ``spark_session(conf=...)`` together with ``connectors=True`` (the
        S3A jars are among the connector jars).

        >>> DevMinio(port=29000).spark_conf()["spark.hadoop.fs.s3a.endpoint"]
        'http://127.0.0.1:29000'
        """
        s3a = {
            "endpoint": self.endpoint,
            "endpoint.region": REGION,
            "access.key": DEV_ACCESS_KEY,
            "secret.key": DEV_SECRET_KEY,
            # only these keys: S3A's default chain would otherwise go on to the environment's
            # AWS credentials and the EC2 metadata address when these are refused
            "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            # bucket in the path (http://127.0.0.1:29000/bucket/key): loopback has no DNS
            # names for virtual-host buckets
            "path.style.access": "true",
            "connection.ssl.enabled": "false",
            # fail in seconds when the server is down: with S3A's retries (7, from 500 ms,
            # doubling) around the SDK's (5) a Delta write to a stopped MinIO still retried
            # after 11 minutes; two of each fail it in ~16 s
            "attempts.maximum": "2",
            "retry.limit": "2",
            "retry.interval": "200ms",
        }
        return {f"spark.hadoop.fs.s3a.{key}": value for key, value in s3a.items()}

    # -- internals -------------------------------------------------------------------

    def _ready(self) -> bool:
        url = f"{self.endpoint}/minio/health/ready"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):  # HTTPError (503 while starting) included
            return False

    def _binary(self) -> str:
        """The pinned MinIO binary, built by ``scripts/fetch_minio.sh`` if missing."""
        path = self._run_fetch("--path")
        if not os.access(path, os.X_OK):
            log.warning(
                "building the pinned MinIO once into %s (bash %s): ~7 minutes on 2 cores",
                Path(path).parent,
                FETCH_SCRIPT,
            )
            path = self._run_fetch()
        return path

    def _run_fetch(self, *args: str) -> str:
        result = subprocess.run(
            ["bash", str(FETCH_SCRIPT), *args],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines:
            raise SinkError(
                f"building MinIO failed (bash {FETCH_SCRIPT}, exit {result.returncode}); it "
                f"needs Go >= 1.24 and the Go module proxy:\n{result.stderr[-2000:]}"
            )
        return lines[-1]

    def _launch(self, binary: str) -> subprocess.Popen[bytes]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.certs_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MINIO_")}
        env.update(
            MINIO_ROOT_USER=DEV_ACCESS_KEY,
            MINIO_ROOT_PASSWORD=DEV_SECRET_KEY,
            # MinIO keeps state in ~/.minio; keep this throwaway server's out of the home
            HOME=str(self.base_dir),
        )
        cmd = [
            binary,
            "server",
            "--address",
            f"127.0.0.1:{self.port}",
            "--console-address",
            f"127.0.0.1:{self.console_port}",
            "--certs-dir",
            str(self.certs_dir),
            "--quiet",  # no start-up banner (it prints the root credentials)
            "--anonymous",  # nor credentials or other sensitive values in its log lines
            str(self.data_dir),
        ]
        # detached: the server outlives the command that started it (tests, shells)
        with self.log_file.open("ab") as out:
            process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.base_dir,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{process.pid}\n")
        return process

    def _pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is this server."""
        return recorded_pid(self.pid_file, b"server", str(self.data_dir).encode())

    def _log_tail(self) -> str:
        if not self.log_file.exists():
            return ""
        return f"\n{self.log_file} ends with:\n{self.log_file.read_text(errors='replace')[-1500:]}"


def main() -> None:
    """``python -m sparkcdc_dev.devminio [start|stop|status]``."""
    import sys

    minio = DevMinio.from_env()
    command = sys.argv[1] if len(sys.argv) > 1 else "start"
    if command == "stop":
        minio.stop()
        print("stopped")
    elif command == "status":
        running = minio.is_running()
        print(f"MinIO {'running' if running else 'not running'} on {minio.endpoint}")
        raise SystemExit(0 if running else 1)
    elif command == "start":
        endpoint = minio.start()
        print(f"MinIO running on {endpoint} (data and log in {minio.base_dir})")
    else:
        raise SystemExit(
            f"usage: python -m sparkcdc_dev.devminio [start|stop|status], not {command!r}"
        )


if __name__ == "__main__":
    main()
