"""The tables a DDL statement names, read without parsing the statement.

Every QUERY event of the binlog is asked which captured tables it changes, so this stays a
few regular expressions (``mysql/ddl/schema_changes.py`` parses a statement fully, with
sqlglot, only once it is known to touch a captured table, and reads names with the same
expressions).

Every table a statement acts on counts, not only the first it names: ``DROP TABLE a, orders``
drops ``orders``, and ``RENAME TABLE orders_new TO orders`` (an online schema change tool's
swap) replaces it.

>>> ddl_tables("app", "DROP TABLE IF EXISTS tmp, `shop`.`orders`")
[('app', 'tmp'), ('shop', 'orders')]
>>> ddl_tables("app", "RENAME TABLE orders TO orders_old, orders_new TO orders")
[('app', 'orders'), ('app', 'orders_old'), ('app', 'orders_new'), ('app', 'orders')]
>>> ddl_tables("app", "ALTER TABLE t RENAME TO u"), ddl_tables("app", "ALTER USER 'x'")
([('app', 't'), ('app', 'u')], [])

Some ALTER TABLE statements add or remove rows themselves, and the binlog holds no row image
of them (:func:`row_changes`):

>>> row_changes("ALTER TABLE logs DROP PARTITION p2023"), row_changes("ALTER TABLE t ADD c INT")
('DROP PARTITION', None)
"""

from __future__ import annotations

import re

from sparkcdc.model.tables import TablePredicate
from sparkcdc.model.text import split_top_level

# comments the server does not run; /*!NNNNN text */ is text the server runs (MySQL and
# MariaDB log DROP TEMPORARY this way)
COMMENT = re.compile(r"/\*(?!!).*?\*/|^\s*--[^\n]*\n|^\s*#[^\n]*\n", re.DOTALL)
EXECUTABLE_COMMENT = re.compile(r"/\*!(?:\d{5,6})?(.*?)\*/", re.DOTALL)
IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{IDENT}(?:\s*\.\s*{IDENT})?"
RENAME_TABLE = re.compile(r"^\s*RENAME\s+TABLES?\s+(.*)$", re.IGNORECASE | re.DOTALL)
RENAME_PAIR = re.compile(rf"\s*({_NAME})\s+TO\s+({_NAME})\s*", re.IGNORECASE)
# ALTER | CREATE | DROP ... TABLE name, TRUNCATE [TABLE] name: the words allowed before it
_TABLE_STATEMENT = re.compile(
    r"^\s*(?P<verb>ALTER|CREATE|DROP|TRUNCATE)\s+"
    r"(?:(?:ONLINE|IGNORE|TEMPORARY|OR\s+REPLACE)\s+)*"
    r"(?P<table>TABLE\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_LEADING_NAME = re.compile(rf"\s*({_NAME})")
# ALTER TABLE t ... RENAME [TO | AS] u (not RENAME COLUMN / INDEX / KEY)
_ALTER_RENAME = re.compile(
    rf"\bRENAME\s+(?!COLUMN\b|INDEX\b|KEY\b)(?:TO\s+|AS\s+)?({_NAME})", re.IGNORECASE
)


# ALTER TABLE clauses that remove, add or swap rows with no row image in the binlog: a
# partition's rows dropped, emptied, swapped with another table's (EXCHANGE), moved out to or
# in from a table (MariaDB's CONVERT PARTITION / CONVERT TABLE), a tablespace's data dropped or
# replaced by a file copy (DISCARD / IMPORT TABLESPACE)
_ROW_CHANGES = re.compile(
    r"\b(?:(?:DROP|TRUNCATE|EXCHANGE)\s+PARTITION|CONVERT\s+(?:PARTITION|TABLE)"
    r"|(?:DISCARD|IMPORT)\s+(?:PARTITION\s+.*?\s+)?TABLESPACE)\b",
    re.IGNORECASE | re.DOTALL,
)
# quoted strings and names, which may spell a clause's words
_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`(?:[^`]|``)*`")


def statement_text(statement: str) -> str:
    """The statement as the server runs it: comments dropped, executable comments opened."""
    return EXECUTABLE_COMMENT.sub(r" \1 ", COMMENT.sub(" ", statement))


def unquote(name: str) -> str:
    name = name.strip()
    if name.startswith("`") and name.endswith("`"):
        return name[1:-1].replace("``", "`")
    return name


