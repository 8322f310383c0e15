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
#: top-level package or module, or a module of one named on its own (the job model is pure and
#: sits low, so that the store can persist it; the job runner sits high).
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
    "jobs.job": 2,
    "jobs.retry": 3,
    "jobs.queue": 4,
    # formats, plan documents and the means of watching
    "meterdata": 2,
    "plans": 2,
    "observability": 2,
    # the documents a household reads (invoices, credit notes): a model and its renderers
    "documents": 2,
    # configuration: every setting, with the limits of the formats it configures
    "settings": 3,
    # the two stores: the database (the only part that speaks SQL) and the quota cache
    "store": 5,
    "cache": 5,
    # the services: settling a quota, and the one path meter data takes in (which reopens one);
    # the retention schedule over the store
    "settlement": 6,
    "invoicing": 6,
    # webhook endpoints and each delivery's attempts (the outbox itself is the store's)
    "webhooks": 6,
    # the accounting export: a run's documents as journals, pure
    "journal": 6,
    "maintenance": 6,
    "ingest": 7,
    # the job runner (worker, rescuer, settlement jobs), and the meter agent: a client of the
    # API, so beside the server, not on it
    "jobs": 8,
    "agent": 8,
    # the running system, built from the settings, and the HTTP API that serves it
    "runtime": 9,
    # what an operator does (retry, cancel, reopen, revoke), each in the audit log
    "actions": 9,
    "api": 10,
    # the simulation drives everything; the command line exposes everything
    "sim": 11,
    "cli": 12,
}

#: Parts that must not import each other although the layers would allow it.
NEVER: dict[str, set[str]] = {
    # the agent talks to the API over HTTP only: it shares no server code
    "agent": {"store", "settlement", "ingest", "jobs", "runtime", "api", "sim"},
    "jobs": {"agent"},
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
