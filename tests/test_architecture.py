"""The module map of docs/architecture.md, enforced: which part of freehours may import which.

Each top-level part of the package has a layer; a module may import freehours code from its own
part or from a lower layer, never from a higher one or a part beside it that the map forbids.
Third-party libraries that carry a concern (SQL, HTTP serving, Redis) are allowed only in the
part that owns that concern. Imports inside functions count too (a lazy import is still a
dependency), and so do imports under ``TYPE_CHECKING`` (a type is part of the interface).

A new part of the package fails here until it is placed on the map, here and in
docs/architecture.md.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "freehours"

#: The layer of every part of freehours: lower layers never import higher ones. A part is a
#: top-level package or module; no package spans two layers (the job model is pure and sits low,
#: so that the store can persist it; the workers that run jobs sit high).
LAYERS: dict[str, int] = {
    # the rules: pure, no I/O, nothing outside the standard library and itself
    "domain": 0,
    # foundations every part may use
    "errors": 1,
    "clock": 1,
    "backoff": 1,
    "defaults": 1,
    "faults": 1,
    # the job model: states, a job, the retry policy and the worker's decisions, pure
    "jobs": 2,
    # formats, plan documents and the means of watching
    "meterdata": 2,
    "plans": 2,
    "observability": 2,
    # the documents a household reads (invoices, credit notes): a model and its renderers
    "documents": 2,
    # configuration: every setting, with the limits of the formats it configures
    "settings": 3,
    # the two stores: the database (the only part that speaks SQL, with its upkeep) and the
    # quota cache
    "store": 5,
    "cache": 5,
    # the services: settling a quota and the one path meter data takes in (which reopens one);
    # invoicing and its accounting export; webhook endpoints and each delivery's attempts (the
    # outbox itself is the store's)
    "settlement": 6,
    "invoicing": 6,
    "webhooks": 6,
    # the job runner (worker, rescuer, the tasks of each kind), and the meter agent: a client of
    # the API, so beside the server, not on it
    "workers": 8,
    "agent": 8,
    # the running system, built from the settings, and what an operator does (retry, cancel,
    # reopen, revoke), each in the audit log
    "operations": 9,
    "api": 10,
    # the simulation drives everything; the command line exposes everything
    "sim": 11,
    "cli": 12,
}

#: docs/architecture.md's table of the parts, a row per group on one layer: the parts, what they
#: are, the third-party libraries they may also use. The table there is this, written by
#: ``python -m tests.test_architecture --write`` and held to it by a test.
ROWS: list[tuple[tuple[str, ...], str, str]] = [
    (
        ("domain",),
        "NEM time, meter-data rules (`reads.py`: NMI, suffix, interval lengths, quality, kWh, the"
        " interval-day types, the read-merge rule), plans and the free window, rating (its day"
        " profiles in `profiles.py`), bills and billing a file, plans compared, the better offer"
        " check's totals and many plans' totals in one pass (`many_plans.py`), the settlement"
        " state machine, the rules of invoices and webhooks, customers' contacts, the retailer's"
        " offers, a household's days (`usage.py`: what each day left of its free allowance)",
        "nothing: the standard library only",
    ),
    (
        ("errors", "clock", "backoff", "defaults", "faults"),
        "the one exception tree (drawn in `errors.py`), the clock seam, full-jitter backoff, every"
        " default shared by a setting and a policy, the fault seam tests inject faults through",
        "",
    ),
    (
        ("jobs",),
        "the job model, pure: a job and its states, what a handler answers, the retry policy, a"
        " worker's decisions (`job.py`, `retry.py`, `decisions.py`); the job table's SQL is the"
        " store's",
        "",
    ),
    (
        ("meterdata", "plans", "observability"),
        "NEM12 read and write; plan documents (pydantic), CDR plans and holiday calendars; logs,"
        " metrics, traces",
        "pydantic, holidays, structlog, prometheus_client, opentelemetry",
    ),
    (
        ("documents",),
        "the invoice and credit-note documents a household reads: a plain model (`model.py`), its"
        " words (`wording.py`), the HTML (`html.py`, the package's template) and PDF (`pdf.py`)"
        " renderers; the domain and the standard library only, never a store"
        " ([invoices.md](invoices.md#the-document))",
        "reportlab (PDF only)",
    ),
    (
        ("settings",),
        "`FREEHOURS_*` settings, with the limits of the formats they configure",
        "pydantic-settings",
    ),
    (
        ("store", "cache"),
        "the database (drivers, units of work, repositories, migrations, and their upkeep in"
        " `maintenance.py`: retention and partitions); the quota cache and Redis breaker",
        "SQLAlchemy, Alembic, psycopg; redis",
    ),
    (
        ("settlement", "invoicing", "webhooks"),
        "the services: a quota settled exactly once (`settlement/service.py`: claim, complete,"
        " release; which days have a quota and how each stands, `settlement/days.py`) and the one"
        " path meter data takes in (`settlement/ingest.py`: store, reopen,"
        " enqueue); invoice runs, numbering, corrections ([invoices.md](invoices.md)) and a run's"
        " documents as manual journals in Xero's import layout (`invoicing/journal.py`), documents"
        " sent by email (`invoicing/mail.py`, the standard library's `smtplib`) and a run's print"
        " batch (`invoicing/print_batch.py`); webhook endpoints and each delivery's attempts, an"
        " HTTP client of the standard library's `http.client` (the outbox itself is the store's:"
        " [webhooks.md](webhooks.md))",
        "pypdf (print batches)",
    ),
    (
        ("workers", "agent"),
        "the worker, the rescuer and the tasks of each job kind (settle, invoice, webhook,"
        " mail); the meter agent (never imports the server's parts)",
        "httpx, pybreaker, tenacity (agent)",
    ),
    (
        ("operations",),
        "the running system built once from the settings (`runtime.py`), and what an operator does"
        " (`actions.py`: retry, cancel, reopen, revoke, each in the audit log)",
        "",
    ),
    (
        ("api",),
        "the FastAPI application, one router per resource",
        "FastAPI, Starlette, uvicorn, limits",
    ),
    (("sim",), "the incident's replay and the demo", "matplotlib, httpx"),
    (("cli",), "the command line (Typer), each command loaded when named", "typer, rich"),
]

#: Where the table goes in docs/architecture.md.
DOC = PACKAGE.parent / "docs" / "architecture.md"
TABLE_START = "<!-- the parts: written by python -m tests.test_architecture --write -->"
TABLE_END = "<!-- end of the parts -->"


def table() -> str:
    """docs/architecture.md's table of the parts, from ``LAYERS`` and ``ROWS``."""
    lines = ["| Layer | Part | What it is | May also use (third-party) |", "|---|---|---|---|"]
    for parts, what, libraries in ROWS:
        layer = LAYERS[parts[0]]
        names = ", ".join(f"`{part}`" for part in parts)
        lines.append(f"| {layer} | {names} | {what} | {libraries} |")
    return "\n".join(lines)


