"""DESIGN.md is the one design document: every section the repository cites by number
(``DESIGN.md §2.3``) is a heading there, and it sends no reader to a file outside the
repository (DESIGN.md's opening paragraphs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "DESIGN.md"
CITING = ("src", "dev", "tests", "bench", "docs", "scripts", "jars")
SUFFIXES = {".py", ".md", ".sh", ".toml", ".c", ".yaml", ".yml", ".xml", ".cfg", ".txt"}

HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.MULTILINE)
# "DESIGN.md §2.3", "DESIGN §8", "DESIGN.md, §2", a comment's line break between them,
# and the numbers listed after the first ("DESIGN.md §2.3 and §2.4")
CITATION = re.compile(
    r"DESIGN(?:\.md)?,?[\s#*]*§\s?(\d+(?:\.\d+)*)((?:(?:,|\s+and|\s+or|/)\s*§\s?\d+(?:\.\d+)*)*)"
)
NUMBER = re.compile(r"§\s?(\d+(?:\.\d+)*)")
OUTSIDE = re.compile(r"(?<![\w.])\.\./|(?<![\w.:/])/(?:work|home|root|tmp|usr|opt)/")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def headings() -> set[str]:
    return set(HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def cited(text: str) -> list[str]:
    numbers = []
    for first, rest in CITATION.findall(text):
        numbers.append(first)
        numbers.extend(NUMBER.findall(rest))
    return numbers


def citing_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "setup.py"]
    for top in CITING:
        files.extend(
            p for p in sorted((ROOT / top).rglob("*")) if p.suffix in SUFFIXES and p.is_file()
        )
    return [p for p in files if p.exists() and p != Path(__file__).resolve()]


def test_the_citation_pattern_reads_the_forms_the_code_writes() -> None:
    text = (
        "(DESIGN.md §2.3) DESIGN §8 DESIGN.md, §6 and\n#   DESIGN.md\n# §4.1 "
        "DESIGN.md §2.4 and §2.5, DESIGN.md §3"
    )
    assert cited(text) == ["2.3", "8", "6", "4.1", "2.4", "2.5", "3"]


def test_every_section_cited_is_a_heading_of_design_md() -> None:
    known = headings()
    assert {"1", "2", "8", "2.1"} <= known, "DESIGN.md lost its numbered sections"
    missing = []
    for path in citing_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        missing.extend(f"{path.relative_to(ROOT)}: §{n}" for n in cited(text) if n not in known)
    assert not missing, (
        f"these files cite sections DESIGN.md does not have: {missing}; "
        f"its sections are {sorted(known, key=lambda n: [int(p) for p in n.split('.')])}. "
        "Cite the section that holds the reason (a heading '## 2.' or '### 2.3')."
    )


def test_design_md_cites_its_own_sections_by_existing_numbers() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    known = headings()
    wrong = sorted({n for n in NUMBER.findall(text) if n not in known})
    assert not wrong, f"DESIGN.md refers to §{wrong}, which are none of its headings"


def test_design_md_names_no_path_outside_the_repository() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    outside = [m.group(0) for m in OUTSIDE.finditer(text)]
    assert not outside, f"DESIGN.md names paths outside the repository: {outside}"
    gone = [link for link in LINK.findall(text) if "://" not in link and not (ROOT / link).exists()]
    assert not gone, f"DESIGN.md links files the repository does not hold: {gone}"


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``.

    >>> anchor("2.2 Trigger.AvailableNow and the Spark lines")
    '22-triggeravailablenow-and-the-spark-lines'
    """
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def test_links_into_design_md_name_its_headings() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    anchors = {anchor(h) for h in re.findall(r"^#{1,4} (.+)$", text, re.MULTILINE)}
    gone = []
    for path in citing_files():
        for target in re.findall(r"DESIGN\.md#([\w\-]+)", path.read_text(errors="replace")):
            if target not in anchors:
                gone.append(f"{path.relative_to(ROOT)}: #{target}")
    assert not gone, f"links to DESIGN.md name no heading of it: {gone}"
