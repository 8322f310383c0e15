"""GET and POST /v1/invoices/{number}/deliveries: a document's sends by email, and a resend."""

from __future__ import annotations

import json

from tests.api.conftest import Api
from tests.mail.test_delivery import JANE, invoiced


def test_a_documents_deliveries_and_a_resend(api: Api) -> None:
    system, emailed, posted = invoiced(api.services.store)
    numbers = {d.nmi: d.number for d in system.documents()}
    read, admin = api.auth("read"), api.auth("admin")

    listed = api.client.get(f"/v1/invoices/{numbers[emailed]}/deliveries", headers=read)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["email"] is True
    ((first),) = body["deliveries"]
    assert (first["sequence"], first["status"], first["resend"]) == (1, "queued", False)
    assert JANE.email not in listed.text
    assert "Jane" not in listed.text

    url = f"/v1/invoices/{numbers[emailed]}/deliveries"
    assert api.client.post(url, headers=read).status_code == 403
    resent = api.client.post(url, headers=admin)
    assert resent.status_code == 202, resent.text
    assert (resent.json()["sequence"], resent.json()["resend"]) == (2, True)
    again = api.client.get(url, headers=read).json()["deliveries"]
    assert [d["sequence"] for d in again] == [1, 2]
    with api.services.store.read() as unit:
        (entry,) = unit.audit.page(limit=5, target=f"document:{numbers[emailed]}")
    assert entry.action == "document.resend"
    assert JANE.email not in json.dumps(entry.after)

    # A customer who chose post: nothing emailed, and no resend by email.
    posted_url = f"/v1/invoices/{numbers[posted]}/deliveries"
    assert api.client.get(posted_url, headers=read).json() == {
        "number": numbers[posted],
        "email": False,
        "deliveries": [],
    }
    refused = api.client.post(posted_url, headers=admin)
    assert refused.status_code == 422
    assert refused.json()["type"].endswith("/no-email-delivery")

    missing = api.client.get("/v1/invoices/IN-99999999/deliveries", headers=read)
    assert missing.status_code == 404
    other = api.client.get(f"/v1/credit-notes/{numbers[emailed]}/deliveries", headers=read)
    assert other.status_code == 404
    assert api.client.post("/v1/invoices/IN-99999999/deliveries", headers=admin).status_code == 404
