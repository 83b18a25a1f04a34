"""A private MariaDB for the quickstart, the tests and the benchmarks.

It runs from Debian's ``mariadb-server`` binaries with its own data directory,
socket and port on 127.0.0.1, with the binlog settings CDC needs
(``log-bin``, ``binlog_format=ROW``, ``binlog_row_image=FULL``,
``binlog_row_metadata=FULL``), and TLS with a certificate of its own CA
(``tls/ca.pem`` under its directory: give it as ``ssl-ca``). Starting it twice is
safe: a running instance is reused.

    >>> server = DevServer.from_env()          # doctest: +SKIP
    >>> server.start()                         # doctest: +SKIP
    >>> server.settings.port                   # doctest: +SKIP
    23306
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from sparkcdc.errors import SourceError
from sparkcdc_dev import lanes
from sparkcdc_dev.lanes import default_port

DEFAULT_PORT = default_port("SPARKCDC_DEV_PORT")
DEFAULT_DIR = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
# Credentials of the private, loopback-only development server (not a secret).
DEV_USER = "cdc"
DEV_PASSWORD = "cdc-dev-password"


@dataclass(frozen=True)
class DevSettings:
    host: str
    port: int
    user: str
    password: str
    socket: str


class DevServer:
    """Start, reuse and stop the private MariaDB."""

    def __init__(
        self,
        base_dir: Path = DEFAULT_DIR,
        port: int = DEFAULT_PORT,
        server_id: int = 1,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.extra_args = extra_args  # more mariadbd options, e.g. require-secure-transport
        self.base_dir = base_dir / f"mariadb-{port}"
        self.tls = TlsFiles.under(self.base_dir / "tls")
        self.port = port
        self.server_id = server_id
        self.datadir = self.base_dir / "data"
        self.socket = self.base_dir / "mysqld.sock"
        self.pid_file = self.base_dir / "mysqld.pid"
        self.log_file = self.base_dir / "error.log"
        # a server's temporary tables in a folder of its own: a mariadbd starting removes the
        # stale "#sql*" files of its tmpdir, which were another lane's bootstrap's in a shared
        # /tmp (its mariadb-install-db then failed: "Unknown table 'mysql.tmp_user_sys'")
        self.tmpdir = self.base_dir / "tmp"
        self.settings = DevSettings("127.0.0.1", port, DEV_USER, DEV_PASSWORD, str(self.socket))

    @classmethod
    def from_env(cls) -> DevServer:
        port = int(os.environ.get("SPARKCDC_DEV_PORT", DEFAULT_PORT))
        return cls(DEFAULT_DIR, port)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> DevSettings:
        if self.is_running():
            self._ensure_users()
            return self.settings
        mariadbd = _binary("mariadbd", "/usr/sbin/mariadbd")
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        if not (self.datadir / "mysql").exists():
            self._install_db()
        self.tls.ensure()
        args = [
            mariadbd,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.log_file}",
            f"--tmpdir={self.tmpdir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            "--skip-name-resolve",
            "--log-bin=mysql-bin",
            f"--server-id={self.server_id}",
            # a replica (see ``replicate``) logs what it applies: it can be failed over to
            "--log-slave-updates=ON",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--binlog-checksum=CRC32",
            "--max-connections=500",
            # rows with 20 MB values fit (the default 16M refuses them); an UPDATE of such a
            # row is a ~40 MB event, larger than this, which BINLOG_GTID_POS cannot scan:
            # as on many production servers, and what the fallback tests need
            "--max-allowed-packet=32M",
            "--innodb-buffer-pool-size=512M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            f"--ssl-ca={self.tls.ca}",
            f"--ssl-cert={self.tls.server_cert}",
            f"--ssl-key={self.tls.server_key}",
            *self.extra_args,
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        # detached: the server outlives the command that started it (quickstart, tests)
        subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.is_running():
                self._ensure_users()
                return self.settings
            time.sleep(0.2)
        tail = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
        raise SourceError(
            f"the private MariaDB on port {self.port} did not start within {timeout_s:.0f}s; "
            f"its log {self.log_file} ends with:\n{tail}"
        )

    def stop(self, timeout_s: float = 60.0) -> None:
        if not self.is_running():
            return
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("SHUTDOWN")
        deadline = time.monotonic() + timeout_s
        # the pid file goes last, once the data files are closed (a copy of the data
        # directory is consistent then)
        while time.monotonic() < deadline and (self.is_running() or self.pid_file.exists()):
            time.sleep(0.2)

    def replicate(self, primary: DevServer) -> None:
        """Make this (running) server a GTID replica of ``primary`` from ``primary``'s
        current GTID position on: what the primary writes from now on arrives here, logged
        in this server's own binlog (``log_slave_updates``) under the primary's GTIDs.
        Give the two servers distinct ``server_id``s.

        >>> replica = DevServer(Path("/tmp/r"), 33062, server_id=2)    # doctest: +SKIP
        >>> replica.start(); replica.replicate(DevServer.from_env())    # doctest: +SKIP
        """
        with primary.root_connection() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            position = _one(cur)
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("STOP SLAVE")
            cur.execute("RESET SLAVE ALL")
            cur.execute("SET GLOBAL gtid_slave_pos = %s", (position,))
            cur.execute(
                "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, "
                "MASTER_USER = %s, MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
                (primary.port, DEV_USER, DEV_PASSWORD),
            )
            cur.execute("START SLAVE")

    def wait_replicated(self, primary: DevServer, timeout_s: float = 60.0) -> None:
        """Wait until this replica has applied everything ``primary`` has logged."""
        with primary.root_connection() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            target = _one(cur)
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (target, timeout_s))
            if _one(cur) != "0":
                cur.execute("SHOW SLAVE STATUS")
                raise SourceError(
                    f"the replica on port {self.port} did not reach GTID {target} of port "
                    f"{primary.port} within {timeout_s:.0f}s: {cur.fetchone()!r}"
                )

    def is_running(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            with self.root_connection(connect_timeout=2):
                return True
        except pymysql.MySQLError:
            return False

    def root_connection(self, connect_timeout: int = 10) -> pymysql.connections.Connection:
        """A connection as root over the private socket (root has no password there)."""
        return pymysql.connect(
            unix_socket=str(self.socket),
            user="root",
            connect_timeout=connect_timeout,
            autocommit=True,
        )

    def connection(self, database: str | None = None) -> pymysql.connections.Connection:
        """A TCP connection as the development user."""
        return pymysql.connect(
            host=self.settings.host,
            port=self.port,
            user=DEV_USER,
            password=DEV_PASSWORD,
            database=database,
            autocommit=True,
            charset="utf8mb4",
        )

    # -- internals -------------------------------------------------------------------

    def _install_db(self) -> None:
        """The system tables, written beside the data directory and moved into its place
        only once complete: a bootstrap that fails leaves no data directory a later start
        would take for an installed one."""
        install = _binary("mariadb-install-db", "/usr/bin/mariadb-install-db")
        partial = self.datadir.with_name(self.datadir.name + ".installing")
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            install,
            "--no-defaults",
            f"--datadir={partial}",
            f"--tmpdir={self.tmpdir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SourceError(
                f"mariadb-install-db failed for {self.datadir} (exit {result.returncode}):\n"
                f"{result.stderr[-2000:]}"
            )
        shutil.rmtree(self.datadir, ignore_errors=True)  # none, or one without system tables
        partial.rename(self.datadir)

    def _ensure_users(self) -> None:
        with self.root_connection() as conn, conn.cursor() as cur:
            # not in the binlog: CDC streams and replicas need not see the set-up
            cur.execute("SET SESSION sql_log_bin = 0")
            for host in ("127.0.0.1", "localhost"):
                cur.execute(
                    f"CREATE USER IF NOT EXISTS '{DEV_USER}'@'{host}' IDENTIFIED BY %s",
                    (DEV_PASSWORD,),
                )
                cur.execute(
                    f"GRANT ALL PRIVILEGES ON *.* TO '{DEV_USER}'@'{host}' WITH GRANT OPTION"
                )


@dataclass(frozen=True)
class TlsFiles:
    """A CA and a server certificate it signed (for 127.0.0.1 and localhost), PEM files.

    >>> files = TlsFiles.under(Path("/tmp/x/tls"))    # doctest: +SKIP
    >>> files.ensure()                                 # doctest: +SKIP
    """

    directory: Path

    @classmethod
    def under(cls, directory: Path) -> TlsFiles:
        return cls(directory)

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca-key.pem"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server-cert.pem"

    @property
    def server_key(self) -> Path:
        return self.directory / "server-key.pem"

    def ensure(self, common_name: str = "sparkcdc dev") -> None:
        """Create the files with ``openssl`` unless they exist."""
        if self.server_cert.exists() and self.server_key.exists() and self.ca.exists():
            return
        openssl = _binary("openssl", "/usr/bin/openssl")
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        d = self.directory
        san = d / "san.cnf"
        san.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        steps = [
            ["genrsa", "-out", str(self.ca_key), "2048"],
            ["req", "-x509", "-new", "-key", str(self.ca_key), "-sha256", "-days", "3650",
             "-subj", f"/CN={common_name} CA", "-out", str(self.ca)],
            ["genrsa", "-out", str(self.server_key), "2048"],
            ["req", "-new", "-key", str(self.server_key), "-subj", "/CN=127.0.0.1",
             "-out", str(d / "server.csr")],
            ["x509", "-req", "-in", str(d / "server.csr"), "-CA", str(self.ca), "-CAkey",
             str(self.ca_key), "-CAcreateserial", "-days", "3650", "-sha256",
             "-extfile", str(san), "-out", str(self.server_cert)],
        ]  # fmt: skip
        for step in steps:
            result = subprocess.run([openssl, *step], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise SourceError(
                    f"openssl {step[0]} failed making the dev server's TLS files in {d}: "
                    f"{result.stderr[-1000:]}"
                )


def _one(cur: Any) -> str:
    row = cur.fetchone()
    return "" if row is None or row[0] is None else str(row[0])


def _binary(name: str, fallback: str) -> str:
    found = shutil.which(name) or (fallback if Path(fallback).exists() else None)
    if not found:
        raise SourceError(
            f"'{name}' is not installed; run 'bash scripts/setup.sh' (it installs Debian's "
            "mariadb-server) or 'apt-get install mariadb-server'"
        )
    return found


def main() -> None:
    """``python -m sparkcdc_dev.devserver [start|stop]``."""
    import sys

    server = DevServer.from_env()
    if len(sys.argv) > 1 and sys.argv[1] == "stop":
        server.stop()
        print("stopped")
        return
    s = server.start()
    print(f"MariaDB running on {s.host}:{s.port} (user {s.user})")


if __name__ == "__main__":
    main()
