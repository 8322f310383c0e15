"""Tariff plans from files and the built-in set: the I/O around ``freehours.domain.plan``.

A plan reference (``PLAN`` on the command line) is a built-in plan id (``sso-nsw``, ``sso-seq``,
``sso-sa``, ``mps-vic``) or the path of a TOML plan file; a built-in id wins, so a file named like
one is given as ``./sso-nsw``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from freehours.domain.plan import Plan
from freehours.errors import PlanError
from freehours.plans.document import parse_plan
from freehours.plans.limits import check_toml

#: The built-in plans, in the order ``freehours plans list`` shows them.
BUILTIN_IDS = ("sso-nsw", "sso-seq", "sso-sa", "mps-vic")


def load_plan(reference: str | Path) -> Plan:
    """A built-in plan by id, or the plan in a TOML file. Raises ``PlanError``."""
    return parse_plan(load_document(reference), source=str(reference))


def load_document(reference: str | Path) -> dict[str, Any]:
    """A built-in plan's document by id, or the document in a TOML file, not yet checked
    (``parse_plan`` checks it). Raises ``PlanError`` naming the file."""
    if isinstance(reference, str) and reference in BUILTIN_IDS:
        return builtin_document(reference)
    path = Path(reference)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PlanError(
            f"no such plan file (nor a built-in plan: {', '.join(BUILTIN_IDS)})", source=str(path)
        ) from None
    except OSError as exc:
        raise PlanError(f"cannot read the plan file: {exc}", source=str(path)) from exc
    return toml_document(data, source=str(path))


def builtin_plan(plan_id: str) -> Plan:
    """One of the plans shipped with freehours (``BUILTIN_IDS``)."""
    return parse_plan(builtin_document(plan_id), source=plan_id)


def builtin_document(plan_id: str) -> dict[str, Any]:
    """A built-in plan's document: what ``PUT /v1/plans/{id}`` and the store take."""
    if plan_id not in BUILTIN_IDS:
        raise PlanError(f"no built-in plan {plan_id!r} ({', '.join(BUILTIN_IDS)})", source=plan_id)
    text = resources.files(__package__).joinpath("builtin", f"{plan_id}.toml").read_text("utf-8")
    return toml_document(text, source=plan_id)


def builtin_plans() -> list[Plan]:
    """Every built-in plan, in ``BUILTIN_IDS`` order."""
    return [builtin_plan(plan_id) for plan_id in BUILTIN_IDS]


def parse_plan_text(text: str, *, source: str) -> Plan:
    """The plan in TOML text; ``source`` names it in errors."""
    return parse_plan(toml_document(text, source=source), source=source)


def toml_document(data: str | bytes, *, source: str) -> dict[str, Any]:
    """A plan file's text (or its bytes, UTF-8) as a document, not yet checked (``parse_plan``
    checks it): for files, built-in plans and ``PUT /v1/plans`` bodies alike, checked against
    ``freehours.plans.limits`` before ``tomllib`` reads it. Raises ``PlanError`` naming
    ``source``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        check_toml(text, source=source)
        return tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise PlanError(f"not UTF-8 text: {exc}", source=source) from None
    except tomllib.TOMLDecodeError as exc:
        hint = _JSON_HINT if text.lstrip().startswith(("{", "[")) else ""
        raise PlanError(f"not valid TOML: {exc}{hint}", source=source) from None


#: What a JSON document given as a plan file most likely is, and where it goes instead.
_JSON_HINT = (
    "; it looks like JSON: a CDR energy plan is read by `freehours plans import-cdr FILE`"
    " (or PUT /v1/plans/{plan_id} with Content-Type application/vnd.cdr.energy-plan+json)"
)
