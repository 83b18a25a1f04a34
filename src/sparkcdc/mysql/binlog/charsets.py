"""Collation id -> character set -> Python codec, as a static table.

Binlog TABLE_MAP optional metadata names each character column's *collation id*
(``DEFAULT_CHARSET`` / ``COLUMN_CHARSET``). The table below covers every collation id of
MariaDB 10.11 (``SELECT ID, CHARACTER_SET_NAME FROM
information_schema.COLLATION_CHARACTER_SET_APPLICABILITY``, including the ``uca1400``
families at 2048+) and the MySQL 8 additions (``utf8mb4_0900_*`` 255..323,
``gb18030`` 248..250, ``utf8mb3_tolower_ci`` 76).

MySQL's ``latin1`` is really Windows-1252 with the five bytes cp1252 leaves undefined
mapped to the same code point; the ``mysql-latin1`` error handler does that. The
single-byte character sets Python has no codec for (dec8, hp8, swe7, keybcs2, armscii8,
geostd8) decode by the server's own tables (``charmaps.py``, codecs ``mysql-<name>``), so a
binlog value reads as a SELECT of it does.

>>> bytes([0xA1, 0xB2]).decode(CHARSET_CODECS["armscii8"]), b"[]".decode(CHARSET_CODECS["swe7"])
('❁Ա', 'ÄÅ')

>>> codec_for_collation(45), codec_for_collation(8), codec_for_collation(63)
('utf-8', 'cp1252', None)
"""

from __future__ import annotations

import codecs
from typing import Any

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog.charmaps import TABLES as _SERVER_TABLES

BINARY_COLLATION = 63
"""The ``binary`` pseudo character set: BINARY/VARBINARY/BLOB columns decode to bytes."""

LATIN1_ERRORS = "mysql-latin1"
"""Error handler for MySQL latin1 (cp1252 plus pass-through of its undefined bytes)."""

# character set name -> collation ids (MariaDB 10.11 + MySQL 8)
_COLLATIONS_BY_CHARSET: dict[str, tuple[int, ...]] = {
    "big5": (
        1,
        84,
        1025,
        1108,
    ),
    "latin2": (
        2,
        9,
        21,
        27,
        77,
        1033,
        1101,
    ),
    "dec8": (
        3,
        69,
        1027,
        1093,
    ),
    "cp850": (
        4,
        80,
        1028,
        1104,
    ),
    "latin1": (
        5,
        8,
        15,
        31,
        *range(47, 50),
        94,
        1032,
        1071,
    ),
    "hp8": (
        6,
        72,
        1030,
        1096,
    ),
    "koi8r": (
        7,
        74,
        1031,
        1098,
    ),
    "swe7": (
        10,
        82,
        1034,
        1106,
    ),
    "ascii": (
        11,
        65,
        1035,
        1089,
    ),
    "ujis": (
        12,
        91,
        1036,
        1115,
    ),
    "sjis": (
        13,
        88,
        1037,
        1112,
    ),
    "cp1251": (
        14,
        23,
        *range(50, 53),
        *range(1074, 1076),
    ),
    "hebrew": (
        16,
        71,
        1040,
        1095,
    ),
    "tis620": (
        18,
        89,
        1042,
        1113,
    ),
    "euckr": (
        19,
        85,
        1043,
        1109,
    ),
    "latin7": (
        20,
        *range(41, 43),
        79,
        1065,
        1103,
    ),
    "koi8u": (
        22,
        75,
        1046,
        1099,
    ),
    "gb2312": (
        24,
        86,
        1048,
        1110,
    ),
    "greek": (
        25,
        70,
        1049,
        1094,
    ),
    "cp1250": (
        26,
        34,
        44,
        66,
        99,
        1050,
        1090,
    ),
    "gbk": (
        28,
        87,
        1052,
        1111,
    ),
    "cp1257": (
        29,
        *range(58, 60),
        *range(1082, 1084),
    ),
    "latin5": (
        30,
        78,
        1054,
        1102,
    ),
    "armscii8": (
        32,
        64,
        1056,
        1088,
    ),
    "utf8mb3": (
        33,
        76,
        83,
        *range(192, 216),
        223,
        *range(576, 579),
        1057,
        1107,
        1216,
        1238,
    ),
    "ucs2": (
        35,
        90,
        *range(128, 152),
        159,
        *range(640, 643),
        1059,
        1114,
        1152,
        1174,
    ),
    "cp866": (
        36,
        68,
        1060,
        1092,
    ),
    "keybcs2": (
        37,
        73,
        1061,
        1097,
    ),
    "macce": (
        38,
        43,
        1062,
        1067,
    ),
    "macroman": (
        39,
        53,
        1063,
        1077,
    ),
    "cp852": (
        40,
        81,
        1064,
        1105,
    ),
    "utf8mb4": (
        *range(45, 47),
        *range(224, 248),
        *range(255, 324),
        *range(608, 611),
        *range(1069, 1071),
        1248,
        1270,
    ),
    "utf16": (
        *range(54, 56),
        *range(101, 125),
        *range(672, 675),
        *range(1078, 1080),
        1125,
        1147,
    ),
    "utf16le": (
        56,
        62,
        1080,
        1086,
    ),
    "cp1256": (
        57,
        67,
        1081,
        1091,
    ),
    "utf32": (
        *range(60, 62),
        *range(160, 184),
        *range(736, 739),
        *range(1084, 1086),
        1184,
        1206,
    ),
    "binary": (63,),
    "geostd8": (
        *range(92, 94),
        *range(1116, 1118),
    ),
    "cp932": (
        *range(95, 97),
        *range(1119, 1121),
    ),
    "eucjpms": (
        *range(97, 99),
        *range(1121, 1123),
    ),
    "gb18030": (*range(248, 251),),
    # MariaDB 10.10+ uca1400 collation families (id blocks of 256)
}
_UCA1400_BLOCKS: tuple[tuple[range, str], ...] = (
    (range(2048, 2304), "utf8mb3"),
    (range(2304, 2560), "utf8mb4"),
    (range(2560, 2816), "ucs2"),
    (range(2816, 3072), "utf16"),
    (range(3072, 3328), "utf32"),
)