def _documented() -> str:
    text = DOC.read_text()
    return text[text.index(TABLE_START) + len(TABLE_START) : text.index(TABLE_END)].strip()


#: Parts that must not import each other although the layers would allow it.
NEVER: dict[str, set[str]] = {
    # the agent talks to the API over HTTP only: it shares no server code
    "agent": {"store", "settlement", "workers", "operations", "api", "sim"},
    "workers": {"agent"},
}

#: Third-party libraries that belong to one concern, and the parts that may import them.
OWNED: dict[str, set[str]] = {
    "sqlalchemy": {"store"},
    "alembic": {"store"},
    "psycopg": {"store"},
    "fastapi": {"api", "sim"},
    "jinja2": {"api"},
    "starlette": {"api", "sim"},
    "uvicorn": {"api", "sim"},
    "limits": {"api"},
    "redis": {"cache", "agent"},
    "httpx": {"agent", "sim"},
    "typer": {"cli"},
    "matplotlib": {"sim"},
    "reportlab": {"documents"},
    "pypdf": {"invoicing"},
}

#: Parts held to the standard library and a few libraries of their own: the domain uses nothing
#: else, the documents only their PDF library.
OWN_LIBRARIES: dict[str, set[str]] = {"domain": set(), "documents": {"reportlab"}}


def _part(module: str) -> str:
    """The part of the map a dotted module name (below ``freehours``) belongs to: the longest
    prefix the map names."""
    names = module.split(".")
    for end in range(len(names), 0, -1):
        prefix = ".".join(names[:end])
        if prefix in LAYERS:
            return prefix
    return names[0]


