"""Each customer's own page, ``/my/{token}``: opened by its signed link alone; the days of the
period, their bills, the better offer and use compared; a link that does not open names no one."""

from __future__ import annotations

import re

from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours.invoicing.mail import DocumentMail, PageLinks, Sender
from freehours.store.database import Store
from tests.household.support import SECRET, households
from tests.mail.conftest import Smtp
from tests.tracing import Spans

INVALID = "This link does not open"


def test_the_page_shows_the_periods_days_bills_and_how_the_saving_is_worked_out(
    store: Store,
) -> None:
    with households(store) as seen:
        token = seen.token(seen.jane)
        page = seen.api.client.get(f"/my/{token}")
        assert page.status_code == 200, page.text
        text = page.text
        invoice = seen.documents[seen.jane]
        assert "<h1>Your free energy</h1>" in text
        assert "1 July 2026 to 31 July 2026" in text
        assert len(re.findall(r"<tr><th scope=\"row\">\w{3} \d{1,2}<", text)) == 31
        assert "How “could have saved” is worked out" in text
        assert f"/my/{token}/documents/{invoice.number}.pdf" in text
        assert "Could you save money on another plan?" in text
        assert "Your use compared" in text
        assert "<script" not in text
        # Nobody's NMI, name or address on it, nor in its address.
        assert seen.jane not in text
        assert "Jane" not in text
        assert "Sun Street" not in text
        headers = page.headers
        assert "script-src" not in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["Cache-Control"] == "no-store"
        assert headers["X-Content-Type-Options"] == "nosniff"

        pdf = seen.api.client.get(f"/my/{token}/documents/{invoice.number}.pdf")
        assert pdf.status_code == 200
        assert pdf.headers["content-type"] == "application/pdf"
        assert pdf.content.startswith(b"%PDF")
        html = seen.api.client.get(f"/my/{token}/documents/{invoice.number}.html")
        assert html.status_code == 200
        assert invoice.number in html.text


def test_a_link_that_does_not_open_names_no_one(store: Store) -> None:
    with households(store) as seen:
        token = seen.token(seen.jane)
        client = seen.api.client
        tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
        other_page = seen.token(seen.pat)
        answers = {
            "tampered": client.get(f"/my/{tampered}"),
            "garbage": client.get("/my/not-a-token"),
            "long": client.get("/my/" + "A" * 5000),
            "expired": client.get(f"/my/{seen.token(seen.jane, days=-1)}"),
            # Another customer's document through this customer's link: as if there were none.
            "theirs": client.get(f"/my/{token}/documents/{seen.documents[seen.pat].number}.pdf"),
            "unknown": client.get(f"/my/{token}/documents/IN-99999999.pdf"),
            "kind": client.get(f"/my/{token}/documents/{seen.documents[seen.jane].number}.exe"),
        }
        for why, answer in answers.items():
            assert answer.status_code == 404, why
            assert INVALID in answer.text, why
            assert seen.jane not in answer.text, why
            assert seen.pat not in answer.text, why
        assert client.get(f"/my/{other_page}").status_code == 200
        # Revoked by the retailer: the link stops opening; a new page id opens again.
        url = f"/v1/customers/{seen.jane}/page"
        assert client.delete(url, headers=seen.api.auth("read")).status_code == 403
        revoked = client.delete(url, headers=seen.api.auth("admin"))
        assert revoked.json() == {"nmi": seen.jane, "revoked": 1}
        with seen.api.services.store.read() as unit:
            (entry,) = unit.audit.page(limit=5, target=f"customer:{seen.jane}")
        assert entry.action == "page.revoke"
        assert client.get(f"/my/{token}").status_code == 404
        unknown = client.delete("/v1/customers/4109999999/page", headers=seen.api.auth("admin"))
        assert unknown.status_code == 404
        assert client.get(f"/my/{seen.token(seen.jane)}").status_code == 200


def test_pages_are_rate_limited_per_address(store: Store) -> None:
    with households(store, rate_limit_pages="3/minute") as seen:
        token = seen.token(seen.jane)
        answers = [seen.api.client.get(f"/my/{token}").status_code for _ in range(5)]
        assert answers[:3] == [200, 200, 200]
        assert answers[3:] == [429, 429]
        busy = seen.api.client.get("/my/not-a-token")
        assert busy.status_code == 429
        assert "Retry-After" in busy.headers
        assert "Too many requests" in busy.text


def test_the_email_carries_the_link_that_opens_the_page(store: Store, smtp: Smtp) -> None:
    with households(store) as seen:
        links = PageLinks("https://bills.retailer.example/", SECRET.encode(), 90)
        mail = DocumentMail(
            store, seen.system.clock, Sender(smtp.server, "billing@retailer.example", links)
        )
        with store.read() as unit:
            (delivery,) = unit.mail.of_document(seen.documents[seen.jane].number)
        assert mail.attempt(delivery.id).what == "sent (250)"
        (message,) = smtp.messages()
        text = message.get_body(("plain",))
        assert text is not None
        found = re.search(r"https://bills\.retailer\.example/my/(\S+)", text.get_content())
        assert found is not None
        token = found.group(1)
        assert seen.jane not in found.group(0)
        html = message.get_body(("html",))
        assert html is not None
        assert f'<a href="https://bills.retailer.example/my/{token}">open your page</a>' in (
            html.get_content()
        )
        assert seen.api.client.get(f"/my/{token}").status_code == 200


def test_the_links_token_is_in_no_span_or_log_line(store: Store, spans: Spans) -> None:
    """A link is a credential: its token is kept out of traces and logs as a key is."""
    with households(store) as seen:
        token = seen.token(seen.jane)
        with capture_logs(processors=[merge_contextvars]) as logs:
            assert seen.api.client.get(f"/my/{token}").status_code == 200
            number = seen.documents[seen.jane].number
            assert seen.api.client.get(f"/my/{token}/documents/{number}.pdf").status_code == 200
        recorded = "\n".join(
            f"{span.name} {dict(span.attributes or {})} {[e.attributes for e in span.events]}"
            for span in spans.finished()
        )
        assert spans.finished()
        assert token not in recorded
        assert token.split(".")[0] not in recorded  # not even its page id
        assert logs
        assert token.split(".")[0] not in "\n".join(str(line) for line in logs)
