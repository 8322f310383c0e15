"""Invoicing over HTTP, on SQLite and PostgreSQL: billing cycles through the customer API, runs
started once per Idempotency-Key and done by the workers, the documents as JSON, PDF and HTML,
pages of a series, late data credited, and a run's accounting journal."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest

from freehours.api.routes.documents import DocumentOut, DocumentPageOut
from freehours.api.routes.invoice_runs import InvoiceRunOut
from freehours.domain.invoicing import BillingCycle, DocumentType, Frequency, Series
from freehours.domain.offers import OfferSource, OfferTerms
from freehours.domain.time import Region
from freehours.invoicing.journal import HEADER
from freehours.plans import builtin_document
from freehours.settings import Settings
from freehours.store.catalog import NewOffer
from freehours.store.database import Store
from tests.api.conftest import Api, serving
from tests.console.conftest import sign_in
from tests.documents.builders import flat, pdf_pages
from tests.invoicing.support import AFTER_JULY, JULY, System, consumption, export, halved, nmi
from tests.servers import api_server, freehours
from tests.store.fixtures import PostgresSchemas
from tests.support import eventually


@pytest.fixture
def settings() -> Settings:
    return Settings(database_url="sqlite://", data_deadline_hours=1)


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[Api]:
    with serving(store, settings) as api:
        api.clock.set(AFTER_JULY)
        yield api


def put_customers(api: Api, count: int, **cycle: Any) -> list[str]:
    meters = [nmi(n) for n in range(count)]
    for meter in meters:
        body = {"plan_id": "sso-nsw", "region": "NSW", **cycle}
        answer = api.client.put(f"/v1/customers/{meter}", json=body, headers=api.auth("admin"))
        assert answer.status_code == 200, answer.text
    return meters


def work(api: Api) -> None:
    """Every job due, done: settlements and invoice runs, as ``freehours worker`` does them."""
    worker = api.services.runtime.worker()
    while worker.run_due():
        pass


def month(api: Api, meters: list[str]) -> None:
    rows = [row for m in meters for d in JULY for row in (consumption(m, d), export(m, d))]
    api.services.runtime.ingestion.file(rows)
    work(api)


def start(api: Api, key: str = "run-1", body: Any = None) -> httpx.Response:
    headers = {**api.auth("admin"), "Idempotency-Key": key}
    if body is None:
        return api.client.post("/v1/invoice-runs", headers=headers)
    return api.client.post("/v1/invoice-runs", json=body, headers=headers)


def invoiced(api: Api, meters: list[str]) -> dict[str, Any]:
    """A month of settled data for ``meters``, and a run over it through the API: the run."""
    month(api, meters)
    answer = start(api)
    assert answer.status_code == 202, answer.text
    work(api)
    run = api.client.get(answer.headers["Location"], headers=api.auth("read"))
    assert run.status_code == 200
    body: dict[str, Any] = run.json()
    return body


# --- billing cycles --------------------------------------------------------------------------


def test_a_customer_is_put_with_its_billing_cycle(api: Api) -> None:
    admin = api.auth("admin")
    body = {
        "plan_id": "sso-nsw",
        "region": "NSW",
        "billing_cycle": "quarterly",
        "anchor_day": 15,
        "payment_term_days": 30,
    }
    answer = api.client.put("/v1/customers/4103000001", json=body, headers=admin)
    assert answer.status_code == 200
    assert answer.json() == {"nmi": "4103000001", **body, **NO_CONTACT}
    with api.services.store.read() as unit:
        [account] = unit.invoices.accounts(["4103000001"])
    assert account.cycle == BillingCycle(Frequency.QUARTERLY, 15, 30)
    # A PUT sets the whole customer: the cycle left out is the default again.
    plain = {"plan_id": "sso-nsw", "region": "NSW"}
    answer = api.client.put("/v1/customers/4103000001", json=plain, headers=admin)
    assert answer.json() == {
        "nmi": "4103000001",
        **plain,
        "billing_cycle": "monthly",
        "anchor_day": 1,
        "payment_term_days": 21,
        **NO_CONTACT,
    }
    with api.services.store.read() as unit:
        [account] = unit.invoices.accounts(["4103000001"])
    assert account.cycle == BillingCycle()


NO_CONTACT = dict.fromkeys(("name", "supply_address", "billing_address", "email", "delivery"))


def test_a_customer_is_put_with_its_contact_and_a_bad_field_is_named_not_shown(api: Api) -> None:
    admin = api.auth("admin")
    contact = {
        "name": "  Sam   Citizen ",
        "supply_address": ["1 Sun Street", "Newtown NSW 2042"],
        "email": "sam@Example.COM.au",
    }
    body = {"plan_id": "sso-nsw", "region": "NSW", **contact}
    answer = api.client.put("/v1/customers/4103000001", json=body, headers=admin)
    assert answer.status_code == 200, answer.text
    stored = {
        "name": "Sam Citizen",
        "supply_address": ["1 Sun Street", "Newtown NSW 2042"],
        "billing_address": None,
        "email": "sam@example.com.au",
        "delivery": "email",
    }
    assert {key: answer.json()[key] for key in stored} == stored
    # A PUT without the contact's fields keeps it.
    plain = {"plan_id": "sso-nsw", "region": "NSW"}
    answer = api.client.put("/v1/customers/4103000001", json=plain, headers=admin)
    assert {key: answer.json()[key] for key in stored} == stored
    with api.services.store.read() as unit:
        kept = unit.catalog.contacts(["4103000001"])["4103000001"]
    assert (kept.name, kept.delivery.value) == ("Sam Citizen", "email")

    for change, field, reason in (
        ({"name": "x" * 81}, "name", "81 characters, at most 80"),
        ({"supply_address": []}, "supply_address", "has at least one line"),
        ({"supply_address": ["a" * 150, "b"]}, "supply_address", "153 characters with its"),
        ({"email": "sam at example"}, "email", "is not an email address"),
        ({"email": None, "delivery": "email"}, "delivery", "email needs an email address"),
        ({"name": None}, "name", "is required with the contact's other fields"),
        ({"name": "Sam\u0007"}, "name", "holds a character that is not printable"),
    ):
        answer = api.client.put("/v1/customers/4103000002", json={**body, **change}, headers=admin)
        assert answer.status_code == 422, (change, answer.text)
        assert answer.json()["errors"][0]["field"] == field
        assert reason in answer.json()["errors"][0]["message"]
        assert "sam at example" not in answer.text  # a field's value is never repeated
    with api.services.store.read() as unit:  # nothing stored of any refusal
        assert unit.catalog.get_customer("4103000002") is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("billing_cycle", "weekly"),
        ("anchor_day", 29),
        ("anchor_day", 0),
        ("payment_term_days", 12),
        ("payment_term_days", 91),
        ("anchor_day", "1"),
    ],
)
def test_a_bad_billing_cycle_is_a_422_naming_the_field(api: Api, field: str, value: Any) -> None:
    body = {"plan_id": "sso-nsw", "region": "NSW", field: value}
    answer = api.client.put("/v1/customers/4103000001", json=body, headers=api.auth("admin"))
    assert answer.status_code == 422
    assert answer.json()["type"] == "/problems/validation-error"
    assert [error["field"] for error in answer.json()["errors"]] == [f"body.{field}"]
    with api.services.store.read() as unit:
        assert unit.invoices.accounts(["4103000001"]) == []


# --- runs ------------------------------------------------------------------------------------


def test_a_run_is_started_once_per_key_and_done_by_the_workers(api: Api) -> None:
    meters = put_customers(api, 3)
    month(api, meters)
    first = start(api, body={"as_of": AFTER_JULY.isoformat()})
    assert first.status_code == 202, first.text
    run = first.json()
    InvoiceRunOut.model_validate(run)
    assert first.headers["Location"] == f"/v1/invoice-runs/{run['run_id']}"
    assert run["state"] == "RUNNING"
    assert run["batches"] is None
    # The same request again: the same run, replayed; nothing started twice.
    again = start(api, body={"as_of": AFTER_JULY.isoformat()})
    assert again.status_code == 202
    assert again.json() == run
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    with api.services.store.read() as unit:
        assert [r.run_id for r in unit.invoices.list_runs()] == [run["run_id"]]
    # The same key with another body is refused.
    other = start(api, body={"as_of": (AFTER_JULY - timedelta(days=1)).isoformat()})
    assert other.status_code == 422
    assert other.json()["type"] == "/problems/idempotency-key-reused"
    work(api)
    done = api.client.get(first.headers["Location"], headers=api.auth("read")).json()
    InvoiceRunOut.model_validate(done)
    assert done["state"] == "COMPLETED"
    assert (done["batches"], done["batches_done"]) == (1, 1)
    assert done["counts"] == {
        "accounts": 3,
        "invoices": 3,
        "credit_notes": 0,
        "adjustment_invoices": 0,
        "waiting": 0,
        "held": 0,
    }
    assert done["finished_at"] is not None
    assert done["as_of"] == run["as_of"]
    # A second run, another key, finds nothing more to invoice.
    assert start(api, key="run-2").status_code == 202
    work(api)
    with api.services.store.read() as unit:
        assert unit.invoices.serials(Series.INVOICE) == [1, 2, 3]
        assert len(unit.invoices.list_runs()) == 2


def test_a_run_without_a_body_is_as_of_now(api: Api) -> None:
    answer = start(api)
    assert answer.status_code == 202
    assert answer.json()["as_of"] == AFTER_JULY.isoformat()
    empty = api.client.post(
        "/v1/invoice-runs",
        content=b"",
        headers={
            **api.auth("admin"),
            "Idempotency-Key": "empty",
            "Content-Type": "application/json",
        },
    )
    assert empty.status_code == 202


@pytest.mark.parametrize(
    ("as_of", "message"),
    [
        ("2026-08-01T00:00:00", "with its offset"),
        ((AFTER_JULY + timedelta(seconds=1)).isoformat(), "in the future"),
        ("yesterday", "RFC 3339"),
        (1785506400, "RFC 3339"),  # seconds since 1970: not the documented form
        ("0001-01-01T00:00:00+10:00", "is outside 2000-01-01 to 2099-12-31"),
        ("9999-12-31T23:59:59-10:00", "is outside 2000-01-01 to 2099-12-31"),
    ],
)
def test_a_naive_future_or_out_of_range_as_of_is_a_422(
    api: Api, as_of: object, message: str
) -> None:
    answer = start(api, body={"as_of": as_of})
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["type"] == "/problems/validation-error"
    assert problem["errors"][0]["field"] == "body.as_of"
    assert message in problem["errors"][0]["message"]
    with api.services.store.read() as unit:
        assert unit.invoices.list_runs() == []


def test_a_run_needs_an_admin_key_and_an_idempotency_key(api: Api) -> None:
    url = "/v1/invoice-runs"
    assert api.client.post(url, headers={"Idempotency-Key": "k"}).status_code == 401
    read = {**api.auth("read"), "Idempotency-Key": "k"}
    assert api.client.post(url, headers=read).status_code == 403
    missing = api.client.post(url, headers=api.auth("admin"))
    assert missing.status_code == 400
    assert missing.json()["type"] == "/problems/idempotency-key-missing"
    assert api.client.get("/v1/invoice-runs/abc").status_code == 401
    assert api.client.get("/v1/invoices", headers=api.auth("settle")).status_code == 403
    with api.services.store.read() as unit:
        assert unit.invoices.list_runs() == []


def test_unknown_runs_and_documents_are_404s(api: Api) -> None:
    read = api.auth("read")
    for path in ("/v1/invoice-runs/nope", "/v1/invoice-runs/nope/journal.csv"):
        answer = api.client.get(path, headers=read)
        assert answer.status_code == 404
        assert answer.json()["type"] == "/problems/invoice-run-not-found"
    for path in ("/v1/invoices/INV-00000001", "/v1/credit-notes/CN-1.pdf", "/v1/invoices/X.html"):
        answer = api.client.get(path, headers=read)
        assert answer.status_code == 404
        assert answer.json()["type"] == "/problems/document-not-found"


# --- documents -------------------------------------------------------------------------------


def test_an_invoice_as_json_traces_each_day_to_its_quota_version(api: Api) -> None:
    [meter] = put_customers(api, 1)
    invoiced(api, [meter])
    read = api.auth("read")
    answer = api.client.get("/v1/invoices/INV-00000001", headers=read)
    assert answer.status_code == 200
    body = answer.json()
    DocumentOut.model_validate(body)
    assert list(body) == list(DocumentOut.model_fields)
    assert body["number"] == "INV-00000001"
    assert body["type"] == "invoice"
    assert body["nmi"] == meter
    assert (body["period_start"], body["period_end"]) == ("2026-07-01", "2026-07-31")
    assert (body["issue_date"], body["due_date"]) == ("2026-08-05", "2026-08-26")
    assert body["free_kwh"] == "93"
    assert body["plan_id"] == "sso-nsw"
    assert body["plan"]["id"] == "sso-nsw"
    assert body["corrects"] is None
    assert body["corrected_by"] == []
    assert len(body["days"]) == 31
    assert {day["quota_version"] for day in body["days"]} == {1}
    with api.services.store.read() as unit:
        quotas = unit.invoices.latest_quotas([meter], JULY[0], JULY[-1])[meter]
    for day in body["days"]:
        quota = quotas[JULY[0].fromisoformat(day["date"])]
        assert quota.version == day["quota_version"]
        assert Decimal(day["free_kwh"]) == quota.free_kwh
    lines = sum(Decimal(line["amount"]) for line in body["lines"])
    assert lines == Decimal(body["subtotal"])
    assert Decimal(body["subtotal"]) + Decimal(body["gst"]) == Decimal(body["total"])
    assert body["links"] == {
        "document": "/v1/invoices/INV-00000001",
        "pdf": "/v1/invoices/INV-00000001.pdf",
        "html": "/v1/invoices/INV-00000001.html",
    }


def test_an_invoice_as_pdf_and_html(api: Api) -> None:
    [meter] = put_customers(api, 1)
    invoiced(api, [meter])
    read = api.auth("read")
    pdf = api.client.get("/v1/invoices/INV-00000001.pdf", headers=read)
    assert pdf.status_code == 200
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF")
    text = flat(pdf_pages(pdf.content)[0])
    assert "INV-00000001" in text
    assert meter in text
    html = api.client.get("/v1/invoices/INV-00000001.html", headers=read)
    assert html.status_code == 200
    assert html.headers["content-type"].startswith("text/html")
    assert "INV-00000001" in html.text
    assert meter in html.text
    # The same by content negotiation on the plain path.
    negotiated = api.client.get(
        "/v1/invoices/INV-00000001", headers={**read, "Accept": "application/pdf"}
    )
    assert negotiated.headers["content-type"] == "application/pdf"
    assert flat(pdf_pages(negotiated.content)[0]) == text
    negotiated = api.client.get(
        "/v1/invoices/INV-00000001", headers={**read, "Accept": "text/html, application/json"}
    )
    assert negotiated.text == html.text
    plain = api.client.get("/v1/invoices/INV-00000001", headers={**read, "Accept": "*/*"})
    assert plain.json()["number"] == "INV-00000001"


def test_a_late_revision_is_a_credit_note_under_its_own_collection(api: Api) -> None:
    [meter] = put_customers(api, 1)
    invoiced(api, [meter])
    api.services.runtime.ingestion.file([halved(meter)])
    work(api)
    answer = start(api, key="after-revision")
    work(api)
    run = api.client.get(answer.headers["Location"], headers=api.auth("read")).json()
    assert run["counts"]["credit_notes"] == 1
    read = api.auth("read")
    note = api.client.get("/v1/credit-notes/CN-00000001", headers=read).json()
    assert note["type"] == "credit_note"
    assert note["corrects"] == "INV-00000001"
    assert note["due_date"] is None
    assert Decimal(note["total"]) < 0
    assert note["free_kwh"] == "-1.5"
    assert [(day["date"], day["quota_version"]) for day in note["days"]] == [("2026-07-10", 2)]
    assert "Revised meter data" in note["reason"]
    invoice = api.client.get("/v1/invoices/INV-00000001", headers=read).json()
    assert invoice["corrected_by"] == ["CN-00000001"]
    # Each number under the other series' collection: a 404 that says what it is.
    wrong = api.client.get("/v1/invoices/CN-00000001", headers=read)
    assert wrong.status_code == 404
    assert wrong.json()["detail"] == (
        "number: CN-00000001 is a credit note (its series' number): /v1/credit-notes/CN-00000001"
    )
    wrong = api.client.get("/v1/credit-notes/INV-00000001.pdf", headers=read)
    assert wrong.status_code == 404
    assert "is an invoice" in wrong.json()["detail"]
    notes = api.client.get("/v1/credit-notes", headers=read).json()
    assert [item["number"] for item in notes["items"]] == ["CN-00000001"]
    invoices = api.client.get("/v1/invoices", headers=read).json()
    assert [item["number"] for item in invoices["items"]] == ["INV-00000001"]
    pdf = api.client.get("/v1/credit-notes/CN-00000001.pdf", headers=read)
    assert "CN-00000001" in flat(pdf_pages(pdf.content)[0])


def test_pages_of_invoices_follow_their_cursor(api: Api) -> None:
    meters = put_customers(api, 5)
    invoiced(api, meters)
    read = api.auth("read")
    seen: list[str] = []
    path: str | None = "/v1/invoices?from=2026-07-01&to=2026-07-31&limit=2"
    pages = 0
    while path is not None:
        answer = api.client.get(path, headers=read)
        assert answer.status_code == 200
        page = answer.json()
        DocumentPageOut.model_validate(page)
        seen += [item["number"] for item in page["items"]]
        if page["next"] is not None:
            assert answer.headers["Link"] == f'<{page["next"]}>; rel="next"'
        path = page["next"]
        pages += 1
    assert seen == [f"INV-0000000{n}" for n in range(1, 6)]
    assert pages == 3
    only = api.client.get(f"/v1/invoices?nmi={meters[3]}", headers=read).json()
    assert [(item["nmi"], item["number"]) for item in only["items"]] == [
        (meters[3], "INV-00000004")
    ]
    assert only["next"] is None
    assert "Link" not in api.client.get(f"/v1/invoices?nmi={meters[3]}", headers=read).headers
    before = api.client.get("/v1/invoices?to=2026-06-30", headers=read).json()
    assert before == {"items": [], "next": None}
    after = api.client.get("/v1/invoices?from=2026-08-01", headers=read).json()
    assert after["items"] == []


@pytest.mark.parametrize(
    "query",
    ["from=2026-08-01&to=2026-07-01", "cursor=nonsense", "cursor=WzEsMiwzXQ==", "limit=0"],
)
def test_a_bad_page_query_is_a_422(api: Api, query: str) -> None:
    answer = api.client.get(f"/v1/invoices?{query}", headers=api.auth("read"))
    assert answer.status_code == 422
    assert answer.json()["type"] == "/problems/validation-error"


def test_a_runs_journal_balances_each_document(api: Api) -> None:
    meters = put_customers(api, 3)
    run = invoiced(api, meters)
    answer = api.client.get(run["journal"], headers=api.auth("read"))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(answer.text, newline="")))
    assert tuple(rows[0]) == HEADER
    sums: Counter[str] = Counter()
    for row in rows[1:]:
        sums[row[0]] += Decimal(row[5])  # type: ignore[assignment]
        assert row[1] == "05/08/2026"
    assert sorted(sums) == sorted(f"INV-0000000{n} NMI {meters[n - 1]}" for n in (1, 2, 3))
    assert all(total == 0 for total in sums.values())
    with api.services.store.read() as unit:
        documents = unit.invoices.list_documents(run_id=run["run_id"])
    receivable = {row[0]: Decimal(row[5]) for row in rows[1:] if row[3] == "610"}
    assert receivable == {f"{d.number} NMI {d.nmi}": d.figures.total for d in documents}


# --- many at once ----------------------------------------------------------------------------

RACERS = 50


@pytest.fixture
def postgres_api(postgres_schemas: PostgresSchemas, settings: Settings) -> Iterator[Api]:
    with (
        postgres_schemas.migrated() as url,
        Store.open(url) as store,
        serving(store, settings) as api,
    ):
        api.clock.set(AFTER_JULY)
        yield api


@pytest.mark.postgres
def test_fifty_runs_at_once_invoice_each_period_once_with_gapless_numbers(
    postgres_api: Api,
) -> None:
    api = postgres_api
    meters = put_customers(api, 12)
    month(api, meters)

    def post(n: int) -> httpx.Response:
        return start(api, key=f"racer-{n}")

    with ThreadPoolExecutor(max_workers=RACERS) as pool:
        answers = list(pool.map(post, range(RACERS)))
    assert [a.status_code for a in answers] == [202] * RACERS
    assert len({a.json()["run_id"] for a in answers}) == RACERS
    # The jobs of all of them, by several workers at once.
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda _: work(api), range(4)))
    work(api)
    with api.services.store.read() as unit:
        runs = unit.invoices.list_runs(limit=100)
        documents = unit.invoices.list_documents(limit=10_000)
        serials = unit.invoices.serials(Series.INVOICE)
    assert len(runs) == RACERS
    assert all(run.finished for run in runs)
    assert sum(run.counts.invoices for run in runs) == len(meters)
    periods = Counter((d.nmi, d.period_start) for d in documents)
    assert periods == Counter({(m, JULY[0]): 1 for m in meters})
    assert all(d.document_type is DocumentType.INVOICE for d in documents)
    assert serials == list(range(1, len(meters) + 1))


@pytest.mark.postgres
@pytest.mark.slow
def test_fifty_runs_at_once_over_http_to_a_served_api_with_workers(
    postgres_schemas: PostgresSchemas,
) -> None:
    """The same race against ``freehours serve --workers 2`` over real HTTP, its workers doing
    the runs on the system clock: every period from July to last month billed once."""
    with postgres_schemas.migrated() as url:
        env = {"FREEHOURS_DATABASE_URL": url}
        with Store.open(url) as store:
            system = System.on(store)
            meters = system.customers(8)
            system.month(meters)
        key = freehours("keys", "create", "--scope", "admin", env=env)
        auth = {"Authorization": f"Bearer {key}"}
        with (
            api_server(env, extra_args=["--workers", "2"]) as base,
            httpx.Client(
                base_url=base, timeout=60, limits=httpx.Limits(max_connections=RACERS)
            ) as client,
        ):

            def post(n: int) -> httpx.Response:
                headers = {**auth, "Idempotency-Key": f"served-{n}"}
                return client.post("/v1/invoice-runs", headers=headers)

            with ThreadPoolExecutor(max_workers=RACERS) as pool:
                answers = list(pool.map(post, range(RACERS)))
            assert [a.status_code for a in answers] == [202] * RACERS
            locations = {a.headers["Location"] for a in answers}
            assert len(locations) == RACERS

            def all_done() -> bool:
                states = {client.get(path, headers=auth).json()["state"] for path in locations}
                return states == {"COMPLETED"}

            eventually(all_done, within=120, what="every run completed", every=0.5)
            replay = client.post(
                "/v1/invoice-runs", headers={**auth, "Idempotency-Key": "served-0"}
            )
            assert replay.json()["run_id"] == answers[0].json()["run_id"]
        with Store.open(url) as store, store.read() as unit:
            documents = unit.invoices.list_documents(limit=10_000)
            serials = unit.invoices.serials(Series.INVOICE)
            assert len(unit.invoices.list_runs(limit=100)) == RACERS
    periods = Counter((d.nmi, d.period_start) for d in documents)
    assert set(periods.values()) == {1}
    assert {(m, JULY[0]) for m in meters} <= set(periods)
    assert serials == list(range(1, len(documents) + 1))


def test_a_documents_html_loads_nothing_and_is_not_sniffed_in_the_api_and_the_console(
    api: Api,
) -> None:
    [meter] = put_customers(api, 1)
    invoiced(api, [meter])
    html = api.client.get("/v1/invoices/INV-00000001.html", headers=api.auth("read"))
    sign_in(api.client, api.keys["admin"])
    in_console = api.client.get("/console/documents/INV-00000001.html")
    assert in_console.status_code == 200
    for page in (html, in_console):
        policy = page.headers["content-security-policy"]
        assert policy.startswith("default-src 'none'; style-src 'sha256-")
        assert "frame-ancestors 'none'" in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["cache-control"] == "no-store"
        # The hash the policy names is the page's one <style>, as a browser hashes it.
        style = page.text.split("<style>", 1)[1].split("</style>", 1)[0]
        digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
        assert f"style-src 'sha256-{digest}'" in policy
        assert page.text.count("</style>") == 1
        assert " style=" not in page.text
        assert "<script" not in page.text
    pdf = api.client.get("/v1/invoices/INV-00000001.pdf", headers=api.auth("read"))
    assert pdf.headers["x-content-type-options"] == "nosniff"


def test_an_invoice_keeps_its_better_offer_check_and_the_api_answers_it_on_demand(
    api: Api,
) -> None:
    document = {**builtin_document("sso-nsw"), "id": "cheap-nsw", "daily_supply_charge": "0.50"}
    with api.services.store.write() as unit:
        unit.catalog.put_offers(
            [
                NewOffer(
                    "cheap-nsw", "Cheap Saver", OfferSource.PLAN, OfferTerms(Region.NSW), document
                )
            ],
            at=api.clock.now(),
        )
    (meter,) = put_customers(api, 1)
    invoiced(api, [meter])
    listed = api.client.get("/v1/invoices", headers=api.auth("read")).json()["items"]
    whole = api.client.get(listed[0]["links"]["document"], headers=api.auth("read")).json()
    DocumentOut.model_validate(whole)
    check = whole["better_offer"]
    assert check["outcome"] == "better_offer"
    assert check["offer"]["offer_id"] == "cheap-nsw"
    assert check["data_from"] == "2026-07-01"
    assert [row["kind"] for row in whole["usage"]] == ["this_period"]

    path = f"/v1/customers/{meter}/better-offer"
    answer = api.client.get(path, params={"as_of": "2026-08-01"}, headers=api.auth("read"))
    assert answer.status_code == 200, answer.text
    assert answer.json() == check  # the invoice's check, made again
    assert api.client.get(path).status_code == 401
    missing = api.client.get("/v1/customers/4103099999/better-offer", headers=api.auth("read"))
    assert missing.status_code == 404
    assert missing.json()["type"].endswith("/problems/customer-not-found")
    bad = api.client.get(path, params={"as_of": "2026-13-01"}, headers=api.auth("read"))
    assert bad.status_code == 422
