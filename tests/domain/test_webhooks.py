"""The webhook rules: URLs and event types an endpoint may have, the signature (held to the
Standard Webhooks reference library), the retry schedule, Retry-After, and when to disable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from standardwebhooks.webhooks import Webhook

from freehours.domain.webhooks import (
    EVENT_TYPES,
    GIVE_UP_AFTER,
    RETRY_SCHEDULE,
    InvalidEndpoint,
    check_event_types,
    check_url,
    new_secret,
    next_attempt,
    parse_retry_after,
    payload,
    should_disable,
    signed_headers,
    verify,
)

T0 = datetime(2026, 7, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "url",
    ["https://a.example/hooks", "http://127.0.0.1:8080/x?y=1", "https://[::1]:443/"],
)
def test_urls_taken(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://a.example/", "must be http or https"),
        ("https:///path", "must name a host"),
        ("https://u:p@a.example/", "must not carry credentials"),
        ("https://a.example/#frag", "must not have a fragment"),
        ("https://a.example/ x", "no spaces or control characters"),
        ("https://a.example:99999/", "not a URL"),
        ("https://a.example/" + "a" * 2048, "at most 2048 characters"),
        ("javascript:alert(1)", "must be http or https"),
    ],
)
def test_urls_refused(url: str, reason: str) -> None:
    with pytest.raises(InvalidEndpoint) as caught:
        check_url(url)
    assert caught.value.field == "url"
    assert reason in caught.value.reason


def test_event_types() -> None:
    assert check_event_types(["quota.revised", "quota.completed", "quota.revised"]) == (
        "quota.completed",
        "quota.revised",
    )
    for bad in ([], ["quota.exploded"], ["quota.completed"] * (2 * len(EVENT_TYPES) + 1)):
        with pytest.raises(InvalidEndpoint):
            check_event_types(bad)


def test_signatures_verify_with_the_reference_library_and_ours() -> None:
    secret, older = new_secret(), new_secret()
    body = payload("quota.completed", T0, {"kwh": Decimal("1.50")}).encode()
    assert (
        body
        == b'{"data":{"kwh":"1.50"},"timestamp":"2026-07-01T00:00:00Z","type":"quota.completed"}'
    )
    now = int(datetime.now(UTC).timestamp())
    headers = signed_headers([secret, older], "msg_1", now, body)
    assert len(headers["webhook-signature"].split()) == 2
    for key in (secret, older):
        Webhook(key).verify(body, headers)
        assert verify(key, headers, body, now=now)
    reference = Webhook(secret).sign("msg_1", datetime.fromtimestamp(now, UTC), body)
    assert headers["webhook-signature"].split()[0] == reference
    assert not verify(new_secret(), headers, body, now=now)
    assert not verify(secret, headers, body + b" ", now=now)
    assert not verify(secret, headers, body, now=now + 301)  # too old


def test_the_schedule_spans_three_days_then_gives_up() -> None:
    now, failed = T0, 0
    while True:
        failed += 1
        wait = next_attempt(failed, started=T0, now=now, retry_after=None, draw=0.5)
        if wait is None:
            break
        now += wait
    assert T0 + GIVE_UP_AFTER - timedelta(hours=12) < now <= T0 + GIVE_UP_AFTER
    assert failed == 13  # attempts in all: the last one failed for good
    assert next_attempt(1, started=T0, now=T0, retry_after=None, draw=0.0) == timedelta(seconds=4)
    assert next_attempt(1, started=T0, now=T0, retry_after=None, draw=1.0) == timedelta(seconds=6)
    assert RETRY_SCHEDULE[0] == timedelta(seconds=5)


def test_retry_after_is_honoured_when_longer_up_to_twelve_hours() -> None:
    assert next_attempt(1, started=T0, now=T0, retry_after=120) == timedelta(seconds=120)
    assert next_attempt(5, started=T0, now=T0, retry_after=1) == timedelta(hours=1)
    assert next_attempt(1, started=T0, now=T0, retry_after=10**6) == timedelta(hours=12)
    assert parse_retry_after("30", T0) == 30
    assert parse_retry_after("Wed, 01 Jul 2026 00:02:00 GMT", T0) == 120
    assert parse_retry_after("soon", T0) is None
    assert parse_retry_after(None, T0) is None


def test_disabled_after_five_days_of_failures_or_twenty_in_a_row() -> None:
    assert not should_disable(failing_since=T0, final_failures=1, now=T0 + timedelta(days=4))
    assert should_disable(failing_since=T0, final_failures=1, now=T0 + timedelta(days=5))
    assert should_disable(failing_since=None, final_failures=20, now=T0)
    assert not should_disable(failing_since=None, final_failures=19, now=T0)
