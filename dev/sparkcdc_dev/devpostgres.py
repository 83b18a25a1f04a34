"""A private PostgreSQL, the target of the ``jdbc`` sink's tests and the source of the
PostgreSQL replication client's (``wal_level = logical``; user ``cdc`` may replicate).

It runs from Debian's ``postgresql`` binaries (``/usr/lib/postgresql/<version>/bin``) with
its own cluster in ``$SPARKCDC_DEV_DIR/postgres-25432`` (default ``/tmp/sparkcdc-dev``),
listening on 127.0.0.1 only, with its unix socket inside that directory. Started as root,
the cluster belongs to the ``postgres`` OS user (PostgreSQL refuses to run as root).
Starting it twice is safe: a running instance is reused.

    >>> server = DevPostgres.from_env()        # doctest: +SKIP
    >>> server.start().port                    # doctest: +SKIP
    25432
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from sparkcdc.errors import SinkError
from sparkcdc_dev import lanes
from sparkcdc_dev.devserver import TlsFiles
from sparkcdc_dev.lanes import default_port

DEFAULT_PORT = default_port("SPARKCDC_DEV_PG_PORT")
DEFAULT_DIR = Path(os.environ.get("SPARKCDC_DEV_DIR", lanes.DEFAULT_DIR))
# Credentials of the private, loopback-only development server (not a secret).
DEV_USER = "cdc"
DEV_PASSWORD = "cdc-dev-password"
DEV_DATABASE = "sink_db"
SUPERUSER = "postgres"  # the cluster's bootstrap superuser (trust over the private socket)
OS_USER = "postgres"  # who runs the server when we are root
_BIN_ROOT = Path("/usr/lib/postgresql")
# What logical decoding needs (initdb's pg_hba.conf already lets loopback replicate).
_LOGICAL_DECODING = {"wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20"}
_LOGICAL_DECODING_CONF = "".join(f"{name} = {value}\n" for name, value in _LOGICAL_DECODING.items())


@dataclass(frozen=True)
class PostgresSettings:
    host: str
    port: int
    user: str
    password: str
    database: str


class DevPostgres:
    """Start, reuse and stop the private PostgreSQL."""

    def __init__(self, base_dir: Path = DEFAULT_DIR, port: int = DEFAULT_PORT) -> None:
        self.port = port
        # the cluster's data directory; the socket and the server log live in it too
        self.datadir = base_dir / f"postgres-{port}"
        self.log_file = self.datadir / "server.log"
        self.settings = PostgresSettings("127.0.0.1", port, DEV_USER, DEV_PASSWORD, DEV_DATABASE)

    @classmethod
    def from_env(cls) -> DevPostgres:
        port = int(os.environ.get("SPARKCDC_DEV_PG_PORT", DEFAULT_PORT))
        return cls(DEFAULT_DIR, port)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> PostgresSettings:
        """Start (or reuse) the server; make sure user ``cdc`` and database ``sink_db`` exist."""
        if self.is_running():
            return self._ready(timeout_s)
        if not (self.datadir / "PG_VERSION").exists():
            self._initdb()
        self._start_server(timeout_s)
        return self._ready(timeout_s)

    def _ready(self, timeout_s: float) -> PostgresSettings:
        """Logical decoding on (a restart once for a cluster made before it), then the
        development user, its database and TLS."""
        if self._ensure_logical_decoding():
            self.stop(timeout_s)
            self._start_server(timeout_s)
        self._ensure_user_and_database()
        self._ensure_tls()
        return self.settings

    def _start_server(self, timeout_s: float) -> None:
        self._run(
            [
                _binary("pg_ctl"),
                "start",
                "--no-wait",
                "-D",
                str(self.datadir),
                "-l",
                str(self.log_file),
            ],
            what="pg_ctl start",
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.is_running():
                return
            time.sleep(0.2)
        tail = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
        raise SinkError(
            f"the private PostgreSQL on port {self.port} did not start within {timeout_s:.0f}s; "
            f"its log {self.log_file} ends with:\n{tail}"
        )

    def stop(self, timeout_s: float = 60.0) -> None:
        if not self.is_running():
            return
        self._run(
            [_binary("pg_ctl"), "stop", "--no-wait", "-m", "fast", "-D", str(self.datadir)],
            what="pg_ctl stop",
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.is_running():
            time.sleep(0.2)
        if self.is_running():
            raise SinkError(
                f"the private PostgreSQL on port {self.port} did not stop within "
                f"{timeout_s:.0f}s; see its log {self.log_file}"
            )

    def is_running(self) -> bool:
        """True when the server accepts a real connection over its private socket."""
        if not (self.datadir / f".s.PGSQL.{self.port}").exists():
            return False
        try:
            with self.superuser_connection(connect_timeout=2):
                return True
        except psycopg.Error:
            return False

    def superuser_connection(self, connect_timeout: int = 10) -> psycopg.Connection[TupleRow]:
        """An autocommit connection as the superuser over the private socket (trusted there)."""
        return psycopg.connect(
            host=str(self.datadir),
            port=self.port,
            user=SUPERUSER,
            dbname="postgres",
            connect_timeout=connect_timeout,
            autocommit=True,
        )

    def connection(self, database: str = DEV_DATABASE) -> psycopg.Connection[TupleRow]:
        """An autocommit TCP connection as the development user."""
        return psycopg.connect(
            host=self.settings.host,
            port=self.port,
            user=DEV_USER,
            password=DEV_PASSWORD,
            dbname=database,
            connect_timeout=10,
            autocommit=True,
        )

    @contextmanager
    def scratch_database(self, prefix: str) -> Iterator[str]:
        """A database of its own (``<prefix>_<pid>_<random>``, owned by the development
        user) for one test; afterwards its replication slots are dropped (a slot keeps WAL,
        and a database with one cannot be dropped) and the database with them."""
        name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with self.superuser_connection() as admin:
            admin.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(DEV_USER)
                )
            )
        try:
            yield name
        finally:
            with self.superuser_connection() as admin:
                for (slot,) in admin.execute(
                    "SELECT slot_name FROM pg_replication_slots WHERE database = %s", [name]
                ).fetchall():
                    admin.execute("SELECT pg_drop_replication_slot(%s)", [slot])
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))

    # -- internals -------------------------------------------------------------------

    def _initdb(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            user = pwd.getpwnam(OS_USER)
            os.chown(self.datadir, user.pw_uid, user.pw_gid)
        self.datadir.chmod(0o700)
        self._run(
            [
                _binary("initdb"),
                "-D",
                str(self.datadir),
                f"--username={SUPERUSER}",
                "--auth-local=trust",  # the socket sits in the 0700 data directory
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            what="initdb",
        )
        with (self.datadir / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# sparkcdc's private development server (dev/sparkcdc_dev/devpostgres.py)\n"
                "listen_addresses = '127.0.0.1'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = {_conf_string(str(self.datadir))}\n"
                # throwaway test data: durability is not worth the fsyncs
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n" + _LOGICAL_DECODING_CONF
                # the PostgreSQL source reads the WAL through a logical replication slot
            )

    def _ensure_logical_decoding(self) -> bool:
        """Set ``wal_level = logical`` on a cluster made without it; True if it needs the
        restart that setting takes effect with."""
        with self.superuser_connection() as conn:
            if conn.execute("SHOW wal_level").fetchone() == ("logical",):
                return False
            for name, value in _LOGICAL_DECODING.items():
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
        return True

    @property
    def tls(self) -> TlsFiles:
        """The server's CA and certificate (give ``tls.ca`` as ``sslrootcert``)."""
        return TlsFiles.under(self.datadir / "tls")

    def _ensure_tls(self) -> None:
        """TLS on (``ssl = on`` with a certificate of its own CA), reloaded if it was off."""
        files = self.tls
        files.ensure()
        if os.geteuid() == 0:
            user = pwd.getpwnam(OS_USER)
            for path in (files.directory, *files.directory.iterdir()):
                os.chown(path, user.pw_uid, user.pw_gid)
        files.server_key.chmod(0o600)  # PostgreSQL refuses a key others may read
        with self.superuser_connection() as conn:
            if conn.execute("SHOW ssl").fetchone() == ("on",):
                return
            conn.execute(
                sql.SQL("ALTER SYSTEM SET ssl_cert_file = {}").format(
                    sql.Literal(str(files.server_cert))
                )
            )
            conn.execute(
                sql.SQL("ALTER SYSTEM SET ssl_key_file = {}").format(
                    sql.Literal(str(files.server_key))
                )
            )
            conn.execute("ALTER SYSTEM SET ssl = on")
            conn.execute("SELECT pg_reload_conf()")

    def _run(self, cmd: list[str], *, what: str) -> None:
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", OS_USER, "--", *cmd]
        # cwd: the postgres user may not enter ours (root's home, say)
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=self.datadir,
        )
        if result.returncode != 0:
            raise SinkError(
                f"{what} failed for the private PostgreSQL in {self.datadir} "
                f"(exit {result.returncode}):\n{(result.stderr or result.stdout)[-2000:]}\n"
                f"If the directory is half-initialised, remove it and start again."
            )

    def _ensure_user_and_database(self) -> None:
        with self.superuser_connection() as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (DEV_USER,))
            verb = "ALTER" if exists.fetchone() else "CREATE"
            # utility statements take no bind parameters: the password is quoted client-side
            conn.execute(
                sql.SQL("{} ROLE {} WITH LOGIN REPLICATION PASSWORD {}").format(
                    sql.SQL(verb), sql.Identifier(DEV_USER), sql.Literal(DEV_PASSWORD)
                )
            )
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DEV_DATABASE,))
            if not found.fetchone():
                conn.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'UTF8'").format(
                        sql.Identifier(DEV_DATABASE), sql.Identifier(DEV_USER)
                    )
                )


