"""POST /v1/meter-readings and /v1/meter-readings/nem12: ingest, Idempotency-Key, limits."""

from __future__ import annotations

import io
import threading
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa

from freehours.api import idempotency
from freehours.api.keys import find_key
from freehours.api.routes.meter_readings import MeterReadingsIn
from freehours.domain.reads import IntervalDay
from freehours.domain.time import NEM_TIME
from freehours.meterdata.writer import write_nem12
from freehours.settings import Settings
from freehours.store.database import Store
from freehours.store.tables import idempotency_keys
from tests.api.conftest import Api, serving
from tests.jobs.support import postgres_only
from tests.support import eventually

NMI = "4102000001"


def batch(*kwh: str, start_hour: int = 11) -> dict[str, object]:
    """Reads of consecutive half-hours from ``start_hour`` on 1 July 2026 (NEM time)."""
    first = datetime(2026, 7, 1, start_hour, tzinfo=NEM_TIME)
    return {
        "nmi": NMI,
        "suffix": "E1",
        "interval_minutes": 30,
        "reads": [
            {"start": (first + timedelta(minutes=30 * i)).isoformat(), "kwh": v, "quality": "A"}
            for i, v in enumerate(kwh)
        ],
    }


def post(api: Api, body: object, key: str | None = "k1", scope: str = "ingest"):
    headers = api.auth(scope)
    if key is not None:
        headers["Idempotency-Key"] = key
    return api.client.post("/v1/meter-readings", json=body, headers=headers)


def stored(api: Api) -> list[IntervalDay]:
    with api.services.store.read() as unit:
        return unit.meter.days_for(NMI, [date(2026, 7, 1)])


def test_reads_are_stored_and_counted(api: Api) -> None:
    response = post(api, batch("0.412", "0.300"))
    assert response.status_code == 200
    assert response.json() == {"accepted": 2, "superseded": 0, "unchanged": 0}
    (day,) = stored(api)
    assert day.values[22:24] == (Decimal("0.412"), Decimal("0.300"))


def test_reads_for_an_nmi_without_a_customer_are_stored_all_the_same(api: Api) -> None:
    assert post(api, batch("1.000")).status_code == 200
    assert len(stored(api)) == 1


def test_same_key_same_payload_replays_the_first_answer(api: Api) -> None:
    first = post(api, batch("0.412"))
    again = post(api, batch("0.412"))
    assert again.status_code == 200
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers


def test_a_new_key_for_the_same_reads_counts_them_unchanged(api: Api) -> None:
    post(api, batch("0.412"), key="k1")
    assert post(api, batch("0.412"), key="k2").json() == {
        "accepted": 0,
        "superseded": 0,
        "unchanged": 1,
    }


def test_a_later_read_supersedes(api: Api) -> None:
    post(api, batch("0.412"), key="k1")
    assert post(api, batch("0.500"), key="k2").json()["superseded"] == 1


def test_missing_idempotency_key_is_400(api: Api) -> None:
    response = post(api, batch("0.412"), key=None)
    assert response.status_code == 400
    assert response.json()["type"] == "/problems/idempotency-key-missing"
    assert stored(api) == []


def test_same_key_different_payload_is_422(api: Api) -> None:
    post(api, batch("0.412"))
    response = post(api, batch("0.999"))
    assert response.status_code == 422
    assert response.json()["type"] == "/problems/idempotency-key-reused"


