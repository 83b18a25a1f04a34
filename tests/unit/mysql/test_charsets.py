"""Collation ids to codecs: every character set the server knows decodes by a codec that
exists, the ones Python lacks by the server's own tables (checked value for value against
SELECT in tests/integration/test_decoder_types.py)."""

from __future__ import annotations

import codecs
import doctest

import pytest

from sparkcdc.mysql.binlog import charsets
from sparkcdc.mysql.binlog.charmaps import TABLES


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(charsets).failed == 0


@pytest.mark.parametrize("charset", sorted(charsets.CHARSET_CODECS))
def test_every_character_set_has_a_codec(charset: str) -> None:
    codec = charsets.CHARSET_CODECS[charset]
    if codec is not None:  # binary keeps its bytes
        assert codecs.lookup(codec)


@pytest.mark.parametrize("charset", sorted(TABLES))
def test_a_character_set_without_a_python_codec_decodes_by_the_servers_table(
    charset: str,
) -> None:
    """Each byte, alone and in a run, reads as the server's table says; before, these
    decoded as ISO-8859-1, which matches the server for some bytes and not others."""
    codec = charsets.CHARSET_CODECS[charset]
    assert codec == f"mysql-{charset}"
    every = bytes(range(256))
    assert every.decode(codec) == TABLES[charset]
    assert [bytes([b]).decode(codec) for b in range(256)] == list(TABLES[charset])
    assert every.decode(codec) != every.decode("latin-1")
    collation = charsets.collation_for_charset(charset)
    assert collation is not None and charsets.codec_for_collation(collation) == codec
