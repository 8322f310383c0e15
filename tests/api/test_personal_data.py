"""A customer's personal data (name, addresses, email address) appears in none of what
freehours leaves behind for operators and integrators: log lines, spans, metrics, webhook
payloads. The test puts a contact through the API (and a refused one, whose message is logged),
invoices the customer, and searches everything these left (docs/security.md#personal-data)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours.domain.contacts import contact
from freehours.observability.logging import add_trace_context
from freehours.store.tables import webhook_events
from tests.api.conftest import Api
from tests.invoicing.support import System
from tests.tracing import Spans

NAME = "Zephyrine Quillfeather"
STREET = "97 Kookaburra Crescent"
LOCALITY = "Wollongbar NSW 2477"
POSTAL = "Locked Bag 4321"
EMAIL = "zephyrine.quillfeather@example.com"
PERSONAL = (NAME, "Quillfeather", STREET, "Kookaburra", LOCALITY, POSTAL, EMAIL)


def leaks(what: str, text: str) -> list[str]:
    return [f"{what}: {value!r}" for value in PERSONAL if value.lower() in text.lower()]


def spans_text(spans: Spans) -> str:
    return "\n".join(
        f"{span.name} {dict(span.attributes or {})} {[e.attributes for e in span.events]}"
        for span in spans.finished()
    )


def test_no_personal_data_in_logs_spans_metrics_or_webhook_payloads(api: Api, spans: Spans) -> None:
    admin = api.auth("admin")
    body: dict[str, Any] = {
        "plan_id": "sso-nsw",
        "region": "NSW",
        "name": NAME,
        "supply_address": [STREET, LOCALITY],
        "billing_address": [POSTAL, LOCALITY],
        "email": EMAIL,
    }
    events = ["quota.completed", "invoice.finalised"]
    endpoint = {"url": "https://receiver.example/hooks", "events": events}
    made = api.client.post("/v1/webhook-endpoints", json=endpoint, headers=admin)
    assert made.status_code == 201, made.text
    system = System.on(api.services.store)
    nmi, _ = system.customers(2)
    with capture_logs(processors=[merge_contextvars, add_trace_context]) as logs:
        assert api.client.put(f"/v1/customers/{nmi}", json=body, headers=admin).status_code == 200
        refused = {**body, "email": EMAIL.replace("@", " at ")}
        answer = api.client.put("/v1/customers/4103009999", json=refused, headers=admin)
        assert answer.status_code == 422
        system.month([nmi])
        system.run()
        metrics = api.client.get("/metrics").text
    documents = [d for d in system.documents() if d.nmi == nmi]
    assert documents
    assert documents[0].customer is not None  # the document itself prints them
    with api.services.store.read() as unit:
        payloads = [row.payload for row in unit.connection.execute(sa.select(webhook_events))]
    assert any('"invoice.finalised"' in payload for payload in payloads)
    assert len(logs) > 10
    found = [
        *leaks("logs", "\n".join(str(line) for line in logs)),
        *leaks("spans", spans_text(spans)),
        *leaks("metrics", metrics),
        *leaks("webhook payloads", "\n".join(payloads)),
    ]
    assert found == []
    # The search finds what is there: the contact itself holds every value it looks for.
    stored = contact(NAME, [STREET, LOCALITY], [POSTAL, LOCALITY], EMAIL)
    assert len(leaks("contact", repr(stored))) == len(PERSONAL)