def test_same_key_while_the_first_is_in_flight_is_409(api: Api) -> None:
    body = batch("0.412")
    with api.services.store.write() as unit:
        key = find_key(unit.keys, api.keys["ingest"])
        assert key is not None
        # The first request has begun and not finished: its key is recorded as in flight.
        payload = MeterReadingsIn.model_validate(body).model_dump_json().encode()
        idempotency.begin(
            unit.idempotency,
            principal=key.id,
            key="k1",
            request_hash=idempotency.fingerprint("POST", "/v1/meter-readings", payload),
            now=api.clock.now(),
            in_flight_timeout=timedelta(seconds=30),
        )
    response = post(api, body)
    assert response.status_code == 409
    assert response.json()["type"] == "/problems/idempotency-key-in-flight"
    assert api.services.settings.idempotency_in_flight_seconds == 30
    assert response.headers["Retry-After"] == "30"  # the lease's whole length is left
    api.clock.advance(15.5)
    # The true wait: the key is free once the lease of the (dead) first request runs out.
    assert post(api, body).headers["Retry-After"] == "15"
    api.clock.advance(14)
    assert post(api, body).headers["Retry-After"] == "1"
    api.clock.advance(1)  # the first request died: its key is taken over
    assert post(api, body).status_code == 200


def test_batch_over_the_limit_is_413(api: Api) -> None:
    response = post(api, batch(*["0.1"] * 101, start_hour=0))
    assert response.status_code == 413
    assert "reads: 101 reads" in response.json()["detail"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"nmi": "short"}, "body.nmi"),
        ({"interval_minutes": 7}, "body.interval_minutes"),
        ({"reads": [{"start": "2026-07-01T11:00:00", "kwh": "1"}]}, "body.reads.0.start"),
        ({"reads": [{"start": "2026-07-01T11:00:00+10:00", "kwh": 1.5}]}, "body.reads.0.kwh"),
        ({"reads": [{"start": "2026-07-01T11:00:00+10:00", "kwh": "-1"}]}, "body.reads.0.kwh"),
        (
            {"reads": [{"start": "2026-07-01T11:00:00+10:00", "kwh": "1", "quality": "Z"}]},
            "body.reads.0.quality",
        ),
    ],
)
def test_malformed_body_is_422_naming_the_field(
    api: Api, change: dict[str, object], field: str
) -> None:
    response = post(api, {**batch("0.1"), **change})
    assert response.status_code == 422
    fields = [e["field"] for e in response.json()["errors"]]
    assert field in fields


def test_a_read_off_the_interval_grid_is_422_and_nothing_is_stored(api: Api) -> None:
    body = batch("0.1", "0.2")
    body["reads"][1]["start"] = "2026-07-01T11:10:00+10:00"  # type: ignore[index]
    response = post(api, body)
    assert response.status_code == 422
    assert stored(api) == []


def nem12_file(value: str, stamp_hour: int = 12) -> bytes:
    day = IntervalDay(
        NMI,
        "E1",
        date(2026, 7, 1),
        30,
        tuple(Decimal(value) for _ in range(48)),
        "A" * 48,
        datetime(2026, 7, 2, stamp_hour, tzinfo=NEM_TIME),
    )
    out = io.StringIO()
    # The header's DateTime fixed, not now: the same file on every call (a replay's body), and
    # no record indicator hiding in it (23:00 is written ...2300,).
    write_nem12([day], out, created=datetime(2026, 7, 3, 9, tzinfo=NEM_TIME))
    return out.getvalue().encode()


def post_nem12(api: Api, body: bytes, key: str = "f1"):
    headers = {**api.auth("ingest"), "Idempotency-Key": key, "Content-Type": "text/csv"}
    return api.client.post("/v1/meter-readings/nem12", content=body, headers=headers)


def test_nem12_upload_is_stored(api: Api) -> None:
    response = post_nem12(api, nem12_file("0.250"))
    assert response.status_code == 200
    assert response.json()["channel_days_accepted"] == 1
    (day,) = stored(api)
    assert sum(v for v in day.values if v is not None) == Decimal("12.000")


