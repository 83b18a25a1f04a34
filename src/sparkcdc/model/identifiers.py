"""Names from the source database made safe where they become code or paths.

Table and column names come from the captured server: anyone who may create a table there
chooses them. They are quoted, one function per SQL dialect, wherever SQL text is built from
them, and encoded wherever they become a segment of a path (the state location, a sink's table
directories). Pure functions, no I/O: every layer may use them.

>>> quote_mysql("odd`name")
'`odd``name`'
>>> quote_spark("a.b")
'`a.b`'
>>> path_segment("app.orders"), path_segment("../../x")
('app.orders', '~2E.~2F..~2Fx')
"""

from __future__ import annotations

import hashlib

# ASCII characters kept as they are in a path segment; a leading "." is encoded all the same
# (no segment is "." or "..", or hidden as the state store's temporary files are)
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.$")
# a segment's length in bytes beyond which it is cut and a digest of the name appended:
# filesystems refuse names over 255 bytes, and encoding triples the bytes it touches
_MAX_SEGMENT_BYTES = 200


def _enclosed(name: str, quote: str, pyformat: bool) -> str:
    quoted = quote + name.replace(quote, quote + quote) + quote
    # pymysql and psycopg format a statement with % whenever parameters are given (even none)
    return quoted.replace("%", "%%") if pyformat else quoted


def quote_mysql(name: str, *, pyformat: bool = False) -> str:
    """A MySQL / MariaDB identifier in backticks, backticks inside doubled.

    ``pyformat``: the statement runs with ``%s`` parameters (pymysql formats it with ``%``
    whenever parameters are given, even none), so a ``%`` in the name is doubled as well.
    Names are quoted whatever they are: no keyword or odd character can change the statement.

    >>> quote_mysql("a`b"), quote_mysql("100%", pyformat=True)
    ('`a``b`', '`100%%`')
    """
    return _enclosed(name, "`", pyformat)


def quote_mysql_table(database: str, table: str, *, pyformat: bool = False) -> str:
    """```database`.`table``` for MySQL SQL (see :func:`quote_mysql`).

    >>> quote_mysql_table("app", "my.table")
    '`app`.`my.table`'
    """
    return f"{quote_mysql(database, pyformat=pyformat)}.{quote_mysql(table, pyformat=pyformat)}"


def quote_spark(name: str) -> str:
    """A Spark SQL identifier (or column reference) in backticks, backticks inside doubled.

    >>> quote_spark("odd`name")
    '`odd``name`'
    """
    return _enclosed(name, "`", False)


def quote_ansi(name: str, *, pyformat: bool = False) -> str:
    """An ANSI SQL (PostgreSQL) identifier in double quotes, double quotes inside doubled;
    ``pyformat`` as for :func:`quote_mysql` (psycopg formats statements the same way).

    >>> quote_ansi('a"b')
    '"a""b"'
    """
    return _enclosed(name, '"', pyformat)


def path_segment(name: str) -> str:
    """``name`` as one segment of a path: ASCII letters, digits and ``_ - . $`` as they are
    (the usual names read as themselves in a listing), a leading ``.`` and
    every other character as ``~XX`` per UTF-8 byte. Different names give different segments,
    and no segment is ``.``, ``..`` or holds a ``/``. The escape is ``~``, not ``%``: readers
    that take paths as URLs (delta-rs, object stores) would decode ``%2F`` into a ``/``. A
    name whose segment would pass 200 bytes is cut there and ends in ``~~`` and a digest of
    the whole name (``~~`` is in no other segment).

    >>> path_segment("orders"), path_segment("a b/c"), path_segment("100%"), path_segment("é")
    ('orders', 'a~20b~2Fc', '100~25', '~C3~A9')
    """
    out = []
    for i, char in enumerate(name):
        if char in _PLAIN and not (i == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"~{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    segment = "".join(out)
    if len(segment) > _MAX_SEGMENT_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        head = segment[: _MAX_SEGMENT_BYTES - len(digest) - 2]
        # never cut a ~XX in two (the digest keeps the segments apart; this keeps them readable)
        cut = head.rfind("~", len(head) - 2)
        segment = f"{head[:cut] if cut >= 0 else head}~~{digest}"
    return segment or "~"


def name_of_path_segment(segment: str) -> str:
    """The name :func:`path_segment` encoded (names too long to keep whole cannot be told).

    >>> name_of_path_segment("~2E.~2F..~2Fx")
    '../../x'
    """
    if segment == "~":
        return ""
    if "~~" in segment:
        raise ValueError(f"{segment!r} is the cut segment of a long name: it cannot be decoded")
    raw = bytearray()
    i = 0
    while i < len(segment):
        if segment[i] == "~":
            raw.append(int(segment[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(segment[i].encode())
            i += 1
    return raw.decode("utf-8", "surrogatepass")
