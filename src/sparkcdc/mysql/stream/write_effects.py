"""Whether a write to a table changes that table alone, asked of the server.

A statement logged as text (``mysql/stream/statements.py``) on a table the stream does not capture
is harmless only when its writes stop at that table. They do not when the table has a
trigger (which may write any table), is the parent of a foreign key that cascades (``ON
DELETE CASCADE``, ``SET NULL``, ...: the child's rows change), is a view (its base tables
change) or a MERGE table (its members change); none of these leaves a row image in the
binlog of a statement-logged session. DESIGN.md §3.2.
"""

from __future__ import annotations

from typing import Any

from sparkcdc.mysql.admin.validator import parse_grants
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection

_TABLE = (
    "SELECT TABLE_TYPE, ENGINE FROM information_schema.TABLES "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
)
_TRIGGER = (
    "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS "
    "WHERE EVENT_OBJECT_SCHEMA = %s AND EVENT_OBJECT_TABLE = %s LIMIT 1"
)
_CASCADE = (
    "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, DELETE_RULE, UPDATE_RULE "
    "FROM information_schema.REFERENTIAL_CONSTRAINTS "
    "WHERE UNIQUE_CONSTRAINT_SCHEMA = %s AND REFERENCED_TABLE_NAME = %s "
    "AND (DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION') "
    "OR UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION')) LIMIT 1"
)
_MERGE_ENGINES = frozenset({"MRG_MYISAM", "MERGE"})
_VIEW = (
    "it is a view: a write to it changes its base tables, and its definition may call "
    "stored functions"
)


class WriteEffects:
    """``effects(database, table, written)``: None when the statement's use of the table
    changes nothing else (``written``: it writes the table; else it only reads it, which
    sets nothing off unless the table is a view, whose definition may call stored
    functions), else why that cannot be shown. Asks the server once per table, on a
    connection opened at the first question (most reads never ask); :meth:`close` closes it.

    >>> effects = WriteEffects(ConnectionSettings("127.0.0.1", 23306, "cdc", "..."))
    >>> effects("aux", "src", True)  # doctest: +SKIP
    'it has a trigger (src_copy), which may write any table'
    """

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self._conn: Any = None
        self._grants: dict[str, set[str]] | None = None
        self._known: dict[tuple[str, str], str | None] = {}

    def __call__(self, database: str, table: str, written: bool) -> str | None:
        key = (database, table)
        if key not in self._known:
            if self._conn is None:
                self._conn = sql_connection(self.settings)
            with self._conn.cursor() as cur:
                self._known[key] = self._ask(cur, database, table)
        found = self._known[key]
        return found if written or found == _VIEW else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _ask(self, cur: Any, database: str, table: str) -> str | None:
        cur.execute(_TABLE, (database, table))
        row = cur.fetchone()
        if row is None:
            if self._holds(cur, database, table, {"SELECT", "ALL PRIVILEGES"}):
                # a table this user may see and does not: another session's temporary table
                # (which has no trigger, foreign key or view definition), or one dropped
                # since the statement ran (DESIGN.md §3.2: the server is asked when it is read)
                return None
            return (
                "the CDC user cannot see it in information_schema.TABLES (it holds no "
                "privilege on it), so its triggers and foreign keys are unknown"
            )
        if str(row[0]).upper() == "VIEW":
            return _VIEW
        if str(row[1] or "").upper() in _MERGE_ENGINES:
            return "it is a MERGE table: writes to it change its member tables"
        cur.execute(_TRIGGER, (database, table))
        trigger = cur.fetchone()
        if trigger is not None:
            return f"it has a trigger ({trigger[0]}), which may write any table"
        if not self._holds(cur, database, table, {"TRIGGER", "ALL PRIVILEGES"}):
            return (
                "the CDC user cannot see its triggers: information_schema.TRIGGERS shows only "
                "the triggers of tables it holds the TRIGGER privilege on (GRANT TRIGGER ON "
                f"`{database}`.* TO the CDC user lets sparkcdc prove such statements harmless)"
            )
        cur.execute(_CASCADE, (database, table))
        child = cur.fetchone()
        if child is not None:
            return (
                f"a foreign key of {child[0]}.{child[1]} refers to it with ON DELETE "
                f"{child[2]} / ON UPDATE {child[3]}: writes to it change that table's rows"
            )
        return None

    def _holds(self, cur: Any, database: str, table: str, wanted: set[str]) -> bool:
        """Whether the user holds one of ``wanted`` on the table (globally, on its database
        or on it); a grant on a database pattern (``app\\_%``) does not count."""
        if self._grants is None:
            cur.execute("SHOW GRANTS")  # the user's and its current role's
            self._grants = parse_grants([str(r[0]) for r in cur.fetchall()])
        return any(
            self._grants.get(target, set()) & wanted
            for target in ("*.*", f"{database}.*", f"{database}.{table}")
        )
