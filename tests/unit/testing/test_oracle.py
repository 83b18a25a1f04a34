from __future__ import annotations

from sparkcdc_dev.oracle import compare, replay


def row(op: str, seq: int, key: int, v: str) -> dict[str, object]:
    return {"_op": op, "_seq": seq, "id": key, "v": v}


def test_clean_changelog_replays_without_violations() -> None:
    log = [
        row("+I", 1, 1, "a"),
        row("-U", 2, 1, "a"),
        row("+U", 3, 1, "b"),
        row("+I", 4, 2, "x"),
        row("-D", 5, 2, "x"),
        row("+I", 6, 2, "y"),
    ]
    result = replay(log, ["id"])
    assert result.violations == []
    assert result.state == {(1,): {"id": 1, "v": "b"}, (2,): {"id": 2, "v": "y"}}


def test_each_violation_is_caught() -> None:
    cases = {
        "already present": [row("+I", 1, 1, "a"), row("+I", 2, 1, "a")],
        "-D of key": [row("-D", 1, 1, "a")],
        "-U of key": [row("-U", 1, 1, "a"), row("+U", 2, 1, "b")],
        "seq went back": [row("+I", 5, 1, "a"), row("-D", 4, 1, "a")],
        "not followed by +U": [row("+I", 1, 1, "a"), row("-U", 2, 1, "a")],
        "without a -U": [row("+U", 1, 1, "a")],
        "differs from its last state": [row("+I", 1, 1, "a"), row("-D", 2, 1, "zzz")],
    }
    for expected, log in cases.items():
        violations = replay(log, ["id"]).violations
        assert any(expected in v for v in violations), (expected, violations)


def test_compare_reports_missing_extra_and_different() -> None:
    problems = compare({(1,): {"v": 1}, (2,): {"v": 2}}, {(1,): {"v": 9}, (3,): {"v": 3}})
    text = "\n".join(problems)
    assert "missing key (3,)" in text and "extra key (2,)" in text and "key (1,)" in text
    assert compare({(1,): {"v": 1}}, {(1,): {"v": 1}}) == []
