"""Does a PostgreSQL server have what CDC needs? (issue 59, item 5)

The same shape as the MySQL source's validator (``mysql/admin/validator.py``):
``read_facts`` runs the queries over a plain SQL connection (one that logs in even when the
user may not replicate); the ``check_*`` functions judge the facts and are pure; every issue
carries the statement that fixes it.

    >>> issues = check_settings(ServerSettings(150004, "15.4", "replica", 10, 2, 10, 1, False))
    >>> [(i.setting, i.severity) for i in issues]
    [('wal_level', 'error')]
    >>> print(issues[0].fix)
    ALTER SYSTEM SET wal_level = 'logical';  -- then restart the server
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from sparkcdc.errors import SourceError
from sparkcdc.model.validation import ValidationIssue
from sparkcdc.postgres.replication import PostgresEndpoint, quote_identifier, quote_literal
from sparkcdc.postgres.session import sql_connection

log = logging.getLogger(__name__)

MIN_VERSION = 100000  # pgoutput and publications: PostgreSQL 10
STREAMING_VERSION = 140000  # large transactions streamed while in progress: PostgreSQL 14
ROW_FILTER_VERSION = 150000  # publications of some rows (WHERE) or columns: PostgreSQL 15
OPERATIONS = ("insert", "update", "delete", "truncate")
# Roles that give REPLICATION where the superuser is the provider's (Amazon RDS, Aurora)
REPLICATION_ROLES = ("rds_replication",)


@dataclass(frozen=True)
class ServerSettings:
    """The server's version and what logical decoding needs of it."""

    version_num: int  # server_version_num, e.g. 150004
    version: str
    wal_level: str
    max_replication_slots: int
    slots_in_use: int
    max_wal_senders: int
    senders_in_use: int
    slot_exists: bool  # the source's slot is there already: it needs no free one


@dataclass(frozen=True)
class UserFacts:
    name: str
    superuser: bool
    replication: bool  # the REPLICATION attribute
    replication_roles: tuple[str, ...]  # the REPLICATION_ROLES the user is a member of


@dataclass(frozen=True)
class PublicationFacts:
    name: str
    operations: tuple[str, ...]  # of OPERATIONS, those it publishes
    tables: frozenset[tuple[str, str]]  # (schema, table) it publishes
    # the tables it publishes only some rows (WHERE) or columns of (PostgreSQL 15+)
    row_filtered: frozenset[tuple[str, str]] = frozenset()
    column_listed: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class TableFacts:
    schema: str
    name: str
    exists: bool
    replica_identity: str = ""  # pg_class.relreplident: d(efault), n(othing), f(ull), i(ndex)
    has_primary_key: bool = False
    owned: bool = False  # the user may add it to a publication (owns it)

    @property
    def quoted(self) -> str:
        return f"{quote_identifier(self.schema)}.{quote_identifier(self.name)}"


@dataclass(frozen=True)
class SourceFacts:
    """What the validator looks at, read in one go by ``read_facts``."""

    settings: ServerSettings
    user: UserFacts
    publication_name: str
    publication: PublicationFacts | None  # None: there is none of that name
    tables: tuple[TableFacts, ...]


# -------------------------------------------------------------------- pure judgments


def _restart(name: str, value: object) -> str:
    return f"ALTER SYSTEM SET {name} = {quote_literal(str(value))};  -- then restart the server"


def check_settings(s: ServerSettings) -> list[ValidationIssue]:
    """Version >= 10 (14 to stream large transactions), wal_level = logical, a free
    replication slot (unless the source's exists) and a free WAL sender."""
    issues = []
    if s.version_num < MIN_VERSION:
        issues.append(
            ValidationIssue(
                "server_version",
                s.version,
                "PostgreSQL >= 10 (pgoutput, publications)",
                "upgrade the server",
                "error",
            )
        )
    elif s.version_num < STREAMING_VERSION:
        issues.append(
            ValidationIssue(
                "server_version",
                s.version,
                "PostgreSQL >= 14 to stream large transactions while they run",
                "upgrade the server; until then a large transaction is decoded whole, at its "
                "commit, with the server spilling it to disk",
                "warning",
            )
        )
    if s.wal_level != "logical":
        issues.append(
            ValidationIssue(
                "wal_level", s.wal_level, "logical", _restart("wal_level", "logical"), "error"
            )
        )
    if not s.slot_exists and s.slots_in_use >= s.max_replication_slots:
        issues.append(
            ValidationIssue(
                "max_replication_slots",
                f"{s.max_replication_slots} ({s.slots_in_use} in use)",
                "a free replication slot for the source",
                _restart("max_replication_slots", s.slots_in_use + 1)
                + "; or drop a slot nothing reads (SELECT slot_name, active FROM "
                "pg_replication_slots; SELECT pg_drop_replication_slot('name'))",
                "error",
            )
        )
    if s.senders_in_use >= s.max_wal_senders:
        issues.append(
            ValidationIssue(
                "max_wal_senders",
                f"{s.max_wal_senders} ({s.senders_in_use} in use)",
                "a free WAL sender for the source's replication connection",
                _restart("max_wal_senders", s.senders_in_use + 1),
                "error",
            )
        )
    return issues


