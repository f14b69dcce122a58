"""Every relative link in README.md, CHANGELOG.md and docs/*.md points at a file that exists and, where it names a
heading (``#anchor``), at a heading of that file, with anchors made as GitHub makes them (lower case, punctuation
dropped, spaces to hyphens, a repeated heading numbered). A renamed heading left a dead link that a newcomer
following the docs found (2026-11-27)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: inline code and links reduced to their text, lower case, every character
    that is not a letter, digit, space, hyphen or underscore dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: Counter[str] = Counter()
    out: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(1))
            out.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    out |= set(re.findall(r'<a id="([^"]+)"', page.read_text(encoding="utf-8")))
    return out


def links(page: Path) -> list[tuple[int, str]]:
    found, fenced = [], False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            found += [(n, target) for target in LINK.findall(line)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    dead = []
    for n, target in links(page):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:: not checked here (no network)
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            dead.append(f"line {n}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            dead.append(f"line {n}: {target} (no such heading)")
    assert not dead, "\n".join(dead)


def test_slugs_follow_githubs_rule() -> None:
    assert slug("In the paper's regime, with every learned method (the default since 2026-11-26; issue 15)") == (
        "in-the-papers-regime-with-every-learned-method-the-default-since-2026-11-26-issue-15"
    )
    assert slug("A live cluster: `dcplace serve`") == "a-live-cluster-dcplace-serve"