# MySQL character set name -> Python codec (None: bytes, no decoding)
CHARSET_CODECS: dict[str, str | None] = {
    "big5": "big5",
    "dec8": "mysql-dec8",
    "cp850": "cp850",
    "hp8": "mysql-hp8",
    "koi8r": "koi8_r",
    "latin1": "cp1252",
    "latin2": "iso8859_2",
    "swe7": "mysql-swe7",
    "ascii": "ascii",
    "ujis": "euc_jp",
    "sjis": "shift_jis",
    "hebrew": "iso8859_8",
    "tis620": "tis_620",
    "euckr": "euc_kr",
    "koi8u": "koi8_u",
    "gb2312": "gb2312",
    "greek": "iso8859_7",
    "cp1250": "cp1250",
    "gbk": "gbk",
    "latin5": "iso8859_9",
    "armscii8": "mysql-armscii8",
    "utf8mb3": "utf-8",
    "ucs2": "utf-16-be",
    "cp866": "cp866",
    "keybcs2": "mysql-keybcs2",
    "macce": "mac_latin2",
    "macroman": "mac_roman",
    "cp852": "cp852",
    "latin7": "iso8859_13",
    "utf8mb4": "utf-8",
    "cp1251": "cp1251",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "utf32": "utf-32-be",
    "binary": None,
    "geostd8": "mysql-geostd8",
    "cp932": "cp932",
    "eucjpms": "euc_jp",
    "gb18030": "gb18030",
}

COLLATION_CHARSETS: dict[int, str] = {
    cid: name for name, ids in _COLLATIONS_BY_CHARSET.items() for cid in ids
}
"""Collation id -> MySQL character set name."""


def charset_for_collation(collation_id: int) -> str | None:
    """The character set name of a collation id, or None if unknown.

    >>> charset_for_collation(2304)
    'utf8mb4'
    """
    name = COLLATION_CHARSETS.get(collation_id)
    if name is not None:
        return name
    for block, family in _UCA1400_BLOCKS:
        if collation_id in block:
            return family
    return None


def collation_for_charset(charset: str) -> int | None:
    """A collation id of a character set (any one decodes alike), None if unknown.

    >>> collation_for_charset("latin1"), collation_for_charset("binary")
    (5, 63)
    """
    if charset == "binary":
        return BINARY_COLLATION
    ids = _COLLATIONS_BY_CHARSET.get(charset)
    return ids[0] if ids else None


def codec_for_collation(collation_id: int) -> str | None:
    """The Python codec for a collation id; None means binary (keep bytes).

    An id this table does not know (a collation added to the server after this table was
    made, or one compiled in by hand) raises: its text cannot be decoded without guessing.
    The binlog reader completes such columns from the table's schema first
    (``tablemeta.complete_columns``), so the stream only meets this error without one.

    >>> codec_for_collation(33)
    'utf-8'
    """
    name = charset_for_collation(collation_id)
    if name is None:
        raise ProtocolError(
            f"the binlog names collation id {collation_id} for a text column, and sparkcdc "
            "does not know that collation's character set, so it cannot decode the text "
            "without guessing. Read the table with its schema (the streaming source does), "
            "or report the collation (SELECT * FROM information_schema.COLLATIONS WHERE "
            f"ID = {collation_id})"
        )
    return CHARSET_CODECS[name]


def is_known_collation(collation_id: int) -> bool:
    """True when :func:`codec_for_collation` can decode text of ``collation_id``.

    >>> is_known_collation(8), is_known_collation(4000)
    (True, False)
    """
    return charset_for_collation(collation_id) is not None


def errors_for_codec(codec: str) -> str:
    """The ``errors=`` argument to decode with ``codec`` (MySQL latin1 needs its own).

    >>> errors_for_codec("cp1252"), errors_for_codec("utf-8")
    ('mysql-latin1', 'replace')
    """
    return LATIN1_ERRORS if codec == "cp1252" else "replace"


def _latin1_passthrough(error: UnicodeError) -> tuple[str, int]:
    # cp1252 leaves 0x81, 0x8D, 0x8F, 0x90, 0x9D undefined; MySQL maps them to U+0081...
    if not isinstance(error, UnicodeDecodeError):
        raise error
    raw = error.object[error.start : error.end]
    return "".join(chr(b) for b in raw), error.end


codecs.register_error(LATIN1_ERRORS, _latin1_passthrough)


def _server_table_codec(name: str) -> codecs.CodecInfo | None:
    """``mysql-<charset>``: a single-byte character set decoded by the server's table."""
    if not name.startswith("mysql_"):  # codecs.lookup normalises '-' to '_'
        return None
    chars = _SERVER_TABLES.get(name.removeprefix("mysql_"))
    if chars is None:
        return None
    encoding = codecs.charmap_build(chars)

    def decode(data: Any, errors: str = "strict") -> tuple[str, int]:
        return codecs.charmap_decode(data, errors, chars)

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, encoding)

    return codecs.CodecInfo(encode, decode, name=name.replace("_", "-"))


codecs.register(_server_table_codec)
