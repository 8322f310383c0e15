"""A customer's personal data (name, addresses, email address) appears in none of what
freehours leaves behind for operators and integrators: log lines, spans, metrics, webhook
payloads. The test puts a contact through the API (and a refused one, whose message is logged),
invoices the customer, and searches everything these left (docs/security.md#personal-data)."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours.domain.contacts import contact
from freehours.invoicing.mail import DocumentMail, PageLinks, Sender
from freehours.observability.logging import add_trace_context
from freehours.store.tables import webhook_events
from tests.api.conftest import Api
from tests.invoicing.support import System
from tests.mail.conftest import Smtp
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


def test_no_personal_data_in_logs_spans_metrics_or_webhook_payloads(
    api: Api, spans: Spans, smtp: Smtp
) -> None:
    admin = api.auth("admin")
    body: dict[str, Any] = {
        "plan_id": "sso-nsw",
        "region": "NSW",
        "name": NAME,
        "supply_address": [STREET, LOCALITY],
        "billing_address": [POSTAL, LOCALITY],
        "email": EMAIL,
    }
    events = ["quota.completed", "invoice.finalised", "document.delivery_failed"]
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
        # Emailed: refused first by a server that echoes the address, then resent and sent, its
        # link to the customer's page in it.
        links = PageLinks("https://bills.retailer.example", b"k" * 32, 90)
        mail = DocumentMail(
            api.services.store, system.clock, Sender(smtp.server, "billing@r.example", links)
        )
        number = next(d.number for d in system.documents() if d.nmi == nmi)
        smtp.reply_next("rcpt", f"550 5.1.1 <{EMAIL}>: no such user here")
        with api.services.store.read() as unit:
            (first,) = unit.mail.of_document(number)
        mail.attempt(first.id)
        resent = api.client.post(f"/v1/invoices/{number}/deliveries", headers=admin)
        assert resent.status_code == 202
        assert mail.attempt(resent.json()["id"]).what == "sent (250)"
        deliveries = api.client.get(f"/v1/invoices/{number}/deliveries", headers=admin).text
        metrics = api.client.get("/metrics").text
    documents = [d for d in system.documents() if d.nmi == nmi]
    assert documents
    assert documents[0].customer is not None  # the document itself prints them
    with api.services.store.read() as unit:
        payloads = [row.payload for row in unit.connection.execute(sa.select(webhook_events))]
    assert any('"invoice.finalised"' in payload for payload in payloads)
    assert any('"document.delivery_failed"' in payload for payload in payloads)
    (message,) = smtp.messages()
    plain = message.get_body(("plain",))
    assert plain is not None
    link = re.search(r"https://bills\.retailer\.example/my/\S+", plain.get_content())
    assert link is not None
    assert len(logs) > 10
    with api.services.store.read() as unit:
        audit = [(e.before, e.after, e.reason) for e in unit.audit.page(limit=100)]
    found = [
        *leaks("logs", "\n".join(str(line) for line in logs)),
        *leaks("spans", spans_text(spans)),
        *leaks("metrics", metrics),
        *leaks("webhook payloads", "\n".join(payloads)),
        *leaks("deliveries", deliveries),
        *leaks("the page's link", link.group(0)),
        *leaks("the audit log", str(audit)),
    ]
    assert found == []
    # The search finds what is there: the contact itself holds every value it looks for.
    stored = contact(NAME, [STREET, LOCALITY], [POSTAL, LOCALITY], EMAIL)
    assert len(leaks("contact", repr(stored))) == len(PERSONAL)
