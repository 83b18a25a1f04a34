"""The PostgreSQL validator against the private server, each failing condition made real:
replica identities altered, a user without REPLICATION, publications missing, partial or
publishing only some operations (issue 59, item 5). wal_level, slots and WAL senders are
judged from parsed facts in tests/unit/postgres/test_validator.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from sparkcdc.errors import SourceConnectionError, SourceError
from sparkcdc.postgres.replication import PostgresEndpoint
from sparkcdc.postgres.validator import check_source, validate_source
from sparkcdc_dev.devpostgres import SUPERUSER, DevPostgres

pytestmark = pytest.mark.integration

TABLES = [("public", "full_t"), ("public", "keyed"), ("public", "bare"), ("public", "nothing_t")]


@pytest.fixture
def endpoint(pg: DevPostgres) -> Iterator[PostgresEndpoint]:
    with pg.scratch_database("pgvalid") as name:
        with pg.connection(name) as sql:
            sql.execute(
                "CREATE TABLE full_t (id int PRIMARY KEY, doc text);"
                "ALTER TABLE full_t REPLICA IDENTITY FULL;"
                "CREATE TABLE keyed (id int PRIMARY KEY, doc text);"
                "CREATE TABLE bare (id int, doc text);"
                "CREATE TABLE nothing_t (id int PRIMARY KEY);"
                "ALTER TABLE nothing_t REPLICA IDENTITY NOTHING;"
                "CREATE PUBLICATION pub FOR TABLE full_t, keyed, bare, nothing_t"
            )
        s = pg.settings
        yield PostgresEndpoint(s.host, s.port, s.user, s.password, name)


def by_setting(endpoint: PostgresEndpoint, publication: str = "pub") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for issue in validate_source(endpoint, "pgvalid_slot", publication, TABLES):
        found.setdefault(issue.setting, []).append(f"{issue.severity}: {issue}")
    return found


def test_replica_identities_are_judged_per_table(endpoint: PostgresEndpoint) -> None:
    found = by_setting(endpoint)
    assert "table public.full_t" not in found
    (keyed,) = found["table public.keyed"]
    assert keyed.startswith("warning: ") and "TOASTed value" in keyed
    assert 'ALTER TABLE "public"."keyed" REPLICA IDENTITY FULL' in keyed
    (bare,) = found["table public.bare"]
    assert bare.startswith("error: ") and "DEFAULT without a primary key" in bare
    (nothing,) = found["table public.nothing_t"]
    assert nothing.startswith("error: ") and "REPLICA IDENTITY NOTHING" in nothing
    assert set(found) == {"table public.keyed", "table public.bare", "table public.nothing_t"}


def test_fixing_as_the_message_says_clears_the_issue(
    pg: DevPostgres, endpoint: PostgresEndpoint
) -> None:
    with pg.connection(endpoint.database) as sql:
        sql.execute('ALTER TABLE "public"."bare" REPLICA IDENTITY FULL')
        sql.execute('ALTER TABLE "public"."nothing_t" REPLICA IDENTITY FULL')
        sql.execute('ALTER TABLE "public"."keyed" REPLICA IDENTITY FULL')
    assert by_setting(endpoint) == {}
    check_source(endpoint, "pgvalid_slot", "pub", TABLES)


def test_a_publication_missing_partial_or_without_some_operations(
    pg: DevPostgres, endpoint: PostgresEndpoint
) -> None:
    (missing,) = by_setting(endpoint, "nopub")["publication nopub"]
    assert missing.startswith("note: ") and "sparkcdc will create it" in missing
    assert 'CREATE PUBLICATION "nopub" FOR TABLE "public"."full_t", "public"."keyed"' in missing
    with pg.connection(endpoint.database) as sql:
        sql.execute("CREATE PUBLICATION part FOR TABLE full_t WITH (publish = 'insert, update')")
    found = by_setting(endpoint, "part")["publication part"]
    assert [issue.split(";")[0] for issue in found] == [
        "error: publication part: found publishes insert, update, expected insert, update, "
        "delete, truncate",
        'error: publication part: found does not publish "public"."keyed", "public"."bare", '
        '"public"."nothing_t", expected every captured table published',
    ]
    assert (
        "ALTER PUBLICATION \"part\" SET (publish = 'insert, update, delete, truncate')" in found[0]
    )
    assert 'ALTER PUBLICATION "part" ADD TABLE "public"."keyed"' in found[1]


def test_a_publication_of_some_rows_or_columns_is_refused(
    pg: DevPostgres, endpoint: PostgresEndpoint
) -> None:
    with pg.connection(endpoint.database) as sql:
        sql.execute(
            "CREATE PUBLICATION narrow FOR TABLE full_t WHERE (id > 0), keyed (id), bare, nothing_t"
        )
    found = by_setting(endpoint, "narrow")["publication narrow"]
    assert [issue.split(";")[0] for issue in found] == [
        "error: publication narrow: found publishes only the rows of a WHERE clause of "
        '"public"."full_t", expected every row and column of the captured tables',
        'error: publication narrow: found publishes only some columns of "public"."keyed", '
        "expected every row and column of the captured tables",
    ]
    assert 'ALTER PUBLICATION "narrow" DROP TABLE "public"."full_t"; ALTER PUBLICATION' in found[0]
    with pg.connection(endpoint.database) as sql:  # the fix, as the message says
        sql.execute('ALTER PUBLICATION "narrow" DROP TABLE "public"."full_t", "public"."keyed"')
        sql.execute('ALTER PUBLICATION "narrow" ADD TABLE "public"."full_t", "public"."keyed"')
    assert "publication narrow" not in by_setting(endpoint, "narrow")


def test_a_missing_table_and_one_the_user_does_not_own(
    pg: DevPostgres, endpoint: PostgresEndpoint
) -> None:
    with pg.connection(endpoint.database) as sql:
        sql.execute("DROP TABLE keyed")
    found = by_setting(endpoint, "nopub")
    (gone,) = found["table public.keyed"]
    assert gone.startswith("error: table public.keyed: found no such table")
    assert found["publication nopub"][0].startswith("note: ")  # the user owns the rest
    with psycopg.connect(
        host=str(pg.datadir),
        port=pg.port,
        user=SUPERUSER,
        dbname=endpoint.database,
        autocommit=True,
    ) as admin:
        admin.execute("CREATE TABLE theirs (id int PRIMARY KEY)")
    issues = validate_source(endpoint, "pgvalid_slot", "nopub", [("public", "theirs")])
    assert [(i.setting, i.severity) for i in issues] == [
        ("publication nopub", "error"),  # only the owner can publish it: nothing to create
        ("table public.theirs", "warning"),
    ]


def test_a_user_without_replication_is_told_the_grant(
    pg: DevPostgres, endpoint: PostgresEndpoint
) -> None:
    role = f"norepl_{uuid.uuid4().hex[:8]}"
    with pg.superuser_connection() as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'norepl-pw' NOREPLICATION")
    try:
        weak = PostgresEndpoint(endpoint.host, endpoint.port, role, "norepl-pw", endpoint.database)
        found = by_setting(weak)
        (issue,) = found[f"user {role}"]
        assert issue.startswith(f"error: user {role}: found no REPLICATION attribute")
        assert f'ALTER ROLE "{role}" REPLICATION' in issue
        with pytest.raises(SourceError, match=rf"not ready for CDC.*\n  - user {role}"):
            check_source(weak, "pgvalid_slot", "pub", TABLES)
        with pytest.raises(SourceConnectionError, match="cannot connect") as refused:
            validate_source(
                PostgresEndpoint(endpoint.host, endpoint.port, role, "wrong-pw", endpoint.database),
                "pgvalid_slot",
                "pub",
                TABLES,
            )
        assert "wrong-pw" not in str(refused.value)
    finally:
        with pg.superuser_connection() as admin:
            admin.execute(f"DROP ROLE {role}")
