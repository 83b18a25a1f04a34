"""MariaDB's ed25519 authentication signs with a key expanded from the password by SHA-512:
for 32-byte secrets that is RFC 8032 Ed25519, checked here against RFC 8032's test vectors
and against the ``cryptography`` package's Ed25519."""

from __future__ import annotations

import random

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sparkcdc.mysql.protocol.ed25519 import sign
from sparkcdc.mysql.protocol.wire import AuthPlugin, auth_response_for

# RFC 8032 section 7.1, TEST 1 to 3: (secret key, message, signature)
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc6"
        "1e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e45"
        "8f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae"
        "67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize(("secret", "message", "signature"), RFC8032)
def test_rfc8032_vectors(secret: str, message: str, signature: str) -> None:
    assert sign(bytes.fromhex(secret), bytes.fromhex(message)).hex() == signature


def test_agrees_with_cryptography_on_32_byte_secrets() -> None:
    rng = random.Random(8032)
    for _ in range(25):
        secret, message = rng.randbytes(32), rng.randbytes(32)
        expected = Ed25519PrivateKey.from_private_bytes(secret).sign(message)
        assert sign(secret, message) == expected


def test_the_auth_response_signs_the_scramble_with_the_password() -> None:
    scramble = bytes(range(32))
    response = auth_response_for(AuthPlugin.ED25519, "pässword", scramble + b"extra")
    assert response == sign("pässword".encode(), scramble)
    assert len(response) == 64
