"""``freehours.domain`` imports nothing from outside itself: the standard library and
``freehours.domain`` only, neither the rest of freehours nor any third-party package, so that its
rules can be read, tested and reused on their own (docs/architecture.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import freehours.domain

_DOMAIN = Path(freehours.domain.__file__).parent
_MODULES = sorted(_DOMAIN.rglob("*.py"))


def _imported(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) for each import, at any depth (a function's own imports too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"line {node.lineno}: a relative import"
            assert node.module is not None
            found.append((node.lineno, node.module))
    return found


def _allowed(module: str) -> bool:
    top = module.partition(".")[0]
    return (
        module == "freehours.domain"
        or module.startswith("freehours.domain.")
        or (top != "freehours" and top in sys.stdlib_module_names)
    )


def test_the_domain_has_modules() -> None:
    assert {"reads.py", "errors.py", "plan.py", "rating.py"} <= {path.name for path in _MODULES}


@pytest.mark.parametrize("path", _MODULES, ids=lambda path: path.name)
def test_a_domain_module_imports_only_the_standard_library_and_the_domain(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    outside = [f"line {line}: {module}" for line, module in _imported(tree) if not _allowed(module)]
    assert outside == []
