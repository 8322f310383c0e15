"""A finalised document can always be shown: the plan format takes its text limits from the
document's (freehours.domain.fields), and a draft that could not be rendered is held before a
number is taken for it."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from freehours.documents.html import render_html
from freehours.documents.pdf import render_pdf
from freehours.domain.fields import MAX_LINE_CODE, MAX_PLAN_ID, MAX_PLAN_NAME
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.invoicing.documents import document_of
from freehours.invoicing.model import InvoicingPolicy
from freehours.plans import BUILTIN_IDS, builtin_document
from freehours.plans.document import parse_plan
from freehours.store.database import Store
from tests.invoicing.support import System, halved, nmi

REGIONS = {"sso-nsw": Region.NSW, "sso-seq": Region.SEQ, "sso-sa": Region.SA, "mps-vic": Region.VIC}
_NMIS = itertools.count(100)


def _customer(system: System, plan_id: str, document: dict[str, Any], region: Region) -> str:
    meter = nmi(next(_NMIS))
    now = system.clock.now()
    with system.store.write() as unit:
        unit.catalog.put_plan(plan_id, document, updated_at=now)
        unit.catalog.put_customer(meter, plan_id=plan_id, region=region, updated_at=now)
    return meter


def _renders(system: System) -> int:
    documents = system.documents()
    for stored in documents:
        document = document_of(stored)
        assert render_pdf(document).startswith(b"%PDF-")
        assert stored.number in render_html(document)
    return len(documents)


def test_every_document_of_the_built_in_plans_and_a_revision_renders(store: Store) -> None:
    """The demo's plans (the built-in ones), invoiced and then credited for a revision."""
    system = System.on(store)
    meters = [
        _customer(system, plan_id, builtin_document(plan_id), REGIONS[plan_id])
        for plan_id in BUILTIN_IDS
    ]
    system.month(meters)
    system.run()
    system.revise(halved(meters[0]))
    assert _renders(system) == len(BUILTIN_IDS) + 1


_WIDE = st.characters(
    codec="utf-8",
    categories=("L", "M", "N", "P", "S", "Zs", "So"),
    min_codepoint=0x20,
)


@st.composite
def plans_at_the_limits(draw: st.DrawFn) -> dict[str, Any]:
    """sso-nsw with an id, a description and band types as long as a document holds: the
    description of any printable characters, wide ones (CJK, emoji) included."""
    document = builtin_document("sso-nsw")
    suffix = draw(st.text("abc123", min_size=6, max_size=6))
    document["id"] = ("p" * MAX_PLAN_ID)[: MAX_PLAN_ID - len(suffix)] + suffix
    document["description"] = draw(
        st.text(_WIDE, min_size=MAX_PLAN_NAME, max_size=MAX_PLAN_NAME).filter(str.strip)
        | st.sampled_from(
            ["語" * MAX_PLAN_NAME, "👩‍👩‍👧‍👦" * (MAX_PLAN_NAME // 7), "W" * MAX_PLAN_NAME]
        )
    )
    types = {band["type"] for band in document["time_of_use"]}
    long_types = {kind: (kind + "_" + "X" * MAX_LINE_CODE)[:MAX_LINE_CODE] for kind in types}
    document["time_of_use"] = [
        {**band, "type": long_types[band["type"]]} for band in document["time_of_use"]
    ]
    return document


@hypothesis.settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=plans_at_the_limits())
def test_a_plan_at_the_limits_makes_documents_that_render(
    store: Store, document: dict[str, Any]
) -> None:
    parse_plan(document, source="generated")
    system = System.on(store)
    before = len(system.documents())
    meter = _customer(system, document["id"], document, Region.NSW)
    system.month([meter])
    system.run()
    assert _renders(system) == before + 1


def test_a_plan_longer_than_an_invoice_holds_is_refused_naming_the_field() -> None:
    document = {**builtin_document("sso-nsw"), "description": "x" * (MAX_PLAN_NAME + 1)}
    with pytest.raises(PlanError, match="description: String should have at most 120"):
        parse_plan(document, source="long")


def test_a_plan_stored_before_the_limit_is_held_and_spends_no_number(store: Store) -> None:
    """A plan stored when descriptions could be longer: its customer's period is held, and the
    next invoice takes the first number."""
    system = System.on(store)
    long = {**builtin_document("sso-nsw"), "id": "long", "description": "x" * 121}
    held = _customer(system, "long", long, Region.NSW)
    fine = _customer(system, "sso-nsw", builtin_document("sso-nsw"), Region.NSW)
    system.month([held, fine])
    run = system.invoicing.run_once()
    assert (run.counts.invoices, run.counts.held) == (1, 1)
    assert [(d.nmi, d.number) for d in system.documents()] == [(fine, "INV-00000001")]
    assert any("its plan 'long' does not parse" in note for note in run.notes)


def test_a_document_that_could_not_be_shown_is_held_before_it_is_numbered(store: Store) -> None:
    """Whatever a document could not hold (here a number longer than its 40 characters) holds
    the period, named, with no number taken; shown again once the cause is gone."""
    system = System.on(store)
    system.invoicing = replace_policy(system, invoice_prefix="I" * 40)
    [meter] = [_customer(system, "sso-nsw", builtin_document("sso-nsw"), Region.NSW)]
    system.month([meter])
    run = system.invoicing.run_once()
    assert (run.counts.invoices, run.counts.held) == (0, 1)
    assert "its document could not be shown (number: 48 characters, at most 40" in run.notes[0]
    assert system.documents() == []
    system.invoicing = replace_policy(system, invoice_prefix="INV-")
    assert system.invoicing.run_once().counts.invoices == 1
    assert [d.number for d in system.documents()] == ["INV-00000001"]


def replace_policy(system: System, **changes: Any) -> Any:
    invoicing = system.invoicing
    policy: InvoicingPolicy = replace(invoicing.policy, **changes)
    return type(invoicing)(system.store, system.clock, policy)
