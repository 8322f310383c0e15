"""Issue 13, items 4 and 5: dates, numbers, NMIs and suffixes past their range are refused where
they enter (422 naming the field, nothing stored), on SQLite and PostgreSQL, and what follows
(a customer for that NMI, a bill, a settlement) answers, never a 500."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from freehours.settlement.model import PLAN_NOT_VALID
from freehours.store.tables import meter_days, plans, quotas
from tests.api.conftest import PLAN, START, Api
from tests.meterdata.nem12_text import channel, day, nem12

NMI = "4102000001"
# START is 1 July 2026 in NEM time: reads may be dated up to 4 July (freehours.domain.reads).
FAR = (START + timedelta(days=30)).date()


def rows(api: Api, table: sa.Table) -> int:
    with api.services.store.read() as unit:
        return unit.connection.scalar(sa.select(sa.func.count()).select_from(table)) or 0


def put_customer(api: Api, nmi: str = NMI):
    return api.client.put(
        f"/v1/customers/{nmi}",
        json={"plan_id": "test-nsw", "region": "NSW"},
        headers=api.auth("admin"),
    )


def put_plan(api: Api, document: dict[str, Any], plan_id: str = "test-nsw"):
    return api.client.put(f"/v1/plans/{plan_id}", json=document, headers=api.auth("admin"))


def bill(api: Api, first: str = "2026-07-01", last: str = "2026-07-01"):
    return api.client.get(
        f"/v1/customers/{NMI}/bill", params={"from": first, "to": last}, headers=api.auth("read")
    )


def problem_fields(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return [error["field"] for error in response.json().get("errors", [])]


# --- NEM12 uploads ------------------------------------------------------------------------------

FAR_DATE = FAR.strftime("%Y%m%d")
NEM12_CASES = [
    ("date 9999-12-31", nem12(channel(NMI), day("99991231")), "IntervalDate", "9999-12-31"),
    ("date year 1", nem12(channel(NMI), day("00010101")), "IntervalDate", "0001-01-01"),
    ("date 1999", nem12(channel(NMI), day("19991231")), "IntervalDate", "before 2000-01-01"),
    ("date next month", nem12(channel(NMI), day(FAR_DATE)), "IntervalDate", "days ahead"),
    ("kwh 40 nines", nem12(channel(NMI), day(value="9" * 40)), "IntervalValue1", "not below"),
    ("kwh 1e999999", nem12(channel(NMI), day(value="1e999999")), "IntervalValue1", "decimal"),
    ("kwh 1e309", nem12(channel(NMI), day(value="1e309")), "IntervalValue1", "decimal"),
    (
        "kwh 1e-999999 written out",
        nem12(channel(NMI), day(value="0." + "0" * 20 + "1")),
        "IntervalValue1",
        "more than 6 decimal places",
    ),
    ("kwh arabic-indic", nem12(channel(NMI), day(value="\u0663")), "IntervalValue1", "decimal"),
    (
        "kwh full-width",
        nem12(channel(NMI), day(value="\uff10.\uff15")),
        "IntervalValue1",
        "decimal",
    ),
    ("nmi lower case", nem12(channel("nlower0001"), day()), "NMI", "'nlower0001' is not an NMI"),
    ("nmi short", nem12(channel("ABC"), day()), "NMI", "'ABC' is not an NMI"),
    ("suffix lower case", nem12(channel(NMI, suffix="e1"), day()), "NMISuffix", "'e1'"),
    ("suffix digit first", nem12(channel(NMI, suffix="1E"), day()), "NMISuffix", "'1E'"),
    (
        "update time 9999",
        nem12(channel(NMI), day(stamp="99991231235959")),
        "UpdateDateTime",
        "9999-12-31",
    ),
]


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [pytest.param(text, field, words, id=case) for case, text, field, words in NEM12_CASES],
)
def test_a_nem12_value_out_of_range_is_422_naming_line_and_field_and_stores_nothing(
    api: Api, text: str, field: str, words: str
) -> None:
    headers = {**api.auth("ingest"), "Idempotency-Key": "f1", "Content-Type": "text/csv"}
    response = api.client.post(
        "/v1/meter-readings/nem12", content=text.encode("utf-8"), headers=headers
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert f"upload.csv:{3 if field.startswith(('Interval', 'Update')) else 2}:" in detail
    assert f"(field {field})" in detail
    assert words in detail
    assert rows(api, meter_days) == 0
    # What the issue saw fail afterwards: a customer for that NMI, and its bill.
    assert put_plan(api, PLAN).status_code == 200
    assert put_customer(api).status_code == 200
    assert bill(api).status_code == 200


# --- JSON reads ----------------------------------------------------------------------------------


def reads_body(start: str = "2026-07-01T11:00:00+10:00", kwh: object = "0.412", **over: Any):
    body: dict[str, Any] = {
        "nmi": NMI,
        "suffix": "E1",
        "interval_minutes": 30,
        "reads": [{"start": start, "kwh": kwh, "quality": "A"}],
    }
    return {**body, **over}


JSON_CASES = [
    ("start 9999", reads_body(start="9999-12-31T23:30:00+10:00"), "body.reads.0.start"),
    ("start year 1", reads_body(start="0001-01-01T00:00:00+10:00"), "body.reads.0.start"),
    ("start year 1 utc", reads_body(start="0001-01-01T00:00:00Z"), "body.reads.0.start"),
    ("start 1999", reads_body(start="1999-12-31T11:00:00+10:00"), "body.reads.0.start"),
    ("start next month", reads_body(start=f"{FAR}T11:00:00+10:00"), "body.reads.0.start"),
    ("kwh 1e999999", reads_body(kwh="1e999999"), "body.reads.0.kwh"),
    ("kwh 1e309", reads_body(kwh="1e309"), "body.reads.0.kwh"),
    ("kwh 40 nines", reads_body(kwh="9" * 40), "body.reads.0.kwh"),
    ("kwh 40 nines as a number", reads_body(kwh=int("9" * 40)), "body.reads.0.kwh"),
    ("kwh 1e-999999", reads_body(kwh="1e-999999"), "body.reads.0.kwh"),
    ("kwh 7 places", reads_body(kwh="0.0000001"), "body.reads.0.kwh"),
    ("kwh arabic-indic", reads_body(kwh="\u0663"), "body.reads.0.kwh"),
    ("kwh full-width", reads_body(kwh="\uff10.\uff15"), "body.reads.0.kwh"),
    ("kwh NaN", reads_body(kwh="NaN"), "body.reads.0.kwh"),
    ("kwh Infinity", reads_body(kwh="Infinity"), "body.reads.0.kwh"),
    ("kwh negative", reads_body(kwh="-1"), "body.reads.0.kwh"),
    ("kwh float", reads_body(kwh=0.5), "body.reads.0.kwh"),
    ("kwh true", reads_body(kwh=True), "body.reads.0.kwh"),
    ("nmi lower case", reads_body(nmi="nlower0001"), "body.nmi"),
    ("nmi short", reads_body(nmi="ABC"), "body.nmi"),
    ("suffix lower case", reads_body(suffix="e1"), "body.suffix"),
    ("suffix digit first", reads_body(suffix="1E"), "body.suffix"),
]


@pytest.mark.parametrize(
    ("body", "field"), [pytest.param(body, field, id=case) for case, body, field in JSON_CASES]
)
def test_a_json_read_out_of_range_is_422_naming_the_field_and_stores_nothing(
    api: Api, body: dict[str, Any], field: str
) -> None:
    headers = {**api.auth("ingest"), "Idempotency-Key": "r1"}
    response = api.client.post("/v1/meter-readings", json=body, headers=headers)
    assert problem_fields(response) == [field]
    assert rows(api, meter_days) == 0
    assert put_plan(api, PLAN).status_code == 200
    assert put_customer(api).status_code == 200
    assert bill(api).status_code == 200


def test_reads_at_the_edges_of_the_ranges_are_stored(api: Api) -> None:
    latest = START.date() + timedelta(days=3)  # START is already 1 July in NEM time
    body = reads_body(kwh="999999.999999")
    body["reads"].append({"start": f"{latest}T23:30:00+10:00", "kwh": "0.000001"})
    body["reads"].append({"start": "2000-01-01T00:00:00+10:00", "kwh": 7})
    headers = {**api.auth("ingest"), "Idempotency-Key": "r1"}
    response = api.client.post("/v1/meter-readings", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 3


# --- settlements, bills, plans -------------------------------------------------------------------


@pytest.mark.parametrize(
    "day_text", ["9999-12-31", "0001-01-01", "1999-12-31", FAR.isoformat(), "2100-01-01"]
)
def test_a_settlement_date_out_of_range_is_422_naming_it_and_stores_no_quota(
    api: Api, day_text: str
) -> None:
    assert put_plan(api, PLAN).status_code == 200
    assert put_customer(api).status_code == 200
    response = api.client.post(
        "/v1/free-energy/settlements",
        json={"nmi": NMI, "date": day_text},
        headers=api.auth("settle"),
    )
    assert problem_fields(response) == ["body.date"]
    assert "Retry-After" not in response.headers
    assert rows(api, quotas) == 0
    state = api.client.get(
        f"/v1/free-energy/settlements/{NMI}/{day_text}", headers=api.auth("read")
    )
    assert problem_fields(state) == ["path.day"]


@pytest.mark.parametrize(
    ("first", "last", "fields"),
    [
        ("0001-01-01", "0001-01-02", ["query.from", "query.to"]),
        ("1999-12-31", "2000-01-01", ["query.from"]),
        ("9999-12-30", "9999-12-31", ["query.from", "query.to"]),
        ("2099-12-31", "2100-01-01", ["query.to"]),
        ("946684800", "2000-01-02", ["query.from"]),  # seconds since 1970: not YYYY-MM-DD
    ],
)
def test_a_bill_for_dates_out_of_range_is_422_naming_every_bound(
    api: Api, first: str, last: str, fields: list[str]
) -> None:
    assert put_plan(api, PLAN).status_code == 200
    assert put_customer(api).status_code == 200
    assert problem_fields(bill(api, first, last)) == fields


def test_a_bill_at_the_last_date_in_range_answers(api: Api) -> None:
    assert put_plan(api, PLAN).status_code == 200
    assert put_customer(api).status_code == 200
    assert bill(api, "2099-12-30", "2099-12-31").status_code == 200


@pytest.mark.parametrize(
    ("key", "price"),
    [
        ("time_of_use[0].unit_price", "1e999999"),
        ("time_of_use[0].unit_price", "1000"),
        ("time_of_use[0].unit_price", "0.0000001"),
        ("daily_supply_charge", "1e999999"),
        ("feed_in.unit_price", "1E+30"),
    ],
)
def test_a_plan_price_out_of_range_is_refused_naming_its_key_and_not_stored(
    api: Api, key: str, price: str
) -> None:
    document = {**PLAN, "time_of_use": [dict(band) for band in PLAN["time_of_use"]]}
    if key == "daily_supply_charge":
        document["daily_supply_charge"] = price
    elif key == "feed_in.unit_price":
        document["feed_in"] = {"unit_price": price}
    else:
        document["time_of_use"][0]["unit_price"] = price
    response = put_plan(api, document)
    assert response.status_code == 422
    assert f"plan test-nsw: {key}: " in response.json()["detail"]
    assert rows(api, plans) == 0


def test_a_stored_plan_that_no_longer_parses_aborts_with_a_fixed_reason(api: Api) -> None:
    """A plan stored before its price was refused (put straight into the store here): the
    settlement is a 422 ABORTED saying so, without the parser's text, and stores no quota."""
    bad = {**PLAN, "daily_supply_charge": "1e999999"}
    with api.services.store.write() as unit:
        unit.catalog.put_plan("test-nsw", bad, updated_at=api.clock.now())
    assert put_customer(api).status_code == 200
    response = api.client.post(
        "/v1/free-energy/settlements",
        json={"nmi": NMI, "date": date(2026, 7, 1).isoformat()},
        headers=api.auth("settle"),
    )
    assert response.status_code == 422
    assert response.json()["status"] == "ABORTED"
    assert response.json()["reason"] == PLAN_NOT_VALID
    assert rows(api, quotas) == 0