def qualified(text: str, default_database: str) -> tuple[str, str]:
    """``db.t`` or ``t`` (in ``default_database``), backticks removed."""
    names = re.findall(IDENT, text)
    if len(names) == 2:
        return unquote(names[0]), unquote(names[1])
    return default_database, unquote(names[0])


def ddl_tables(default_database: str, query: str) -> list[tuple[str, str]]:
    """Every (database, table) a table DDL statement acts on, in statement order; ``[]`` for
    any other statement. ``default_database`` is the QUERY event's current database."""
    text = statement_text(query)
    renamed = RENAME_TABLE.match(text)
    if renamed:
        names = []
        for part in split_top_level(renamed.group(1)):
            pair = RENAME_PAIR.fullmatch(part)
            if pair:
                names += [pair.group(1), pair.group(2)]
        return [qualified(n, default_database) for n in names]
    match = _TABLE_STATEMENT.match(text)
    if not match or (match["table"] is None and match["verb"].upper() != "TRUNCATE"):
        return []
    verb, rest = match["verb"].upper(), match["rest"]
    # DROP TABLE a, b [RESTRICT | CASCADE]: every name; the others act on one table
    parts = split_top_level(rest) if verb == "DROP" else [rest]
    leading = [m for m in (_LEADING_NAME.match(p) for p in parts) if m]
    names = [m.group(1) for m in leading]
    if verb == "ALTER" and leading:
        names += [m.group(1) for m in _ALTER_RENAME.finditer(rest, leading[0].end())]
    return [qualified(n, default_database) for n in names]


_DROP_DATABASE = re.compile(
    rf"^\s*DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?({IDENT})\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def dropped_database(statement: str) -> str | None:
    """The database a ``DROP DATABASE`` / ``DROP SCHEMA`` drops, or None. The server logs
    only the statement: the rows of the tables it held leave with no row image.

    >>> dropped_database("DROP SCHEMA IF EXISTS `shop`"), dropped_database("DROP TABLE a")
    ('shop', None)
    """
    match = _DROP_DATABASE.match(statement_text(statement))
    return unquote(match.group(1)) if match else None


def row_changes(statement: str) -> str | None:
    """The clause of an ALTER TABLE that adds or removes rows without row images (e.g.
    ``DROP PARTITION``), or None."""
    text = statement_text(statement)
    match = _TABLE_STATEMENT.match(text)
    if not match or match["verb"].upper() != "ALTER" or match["table"] is None:
        return None
    clause = _ROW_CHANGES.search(_QUOTED.sub("''", match["rest"]))
    return " ".join(clause.group(0).split()) if clause else None


# the tables an online schema change tool makes beside t: gh-ost's _t_gho (the copy it alters,
# fills with t's rows and swaps in by RENAME), _t_ghc (its changelog) and _t_del (t, swapped
# out); pt-online-schema-change's _t_new and _t_old (more leading underscores when the name is
# taken)
_TOOL_TABLE = re.compile(r"^_+(.+)_(gho|ghc|del|new|old)$", re.DOTALL)
_COPIES = ("gho", "new")


def tool_table_of(table: str) -> tuple[str, bool] | None:
    """``(t, is_copy)`` when ``table`` is, by its name, a table an online schema change tool
    makes beside ``t`` (``is_copy``: the altered copy it swaps in), else None.

    >>> tool_table_of("_orders_gho"), tool_table_of("__orders_old"), tool_table_of("orders_new")
    (('orders', True), ('orders', False), None)
    """
    match = _TOOL_TABLE.match(table)
    return (match.group(1), match.group(2) in _COPIES) if match else None


def shadow_of(table: str) -> str | None:
    """The table ``table`` is an online schema change tool's altered copy of, or None."""
    tool = tool_table_of(table)
    return tool[0] if tool is not None and tool[1] else None


def with_shadows(captured: TablePredicate, database: str, table: str) -> bool:
    """Whether ``table`` is captured, or an online schema change tool's copy of a captured
    table (whose DDL a pipeline applies to that table when the tool swaps the copy in)."""
    if captured(database, table):
        return True
    original = shadow_of(table)
    return original is not None and captured(database, original)
