"""What each request leaves behind: its canonical log line, its server span, and /metrics moving."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest
from opentelemetry.trace import SpanKind, format_span_id
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from freehours.domain.time import NEM_TIME
from freehours.observability.logging import add_trace_context
from freehours.settlement.model import SettleRequest
from tests.api.conftest import Api
from tests.api.test_settlements import NMI, set_up, settle
from tests.metrics import Samples
from tests.tracing import Spans

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
SETTLEMENTS = "/v1/free-energy/settlements"


def scrape(api: Api) -> Samples:
    """/metrics through the app."""
    response = api.client.get("/metrics")
    assert response.status_code == 200
    return Samples.of(response.text)


def reads_body(first: datetime, count: int) -> dict[str, object]:
    reads = [
        {"start": (first + timedelta(minutes=30 * n)).isoformat(), "kwh": "0.250"}
        for n in range(count)
    ]
    return {"nmi": NMI, "suffix": "E1", "interval_minutes": 30, "reads": reads}


def finished(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [line for line in logs if line["event"] == "request_finished"]


def test_a_settlement_logs_one_canonical_line_with_its_quota_and_the_clients_trace(
    api: Api, spans: Spans
) -> None:
    set_up(api)
    with capture_logs(processors=[merge_contextvars, add_trace_context]) as logs:
        response = api.client.post(
            SETTLEMENTS,
            json={"nmi": NMI, "date": "2026-07-01"},
            headers={**api.auth("settle"), "traceparent": TRACEPARENT},
        )
    assert response.status_code == 200
    server = spans.one(f"POST {SETTLEMENTS}")
    assert server.kind is SpanKind.SERVER
    assert server.parent is not None
    assert format_span_id(server.parent.span_id) == CLIENT_SPAN
    (line,) = finished(logs)
    duration = line.pop("duration_ms")
    assert isinstance(duration, float)
    assert duration >= 0
    assert line.pop("key_id")
    assert line == {
        "event": "request_finished",
        "log_level": "info",
        "method": "POST",
        "route": SETTLEMENTS,
        "status": 200,
        "nmi": NMI,
        "date": "2026-07-01",
        "quota_state": "COMPLETED",
        "trace_id": TRACE_ID,
        "span_id": format_span_id(server.context.span_id),
    }
    # The settlement's own lines are in the request's trace too, and say which quota.
    (claimed,) = [entry for entry in logs if entry["event"] == "quota_completed"]
    assert (claimed["trace_id"], claimed["nmi"], claimed["date"]) == (TRACE_ID, NMI, "2026-07-01")


def test_the_settlements_spans_are_inside_the_requests_span(api: Api, spans: Spans) -> None:
    set_up(api)
    assert settle(api).status_code == 200
    # The request's batch (of one here) inside the request's span; the answer on that span.
    batch = spans.one("settlement.batch")
    assert spans.ancestors(batch)[-1] == f"POST {SETTLEMENTS}"
    assert batch.attributes is not None
    assert batch.attributes["freehours.settlement.batch"] == 1
    server = spans.one(f"POST {SETTLEMENTS}")
    assert server.attributes is not None
    assert server.attributes["freehours.settlement.outcome"] == "settled"
    assert server.attributes["freehours.quota.key"] == f"{NMI}:2026-07-01"
    settlement = spans.one("settlement.settle_many")
    assert settlement.parent == batch.context
    for name in ("settlement.claim", "settlement.complete", "cache.put"):
        assert spans.one(name).parent == settlement.context, name


def test_a_replayed_ingest_is_logged_with_its_idempotency_key_as_a_replay(api: Api) -> None:
    set_up(api, with_data=False)
    body = reads_body(datetime(2026, 7, 1, tzinfo=NEM_TIME), 4)
    headers = {**api.auth("ingest"), "Idempotency-Key": "batch-1"}
    with capture_logs() as logs:
        first = api.client.post("/v1/meter-readings", json=body, headers=headers)
        again = api.client.post("/v1/meter-readings", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (200, 200)
    lines = finished(logs)
    assert [(line["idempotency_key"], line["nmi"]) for line in lines] == [("batch-1", NMI)] * 2
    assert ["replayed" in line for line in lines] == [False, True]
    assert lines[1]["replayed"] is True


def test_a_refused_request_is_an_information_line_with_its_status(api: Api) -> None:
    with capture_logs() as logs:
        response = api.client.get("/v1/customers/4102000001/bill?from=2026-07-01&to=2026-07-01")
    assert response.status_code == 401
    (line,) = finished(logs)
    assert (line["log_level"], line["status"], line["route"]) == (
        "info",
        401,
        "/v1/customers/{nmi}/bill",
    )


def test_a_request_that_breaks_is_an_error_line_with_status_500(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_up(api)

    def broken(requests: Sequence[SettleRequest]) -> None:
        raise RuntimeError("the settlement broke")

    monkeypatch.setattr(api.services.settlements, "settle_many", broken)
    with capture_logs() as logs, pytest.raises(RuntimeError, match="the settlement broke"):
        settle(api)
    (line,) = finished(logs)
    assert (line["log_level"], line["status"], line["nmi"]) == ("error", 500, NMI)
    assert str(line["exc_info"]) == "the settlement broke"


def test_probes_and_scrapes_are_logged_at_debug_level(api: Api) -> None:
    with capture_logs() as logs:
        assert api.client.get("/healthz").status_code == 200
    (line,) = finished(logs)
    assert (line["log_level"], line["route"]) == ("debug", "/healthz")


def test_metrics_move_with_ingests_and_settlements_by_route_and_status(api: Api) -> None:
    set_up(api, with_data=False)
    before = scrape(api)
    body = reads_body(datetime(2026, 7, 1, tzinfo=NEM_TIME), 48)
    ingest = {**api.auth("ingest"), "Idempotency-Key": "day-1"}
    assert api.client.post("/v1/meter-readings", json=body, headers=ingest).status_code == 200
    assert settle(api).status_code == 200
    assert settle(api, day="2026-07-02").status_code == 409  # its window is still open
    read = api.auth("read")
    assert api.client.get(f"{SETTLEMENTS}/{NMI}/2026-07-01", headers=read).status_code == 200
    assert api.client.get("/nowhere").status_code == 404
    after = scrape(api)

    def moved(name: str, **labels: str) -> float:
        return after.count(name, **labels) - before.count(name, **labels)

    requests = "freehours_http_requests_total"
    assert moved(requests, method="POST", route=SETTLEMENTS, status="200") == 1
    assert moved(requests, method="POST", route=SETTLEMENTS, status="409") == 1
    assert moved(requests, method="POST", route="/v1/meter-readings", status="200") == 1
    state_route = "/v1/free-energy/settlements/{nmi}/{day}"
    assert moved(requests, method="GET", route=state_route, status="200") == 1
    assert moved(requests, method="GET", route="unmatched", status="404") == 1
    seconds = "freehours_http_request_seconds_count"
    assert moved(seconds, method="POST", route=SETTLEMENTS) == 2
    outcomes = "freehours_settlement_outcomes_total"
    assert moved(outcomes, status="COMPLETED", replayed="false") == 1
    assert moved(outcomes, status="PENDING", replayed="false") == 1
    assert moved("freehours_ingested_values_total", path="reads") == 48
    assert moved("freehours_settlement_seconds_count") == 1


def test_jobs_waiting_with_no_worker_are_stuck_on_the_apis_own_metrics(api: Api) -> None:
    # The API runs no worker here, as an API deployed without one: reads for past days enqueue
    # their settlement jobs, due at once, and nobody starts them.
    set_up(api, with_data=False)
    ingest = api.auth("ingest")
    for n, first in enumerate(
        [datetime(2026, 6, 1, tzinfo=NEM_TIME), datetime(2026, 6, 2, tzinfo=NEM_TIME)]
    ):
        body = reads_body(first, 48)
        headers = {**ingest, "Idempotency-Key": f"day-{n}"}
        assert api.client.post("/v1/meter-readings", json=body, headers=headers).status_code == 200
    api.clock.advance(21)  # due for over 20 s
    assert scrape(api).value("freehours_jobs_stuck") == 2


def test_the_documentation_is_counted_under_its_own_routes_not_unmatched(api: Api) -> None:
    before = scrape(api)
    paths = {
        "/openapi.json": "/openapi.json",
        "/docs": "/docs",
        "/redoc": "/redoc",
        "/docs/static/swagger-ui.css": "/docs/static",
        "/docs/static/redoc.standalone.js": "/docs/static",
    }
    for path in paths:
        assert api.client.get(path).status_code == 200, path
    assert api.client.get("/docs/static/nothing.js").status_code == 404
    after = scrape(api)

    def moved(route: str, status: str = "200") -> float:
        labels = {"method": "GET", "route": route, "status": status}
        name = "freehours_http_requests_total"
        return after.count(name, **labels) - before.count(name, **labels)

    assert moved("/openapi.json") == 1
    assert moved("/docs") == moved("/redoc") == 1
    assert moved("/docs/static") == 2
    assert moved("/docs/static", "404") == 1  # an asset it does not have: still its route
    assert moved("unmatched") == moved("unmatched", "404") == 0