def check_user(user: UserFacts) -> list[ValidationIssue]:
    """The user may open a replication connection: REPLICATION, superuser, or a provider's
    replication role."""
    if user.superuser or user.replication or user.replication_roles:
        return []
    return [
        ValidationIssue(
            f"user {user.name}",
            "no REPLICATION attribute",
            "REPLICATION (or membership in rds_replication on Amazon RDS)",
            f"ALTER ROLE {quote_identifier(user.name)} REPLICATION;  -- as a superuser; on "
            f"RDS: GRANT rds_replication TO {quote_identifier(user.name)}",
            "error",
        )
    ]


def check_publication(
    name: str, publication: PublicationFacts | None, tables: Sequence[TableFacts]
) -> list[ValidationIssue]:
    """The publication publishes every captured table, all its rows and columns, and every
    operation; a missing one is an error unless the user owns the tables: then a note
    that sparkcdc will create it."""
    present = [table for table in tables if table.exists]
    listed = ", ".join(table.quoted for table in present)
    quoted = quote_identifier(name)
    if publication is None:
        create = f"CREATE PUBLICATION {quoted} FOR TABLE {listed}"
        if all(table.owned for table in present):  # sparkcdc creates it: nothing to fix
            return [
                ValidationIssue(
                    f"publication {name}",
                    "none yet",
                    "a publication of the captured tables",
                    f"none needed: sparkcdc will create it when the stream starts ({create}; "
                    "the user owns the tables)",
                    "note",
                )
            ]
        return [
            ValidationIssue(
                f"publication {name}",
                "none",
                "a publication of the captured tables",
                f"{create};  -- as a table owner: only the owner can publish a table",
                "error",
            )
        ]
    issues = []
    missing_operations = [op for op in OPERATIONS if op not in publication.operations]
    if missing_operations:
        issues.append(
            ValidationIssue(
                f"publication {name}",
                f"publishes {', '.join(publication.operations) or 'nothing'}",
                "insert, update, delete, truncate",
                f"ALTER PUBLICATION {quoted} SET (publish = 'insert, update, delete, truncate');",
                "error",
            )
        )
    unpublished = [t for t in present if (t.schema, t.name) not in publication.tables]
    if unpublished:
        issues.append(
            ValidationIssue(
                f"publication {name}",
                f"does not publish {', '.join(t.quoted for t in unpublished)}",
                "every captured table published",
                f"ALTER PUBLICATION {quoted} ADD TABLE {', '.join(t.quoted for t in unpublished)};",
                "error",
            )
        )
    for narrowed, what in (
        (publication.row_filtered, "only the rows of a WHERE clause"),
        (publication.column_listed, "only some columns"),
    ):
        tables_narrowed = [t for t in present if (t.schema, t.name) in narrowed]
        if tables_narrowed:
            names = ", ".join(t.quoted for t in tables_narrowed)
            issues.append(
                ValidationIssue(
                    f"publication {name}",
                    f"publishes {what} of {names}",
                    "every row and column of the captured tables",
                    f"ALTER PUBLICATION {quoted} DROP TABLE {names}; "
                    f"ALTER PUBLICATION {quoted} ADD TABLE {names};",
                    "error",
                )
            )
    return issues


def check_tables(tables: Sequence[TableFacts]) -> list[ValidationIssue]:
    """Each captured table exists and has a replica identity whose old images are exact:
    FULL; DEFAULT with a primary key (or a unique index) is accepted with the TOAST caveat;
    NOTHING, or DEFAULT without a primary key, is refused."""
    issues = []
    for table in tables:
        where = f"table {table.schema}.{table.name}"
        full = f"ALTER TABLE {table.quoted} REPLICA IDENTITY FULL;"
        if not table.exists:
            issues.append(
                ValidationIssue(
                    where,
                    "no such table",
                    "a table to capture",
                    "check table-name and schema-name (names are case-sensitive when quoted)",
                    "error",
                )
            )
        elif table.replica_identity == "f":
            continue
        elif table.replica_identity == "n" or (
            table.replica_identity == "d" and not table.has_primary_key
        ):
            found = (
                "REPLICA IDENTITY NOTHING"
                if table.replica_identity == "n"
                else "REPLICA IDENTITY DEFAULT without a primary key"
            )
            issues.append(
                ValidationIssue(
                    where,
                    f"{found}: its updates and deletes carry no old key",
                    "REPLICA IDENTITY FULL, or DEFAULT with a primary key",
                    f"{full}  -- or add a primary key",
                    "error",
                )
            )
        else:
            kind = "DEFAULT (the primary key)" if table.replica_identity == "d" else "USING INDEX"
            issues.append(
                ValidationIssue(
                    where,
                    f"REPLICA IDENTITY {kind}",
                    "REPLICA IDENTITY FULL for every update's whole row",
                    f"{full}  -- else an update that leaves a TOASTed value (a large text, "
                    "bytea, jsonb) unchanged does not carry it: sparkcdc takes it from the "
                    "row's last image or stops, never writes a placeholder",
                    "warning",
                )
            )
    return issues


