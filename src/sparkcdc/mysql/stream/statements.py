"""What a QUERY event's statement does to captured tables, judged without guessing.

In ``binlog_format=ROW`` a server logs data changes as ROWS events and only DDL and
transaction control as QUERY events. A session that sets ``binlog_format=STATEMENT`` or
``MIXED`` makes the server log its INSERT / UPDATE / DELETE as statement text instead, and a
stored function's changes as the ``SELECT f()`` that called it: no row image exists for them,
so a CDC reader cannot know the rows they changed. Such a statement stops the stream unless
it is proven to touch no captured table (:func:`row_effect` says what a proof needs: the
tables it names, the tables it writes, or why no proof is possible; DESIGN.md §3.2).

>>> statement_kind("/* app */ INSERT INTO t VALUES (1)")
'dml'
>>> statement_kind("BEGIN")
'control'
>>> effect = row_effect("app", "UPDATE LOW_PRIORITY `shop`.o JOIN i ON o.id = i.id SET o.n = 1")
>>> effect.writes, effect.unprovable
((('shop', 'o'), ('app', 'i')), None)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import SqlglotError, TokenError

from sparkcdc.mysql.stream.builtin_functions import is_builtin_function

StatementKind = Literal["control", "dml", "xa_rollback", "other"]

# comments (also executable /*!ddddd ... */ and MariaDB /*M! ... */ ones, which hide no DML
# keyword in front of the statement) before the first keyword
_LEADING_COMMENTS = re.compile(
    r"^\s*(?:(?:/\*(?![!M]).*?\*/|#[^\n]*\n|--\s[^\n]*\n)\s*)*", re.DOTALL
)
_EXECUTABLE_PREFIX = re.compile(r"^/\*[!M]!?\d*\s*")
_FIRST_WORDS = re.compile(r"^([A-Za-z]+)(?:\s+([A-Za-z]+))?")
_CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "START", "XA"})
_DML = frozenset(
    {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "CALL", "DO", "SELECT", "VALUES"}
)


# MariaDB's SET STATEMENT var = value [, ...] FOR <statement>: the statement is what runs
_SET_STATEMENT_FOR = re.compile(r"^SET\s+STATEMENT\s.*?\sFOR\s+", re.IGNORECASE | re.DOTALL)


def _strip_leading(statement: str) -> str:
    text = _LEADING_COMMENTS.sub("", statement, count=1)
    # an executable comment in front (/*!40000 ... */): its content is part of the statement
    text = _EXECUTABLE_PREFIX.sub("", text, count=1)
    return _SET_STATEMENT_FOR.sub("", text, count=1)


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
    """``control`` (transaction control), ``dml`` (may change rows: DML, and a ``SELECT`` /
    ``DO`` / ``CALL``, which a server logs only when the routines it calls change rows),
    ``xa_rollback`` (rolls a prepared XA transaction back) or ``other`` (DDL, account and
    server statements).

    >>> statement_kind("XA ROLLBACK 'x1'"), statement_kind("ALTER TABLE t ADD c INT")
    ('xa_rollback', 'other')
    """
    text = _strip_leading(statement)
    if text.startswith("("):  # (SELECT f()) UNION ...
        return "dml"
    match = _FIRST_WORDS.match(text)
    if not match:
        return "other"
    first = match.group(1).upper()
    second = (match.group(2) or "").upper()
    if first == "XA" and second == "ROLLBACK":
        return "xa_rollback"
    if first == "BEGIN" and second == "NOT":  # MariaDB's BEGIN NOT ATOMIC ... END block
        return "dml"
    if first in _CONTROL:
        return "control"
    if first in _DML:
        return "dml"
    return "other"


@dataclass(frozen=True)
class RowEffect:
    """What a statement logged as text may change: rows of the ``writes`` tables, and only
    those, unless a write sets off more (a trigger, a cascading foreign key: the caller asks
    the server) or ``unprovable`` says why nothing bounds it (a stored routine's call, a
    statement sparkcdc cannot read whole). ``tables``: every table it names (read or
    written), as ``(database, table)``."""

    tables: tuple[tuple[str, str], ...]
    writes: tuple[tuple[str, str], ...]
    unprovable: str | None = None


def row_effect(default_database: str, statement: str) -> RowEffect | None:
    """What a statement logged as text may do to rows (None: nothing, e.g. DDL, whose
    tables ``ddl_names`` reads, or a ``SET`` / ``SELECT`` that calls no stored routine).

    >>> row_effect("app", "UPDATE IGNORE t SET v = 1 WHERE id IN (SELECT id FROM u)")
    RowEffect(tables=(('app', 't'), ('app', 'u')), writes=(('app', 't'),), unprovable=None)
    >>> row_effect("app", "SELECT `aux`.`f`()").unprovable
    'it calls aux.f(), a stored function'
    >>> row_effect("app", "SET SESSION sql_mode = 'ANSI'") is None
    True
    """
    text = _strip_leading(statement).strip().rstrip(";")
    words = _FIRST_WORDS.match(text)
    first = words.group(1).upper() if words else ""
    if first == "SET":  # a variable's value from a stored function: SET @x = f()
        return _effect_of_calls(default_database, text, (), ())
    if statement_kind(text) != "dml":
        return None
    if first == "CALL":
        return RowEffect((), (), "it calls a stored procedure")
    if first == "LOAD":
        return RowEffect((), (), "LOAD DATA's rows are not in the binlog")
    if first == "BEGIN":
        return RowEffect((), (), "it is a compound statement (BEGIN NOT ATOMIC)")
    try:
        trees = sqlglot.parse(_for_parser(text), read="mysql")
    except (SqlglotError, RecursionError):  # anything not read whole proves nothing
        return RowEffect((), (), "sparkcdc cannot parse it")
    tree = trees[0] if len(trees) == 1 else None
    if not isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.Query)):
        return RowEffect((), (), "sparkcdc cannot parse it")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    tables = _tables(tree.find_all(exp.Table), default_database, ctes)
    if isinstance(tree, exp.Insert):
        written = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        targets: list[exp.Table] = [written] if isinstance(written, exp.Table) else []
    elif isinstance(tree, exp.Update):
        targets = list(tree.this.find_all(exp.Table))
    elif isinstance(tree, exp.Delete):
        targets = list(tree.args.get("tables") or [tree.this])
    else:  # SELECT, DO: changes rows only through what it calls
        targets = []
    writes = _tables(targets, default_database, ctes)
    if isinstance(tree, (exp.Insert, exp.Update, exp.Delete)) and not writes:
        return RowEffect(tables, writes, "sparkcdc cannot tell which table it writes")
    return _effect_of_calls(default_database, text, tables, writes)


def _tables(
    nodes: Iterable[exp.Expression], default_database: str, ctes: set[str]
) -> tuple[tuple[str, str], ...]:
    found: dict[tuple[str, str], None] = {}
    for node in nodes:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            continue
        if not node.db and (node.name.lower() in ctes or node.name.upper() == "DUAL"):
            continue
        found[(node.db or default_database, node.name)] = None
    return tuple(found)


# words in front of a statement's target that name no table (sqlglot reads them as one)
_MODIFIERS = re.compile(
    r"^(INSERT|REPLACE|UPDATE|DELETE)(?:\s+(?:LOW_PRIORITY|HIGH_PRIORITY|DELAYED|QUICK|IGNORE))+\b",
    re.IGNORECASE,
)


def _for_parser(text: str) -> str:
    """``text`` as sqlglot's MySQL dialect reads it, writing the same tables: modifiers
    dropped, REPLACE as INSERT, DO as SELECT."""
    text = _MODIFIERS.sub(r"\1", text, count=1)
    return _PARSER_VERBS.sub(lambda m: _PARSER_VERB[m.group(0).upper()], text, count=1)


_PARSER_VERBS = re.compile(r"^(?:REPLACE|DO)\b", re.IGNORECASE)
_PARSER_VERB = {"REPLACE": "INSERT", "DO": "SELECT"}


def _effect_of_calls(
    default_database: str,
    text: str,
    tables: tuple[tuple[str, str], ...],
    writes: tuple[tuple[str, str], ...],
) -> RowEffect | None:
    """The effect, made unprovable by a call of anything but a built-in function (found in
    the statement's tokens: a name followed by ``(``); a ``SET`` / ``SELECT`` that calls
    none changes nothing."""
    try:
        tokens = MySQL().tokenize(text)
    except TokenError:
        return RowEffect(tables, writes, "sparkcdc cannot parse it")
    names = {t.lower() for _, t in tables}
    qualified_names = {(d.lower(), t.lower()) for d, t in tables}
    for i, token in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type is not TokenType.L_PAREN:
            continue
        if i >= 2 and tokens[i - 1].token_type is TokenType.DOT:
            database, name = tokens[i - 2].text, token.text
            if (database.lower(), name.lower()) not in qualified_names:  # INTO db.t (a, b)
                why = f"it calls {database}.{name}(), a stored function"
                return RowEffect(tables, writes, why)
        elif (
            token.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            and not is_builtin_function(token.text)
            and token.text.lower() not in names
        ):
            why = f"it calls {token.text}(), not a built-in function"
            return RowEffect(tables, writes, why)
    if not writes:
        return None
    return RowEffect(tables, writes)
