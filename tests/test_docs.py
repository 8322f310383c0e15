"""Every link of README.md and docs/*.md resolves inside the repository: to a file or folder
that is there, and, for ``#anchor``, to a heading of that page (or an ``<a id>`` in it)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ``[text](target)`` and ``![alt](target)``, and ``[label]: target`` definitions.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
#: An anchor written as HTML, ``<a id="name"></a>``, which GitHub keeps.
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)
EXTERNAL = ("http://", "https://", "mailto:")


def prose(text: str) -> str:
    """``text`` without code blocks and code spans, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but ``-`` and ``_``
    dropped, spaces as hyphens; a repeated one numbered ``-1``, ``-2``, ...; and the ``<a id>``
    written in its prose."""
    text = prose(page.read_text(encoding="utf-8"))
    found: set[str] = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def links(page: Path) -> list[str]:
    text = prose(page.read_text(encoding="utf-8"))
    return INLINE_LINK.findall(text) + DEFINITION.findall(text)


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """Each link of ``page`` that does not resolve inside ``root``, with why."""
    wrong = []
    for target in links(page):
        if target.startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not linked.is_relative_to(root):
            wrong.append(f"{target}: outside the repository")
        elif not linked.exists():
            wrong.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            wrong.append(f"{target}: no heading #{anchor} in {linked.relative_to(root)}")
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_link_resolves_inside_the_repository(page: Path) -> None:
    assert broken(page) == []


def test_the_checker_finds_what_is_broken(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "README.md").write_text("# Read me\n", encoding="utf-8")
    (root / "docs" / "design.md").write_text("## 4. Command line (contract)\n", encoding="utf-8")
    page = root / "docs" / "page.md"
    page.write_text(
        '# A page\n\n## Its part (one)\n\n## Its part (one)\n\n<a id="here"></a>\n\n'
        "[ok](#its-part-one) [ok](#its-part-one-1) [ok](#here)"
        " [ok](design.md#4-command-line-contract)"
        " [ok](../README.md) [ok](<design.md>)\n"
        "[gone](nope.md) [out](../../shared/DESIGN.md) [anchor](#no-such) "
        "[far](design.md#no-such) [web](https://example.org/x)\n"
        "`[code](nope.md)`\n\n```\n[fenced](nope.md)\n```\n\n[def]: missing.md\n",
        encoding="utf-8",
    )
    assert broken(page, root) == [
        "nope.md: no such file",
        "../../shared/DESIGN.md: outside the repository",
        "#no-such: no heading #no-such in docs/page.md",
        "design.md#no-such: no heading #no-such in docs/design.md",
        "missing.md: no such file",
    ]


def test_the_readme_links_the_contract_pages() -> None:
    readme = set(links(ROOT / "README.md"))
    pages = ("design.md", "api.md", "cli.md", "plan.md", "bill.md", "incident.md", "deployment.md")
    for page in (f"docs/{name}" for name in pages):
        assert page in readme or any(link.startswith(f"{page}#") for link in readme), page
