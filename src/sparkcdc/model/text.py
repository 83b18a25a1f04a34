"""Text helpers: SQL fragments (Spark SQL projections, MySQL DDL lists), and locations
as messages may show them."""

from __future__ import annotations

import re

_URI_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@:?#\s]*):[^/@?#\s]*@")
_SECRET_PARAMETER = re.compile(
    r"([?&;][^=&;#]*(?:secret|password|passwd|token|key|credential|signature)[^=&;#]*=)[^&;#]*",
    re.IGNORECASE,
)


def redacted_uri(location: str) -> str:
    """``location`` as an error message may show it: the credentials a filesystem URI can
    carry masked (a password in its user part, and the values of query parameters whose
    names speak of a secret, key, token, password, credential or signature).

    >>> redacted_uri("s3://AKIA:s3cr3t@bucket/state?region=eu&secret_key=x&endpoint_override=h")
    's3://AKIA:***@bucket/state?region=eu&secret_key=***&endpoint_override=h'
    >>> redacted_uri("/data/cdc/state")
    '/data/cdc/state'
    """
    masked = _URI_PASSWORD.sub(r"\1:***@", location)
    return _SECRET_PARAMETER.sub(r"\1***", masked)


def split_top_level(text: str) -> list[str]:
    """Split a list at commas outside parentheses and quotes (string literals may escape with
    a backslash, as in Spark SQL and MySQL); items stripped, empty ones left out.

    >>> split_top_level("*, concat(a, ',', b) AS ab, `x,y`")
    ['*', "concat(a, ',', b) AS ab", '`x,y`']
    """
    items: list[str] = []
    depth, quote_char, start, escaped = 0, "", 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif quote_char:
            if ch == "\\" and quote_char != "`":
                escaped = True
            elif ch == quote_char:
                quote_char = ""
        elif ch in "'\"`":
            quote_char = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [item for item in items if item]
