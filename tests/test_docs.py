"""The user docs name only what exists: every relative link in README.md and docs/ resolves (its
anchor too), every repository path they mention in code spans is there, and docs/ stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").rglob("*.md"))
PAGES = [REPO / "README.md", *DOCS]
MAX_DOC_LINES = 2000

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A path in a code span is read as one of the repository's when it starts at one of its
# top-level directories and ends in a file's suffix or a `/` (`verimap/plan`, an Inspect event
# source, is no path), or names a top-level file.
TOP = (
    "verimap/",
    "tests/",
    "benchmarks/",
    "eval/",
    "datasets/",
    "scripts/",
    "docs/",
    "design/",
    "sandbox/",
)
TOP_FILES = {"README.md", "CHANGELOG.md", "Makefile", "pyproject.toml"}


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation but `-` and `_` gone,
    spaces as `-`."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = _slug(line.lstrip("#"))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _prose(page: Path) -> str:
    """`page` without its fenced code blocks (commands and examples, not references)."""
    return re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)


def _links(page: Path) -> list[str]:
    return [a or b for a, b in LINK.findall(_prose(page))]


def _mentioned_paths(page: Path) -> set[str]:
    found = set()
    for span in CODE_SPAN.findall(_prose(page)):
        for token in span.split():
            token = token.rstrip(".,;:)").split("::")[0].split("@")[0].split("#")[0]
            if token in TOP_FILES or (
                token.startswith(TOP) and "*" not in token and re.search(r"(\.\w+|/)$", token)
            ):
                found.add(token)
    return found


def _broken_link(page: Path, target: str) -> str | None:
    if re.match(r"[a-z]+:", target):  # https:, mailto:, file:
        return None
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"{page.relative_to(REPO)}: link to a missing {target}"
    if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
        return f"{page.relative_to(REPO)}: link to a missing anchor {target}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = [b for t in _links(page) if (b := _broken_link(page, t))]
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_a_page_names_exists(page):
    missing = sorted(p for p in _mentioned_paths(page) if not (REPO / p).exists())
    assert missing == []


def test_the_checks_catch_a_missing_file_and_a_missing_anchor(tmp_path, monkeypatch):
    page = tmp_path / "p.md"
    page.write_text(
        "# Title `x`\n## Where: `--ray`\n[a](#title-x) [b](#where---ray) [c](#nowhere) "
        "[d](gone.md) [e](https://example.com)\n`verimap/evals/methods.py` `verimap/` "
        "`runs/x` `eval/draws/README.md#anchor` `verimap/plan`\n```\n`tests/nowhere.py`\n```\n"
    )
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert [b for t in _links(page) if (b := _broken_link(page, t))] == [
        "p.md: link to a missing anchor #nowhere",
        "p.md: link to a missing gone.md",
    ]
    assert _mentioned_paths(page) == {
        "verimap/evals/methods.py",
        "verimap/",
        "eval/draws/README.md",
    }


def test_the_user_docs_are_short():
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in DOCS)
    assert lines <= MAX_DOC_LINES, f"docs/**/*.md is {lines} lines (at most {MAX_DOC_LINES})"


def test_docs_hold_user_documentation_only():
    """Design records and run logs live outside docs/ (design/, eval/)."""
    assert not (REPO / "docs" / "decisions.md").exists()
    assert (REPO / "design" / "decisions.md").is_file()
