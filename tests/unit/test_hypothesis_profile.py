"""Property tests run under the root conftest's hypothesis profile: no deadline, since a
loaded machine made a 200 ms deadline fail tests that assert no time (the pgoutput fuzz
test failed so once in a landing)."""

from __future__ import annotations

from hypothesis import settings


def test_the_profile_sets_no_deadline() -> None:
    assert settings().deadline is None
    assert settings().print_blob