def judge(facts: SourceFacts) -> list[ValidationIssue]:
    """All issues of a source (pure)."""
    return [
        *check_settings(facts.settings),
        *check_user(facts.user),
        *check_publication(facts.publication_name, facts.publication, facts.tables),
        *check_tables(facts.tables),
    ]


# ------------------------------------------------------------------------------ queries


def _one(conn: psycopg.Connection[Any], query: str, *params: Any) -> tuple[Any, ...]:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return tuple(row)


def read_facts(
    conn: psycopg.Connection[Any],
    slot: str,
    publication: str,
    tables: Sequence[tuple[str, str]],
) -> SourceFacts:
    """Everything the checks need, from one SQL connection to the source's database."""
    settings = ServerSettings(
        *_one(
            conn,
            "SELECT current_setting('server_version_num')::int, current_setting('server_version'),"
            " current_setting('wal_level'), current_setting('max_replication_slots')::int,"
            " (SELECT count(*) FROM pg_replication_slots)::int,"
            " current_setting('max_wal_senders')::int,"
            " (SELECT count(*) FROM pg_stat_replication)::int,"
            " EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = %s)",
            slot,
        )
    )
    name, superuser, replication = _one(
        conn, "SELECT rolname, rolsuper, rolreplication FROM pg_roles WHERE rolname = current_user"
    )
    roles = tuple(
        str(row[0])
        for row in conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) "
            "AND pg_has_role(current_user, oid, 'MEMBER')",
            [list(REPLICATION_ROLES)],
        )
    )
    user = UserFacts(name, superuser, replication, roles)
    found = conn.execute(
        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication "
        "WHERE pubname = %s",
        [publication],
    ).fetchone()
    publication_facts = None
    if found is not None:
        published = conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
            [publication],
        ).fetchall()
        narrowed: list[tuple[str, str, bool, bool]] = []
        if settings.version_num >= ROW_FILTER_VERSION:
            narrowed = conn.execute(
                "SELECT n.nspname, c.relname, r.prqual IS NOT NULL, r.prattrs IS NOT NULL "
                "FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid "
                "JOIN pg_class c ON c.oid = r.prrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.pubname = %s",
                [publication],
            ).fetchall()
        publication_facts = PublicationFacts(
            publication,
            tuple(op for op, flag in zip(OPERATIONS, found, strict=True) if flag),
            frozenset((str(s), str(t)) for s, t in published),
            frozenset((str(s), str(t)) for s, t, rows, _ in narrowed if rows),
            frozenset((str(s), str(t)) for s, t, _, columns in narrowed if columns),
        )
    return SourceFacts(
        settings,
        user,
        publication,
        publication_facts,
        tuple(_table_facts(conn, schema, table) for schema, table in tables),
    )


def _table_facts(conn: psycopg.Connection[Any], schema: str, table: str) -> TableFacts:
    row = conn.execute(
        "SELECT c.relreplident, EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid "
        "AND i.indisprimary), pg_has_role(current_user, c.relowner, 'USAGE') "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
        [schema, table],
    ).fetchone()
    if row is None:
        return TableFacts(schema, table, exists=False)
    identity, primary_key, owned = row
    return TableFacts(schema, table, True, str(identity), bool(primary_key), bool(owned))


def validate_source(
    endpoint: PostgresEndpoint, slot: str, publication: str, tables: Sequence[tuple[str, str]]
) -> list[ValidationIssue]:
    """Every issue of the source (empty when it is ready for CDC).

    Raises ``SourceConnectionError`` only when the server cannot be reached or logged in to.

    >>> validate_source(endpoint, "sparkcdc_slot", "sparkcdc_pub",  # doctest: +SKIP
    ...                 [("public", "orders")])
    []
    """
    with sql_connection(endpoint) as conn:
        return judge(read_facts(conn, slot, publication, tables))


def _listed(issues: list[ValidationIssue]) -> str:
    return "\n".join(f"  - {issue}" for issue in issues)


def check_source(
    endpoint: PostgresEndpoint, slot: str, publication: str, tables: Sequence[tuple[str, str]]
) -> None:
    """Raise ``SourceError`` listing every error-severity issue; log the warnings, and
    the notes of what sparkcdc will do as information."""
    issues = validate_source(endpoint, slot, publication, tables)
    for issue in issues:
        if issue.severity == "warning":
            log.warning("source %s: %s", endpoint.where(), issue)
        elif issue.severity == "note":
            log.info("source %s: %s", endpoint.where(), issue)
    errors = [i for i in issues if i.severity == "error"]
    if errors:
        raise SourceError(
            f"the PostgreSQL source {endpoint.where()} is not ready for CDC ({len(errors)} "
            f"problem{'s' if len(errors) > 1 else ''}):\n{_listed(errors)}"
        )
