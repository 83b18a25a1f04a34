"""TLS settings of a MySQL/MariaDB connection, with MySQL's ``--ssl-mode`` semantics.

One frozen value (``TlsSettings``) says how every source connection (pymysql, the
replication client, snapshot reads) negotiates TLS; ``TlsSettings.context()`` builds
the ``ssl.SSLContext`` they share. The modes are MySQL's client modes (Connector/J's
``sslMode``, Debezium's ``database.ssl.mode``):

- ``disabled``: plain TCP.
- ``preferred`` (the default): TLS when the server offers it, without checking the
  certificate; plain TCP otherwise. As soon as a CA file is given the certificate is
  checked against it (``preferred`` + ``ssl-ca`` behaves as ``verify-ca``).
- ``required``: TLS or no connection; the certificate is not checked.
- ``verify-ca``: TLS, the server certificate signed by the CA (``ssl-ca``, or the
  system's trusted CAs when none is given).
- ``verify-identity``: ``verify-ca`` plus the host name in the certificate.

    >>> TlsSettings.parse(mode="VERIFY_CA").mode
    'verify-ca'
    >>> TlsSettings(ca="/etc/ca.pem").effective_mode
    'verify-ca'
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from sparkcdc.errors import ConfigError

SSL_MODES = ("disabled", "preferred", "required", "verify-ca", "verify-identity")
DEFAULT_SSL_MODE = "preferred"


def parse_ssl_mode(value: str, option: str = "ssl-mode") -> str:
    """A mode in the canonical spelling; JDBC's upper-case ``VERIFY_CA`` is accepted.

    >>> parse_ssl_mode("Verify_Identity")
    'verify-identity'
    >>> parse_ssl_mode("on")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sparkcdc.errors.ConfigError: ssl-mode 'on' is not a TLS mode; use one of disabled, ...
    """
    mode = str(value).strip().lower().replace("_", "-")
    if mode not in SSL_MODES:
        raise ConfigError(
            f"{option} {value!r} is not a TLS mode; use one of {', '.join(SSL_MODES)}"
        )
    return mode


@dataclass(frozen=True)
class TlsSettings:
    """How a connection negotiates TLS and how it sends a password in clear-text-needing
    authentication exchanges (caching_sha2_password full authentication, sha256_password).

    ``server_public_key`` is the pinned RSA public key file of the server (PEM), used to
    encrypt the password when no TLS protects it; ``allow_public_key_retrieval`` lets
    the client ask the server for its key instead (an active attacker can answer with
    their own: off by default, as in MySQL's clients).
    """

    mode: str = DEFAULT_SSL_MODE
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    key_password: str | None = field(default=None, repr=False)
    server_public_key: str | None = None
    allow_public_key_retrieval: bool = False

    @classmethod
    def parse(
        cls,
        mode: str | None = None,
        ca: str | None = None,
        cert: str | None = None,
        key: str | None = None,
        key_password: str | None = None,
        server_public_key: str | None = None,
        allow_public_key_retrieval: bool = False,
        prefix: str = "",
    ) -> TlsSettings:
        """Settings from option values (``prefix`` names the options in messages)."""
        settings = cls(
            mode=parse_ssl_mode(mode or DEFAULT_SSL_MODE, f"{prefix}ssl-mode"),
            ca=ca or None,
            cert=cert or None,
            key=key or None,
            key_password=key_password or None,
            server_public_key=server_public_key or None,
            allow_public_key_retrieval=allow_public_key_retrieval,
        )
        if settings.mode == "disabled" and (settings.ca or settings.cert):
            raise ConfigError(
                f"{prefix}ssl-mode 'disabled' with {prefix}ssl-ca/{prefix}ssl-cert set: the "
                "certificates would be ignored; remove them or choose another ssl-mode"
            )
        if bool(settings.cert) != bool(settings.key):
            raise ConfigError(
                f"{prefix}ssl-cert and {prefix}ssl-key go together (a client certificate and "
                "its private key); set both or neither"
            )
        for option, path in (
            (f"{prefix}ssl-ca", settings.ca),
            (f"{prefix}ssl-cert", settings.cert),
            (f"{prefix}ssl-key", settings.key),
            (f"{prefix}server-public-key-path", settings.server_public_key),
        ):
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"{option} {path!r} is not a readable file; give a PEM file")
        return settings

    @property
    def effective_mode(self) -> str:
        """The mode in force: ``preferred`` with a CA file checks the certificate."""
        if self.mode == "preferred" and self.ca:
            return "verify-ca"
        return self.mode

    @property
    def wants_tls(self) -> bool:
        return self.mode != "disabled"

    @property
    def requires_tls(self) -> bool:
        """No connection without TLS (every mode but ``disabled`` and plain ``preferred``)."""
        return self.effective_mode not in ("disabled", "preferred")

    @property
    def verifies_certificate(self) -> bool:
        return self.effective_mode in ("verify-ca", "verify-identity")

    @property
    def verifies_identity(self) -> bool:
        return self.effective_mode == "verify-identity"

    def context(self) -> ssl.SSLContext | None:
        """The shared ``SSLContext`` of these settings (``None`` when TLS is disabled).

        Building one loads CA files (~18 ms for the system store): it is built once per
        process and settings.
        """
        if not self.wants_tls:
            return None
        return _context(self)


@functools.lru_cache(maxsize=16)
def _context(settings: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.verifies_certificate:
        try:
            if settings.ca:
                ctx.load_verify_locations(cafile=settings.ca)
            else:
                ctx.load_default_certs()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ssl-ca {settings.ca!r} is not a PEM CA file: {exc}") from None
        # self-made server certificates (MariaDB's, MySQL's auto-generated ones) often miss
        # extensions the strict RFC 5280 profile (Python >= 3.13's default) insists on
        ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
        ctx.check_hostname = settings.verifies_identity
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if settings.cert and settings.key:
        try:
            ctx.load_cert_chain(settings.cert, settings.key, password=settings.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load the client certificate ssl-cert {settings.cert!r} with ssl-key "
                f"{settings.key!r}: {exc}; check the files (PEM) and ssl-key-password"
            ) from None
    return ctx
