"""Every recipe marked as tested in README.md and docs/ is one tests/integration/test_recipes.py
runs, and the test runs no recipe the pages lost, so a block cannot drop out silently."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sparkcdc_dev.recipes import (
    MARKER,
    ROOT,
    TEST,
    Recipe,
    RecipeError,
    markdown_files,
    marked_recipes,
)


def recipes_the_test_runs(test: Path = ROOT / TEST) -> set[str]:
    """The names of every ``recipe("NAME")`` call in the integration test."""
    names = set()
    for node in ast.walk(ast.parse(test.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "recipe"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def test_every_marked_recipe_is_run_by_the_integration_test() -> None:
    marked = marked_recipes()
    assert marked, "no recipe is marked in README.md or docs/"
    unrun = {name: r.where for name, r in marked.items() if name not in recipes_the_test_runs()}
    assert not unrun, f"marked as tested but not run by {TEST}: {unrun}"


def test_the_integration_test_runs_only_recipes_the_pages_hold() -> None:
    lost = recipes_the_test_runs() - set(marked_recipes())
    assert not lost, f"{TEST} runs recipes no page marks any more: {sorted(lost)}"


def test_every_marker_names_the_test_that_runs_it() -> None:
    """A marker misspelt (so not read as one) or naming another test is an error, not a
    block that quietly drops out."""
    for path in markdown_files():
        for line in path.read_text(encoding="utf-8").splitlines():
            if "tested:" in line and line.lstrip().startswith("<!--"):
                marker = MARKER.match(line.strip())
                assert marker is not None, f"{path}: a marker the test cannot read: {line}"
                assert marker["test"] == TEST, f"{path}: {line}"


def test_a_marker_without_its_block_and_a_name_used_twice_are_errors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    marker = f"<!-- tested: {TEST}, recipe a -->"
    (tmp_path / "README.md").write_text(f"{marker}\n\n```bash\nls\n```\n")
    with pytest.raises(RecipeError, match="not followed by a code fence"):
        marked_recipes(tmp_path)
    (tmp_path / "README.md").write_text(f"{marker}\n```bash\nls /data\n```\n")
    (tmp_path / "docs" / "x.md").write_text(f"{marker}\n```sql\nSELECT 1\n```\n")
    with pytest.raises(RecipeError, match="marked twice"):
        marked_recipes(tmp_path)
    (tmp_path / "docs" / "x.md").write_text(f"```\n{marker}\n```\n")  # shown, not a marker
    found = marked_recipes(tmp_path)["a"]
    assert (found.lang, found.text, found.line) == ("bash", "ls /data\n", 2)


def test_a_placeholder_the_block_lacks_is_an_error() -> None:
    block = Recipe("r", ROOT / "README.md", 1, "bash", "polars /tmp/sparkcdc-demo/lake\n")
    assert block.given({"/tmp/sparkcdc-demo": "/t"}) == "polars /t/lake\n"
    with pytest.raises(RecipeError, match=r"does not hold '127\.0\.0\.1:9092'"):
        block.given({"127.0.0.1:9092": "127.0.0.1:29124"})