def test_a_far_day_stored_before_the_ranges_does_not_break_its_customer(api: Api) -> None:
    """A row dated 9999-12-31, stored before the reader refused it (written straight into the
    table here): creating the customer of its NMI answers, and so do its bills."""
    with api.services.store.write() as unit:
        unit.connection.execute(
            meter_days.insert().values(
                nmi=NMI,
                suffix="E1",
                day=date(9999, 12, 31),
                interval_minutes=30,
                uom="KWH",
                interval_values=",".join(["0.5"] * 48),
                qualities="A" * 48,
                update_datetime=None,
                received_at=api.clock.now(),
            )
        )
    assert put_plan(api, PLAN).status_code == 200
    assert put_customer(api).status_code == 200
    assert bill(api).status_code == 200


# --- strict JSON types (docs/api.md): no number for a date, no float or string for an integer ----

READ = {"start": "2026-07-01T11:00:00+10:00", "kwh": "0.4", "quality": "A"}
BATCH = {"nmi": NMI, "suffix": "E1", "interval_minutes": 30, "reads": [READ]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**BATCH, "reads": [{**READ, "start": 1782867600}]}, "body.reads.0.start"),
        ({**BATCH, "reads": [{**READ, "start": "1782867600"}]}, "body.reads.0.start"),
        ({**BATCH, "reads": [{**READ, "start": "2026-07-01"}]}, "body.reads.0.start"),
        (
            {**BATCH, "reads": [{**READ, "start": "0001-01-01T00:00:00+10:00"}]},
            "body.reads.0.start",
        ),
        ({**BATCH, "interval_minutes": 30.0}, "body.interval_minutes"),
        ({**BATCH, "interval_minutes": "30"}, "body.interval_minutes"),
        ({**BATCH, "interval_minutes": True}, "body.interval_minutes"),
        ({**BATCH, "nmi": 4102000001}, "body.nmi"),
    ],
)
def test_a_read_of_a_loose_type_is_422_naming_it(
    api: Api, body: dict[str, Any], field: str
) -> None:
    response = api.client.post(
        "/v1/meter-readings", json=body, headers={**api.auth("ingest"), "Idempotency-Key": "k"}
    )
    assert problem_fields(response) == [field]
    assert rows(api, meter_days) == 0


