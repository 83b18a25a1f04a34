"""The PostgreSQL validator's judgments of server settings, from parsed facts (wal_level,
slots and WAL senders cannot be changed on the shared test server without a restart; the
real-server checks are in tests/integration/test_postgres_validator.py)."""

from __future__ import annotations

import dataclasses

import pytest

from sparkcdc.postgres.validator import (
    ServerSettings,
    TableFacts,
    ValidationIssue,
    check_publication,
    check_settings,
)

READY = ServerSettings(150004, "15.4", "logical", 10, 2, 10, 1, slot_exists=False)


def issues(**changes: object) -> list[tuple[str, str, str]]:
    found = check_settings(dataclasses.replace(READY, **changes))  # type: ignore[arg-type]
    return [(i.setting, i.severity, i.fix) for i in found]


def test_a_ready_server_has_no_issue() -> None:
    assert check_settings(READY) == []


@pytest.mark.parametrize("level", ["replica", "minimal"])
def test_wal_level_must_be_logical(level: str) -> None:
    assert issues(wal_level=level) == [
        (
            "wal_level",
            "error",
            "ALTER SYSTEM SET wal_level = 'logical';  -- then restart the server",
        )
    ]


def test_every_slot_in_use_is_an_error_unless_the_sources_slot_is_one() -> None:
    ((setting, severity, fix),) = issues(slots_in_use=10)
    assert (setting, severity) == ("max_replication_slots", "error")
    assert "max_replication_slots = '11'" in fix and "pg_drop_replication_slot" in fix
    assert issues(slots_in_use=10, slot_exists=True) == []


def test_every_wal_sender_in_use_is_an_error() -> None:
    assert [i[:2] for i in issues(senders_in_use=10)] == [("max_wal_senders", "error")]


@pytest.mark.parametrize(
    ("version_num", "expected"),
    [
        (90624, [("server_version", "error")]),
        (130012, [("server_version", "warning")]),
        (140000, []),
    ],
)
def test_version_10_is_needed_and_14_streams(version_num: int, expected: list[object]) -> None:
    assert [i[:2] for i in issues(version_num=version_num)] == expected


def test_an_issue_reads_found_expected_and_fix() -> None:
    issue = ValidationIssue("wal_level", "replica", "logical", "fix it", "error")
    assert str(issue) == "wal_level: found replica, expected logical; fix: fix it"


def test_a_missing_publication_sparkcdc_will_create_is_a_note_not_a_fault() -> None:
    owned = [TableFacts("public", "orders", True, "f", True, owned=True)]
    ((issue),) = check_publication("pub", None, owned)
    assert issue.severity == "note"
    assert issue.fix.startswith("none needed: sparkcdc will create it when the stream starts")
    assert 'CREATE PUBLICATION "pub" FOR TABLE "public"."orders"' in issue.fix
    theirs = [dataclasses.replace(owned[0], owned=False)]
    ((refused),) = check_publication("pub", None, theirs)
    assert refused.severity == "error"
    assert refused.fix.startswith('CREATE PUBLICATION "pub" FOR TABLE "public"."orders";')
