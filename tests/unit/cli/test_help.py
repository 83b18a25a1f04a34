"""``sparkcdc --help`` and each command's: plain text, an example, the exit codes, and every
argument described (issue 58)."""

from __future__ import annotations

import argparse

import pytest

from sparkcdc.cli.main import build_parser


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


@pytest.mark.parametrize("name", sorted(commands()))
def test_each_command_shows_an_example_and_the_exit_codes(name: str) -> None:
    text = commands()[name].format_help()
    assert "``" not in text and "`" not in text, text
    assert f"  sparkcdc {name}" in text.split("example", 1)[1], text
    assert "exit codes:" in text and "3  source problem" in text, text
    for action in commands()[name]._actions:
        assert action.help, f"sparkcdc {name}: {action.dest} is not described"


def test_the_top_help_is_plain_text_with_the_exit_codes() -> None:
    text = build_parser().format_help()
    assert "`" not in text and "exit codes:" in text and "examples:" in text, text