def test_nem12_answers_count_channel_days_and_say_so_where_reads_count_reads(api: Api) -> None:
    """One word, one unit: ``accepted`` counts interval reads (the JSON answer); a NEM12 file is
    counted in channel-days, under names that say it."""
    first = post_nem12(api, nem12_file("0.250"))
    assert first.json() == {
        "file": "upload.csv",
        "intervals": 48,
        "channel_days_accepted": 1,
        "channel_days_superseded": 0,
        "channel_days_unchanged": 0,
        "channel_days_stale": 0,
    }
    newer = post_nem12(api, nem12_file("0.300", stamp_hour=13), key="f2").json()
    older = post_nem12(api, nem12_file("0.100", stamp_hour=11), key="f3").json()
    same = post_nem12(api, nem12_file("0.300", stamp_hour=13), key="f4").json()
    assert [
        (a["channel_days_superseded"], a["channel_days_stale"], a["channel_days_unchanged"])
        for a in (newer, older, same)
    ] == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    # The same day as 48 JSON reads: counted read by read (two of them different).
    body = batch("0.900", "0.800", *["0.300"] * 46, start_hour=0)
    assert post(api, body, key="r1").json() == {"accepted": 0, "superseded": 2, "unchanged": 46}


def test_nem12_upload_with_a_bad_line_is_422_naming_it_and_stores_nothing(api: Api) -> None:
    good = nem12_file("0.250").decode().splitlines()
    bad = "\n".join([*good[:2], good[2].replace("0.250", "zzz", 1), *good[3:]]).encode()
    response = post_nem12(api, bad)
    assert response.status_code == 422
    assert ":3" in response.json()["detail"]
    assert stored(api) == []
    # The answer is final for that key: a repeat replays the same 422.
    again = post_nem12(api, bad)
    assert (again.status_code, again.headers["Idempotent-Replayed"]) == (422, "true")


def test_nem12_upload_over_the_limit_is_413(api: Api) -> None:
    response = post_nem12(api, b"100," + b"x" * 200_001)
    assert response.status_code == 413


def test_concurrent_repeats_of_one_key_ingest_once(api: Api) -> None:
    body = batch("0.412", "0.300")
    answers: list[int] = []

    def send() -> None:
        answers.append(post(api, body, key="same").status_code)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(answers) <= {200, 409}
    assert answers.count(200) >= 1
    (day,) = stored(api)
    assert day.values[22:24] == (Decimal("0.412"), Decimal("0.300"))


@postgres_only
def test_a_key_stays_held_while_its_request_runs_however_long(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that runs for many leases keeps its key: a repeat is a 409 saying how long
    to wait, never a second run; once the first finishes, the repeat replays its answer.
    (PostgreSQL: on SQLite the work's write transaction holds the only writer's place, so
    neither a renewal nor a takeover can happen until it ends.)"""
    lease = 0.6
    short = settings.model_copy(update={"idempotency_in_flight_seconds": lease})
    with serving(store, short) as api:
        ingestion = api.services.runtime.ingestion
        entered, release = threading.Event(), threading.Event()
        real_reads = ingestion.reads
        runs: list[int] = []

        def slow_reads(unit, reads, arrival=None):  # type: ignore[no-untyped-def]
            runs.append(len(reads))
            entered.set()
            assert release.wait(30)
            return real_reads(unit, reads, arrival)

        monkeypatch.setattr(ingestion, "reads", slow_reads)
        body = batch("0.412")
        first: list[int] = []
        sender = threading.Thread(target=lambda: first.append(post(api, body).status_code))
        sender.start()
        try:
            assert entered.wait(10)
            began = api.clock.now()
            api.clock.advance(10 * lease)  # ten leases later by the clock: only renewal holds it

            def renewed() -> bool:
                with api.services.store.read() as unit:
                    (locked_at,) = unit.connection.execute(
                        sa.select(idempotency_keys.c.locked_at).where(
                            idempotency_keys.c.key == "k1"
                        )
                    ).one()
                return bool(locked_at > began)

            eventually(renewed, within=10, what="the lease's renewal")
            repeat = post(api, body)
            assert repeat.status_code == 409
            assert repeat.headers["Retry-After"] == "1"  # what is left of a 0.6 s lease, rounded up
        finally:
            release.set()
            sender.join(30)
        assert first == [200]
        replay = post(api, body)
        assert (replay.status_code, replay.headers["Idempotent-Replayed"]) == (200, "true")
        assert runs == [1]
