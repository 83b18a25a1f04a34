"""What a QUERY event's statement does to captured tables, judged without guessing.

In ``binlog_format=ROW`` a server logs data changes as ROWS events and only DDL and
transaction control as QUERY events. A session that sets ``binlog_format=STATEMENT`` or
``MIXED`` makes the server log its INSERT / UPDATE / DELETE as statement text instead: no
row image exists for them, so a CDC reader cannot know the rows they changed. Such a
statement on a captured table must stop the stream (:func:`dml_tables` tells which tables a
statement may write; it answers ``None`` when it cannot tell, which the caller treats as
"possibly any").

>>> statement_kind("/* app */ INSERT INTO t VALUES (1)")
'dml'
>>> statement_kind("BEGIN")
'control'
>>> dml_tables("app", "UPDATE `shop`.orders o JOIN items i ON o.id = i.id SET o.n = 1")
[('shop', 'orders'), ('app', 'items')]
"""

from __future__ import annotations

import re
from typing import Literal

StatementKind = Literal["control", "dml", "xa_rollback", "other"]

# comments (also executable /*!ddddd ... */ and MariaDB /*M! ... */ ones, which hide no DML
# keyword in front of the statement) before the first keyword
_LEADING_COMMENTS = re.compile(
    r"^\s*(?:(?:/\*(?![!M]).*?\*/|#[^\n]*\n|--\s[^\n]*\n)\s*)*", re.DOTALL
)
_EXECUTABLE_PREFIX = re.compile(r"^/\*[!M]!?\d*\s*")
_FIRST_WORDS = re.compile(r"^([A-Za-z]+)(?:\s+([A-Za-z]+))?")
_CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "START", "XA"})
_DML = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "CALL", "DO"})
# the next identifier after these keywords names a table the statement may write (or read)
_TABLE_AFTER = re.compile(
    r"\b(?:INTO(?:\s+TABLE)?|UPDATE|FROM|JOIN|TABLE|USING)\s+((?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?)",
    re.IGNORECASE,
)
# a comma-separated continuation of a table list (DELETE a, b FROM ...; UPDATE a, b SET)
_TABLE_LIST_ITEM = re.compile(
    r"\s*(?:(?:AS\s+)?[\w$]+\s*)?,\s*((?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?)",
    re.IGNORECASE,
)
_NAME_PART = re.compile(r"`((?:[^`]|``)+)`|([\w$]+)")
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"", re.DOTALL)


def _strip_leading(statement: str) -> str:
    text = _LEADING_COMMENTS.sub("", statement, count=1)
    # an executable comment in front (/*!40000 ... */): its content is part of the statement
    return _EXECUTABLE_PREFIX.sub("", text, count=1)


_XA = re.compile(
    r"^XA\s+(START|BEGIN|END|PREPARE|COMMIT|ROLLBACK)\s+(.*?)"
    r"(?:\s+(?:JOIN|RESUME|SUSPEND(?:\s+FOR\s+MIGRATE)?|ONE\s+PHASE))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def xa_statement(statement: str) -> tuple[str, str] | None:
    """``(verb, xid)`` of an XA statement (verb upper-case, xid without blanks), else None.

    >>> xa_statement("XA ROLLBACK X'7732',X'',1")
    ('ROLLBACK', "X'7732',X'',1")
    >>> xa_statement("XA COMMIT 'a' ONE PHASE")
    ('COMMIT', "'a'")
    """
    match = _XA.match(_strip_leading(statement))
    if match is None:
        return None
    verb = match.group(1).upper()
    return ("START" if verb == "BEGIN" else verb), re.sub(r"\s+", "", match.group(2))


def statement_kind(statement: str) -> StatementKind:
    """``control`` (transaction control), ``dml`` (changes rows), ``xa_rollback`` (rolls a
    prepared XA transaction back) or ``other`` (DDL, account and server statements).

    >>> statement_kind("XA ROLLBACK 'x1'"), statement_kind("ALTER TABLE t ADD c INT")
    ('xa_rollback', 'other')
    """
    match = _FIRST_WORDS.match(_strip_leading(statement))
    if not match:
        return "other"
    first = match.group(1).upper()
    second = (match.group(2) or "").upper()
    if first == "XA" and second == "ROLLBACK":
        return "xa_rollback"
    if first in _CONTROL:
        return "control"
    if first in _DML:
        return "dml"
    return "other"


def dml_tables(default_database: str, statement: str) -> list[tuple[str, str]] | None:
    """Every ``(database, table)`` a DML statement names after INTO / UPDATE / FROM / JOIN /
    USING (and in table lists), in order; ``None`` when it cannot be told (a stored
    procedure call, a ``DO``, no table found). Names of aliases and subquery tables may come
    along: over-reporting only makes the caller stop more often, never miss a change.

    >>> dml_tables("app", "DELETE FROM `a``b` WHERE x = 'FROM secret'")
    [('app', 'a`b')]
    >>> dml_tables("app", "CALL refresh()") is None
    True
    """
    text = _STRING_LITERAL.sub("''", _strip_leading(statement))
    if statement_kind(text) != "dml" or text[:4].upper() in ("CALL", "DO ", "DO\t"):
        return None
    found: list[tuple[str, str]] = []
    for match in _TABLE_AFTER.finditer(text):
        names = [match.group(1)]
        end = match.end()
        while True:
            more = _TABLE_LIST_ITEM.match(text, end)
            if more is None:
                break
            names.append(more.group(1))
            end = more.end()
        for raw in names:
            parts = [q.replace("``", "`") if q else p for q, p in _NAME_PART.findall(raw)]
            entry = (parts[0], parts[1]) if len(parts) == 2 else (default_database, parts[0])
            if entry not in found:
                found.append(entry)
    return found or None
