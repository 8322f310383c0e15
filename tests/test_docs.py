"""The docs hold together: every link of README.md and docs/*.md resolves inside the repository
(to a file or folder that is there and, for ``#anchor``, to a heading of that page); docs/api.md's
routes are the served API's, path and parameter names alike, and every route another page names
is one; docs/index.md links every page; the README's settings table lists every setting."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from freehours.cli import docs

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ``[text](target)`` and ``![alt](target)``, and ``[label]: target`` definitions.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
EXTERNAL = ("http://", "https://", "mailto:")


def prose(text: str) -> str:
    """``text`` without code blocks and code spans, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but ``-`` and ``_``
    dropped, spaces as hyphens; a repeated one numbered ``-1``, ``-2``, ...

    Headings only: an ``<a id>`` written as HTML is not one, since renderers differ on it
    (GitHub renames it ``user-content-...``, others drop it)."""
    found: set[str] = set()
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
        "[ok](#its-part-one) [ok](#its-part-one-1)"
        " [ok](design.md#4-command-line-contract)"
        " [ok](../README.md) [ok](<design.md>)\n"
        "[html](#here) [gone](nope.md) [out](../../shared/DESIGN.md) [anchor](#no-such) "
        "[far](design.md#no-such) [web](https://example.org/x)\n"
        "`[code](nope.md)`\n\n```\n[fenced](nope.md)\n```\n\n[def]: missing.md\n",
        encoding="utf-8",
    )
    assert broken(page, root) == [
        "#here: no heading #here in docs/page.md",
        "nope.md: no such file",
        "../../shared/DESIGN.md: outside the repository",
        "#no-such: no heading #no-such in docs/page.md",
        "design.md#no-such: no heading #no-such in docs/design.md",
        "missing.md: no such file",
    ]


def test_the_readme_leads_to_the_index_and_the_index_to_every_page() -> None:
    assert "docs/index.md" in links(ROOT / "README.md")
    linked = {target.partition("#")[0] for target in links(ROOT / "docs" / "index.md")}
    pages = {
        path.name
        for path in (ROOT / "docs").iterdir()
        if path.suffix in (".md", ".json") and path.name != "index.md"
    }
    assert sorted(pages - linked) == []
    assert "../CHANGELOG.md" in linked


#: A route as the docs write it, in a code span: ``GET /v1/invoices/{number}?from=&to=``.
ROUTE = re.compile(r"`(GET|PUT|POST|PATCH|DELETE) (/[^`\s?]*)(\?[^`\s]*)?[^`]*`")
SERVED = ("/v1/", "/healthz", "/readyz", "/metrics")


def served_routes() -> dict[tuple[str, str], set[str]]:
    """Each (method, path) of docs/openapi.json, with the names of its query parameters."""
    document = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    return {
        (method.upper(), path): {
            parameter["name"]
            for parameter in operation.get("parameters", [])
            if parameter["in"] == "query"
        }
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if method in ("get", "put", "post", "patch", "delete")
    }


def routes_table(text: str) -> dict[tuple[str, str], set[str]]:
    """The routes of api.md's table under ``## Routes``: each row's first cell, one route, with
    the names of the query parameters it writes (``?from=&to=``)."""
    section = text.split("\n## Routes\n", 1)[1].split("\n## ", 1)[0]
    table: dict[tuple[str, str], set[str]] = {}
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        found = ROUTE.fullmatch(row.split(" | ", 1)[0].removeprefix("| "))
        assert found, f"a row of api.md's routes must name one route: {row[:80]}"
        method, path, query = found.groups()
        key = (method, path)
        assert key not in table, f"{method} {path} twice in api.md's routes"
        table[key] = {pair.partition("=")[0] for pair in (query or "?")[1:].split("&") if pair}
    return table


def test_api_md_lists_every_served_route_with_its_parameters_names() -> None:
    """Every operation of docs/openapi.json (what the app serves: tests/api check the document
    against it) is a row of api.md's routes, its path written as served ({endpoint_id}, {day})
    and its query parameters named; and no row names a route that is not served."""
    documented = routes_table((ROOT / "docs" / "api.md").read_text(encoding="utf-8"))
    served = served_routes()
    assert sorted(set(served) - set(documented)) == [], "served, not in api.md"
    assert sorted(set(documented) - set(served)) == [], "in api.md, not served"
    assert {key: names for key, names in documented.items() if names != served[key]} == {}


def test_the_routes_table_reader_sees_what_differs() -> None:
    text = (
        "# API\n\n## Routes\n\n| method and path | what |\n|---|---|\n"
        "| `GET /v1/audit?target=&limit=` | the audit log |\n"
        "| `GET /v1/customers/{nmi}/bill?from=YYYY-MM-DD&to=YYYY-MM-DD` | a bill |\n"
        "| `GET /v1/webhook-endpoints/{id}` | one endpoint |\n\n## Errors\n"
        "| `GET /v1/elsewhere` | not in the table |\n"
    )
    assert routes_table(text) == {
        ("GET", "/v1/audit"): {"target", "limit"},
        ("GET", "/v1/customers/{nmi}/bill"): {"from", "to"},
        ("GET", "/v1/webhook-endpoints/{id}"): set(),
    }
    assert ("GET", "/v1/webhook-endpoints/{id}") not in served_routes()
    with pytest.raises(AssertionError, match="one route"):
        routes_table("\n## Routes\n\n| `GET /a`, `GET /b` | two |\n")


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_route_a_page_names_is_served_so(page: Path) -> None:
    """A route named in a code span anywhere in the docs is written as served: its method and
    path, parameter names included (``.../{id}`` shorthand with an ellipsis aside)."""
    served = served_routes()
    named = {
        f"{method} {path}"
        for method, path, _ in ROUTE.findall(page.read_text(encoding="utf-8"))
        if path.startswith(SERVED) and "..." not in path
    }
    assert sorted(route for route in named if tuple(route.split(" ", 1)) not in served) == []


def readme_settings() -> set[str]:
    """The variables the README's configuration table names, ``..._X`` read as the name before
    it with its last words replaced, as far as that makes a setting."""
    known = {setting.name for setting in docs.settings()}
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Configuration\n")[1]
    names: set[str] = set()
    for row in section.split("\n## ", 1)[0].splitlines():
        if not row.startswith("| `"):
            continue
        cell = row.split(" | ", 1)[0]
        first, *rest = re.findall(r"`([A-Z0-9_.]+)`", cell)
        names.add(first)
        words = first.split("_")
        for short in rest:
            tail = short.removeprefix("...")
            candidates = ["_".join(words[:cut]) + tail for cut in range(len(words) - 1, 0, -1)]
            names.add(next((name for name in candidates if name in known), short))
    return names


def test_the_readme_lists_every_setting() -> None:
    """The README's configuration table against the settings ``freehours --help`` lists
    (``freehours.cli.docs.settings``, made from ``Settings`` and ``AgentSettings``)."""
    known = {setting.name for setting in docs.settings()}
    listed = readme_settings()
    assert sorted(known - listed) == [], "settings missing from the README's table"
    assert sorted(name for name in listed - known if name.startswith("FREEHOURS_")) == []
