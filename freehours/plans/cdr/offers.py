"""A retailer's published CDR plan as one of its offers: the plan (``plan_document_from_cdr``)
and the terms the document gives for where and when it applies (``OfferTerms``): its
distributors, whether it prices a controlled load, its effective dates. Only a residential plan
is an offer a household's better offer check weighs; a business plan is refused by its path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from freehours.domain.fields import MAX_PLAN_NAME
from freehours.domain.offers import OfferTerms
from freehours.domain.time import NEM_TIME, Region
from freehours.plans.cdr.common import _object, _Path
from freehours.plans.cdr.reader import plan_document_from_cdr


def offer_from_cdr(
    document: object,
    *,
    source: str,
    region: Region | None = None,
    controlled_load_suffixes: Sequence[str] = ("E2",),
) -> tuple[dict[str, Any], OfferTerms, str]:
    """The plan document, the offer's terms and its name (the CDR ``displayName``) of a CDR
    ``EnergyPlanDetailV3`` (bare, or in its response's ``data``). Raises ``PlanError`` naming
    ``source`` and the JSON path of the first problem."""
    plan = plan_document_from_cdr(
        document,
        source=source,
        region=region,
        controlled_load_suffixes=controlled_load_suffixes,
    )
    root = _Path(source)
    body = _object(document, root)
    if "planId" not in body and isinstance(body.get("data"), Mapping):
        root, body = root / "data", body["data"]
    customer_type = body.get("customerType", "RESIDENTIAL")
    if customer_type != "RESIDENTIAL":
        raise (root / "customerType").error(
            f"{customer_type!r}: an offer is a residential plan (a household's better offer is"
            " one of the offers it could take)"
        )
    geography = body.get("geography")
    distributors: tuple[str, ...] = ()
    if isinstance(geography, Mapping):
        listed = geography.get("distributors") or []
        if not isinstance(listed, list) or not all(isinstance(d, str) for d in listed):
            raise (root / "geography" / "distributors").error("expected a list of names")
        distributors = tuple(sorted(set(listed)))
    effective_from = _day(body, "effectiveFrom", root)
    effective_to = _day(body, "effectiveTo", root)
    try:
        terms = OfferTerms(
            Region(plan["region"]),
            distributors,
            "controlled_load" in plan,
            effective_from,
            effective_to,
        )
    except ValueError as exc:
        raise (root / "effectiveTo").error(str(exc).partition(": ")[2]) from None
    name = body.get("displayName")
    if not isinstance(name, str) or not name.strip():
        return plan, terms, plan["id"]
    name = " ".join(name.split())  # one line, as an invoice prints it
    if len(name) > MAX_PLAN_NAME:
        raise (root / "displayName").error(
            f"{len(name)} characters; an invoice prints an offer's name whole, at most"
            f" {MAX_PLAN_NAME}"
        )
    return plan, terms, name


def _day(body: Mapping[str, Any], name: str, root: _Path) -> date | None:
    """A CDR DateTimeString field as the NEM date it falls on, or None where it is absent."""
    text = body.get(name)
    if text is None:
        return None
    if not isinstance(text, str) or len(text) > 40:
        raise (root / name).error("expected an RFC 3339 date and time")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise (root / name).error(f"{text[:40]!r} is not an RFC 3339 date and time") from None
    if moment.tzinfo is None:
        raise (root / name).error(f"{text!r} has no UTC offset")
    return moment.astimezone(NEM_TIME).date()
