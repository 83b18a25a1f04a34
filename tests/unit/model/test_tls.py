"""TLS options: MySQL's modes, the CA rule, clear errors (source and jdbc sink)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.model.options import SourceOptions
from sparkcdc.model.tls import SSL_MODES, TlsSettings
from sparkcdc.sinks.jdbc import JdbcOptions, SinkTls

BASE = {
    "hostname": "h",
    "username": "u",
    "database-name": "app",
    "scan.startup.mode": "latest-offset",
}


def source(**tls: str) -> SourceOptions:
    return SourceOptions.from_options({**BASE, **tls})


@pytest.mark.parametrize(
    ("given", "mode"),
    [
        ("disabled", "disabled"),
        ("PREFERRED", "preferred"),
        ("required", "required"),
        ("VERIFY_CA", "verify-ca"),
        ("verify-identity", "verify-identity"),
    ],
)
def test_modes_in_mysql_and_connector_j_spelling(given: str, mode: str) -> None:
    assert source(**{"ssl-mode": given}).tls_settings().mode == mode


def test_default_is_preferred_and_a_ca_makes_it_check_the_certificate(tmp_path: Path) -> None:
    default = source().tls_settings()
    assert (default.mode, default.requires_tls, default.verifies_certificate) == (
        "preferred",
        False,
        False,
    )
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    with_ca = source(**{"ssl-ca": str(ca)}).tls_settings()
    assert with_ca.effective_mode == "verify-ca"
    assert with_ca.requires_tls and with_ca.verifies_certificate
    assert not with_ca.verifies_identity


def test_a_bad_mode_names_the_option_and_the_allowed_values() -> None:
    with pytest.raises(ConfigError) as raised:
        source(**{"ssl-mode": "on"})
    message = str(raised.value)
    assert "ssl-mode" in message and "'on'" in message
    assert all(mode in message for mode in SSL_MODES)


def test_missing_files_and_half_a_client_certificate_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl-ca '/nonexistent/ca\.pem' is not a readable file"):
        source(**{"ssl-ca": "/nonexistent/ca.pem"})
    cert = tmp_path / "client.pem"
    cert.write_text("x")
    with pytest.raises(ConfigError, match="ssl-cert and ssl-key go together"):
        source(**{"ssl-cert": str(cert)})
    with pytest.raises(ConfigError, match="disabled"):
        source(**{"ssl-mode": "disabled", "ssl-ca": str(cert)})


def test_the_key_password_is_never_shown(tmp_path: Path) -> None:
    pem = tmp_path / "k.pem"
    pem.write_text("x")
    opts = source(**{"ssl-cert": str(pem), "ssl-key": str(pem), "ssl-key-password": "hush-42"})
    assert "hush-42" not in repr(opts) and "hush-42" not in repr(opts.tls_settings())
    assert opts.tls_settings().key_password == "hush-42"


def test_public_key_options(tmp_path: Path) -> None:
    assert source().tls_settings().allow_public_key_retrieval is False
    key = tmp_path / "server.pem"
    key.write_text("x")
    tls = source(
        **{"server-public-key-path": str(key), "allow-public-key-retrieval": "true"}
    ).tls_settings()
    assert tls == TlsSettings(server_public_key=str(key), allow_public_key_retrieval=True)


def jdbc(url: str, **tls: str) -> JdbcOptions:
    return JdbcOptions.model_validate({"type": "jdbc", "url": url, **tls})


def test_jdbc_sink_tls_for_postgresql_passes_libpq_names(tmp_path: Path) -> None:
    ca = tmp_path / "root.crt"
    ca.write_text("x")
    target = jdbc("jdbc:postgresql://db/x", sslrootcert=str(ca)).target
    assert target.tls.psycopg_kwargs() == {"sslmode": "verify-ca", "sslrootcert": str(ca)}
    full = jdbc("jdbc:postgresql://db/x", sslmode="verify-full").target.tls
    assert full.psycopg_kwargs() == {"sslmode": "verify-full"}
    assert jdbc("jdbc:postgresql://db/x").target.tls.psycopg_kwargs() == {}
    with pytest.raises(ConfigError, match=r"sink\.sslmode 'sometimes'"):
        jdbc("jdbc:postgresql://db/x", sslmode="sometimes")


def test_jdbc_sink_tls_for_mysql_maps_postgresql_words() -> None:
    assert SinkTls(mode="require").mysql().mode == "required"
    assert SinkTls(mode="verify-full").mysql().mode == "verify-identity"
    assert SinkTls(mode="VERIFY_CA").mysql().mode == "verify-ca"
    assert SinkTls().mysql().mode == "preferred"
    with pytest.raises(ConfigError, match=r"sink\.sslmode"):
        jdbc("jdbc:mariadb://db/x", sslmode="allow-ish")
