"""The exception tree drawn in ``freehours.errors`` is the one freehours defines: each class drawn
is found where the drawing says, under the parent it is drawn under, and no public subclass of
``FreehoursError`` is left out."""

from __future__ import annotations

import importlib
import pkgutil
import re

import freehours
from freehours import errors

#: A class in the drawing: its depth in ``|   `` columns, its name, and a ``[module]`` if any.
_NODE = re.compile(r"^    (?P<rails>(?:[| ]   )*)(?P<branch>\+-- )?(?P<name>[A-Z]\w+)\b")
_MODULE = re.compile(r"\[(?P<module>[\w.]+)\]\s*$")


def _drawn() -> dict[str, tuple[str | None, type]]:
    """Class name -> (the parent it is drawn under, the class), from the docstring."""
    assert errors.__doc__ is not None
    drawn: dict[str, tuple[str | None, type]] = {}
    parents: list[str] = []
    for line in errors.__doc__.splitlines():
        node = _NODE.match(line)
        if node is None:
            continue
        depth = len(node["rails"]) // 4 + (1 if node["branch"] else 0)
        del parents[depth:]
        module = _MODULE.search(line)
        home = f"freehours.{module['module']}" if module else "freehours.errors"
        name = node["name"]
        cls = ValueError if name == "ValueError" else getattr(importlib.import_module(home), name)
        drawn[name] = (parents[-1] if parents else None, cls)
        parents.append(name)
    return drawn


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_class_is_drawn_under_its_parent() -> None:
    drawn = _drawn()
    assert {"FreehoursError", "NEM12TooLarge", "RangeError", "Unsendable"} <= drawn.keys()
    for name, (parent, cls) in drawn.items():
        if parent is not None:
            assert cls.__bases__ == (drawn[parent][1],), name


def test_every_public_freehours_error_is_drawn() -> None:
    for module in pkgutil.walk_packages(freehours.__path__, "freehours."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
    public = {
        cls.__name__
        for cls in _subclasses(errors.FreehoursError)
        if cls.__module__.startswith("freehours.") and not cls.__name__.startswith("_")
    }
    assert public <= _drawn().keys()
