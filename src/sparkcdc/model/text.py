"""Text helpers for SQL fragments: Spark SQL projections, MySQL DDL lists."""

from __future__ import annotations


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
