"""Does the source server have what CDC needs? Version, binlog settings, privileges.

Structure: ``read_source_facts`` runs the queries; the ``check_*`` functions judge the
facts and are pure (unit-tested with made-up variables and grants). Every issue carries
the exact statement that fixes it.

    >>> issues = check_binlog_settings({"log_bin": "ON", "binlog_format": "MIXED",
    ...     "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}, "mariadb")
    >>> [(i.setting, i.severity) for i in issues]
    [('binlog_format', 'error')]
    >>> print(issues[0].fix)
    SET GLOBAL binlog_format = 'ROW';  -- and binlog_format = ROW under [mysqld] in my.cnf
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import pymysql

from sparkcdc.errors import SourceError
from sparkcdc.model.validation import ValidationIssue
from sparkcdc.mysql.admin.server import ServerInfo, binlog_filters, server_info, variables
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.replication import BinlogClient

log = logging.getLogger(__name__)

MIN_MYSQL = (5, 7, 0)
MIN_MARIADB = (10, 4, 0)
# MariaDB 10.5.2 split REPLICATION CLIENT into BINLOG MONITOR (SHOW BINARY LOGS / MASTER
# STATUS) and others; SHOW GRANTS then prints the new names.
MARIADB_BINLOG_MONITOR = (10, 5, 2)

BINLOG_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata")
# whether a replica writes what it applies to its own binlog (MySQL 8.0.26 renamed it)
REPLICA_LOGGING_VARIABLES = ("log_slave_updates", "log_replica_updates")


@dataclass(frozen=True)
class SourceFacts:
    """What the validator looks at, read in one go by ``read_source_facts``."""

    info: ServerInfo
    variables: dict[str, str]
    grants: tuple[str, ...]
    current_user: str  # user@host as CURRENT_USER() reports it
    # replication threads applying a primary's changes here (None: the server would not say)
    replicating: int | None = None


# -------------------------------------------------------------------- pure judgments


def check_version(info: ServerInfo) -> list[ValidationIssue]:
    """MySQL >= 5.7 or MariaDB >= 10.4.

    >>> check_version(ServerInfo("mysql", (5, 6, 51), "5.6.51", 1, False))[0].expected
    'MySQL >= 5.7'
    """
    minimum, name = (MIN_MARIADB, "MariaDB") if info.is_mariadb else (MIN_MYSQL, "MySQL")
    if info.version >= minimum:
        return []
    wanted = f"{name} >= {minimum[0]}.{minimum[1]}"
    return [
        ValidationIssue(
            "server version",
            info.version_text,
            wanted,
            f"upgrade the server to {wanted} (older servers lack the row events and "
            "metadata sparkcdc decodes)",
            "error",
        )
    ]


def _set_global(name: str, value: str) -> str:
    return f"SET GLOBAL {name} = '{value}';  -- and {name} = {value} under [mysqld] in my.cnf"


def check_binlog_settings(
    values: dict[str, str], flavor: Literal["mariadb", "mysql"]
) -> list[ValidationIssue]:
    """log_bin=ON, binlog_format=ROW, binlog_row_image=FULL (errors) and
    binlog_row_metadata=FULL (warning).

    >>> check_binlog_settings({"log_bin": "ON", "binlog_format": "ROW",
    ...     "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}, "mysql")
    []
    """
    issues: list[ValidationIssue] = []
    log_bin = values.get("log_bin", "OFF").upper()
    if log_bin not in ("ON", "1"):
        issues.append(
            ValidationIssue(
                "log_bin",
                values.get("log_bin", "(not set)"),
                "ON",
                "log-bin = mysql-bin and server-id = 1 under [mysqld] in my.cnf, then restart "
                "the server (log_bin cannot be changed at runtime)",
                "error",
            )
        )
    fmt = values.get("binlog_format", "(not set)")
    if fmt.upper() != "ROW":
        issues.append(
            ValidationIssue(
                "binlog_format", fmt, "ROW", _set_global("binlog_format", "ROW"), "error"
            )
        )
    image = values.get("binlog_row_image", "FULL")  # FULL is the default where it is absent
    if image.upper() != "FULL":
        issues.append(
            ValidationIssue(
                "binlog_row_image", image, "FULL", _set_global("binlog_row_image", "FULL"), "error"
            )
        )
    metadata = values.get("binlog_row_metadata")
    if metadata is None or metadata.upper() != "FULL":
        server_has_it = metadata is not None
        fix = (
            _set_global("binlog_row_metadata", "FULL")
            if server_has_it
            else (
                "upgrade to MariaDB >= 10.5 to get binlog_row_metadata"
                if flavor == "mariadb"
                else "upgrade to MySQL >= 8.0.1 to get binlog_row_metadata"
            )
        )
        issues.append(
            ValidationIssue(
                "binlog_row_metadata",
                metadata or "(not supported by this server)",
                "FULL (recommended)",
                fix + ". Without it, row events carry no column names (nor, below MINIMAL, "
                "signedness, character sets or ENUM/SET labels): sparkcdc decodes them with "
                "the schema it read from the server, checked against each row event, and "
                "restarts the query at each DDL on a captured table to read the new schema; "
                "give the query a state.location so a DDL made while it is stopped can be "
                "followed, and expect it to stop (never to guess) when a table changed twice "
                "while the stream was behind",
                "warning",
            )
        )
    return issues


_GRANT_RE = re.compile(r"^GRANT\s+(?P<privs>.+?)\s+ON\s+(?P<target>\S+)\s+TO\s", re.IGNORECASE)
_ANY_SELECT_SCOPE = "any"


def parse_grants(lines: list[str] | tuple[str, ...]) -> dict[str, set[str]]:
    """Privileges by target (``*.*``, ``db.*``, ...) from SHOW GRANTS lines.

    Column-level grants (``SELECT (a, b)``) count as the privilege without columns.
    ``ALL`` is normalised to ``ALL PRIVILEGES``.

    >>> grants = parse_grants(["GRANT SELECT, REPLICATION SLAVE ON *.* TO `u`@`%`"])
    >>> {target: sorted(privileges) for target, privileges in grants.items()}
    {'*.*': ['REPLICATION SLAVE', 'SELECT']}
    """
    by_target: dict[str, set[str]] = {}
    for line in lines:
        match = _GRANT_RE.match(line.strip())
        if not match or match.group("privs").strip().upper() == "PROXY":
            continue  # role grants (no ON) and GRANT PROXY say nothing about privileges
        target = match.group("target").replace("`", "")
        privs = re.sub(r"\([^)]*\)", "", match.group("privs"))  # drop column lists
        for priv in privs.split(","):
            name = " ".join(priv.split()).upper()
            if name == "ALL":
                name = "ALL PRIVILEGES"
            if name:
                by_target.setdefault(target, set()).add(name)
    return by_target


def required_privileges(info: ServerInfo) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(name to grant, names that satisfy it) per needed global privilege, as ``info``'s
    server calls them."""
    client: tuple[str, tuple[str, ...]]
    if info.is_mariadb and info.version >= MARIADB_BINLOG_MONITOR:
        client = ("BINLOG MONITOR", ("BINLOG MONITOR", "REPLICATION CLIENT"))
    else:
        client = ("REPLICATION CLIENT", ("REPLICATION CLIENT",))
    return (
        ("REPLICATION SLAVE", ("REPLICATION SLAVE", "REPLICATION REPLICA")),
        client,
        ("SELECT", ("SELECT",)),
    )


def grantee(current_user: str) -> str:
    """``'user'@'host'`` from CURRENT_USER()'s ``user@host``.

    >>> grantee("cdc@127.0.0.1")
    "'cdc'@'127.0.0.1'"
    """
    user, _, host = current_user.rpartition("@")
    if not user:
        user, host = current_user, "%"
    return f"'{user}'@'{host}'"


def check_privileges(
    grants: list[str] | tuple[str, ...], info: ServerInfo, current_user: str
) -> list[ValidationIssue]:
    """REPLICATION SLAVE + REPLICATION CLIENT (MariaDB >= 10.5.2: BINLOG MONITOR) on ``*.*``
    and SELECT (on ``*.*``; SELECT only on some databases is a warning).
    ``ALL PRIVILEGES ON *.*`` covers everything.

    >>> info = ServerInfo("mysql", (8, 0, 36), "8.0.36", 1, True)
    >>> [i.fix for i in check_privileges(["GRANT USAGE ON *.* TO `u`@`%`"], info, "u@%")]
    ["GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'u'@'%';"]
    """
    by_target = parse_grants(grants)
    global_privs = by_target.get("*.*", set())
    if "ALL PRIVILEGES" in global_privs:
        return []
    needed = required_privileges(info)
    missing = [name for name, accepted in needed if not global_privs.intersection(accepted)]
    issues: list[ValidationIssue] = []
    select_elsewhere = sorted(
        t for t, privs in by_target.items() if t != "*.*" and privs & {"SELECT", "ALL PRIVILEGES"}
    )
    if "SELECT" in missing and select_elsewhere:
        missing.remove("SELECT")
        issues.append(
            ValidationIssue(
                "privileges",
                f"SELECT only on {', '.join(select_elsewhere)}",
                "SELECT on *.* (or on every captured database)",
                f"GRANT SELECT ON *.* TO {grantee(current_user)};  -- or per captured "
                "database: GRANT SELECT ON `db`.* TO ...",
                "warning",
            )
        )
    if missing:
        found = ", ".join(sorted(global_privs)) or "USAGE"
        issues.insert(
            0,
            ValidationIssue(
                "privileges",
                f"{found} on *.*",
                ", ".join(name for name, _ in needed) + " on *.*",
                f"GRANT {', '.join(missing)} ON *.* TO {grantee(current_user)};",
                "error",
            ),
        )
    return issues


def check_replica_logging(values: dict[str, str], replicating: int | None) -> list[ValidationIssue]:
    """A replica that applies a primary's changes must write them to its own binlog
    (``log_slave_updates``): without it, every change that reaches it by replication is
    missing from the binlog sparkcdc reads, and nothing else would ever say so.

    >>> check_replica_logging({"log_slave_updates": "OFF"}, 1)[0].setting
    'log_slave_updates'
    >>> check_replica_logging({"log_slave_updates": "OFF"}, 0)
    []
    """
    if not replicating:
        return []
    found = {k: v for k, v in values.items() if k in REPLICA_LOGGING_VARIABLES}
    if not found or any(v.upper() in ("ON", "1") for v in found.values()):
        return []
    name = "log_replica_updates" if "log_replica_updates" in found else "log_slave_updates"
    return [
        ValidationIssue(
            name,
            f"{found[name]} on a replica ({replicating} replication thread(s) applying a "
            "primary's changes)",
            "ON",
            f"{name} = ON under [mysqld] in my.cnf, then restart the server ({name} cannot "
            "be changed at runtime), or capture from the primary: the changes this server "
            "replicates are not written to its binlog, so they would never reach the stream",
            "error",
        )
    ]


def check_binlog_filters(
    do_db: tuple[str, ...], ignore_db: tuple[str, ...], databases: Iterable[str]
) -> list[ValidationIssue]:
    """The captured ``databases`` the server's binlog filters leave out (``binlog-do-db``,
    ``binlog-ignore-db``): their row changes are never written to the binlog. In row format
    the filters judge the database of the changed table (a statement's, such as a DDL,
    the session's default database).

    >>> [i.found for i in check_binlog_filters((), ("audit",), ["app", "audit"])]
    ['binlog-ignore-db=audit']
    >>> check_binlog_filters(("app",), (), ["app"])
    []
    """
    issues: list[ValidationIssue] = []
    for database in sorted(set(databases)):
        if do_db:  # where there are do-db rules, the server consults no ignore-db rule
            if database in do_db:
                continue
            found = f"binlog-do-db={','.join(do_db)}"
        elif database in ignore_db:
            found = f"binlog-ignore-db={','.join(ignore_db)}"
        else:
            continue
        issues.append(
            ValidationIssue(
                f"binlog filter of database {database}",
                found,
                f"{database} written to the binlog",
                f"remove the filter that leaves {database} out from [mysqld] in my.cnf "
                "(binlog-do-db / binlog-ignore-db) and restart the server, or stop capturing "
                f"{database}: its changes are not written to the binlog, so after the "
                "snapshot none would reach the stream",
                "error",
            )
        )
    return issues


def judge(facts: SourceFacts) -> list[ValidationIssue]:
    """All issues of a source (pure)."""
    return [
        *check_version(facts.info),
        *check_binlog_settings(facts.variables, facts.info.flavor),
        *check_replica_logging(facts.variables, facts.replicating),
        *check_privileges(facts.grants, facts.info, facts.current_user),
    ]


# ------------------------------------------------------------------------------ queries


def read_source_facts(conn: Any) -> SourceFacts:
    """Everything the checks need, from one SQL connection."""
    info = server_info(conn)
    values = variables(conn, *BINLOG_VARIABLES, *REPLICA_LOGGING_VARIABLES)
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        row = cur.fetchone()
        current_user = str(row[0]) if row else ""
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        grants = tuple(str(r[0]) for r in cur.fetchall())
    return SourceFacts(info, values, grants, current_user, replication_threads(conn, info))


def replication_threads(conn: Any, info: ServerInfo) -> int | None:
    """How many replication threads apply a primary's changes on this server: MariaDB's
    ``Slaves_running`` status (any user may read it); on MySQL the configured channels of
    ``SHOW REPLICA STATUS`` (REPLICATION CLIENT, which CDC needs anyway). None when the
    server does not say."""
    try:
        with conn.cursor() as cur:
            if info.is_mariadb:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Slaves_running'")
                row = cur.fetchone()
                return int(row[1]) if row else None
            cur.execute(
                "SHOW REPLICA STATUS" if info.version >= (8, 0, 22) else "SHOW SLAVE STATUS"
            )
            return len(cur.fetchall())
    except pymysql.MySQLError as exc:
        log.debug("the source does not say whether it replicates: %s", exc)
        return None


def _listed(issues: list[ValidationIssue]) -> str:
    return "\n".join(f"  - {issue}" for issue in issues)


def check_captured_databases(conn: Any, info: ServerInfo, databases: Iterable[str]) -> None:
    """Raise ``SourceError`` when the binlog filters leave out a captured database."""
    issues = check_binlog_filters(*binlog_filters(conn, info), databases)
    if issues:
        raise SourceError(f"captured tables' changes are not in the binlog:\n{_listed(issues)}")


def session_tls(conn: Any) -> str:
    """The server's word on this session's TLS: ``TLSv1.3 TLS_AES_256_GCM_SHA384``, or ''."""
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')")
        found = {str(name).lower(): str(value or "") for name, value in cur.fetchall()}
    cipher = found.get("ssl_cipher", "")
    return f"{found.get('ssl_version', '')} {cipher}".strip() if cipher else ""


def describe_tls(settings: ConnectionSettings, state: str) -> str:
    """How one connection is protected, for ``validate``'s report.

    >>> describe_tls(ConnectionSettings("h"), "")
    'plain TCP, not encrypted (ssl-mode preferred)'
    """
    tls = settings.tls
    if not state:
        return f"plain TCP, not encrypted (ssl-mode {tls.mode})"
    if tls.verifies_identity:
        check = "certificate and host name verified"
    elif tls.verifies_certificate:
        check = f"certificate verified against {tls.ca or 'the system CAs'}"
    else:
        check = "certificate NOT verified: set ssl-ca to check it"
    return f"TLS {state} (ssl-mode {tls.effective_mode}, {check})"


def tls_report(settings: ConnectionSettings) -> list[tuple[str, str]]:
    """(connection, how it is protected) for each kind of connection sparkcdc makes to the
    source: SQL (schemas, snapshot chunks) and replication. Raises ``SourceError`` when
    one cannot log in (e.g. TLS refused or required)."""
    with sql_connection(settings) as conn:
        sql_state = session_tls(conn)
    # the replication login only: no replica is registered, the id is never announced
    replication_state = BinlogClient(settings, server_id=1).session_tls()
    return [
        ("SQL connections", describe_tls(settings, sql_state)),
        ("replication connection", describe_tls(settings, replication_state)),
    ]


def validate_source(settings: ConnectionSettings) -> list[ValidationIssue]:
    """Every issue of the source (empty when it is ready for CDC).

    Raises ``SourceError`` only when the server cannot be reached or logged in to.

    >>> validate_source(ConnectionSettings("127.0.0.1", 23306, "cdc", "..."))  # doctest: +SKIP
    []
    """
    with sql_connection(settings) as conn:
        facts = read_source_facts(conn)
    return judge(facts)


def check_source(settings: ConnectionSettings) -> None:
    """Raise ``SourceError`` listing every error-severity issue; log the warnings.

    >>> check_source(ConnectionSettings("127.0.0.1", 23306, "cdc", "..."))  # doctest: +SKIP
    """
    issues = validate_source(settings)
    for issue in issues:
        if issue.severity == "warning":
            log.warning("source %s: %s", settings.endpoint, issue)
    errors = [i for i in issues if i.severity == "error"]
    if errors:
        raise SourceError(
            f"the source {settings.endpoint} is not ready for CDC ({len(errors)} problem"
            f"{'s' if len(errors) > 1 else ''}):\n{_listed(errors)}"
        )
