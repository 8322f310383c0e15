"""The exception tree drawn in ``freehours.errors`` is the one freehours defines: each class drawn
is found where the drawing says, under the parent it is drawn under, and every exception class
defined anywhere in the package (each module imported, every subclass of ``BaseException`` it
defines, private ones included) is drawn."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re

import freehours
from freehours import errors

#: A class in the drawing: its depth in ``|   `` columns, its name, and a ``[module]`` if any.
_NODE = re.compile(r"^    (?P<rails>(?:[| ]   )*)(?P<branch>\+-- )?(?P<name>_?[A-Z]\w+)\b")
_MODULE = re.compile(r"\[(?P<module>[\w.]+)\]\s*$")


def _drawn() -> dict[type, type | None]:
    """Each class drawn -> the class it is drawn under (None for a root), from the docstring.
    A root without a ``[module]`` is a built-in exception; a class without one is in
    ``freehours.errors``."""
    assert errors.__doc__ is not None
    drawn: dict[type, type | None] = {}
    parents: list[type] = []
    for line in errors.__doc__.splitlines():
        node = _NODE.match(line)
        if node is None:
            continue
        depth = len(node["rails"]) // 4 + (1 if node["branch"] else 0)
        del parents[depth:]
        module = _MODULE.search(line)
        name = node["name"]
        if module:
            home = importlib.import_module(f"freehours.{module['module']}")
        elif depth == 0 and hasattr(builtins, name):
            home = builtins
        else:
            home = errors
        cls = getattr(home, name)
        assert cls not in drawn, f"{name} is drawn twice"
        drawn[cls] = parents[-1] if parents else None
        parents.append(cls)
    return drawn


def _defined() -> set[type]:
    """Every exception class the modules of freehours define (the migrations aside)."""
    found: set[type] = set()
    for info in pkgutil.walk_packages(freehours.__path__, "freehours."):
        if ".migrations" in info.name:
            continue
        module = importlib.import_module(info.name)
        found |= {
            cls
            for cls in vars(module).values()
            if inspect.isclass(cls)
            and issubclass(cls, BaseException)
            and cls.__module__ == module.__name__
        }
    return found


def test_every_class_is_drawn_under_its_parent() -> None:
    drawn = _drawn()
    names = {cls.__name__ for cls in drawn}
    assert {"FreehoursError", "NEM12TooLarge", "RangeError", "Unsendable", "CycleError"} <= names
    for cls, parent in drawn.items():
        if parent is not None:
            assert cls.__bases__ == (parent,), f"{cls.__module__}.{cls.__qualname__}"


def test_every_exception_class_of_freehours_is_drawn() -> None:
    defined = _defined()
    assert len(defined) > 30  # the walk found the package's modules
    missing = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in defined - _drawn().keys())
    assert missing == []