@pytest.mark.parametrize(
    ("date_value", "field"),
    [(20260701, "body.date"), ("20260701", "body.date"), ("0001-01-01", "body.date")],
)
def test_a_settlement_date_of_a_loose_type_or_out_of_range_is_422(
    api: Api, date_value: object, field: str
) -> None:
    response = api.client.post(
        "/v1/free-energy/settlements",
        json={"nmi": NMI, "date": date_value},
        headers=api.auth("settle"),
    )
    assert problem_fields(response) == [field]


@pytest.mark.parametrize("day_value", ["0001-01-01", "20260701", "1782820800"])
def test_a_settlement_path_date_out_of_form_or_range_is_422(api: Api, day_value: str) -> None:
    response = api.client.get(
        f"/v1/free-energy/settlements/{NMI}/{day_value}", headers=api.auth("read")
    )
    assert problem_fields(response) == ["path.day"]


@pytest.mark.parametrize("bound", ["from", "to"])
def test_a_document_list_date_out_of_range_is_422(api: Api, bound: str) -> None:
    response = api.client.get(
        "/v1/invoices", params={bound: "0001-01-01"}, headers=api.auth("read")
    )
    assert problem_fields(response) == [f"query.{bound}"]


def test_a_customer_anchor_day_as_a_string_is_422(api: Api) -> None:
    assert put_plan(api, PLAN).status_code == 200
    response = api.client.put(
        f"/v1/customers/{NMI}",
        json={"plan_id": "test-nsw", "region": "NSW", "anchor_day": "1"},
        headers=api.auth("admin"),
    )
    assert problem_fields(response) == ["body.anchor_day"]
