"""The jdbc sink's options: the target URL, TLS in PostgreSQL JDBC's words, the option model."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator

from sparkcdc.errors import ConfigError
from sparkcdc.model.tls import SSL_MODES, TlsSettings, parse_ssl_mode
from sparkcdc.sinks.base import SinkOptions

Family = Literal["mysql", "postgresql"]
# URL scheme -> the SQL dialect spoken (MariaDB speaks MySQL's)
SCHEMES: dict[str, Family] = {"mysql": "mysql", "mariadb": "mysql", "postgresql": "postgresql"}
DEFAULT_PORTS: dict[Family, int] = {"mysql": 3306, "postgresql": 5432}


# PostgreSQL JDBC's (and libpq's) sslmode values
PG_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
# the same modes in MySQL's words, for MySQL/MariaDB targets given PostgreSQL's spelling
_PG_TO_MYSQL = {
    "disable": "disabled",
    "prefer": "preferred",
    "require": "required",
    "verify-ca": "verify-ca",
    "verify-full": "verify-identity",
}


@dataclass(frozen=True)
class SinkTls:
    """TLS of the sink's connections, in PostgreSQL JDBC's option names (``sslmode``,
    ``sslrootcert``, ``sslcert``, ``sslkey``, ``sslpassword``). As on the source, a given
    root certificate means the certificate is checked (an unset or ``prefer`` mode with
    ``sslrootcert`` is ``verify-ca``).

    >>> SinkTls(rootcert="/ca.pem").mode_for("postgresql")
    'verify-ca'
    >>> SinkTls(mode="VERIFY_IDENTITY").mode_for("mysql")
    'verify-identity'
    """

    mode: str | None = None
    rootcert: str | None = None
    cert: str | None = None
    key: str | None = None
    password: str | None = field(default=None, repr=False)

    def mode_for(self, family: Family) -> str | None:
        """The mode in the target driver's words (None: the driver's default)."""
        mode = self.mode
        if family == "postgresql":
            if mode is not None:
                mode = mode.strip().lower().replace("_", "-")
                mode = {"disabled": "disable", "preferred": "prefer", "required": "require",
                        "verify-identity": "verify-full"}.get(mode, mode)  # fmt: skip
                if mode not in PG_SSL_MODES:
                    raise ConfigError(
                        f"sink.sslmode {self.mode!r} is not a PostgreSQL TLS mode; use one of "
                        f"{', '.join(PG_SSL_MODES)}"
                    )
            if self.rootcert and mode in (None, "prefer"):
                return "verify-ca"
            return mode
        if mode is None:
            return None
        lowered = mode.strip().lower().replace("_", "-")
        if lowered in _PG_TO_MYSQL:
            return _PG_TO_MYSQL[lowered]
        try:
            return parse_ssl_mode(mode, "sink.sslmode")
        except ConfigError:
            raise ConfigError(
                f"sink.sslmode {mode!r} is not a TLS mode; use one of {', '.join(SSL_MODES)}"
            ) from None

    def psycopg_kwargs(self) -> dict[str, Any]:
        out = {"sslmode": self.mode_for("postgresql"), "sslrootcert": self.rootcert,
               "sslcert": self.cert, "sslkey": self.key, "sslpassword": self.password}  # fmt: skip
        return {k: v for k, v in out.items() if v is not None}

    def mysql(self) -> TlsSettings:
        return TlsSettings.parse(
            mode=self.mode_for("mysql"),
            ca=self.rootcert,
            cert=self.cert,
            key=self.key,
            key_password=self.password,
            prefix="sink.",
        )


@dataclass(frozen=True)
class JdbcUrl:
    """The parts of a ``jdbc:<scheme>://host[:port]/database`` URL the sink uses.

    >>> JdbcUrl.parse("jdbc:mariadb://db:3307/shop")
    JdbcUrl(scheme='mariadb', host='db', port=3307, database='shop')
    >>> JdbcUrl.parse("jdbc:postgresql://db/shop").port
    5432
    """

    scheme: str
    host: str
    port: int
    database: str
    tls: SinkTls = field(default=SinkTls(), repr=False, compare=False)

    @property
    def family(self) -> Family:
        return SCHEMES[self.scheme]

    @classmethod
    def parse(cls, url: str, *, where: str = "sink.url") -> JdbcUrl:
        # Messages name the scheme, host and port at most: a URL may carry credentials.
        supported = ", ".join(f"jdbc:{s}://host:port/database" for s in SCHEMES)
        if not url.startswith("jdbc:"):
            raise ConfigError(
                f"{where}: a JDBC URL starts with 'jdbc:', e.g. 'jdbc:mysql://host:3306/db'; "
                f"supported: {supported}"
            )
        scheme = url[5:].partition(":")[0].lower()
        if scheme not in SCHEMES:
            shown = scheme if re.fullmatch(r"[a-z0-9+.-]{1,20}", scheme) else "(unreadable)"
            raise ConfigError(
                f"{where}: the jdbc sink does not support URL scheme 'jdbc:{shown}'; "
                f"supported: {supported}"
            )
        parts = urlsplit(url[5:])
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"{where}: put the credentials in the sink's 'username' and 'password' options, "
                "not in the URL (a URL ends up in logs)"
            )
        if parts.query or ";" in parts.path:
            names = sorted(
                {p.partition("=")[0] for p in re.split(r"[&;]", parts.query) if "=" in p}
                | {p.partition("=")[0] for p in parts.path.split(";")[1:] if "=" in p}
            )
            raise ConfigError(
                f"{where}: driver properties in the URL are not supported (got "
                f"{', '.join(names)}); the sink writes with a Python driver: give only "
                f"jdbc:{scheme}://host:port/database"
            )
        try:
            port = parts.port
        except ValueError:
            port = -1
        database = parts.path.lstrip("/")
        if (
            not parts.hostname
            or "," in parts.netloc
            or port == -1
            or not database
            or "/" in database
        ):
            raise ConfigError(
                f"{where}: expected jdbc:{scheme}://host[:port]/database with one host, a "
                f"numeric port and a database name"
            )
        family = SCHEMES[scheme]
        return cls(scheme, parts.hostname, port or DEFAULT_PORTS[family], database)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"jdbc:{self.scheme}://{host}:{self.port}/{self.database}"


class JdbcOptions(SinkOptions):
    """Options of ``type: jdbc`` (names after Flink's JDBC connector)."""

    url: str
    username: str | None = None
    password: SecretStr | None = None
    schema_name: str | None = Field(None, alias="schema", description="PostgreSQL schema")
    table_create: bool = Field(True, alias="table.create")
    commit_table: str = Field("sparkcdc_commits", alias="sink.commit-table", min_length=1)
    # TLS, PostgreSQL JDBC's names (SinkTls); MySQL/MariaDB targets take them too
    sslmode: str | None = None
    sslrootcert: str | None = None
    sslcert: str | None = None
    sslkey: str | None = None
    sslpassword: SecretStr | None = None

    @model_validator(mode="after")
    def _check(self) -> JdbcOptions:
        # ConfigError passes through pydantic unchanged (it is no ValueError)
        target = self.target
        if target.family == "mysql":
            target.tls.mysql()  # a bad mode or a missing file fails here
        else:
            target.tls.mode_for("postgresql")
        if self.schema_name is not None and target.family != "postgresql":
            raise ConfigError(
                f"sink.schema applies to PostgreSQL targets only; a {target.scheme} target's "
                f"tables go into the URL's database ({target.database!r}): remove 'schema'"
            )
        return self

    @property
    def target(self) -> JdbcUrl:
        tls = SinkTls(
            mode=self.sslmode,
            rootcert=self.sslrootcert,
            cert=self.sslcert,
            key=self.sslkey,
            password=self.sslpassword.get_secret_value() if self.sslpassword else None,
        )
        return replace(JdbcUrl.parse(self.url), tls=tls)

    @property
    def namespace(self) -> str:
        """Where target tables live: the PostgreSQL schema or the MySQL database."""
        if self.target.family == "postgresql":
            return self.schema_name or "public"
        return self.target.database
