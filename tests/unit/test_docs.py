"""The documentation holds together: README.md stays short, and every relative link in
README.md and docs/ leads to a file that exists, and to a heading of it for ``#anchor`` links
(GitHub's anchors: the heading's text lower-cased, punctuation dropped, spaces as hyphens)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 250

# [text](target) and [text](target "title"); images too. Reference-style links are not used.
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"`[^`]*`")


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code spans blanked for link search."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, every character that is not
    a letter, digit, space, hyphen or underscore removed, spaces as hyphens.

    >>> github_slug("Snapshot chunks over TLS: the text splitter (extends §2)")
    'snapshot-chunks-over-tls-the-text-splitter-extends-2'
    >>> github_slug("`Trigger.AvailableNow`")
    'triggeravailablenow'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in ("L", "N"))
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of ``path`` (repeats as ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    links = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        for target in _LINK.findall(_INLINE_CODE.sub("``", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # https:, mailto:, ...
            links.append(target)
    return links


def broken_link(source: Path, target: str) -> str | None:
    """Why ``target``, written in ``source``, leads nowhere; None when it resolves."""
    file_part, _, anchor = target.partition("#")
    resolved = (source.parent / file_part).resolve() if file_part else source
    if not resolved.exists():
        return f"{target}: no file {resolved}"
    if anchor:
        if resolved.is_dir() or resolved.suffix != ".md":
            return f"{target}: an anchor into {resolved}, which is no Markdown file"
        if anchor not in anchors(resolved):
            return f"{target}: no heading in {resolved.name} has the anchor #{anchor}"
    return None


def test_readme_is_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines; keep it under {README_MAX_LINES} and move the rest "
        "to a page of docs/ (linked from docs/README.md)"
    )


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    broken = [why for t in relative_links(path) if (why := broken_link(path, t)) is not None]
    assert not broken, f"{path.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_docs_index_lists_every_page() -> None:
    index = ROOT / "docs" / "README.md"
    listed = {(index.parent / t.partition("#")[0]).resolve() for t in relative_links(index)}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md") if p != index}
    missing = sorted(str(p.relative_to(ROOT)) for p in pages - listed)
    assert not missing, f"docs/README.md does not link these pages: {missing}"


def test_link_checker_sees_broken_links(tmp_path: Path) -> None:
    """The checker itself: a missing file and a missing heading are both found."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Object stores\n\n[ok](#object-stores) [bad](#objects) [gone](nope.md)\n"
        "```\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    found = [why for t in relative_links(page) if (why := broken_link(page, t)) is not None]
    assert len(found) == 2
    assert "#objects" in found[0] and "nope.md" in found[1]