def _conf_string(value: str) -> str:
    """A postgresql.conf string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _binary(name: str) -> str:
    """``name`` from the newest PostgreSQL installed under /usr/lib/postgresql."""

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parents[1].name))

    found = sorted(_BIN_ROOT.glob(f"*/bin/{name}"), key=version)
    if not found:
        raise SinkError(
            f"PostgreSQL's '{name}' is not installed (looked in {_BIN_ROOT}/*/bin); run "
            "'bash scripts/setup.sh' (it installs Debian's postgresql) or "
            "'apt-get install postgresql'"
        )
    return str(found[-1])


def main() -> None:
    """``python -m sparkcdc_dev.devpostgres [start|stop|status]``."""
    import sys

    server = DevPostgres.from_env()
    command = sys.argv[1] if len(sys.argv) > 1 else "start"
    if command == "stop":
        server.stop()
        print("stopped")
    elif command == "status":
        running = server.is_running()
        print(f"PostgreSQL on 127.0.0.1:{server.port}: {'running' if running else 'not running'}")
        sys.exit(0 if running else 1)
    elif command == "start":
        s = server.start()
        print(f"PostgreSQL running on {s.host}:{s.port} (user {s.user}, database {s.database})")
    else:
        sys.exit(f"usage: python -m sparkcdc_dev.devpostgres [start|stop|status], not {command!r}")


if __name__ == "__main__":
    main()
