"""A plan document written as a plan file (TOML), keys in the order docs/plan.md lists them.

What ``freehours plans import-cdr`` prints: a file ``freehours bill --plan`` and ``plans put``
take as they are, and a person can read and edit. Strings are written as TOML basic strings
(JSON's escapes are TOML's), money and energy as strings, as every plan file writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_TOP = (
    "id",
    "description",
    "region",
    "time_zone",
    "daily_supply_charge",
    "supply_charges",
    "gst_rate",
    "consumption_suffixes",
    "information",
)
_TABLES = ("free_window", "feed_in", "controlled_load")
_MULTILINE = ("information", "supply_charges")


def plan_toml(document: Mapping[str, Any]) -> str:
    """``document`` (a plan document, checked or not) as the text of a plan file."""
    unknown = set(document) - set(_TOP) - set(_TABLES) - {"time_of_use"}
    if unknown:
        raise ValueError(f"not plan keys: {', '.join(sorted(unknown))}")
    lines = [
        f"{key} = {_value(document[key], multiline=key in _MULTILINE)}"
        for key in _TOP
        if key in document
    ]
    if "free_window" in document:
        lines += ["", "[free_window]", *_pairs(document["free_window"])]
    for band in document.get("time_of_use", ()):
        lines += ["", "[[time_of_use]]"]
        lines += _pairs({key: value for key, value in band.items() if key != "periods"})
        periods = band.get("periods", [])
        lines.append("periods = [")
        lines += [f"  {_value(period)}," for period in periods]
        lines.append("]")
    for table in ("feed_in", "controlled_load"):
        if table in document:
            lines += ["", f"[{table}]", *_pairs(document[table])]
    return "\n".join(lines) + "\n"


def _pairs(table: Mapping[str, Any]) -> list[str]:
    return [f"{key} = {_value(value)}" for key, value in table.items()]


def _value(value: object, *, multiline: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{key} = {_value(item)}" for key, item in value.items()) + " }"
    if isinstance(value, Sequence):
        items = [_value(item) for item in value]
        if multiline and items:
            return "[\n" + "".join(f"  {item},\n" for item in items) + "]"
        return "[" + ", ".join(items) + "]"
    raise ValueError(f"a plan document holds no {type(value).__name__}: {value!r}")