def _module(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, with its line: absolute names, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ["freehours", *path.relative_to(root).parent.parts]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def violations(path: Path, root: Path = PACKAGE) -> list[str]:
    """What ``path``, a module of the package at ``root``, imports against the map."""
    module_name = _module(path, root)
    if module_name in ("__init__", "__main__"):
        return []
    part = _part(module_name)
    layer = LAYERS[part]
    wrong: list[str] = []
    for line, module in _imports(path, root):
        top, _, rest = module.partition(".")
        where = f"{path.relative_to(root.parent)}:{line} imports {module}"
        if top == "freehours":
            target = _part(rest)
            if not rest or target == part or module_name.startswith(f"{target}."):
                continue
            if target not in LAYERS:
                wrong.append(f"{where}: {target} is not on the map")
            elif LAYERS[target] >= layer:
                wrong.append(
                    f"{where}: {part} (layer {layer}) may not use {target} (layer {LAYERS[target]})"
                )
            elif target in NEVER.get(part, set()):
                wrong.append(f"{where}: {part} never uses {target}")
        elif top in OWNED and part not in OWNED[top]:
            wrong.append(f"{where}: only {sorted(OWNED[top])} may use {top}")
        elif part in OWN_LIBRARIES and not _standard(top) and top not in OWN_LIBRARIES[part]:
            wrong.append(
                f"{where}: the {part} uses only the standard library and "
                f"{sorted(OWN_LIBRARIES[part])}"
            )
    return wrong


def _standard(name: str) -> bool:
    return name in sys.stdlib_module_names or name == "__future__"


MODULES = sorted(
    path for path in PACKAGE.rglob("*.py") if "migrations" not in path.relative_to(PACKAGE).parts
)


def test_every_part_is_on_the_map() -> None:
    parts = {_part(_module(path, PACKAGE)) for path in MODULES} - {"__init__", "__main__"}
    unplaced = sorted(parts - LAYERS.keys())
    assert not unplaced, f"place {unplaced} in LAYERS here and in docs/architecture.md"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_map(path: Path) -> None:
    wrong = violations(path)
    assert not wrong, "\n".join(wrong)


def test_the_map_finds_what_breaks_it(tmp_path: Path) -> None:
    """The checker itself: SQL in a service, a service using the API, the agent using the store,
    a lazy import in the domain, and a relative import, each found with its line."""
    root = tmp_path / "freehours"
    (root / "domain").mkdir(parents=True)
    (root / "agent").mkdir()
    (root / "settlement.py").write_text(
        "import sqlalchemy as sa\nfrom freehours.api import app\nfrom . import store\n"
    )
    (root / "agent" / "spool.py").write_text("from ..store import database\n")
    (root / "domain" / "rating.py").write_text(
        "def f():\n    from freehours.meterdata import nem12\n"
    )
    found = [
        *violations(root / "settlement.py", root),
        *violations(root / "agent" / "spool.py", root),
        *violations(root / "domain" / "rating.py", root),
    ]
    assert found == [
        "freehours/settlement.py:1 imports sqlalchemy: only ['store'] may use sqlalchemy",
        "freehours/settlement.py:2 imports freehours.api: "
        "settlement (layer 6) may not use api (layer 10)",
        "freehours/agent/spool.py:1 imports freehours.store: agent never uses store",
        "freehours/domain/rating.py:2 imports freehours.meterdata: "
        "domain (layer 0) may not use meterdata (layer 2)",
    ]


def test_the_table_in_the_docs_is_the_map() -> None:
    rowed = [part for parts, _, _ in ROWS for part in parts]
    assert sorted(rowed) == sorted(LAYERS), "each part of LAYERS in exactly one of ROWS"
    for parts, _, _ in ROWS:
        assert len({LAYERS[part] for part in parts}) == 1, f"{parts}: one layer to a row"
    assert [LAYERS[parts[0]] for parts, _, _ in ROWS] == sorted(LAYERS[p[0]] for p, _, _ in ROWS)
    assert _documented() == table(), "python -m tests.test_architecture --write"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.test_architecture --write")
    text = DOC.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    DOC.write_text(text[:start] + "\n" + table() + "\n" + text[end:])


def _graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module (dotted, below ``freehours``) and the modules of its own part it imports:
    ``from freehours.store import database`` names the module ``store.database``."""
    paths = {
        _module(path, root).removesuffix(".__init__"): path
        for path in root.rglob("*.py")
        if "migrations" not in path.relative_to(root).parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        part = _part(name)
        edges: set[str] = set()
        for _, module in _imports(path, root):
            top, _, rest = module.partition(".")
            if top != "freehours" or not rest:
                continue
            targets = [rest]
            if rest in paths and paths[rest].name == "__init__.py":
                # ``from package import module``: the modules named, and the package itself
                # only for a name it defines
                names = _names(path, module)
                submodules = [f"{rest}.{alias}" for alias in names if f"{rest}.{alias}" in paths]
                targets = submodules + ([rest] if len(submodules) < len(names) else [])
            for target in targets:
                if target in paths and target != name and _part(target) == part:
                    edges.add(target)
        graph[name] = edges
    return graph


def _names(path: Path, module: str) -> list[str]:
    """The names ``path`` imports from ``module`` (``from module import a, b``)."""
    tree = ast.parse(path.read_text())
    return [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
    ]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``, each once, as the modules around it."""
    found: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycle = path[path.index(nxt) :]
                key = tuple(sorted(cycle))
                if key not in seen:
                    seen.add(key)
                    found.append([*cycle, nxt])
            elif len(path) < 12:
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_no_part_imports_itself_in_a_cycle() -> None:
    """A cycle inside a part (a lazy import included) is a module that cannot be read, or
    tested, without the other: one of them holds what both need, or the two are one."""
    found = cycles(_graph())
    assert not found, "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_cycle_check_finds_a_lazy_one(tmp_path: Path) -> None:
    root = tmp_path / "freehours"
    (root / "api").mkdir(parents=True)
    (root / "api" / "__init__.py").write_text("")
    (root / "api" / "app.py").write_text("from freehours.api import openapi\n")
    (root / "api" / "openapi.py").write_text("def f():\n    from freehours.api.app import x\n")
    assert cycles(_graph(root)) == [["api.app", "api.openapi", "api.app"]]
