"""The documentation's recipes, as a user copies them: code blocks of README.md and docs/
marked as tested, for tests/integration/test_recipes.py to run exactly as printed.

A block is marked by an HTML comment on the line before its fence, which a reader of the
rendered page does not see::

    <!-- tested: tests/integration/test_recipes.py, recipe kafka-spark-reader -->
    ```python
    ...
    ```

The test asks for a recipe by name (``recipe("kafka-spark-reader")``) and may replace only the
addresses and paths it must give (``Recipe.given``: each replaced text must be in the block),
so a block is run as printed or the test fails. ``tests/unit/test_recipes_marked.py`` checks
that every marked block is one the test runs, so none drops out silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/integration/test_recipes.py"
MARKER = re.compile(r"^<!--\s*tested:\s*(?P<test>\S+?),\s*recipe\s+(?P<name>[\w.-]+)\s*-->\s*$")
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")


class RecipeError(Exception):
    """A marker without a code block after it, a name used twice, a recipe not found, or a
    replacement whose text the block does not hold."""


@dataclass(frozen=True)
class Recipe:
    """One marked code block: its name, where it is, its language and its text."""

    name: str
    path: Path
    line: int  # of the fence, 1-based
    lang: str
    text: str

    def given(self, replacements: Mapping[str, str]) -> str:
        """The text with each documented placeholder (a host:port, a path) replaced by what
        the test gives; a placeholder the block does not hold is an error, so a recipe that
        changed is not run half-substituted.

        >>> Recipe("r", Path("x.md"), 1, "bash", "ls /data/lake").given({"/data/lake": "/tmp/l"})
        'ls /tmp/l'
        """
        text = self.text
        for placeholder, value in replacements.items():
            if placeholder not in text:
                raise RecipeError(
                    f"recipe {self.name} ({self.where}) does not hold {placeholder!r}: the test "
                    "replaces it with what the test gives; update the test with the recipe"
                )
            text = text.replace(placeholder, value)
        return text

    @property
    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"


def markdown_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def marked_recipes(root: Path = ROOT) -> dict[str, Recipe]:
    """Every marked code block of README.md and docs/, by name. A marker must be followed by
    a fence on its next line, and a name used once."""
    found: dict[str, Recipe] = {}
    for path in markdown_files(root):
        lines = path.read_text(encoding="utf-8").splitlines()
        fenced = False  # a marker shown inside a code block (as in docs/development.md) is text
        for number, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            marker = None if fenced else MARKER.match(line.strip())
            if marker is None:
                continue
            name = marker["name"]
            fence = _FENCE.match(lines[number + 1]) if number + 1 < len(lines) else None
            if fence is None:
                raise RecipeError(
                    f"{path.relative_to(root)}:{number + 1}: the marker of recipe {name} is not "
                    "followed by a code fence on the next line"
                )
            body: list[str] = []
            for inner in lines[number + 2 :]:
                if inner.startswith("```"):
                    break
                body.append(inner)
            else:
                raise RecipeError(f"{path.relative_to(root)}:{number + 2}: unclosed code block")
            if name in found:
                raise RecipeError(
                    f"recipe {name} is marked twice: {found[name].where} and "
                    f"{path.relative_to(root)}:{number + 2}"
                )
            found[name] = Recipe(name, path, number + 2, fence["lang"], "\n".join(body) + "\n")
    return found


def recipe(name: str, root: Path = ROOT) -> Recipe:
    """The marked block named ``name``."""
    recipes = marked_recipes(root)
    if name not in recipes:
        raise RecipeError(f"no code block of README.md or docs/ is marked as recipe {name}")
    return recipes[name]
