"""The project's Markdown documents link only to files and headings that exist: a moved
section or a renamed file breaks a link here, not for a reader on GitHub."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# [text](target) and ![alt](target); a target may carry a "title" after a space.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def documents() -> list[Path]:
    """Every Markdown file git tracks (outside a git checkout, every one under the root
    but in hidden folders and the virtualenv), the third-party fixtures' aside."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [
            p.relative_to(ROOT).as_posix()
            for p in ROOT.rglob("*.md")
            if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
        ]
    return [ROOT / name for name in listed if not name.startswith("tests/fixtures/")]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@functools.cache  # a document links to the same few files many times
def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """``path``'s relative links whose file or heading is missing, as ``target: why``."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    problems = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{target}: no such heading in {linked.name}")
    return problems


def test_the_documents_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in documents()}
    assert {"README.md", "docs/performance.md"} <= names


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_a_broken_link_or_heading_is_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## Some `code` here\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Title\n\n[ok](other.md#some-code-here) [ok](#title) ![img](other.md) "
        "[web](https://example.com/x#y)\n[gone](missing.md) [bad](other.md#nope) "
        "[self](#nothing)\n```\n[in a fence](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(doc) == [
        "missing.md: no such file",
        "other.md#nope: no such heading in other.md",
        "#nothing: no such heading in doc.md",
    ]
