"""Webhook URLs encoded or refused at registration (a property test: nothing but the refusal is
raised, and every URL taken is one ``http.client`` can send), the destination policy, and an
endpoint's circuit breaker."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from freehours.domain.webhooks import (
    BREAKER_FAILURES,
    BREAKER_OPEN,
    IN_FLIGHT_WAIT,
    MAX_IN_FLIGHT,
    MAX_URL_LENGTH,
    Circuit,
    Destinations,
    InvalidEndpoint,
    check_url,
    legacy_ipv4,
)
from freehours.webhooks.sender import connection_to

T0 = datetime(2026, 7, 1, tzinfo=UTC)
PUBLIC = Destinations()


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("https://bücher.example/päth?q=ü", "https://xn--bcher-kva.example/p%C3%A4th?q=%C3%BC"),
        ("https://A.Example", "https://a.example/"),
        ("https://a.example/already%20escaped", "https://a.example/already%20escaped"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0x7f.1:8080/x", "http://127.0.0.1:8080/x"),
        ("http://0177.0.0.1/", "http://127.0.0.1/"),
        ("http://[::FFFF:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
    ],
)
def test_urls_encoded(url: str, sent: str) -> None:
    assert check_url(url) == sent


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://" + "a" * 64 + ".example/", "not a valid IDNA name"),
        ("http://a..example/", "not a valid IDNA name"),
        ("http://a_b!.example/", "the host must be a name"),
        ("http://@a.example/", "must not carry credentials"),
        ("http://user@a.example/", "must not carry credentials"),
        ("http://[fe80::1%25eth0]/", "must not name a zone"),
        ("https://a.example/\u2028", "no spaces or control characters"),
        ("https://a.example/" + "ä" * 700, "at most 2048 characters once encoded"),
    ],
)
def test_urls_refused(url: str, reason: str) -> None:
    with pytest.raises(InvalidEndpoint) as caught:
        check_url(url)
    assert caught.value.field == "url"
    assert reason in caught.value.reason


def _sendable(url: str) -> None:
    """What the sender does with a URL short of connecting: its connection made, the request
    line and Host header built (http.client encodes and checks both)."""
    url.encode("ascii")
    conn, path = connection_to(url, 1.0)
    assert conn.host == urlsplit(url).hostname
    conn.putrequest("POST", path)
    conn.putheader("content-type", "application/json")


URL_TEXT = st.one_of(
    st.text(max_size=80),
    st.builds(
        "{}://{}{}{}".format,
        st.sampled_from(["http", "https", "ftp", "HTTP", ""]),
        st.one_of(
            st.text(max_size=70),
            st.from_regex(r"[a-zA-Z0-9.\-]{1,70}", fullmatch=True),
            st.ip_addresses().map(lambda a: f"[{a}]" if a.version == 6 else str(a)),
            st.integers(0, 2**32 + 5).map(str),
        ),
        st.one_of(st.just(""), st.integers(-1, 70000).map(lambda p: f":{p}")),
        st.text(max_size=60).map(lambda t: "/" + t),
    ),
)


@settings(max_examples=400, deadline=None)
@given(URL_TEXT)
@example("http://" + "a" * 64 + "/")
@example("http://ä.example/ä?ä#")
@example("http://2130706433/")
@example("HTTP://\u00b9")  # IDNA makes the superscript one a 1: the address 0.0.0.1
def test_a_url_is_refused_or_sendable(url: str) -> None:
    refused: InvalidEndpoint | None = None
    try:
        sent = check_url(url)
    except InvalidEndpoint as exc:
        refused = exc
    if refused is not None:
        assert refused.field == "url"
        return
    assert len(sent) <= MAX_URL_LENGTH
    _sendable(sent)
    assert check_url(sent) == sent  # encoding once is enough


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1.2", "10.1.0.2"),
        ("0", "0.0.0.0"),
        ("8.8.8.8", "8.8.8.8"),
        ("256.1.1.1", None),
        ("4294967296", None),
        ("1.2.3.4.5", None),
        ("09", None),
        ("a.example", None),
    ],
)
def test_legacy_ipv4_reads_as_the_resolver_does(host: str, address: str | None) -> None:
    found = legacy_ipv4(host)
    assert (None if found is None else str(found)) == address


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.5", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("100.100.100.200", "non-public"),
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
    ],
)
def test_the_destination_policy(address: str, kind: str | None) -> None:
    refusal = PUBLIC.refusal(ipaddress.ip_address(address))
    if kind is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert refusal.startswith(kind)


def test_allowed_networks_let_private_addresses_through() -> None:
    allowing = Destinations.parse(" 127.0.0.1/32, 10.20.0.0/16 ,")
    assert allowing.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert allowing.refusal(ipaddress.ip_address("::ffff:127.0.0.1")) is None
    assert allowing.refusal(ipaddress.ip_address("10.20.3.4")) is None
    assert allowing.refusal(ipaddress.ip_address("127.0.0.2")) is not None
    assert allowing.refusal(ipaddress.ip_address("10.21.0.1")) is not None
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not a network"):
        Destinations.parse("10.0.0.0/33")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:5432/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
    ],
)
def test_a_literal_address_is_checked_at_registration(url: str) -> None:
    assert PUBLIC.url_refusal(check_url(url)) is not None
    assert Destinations.parse("0.0.0.0/0,::/0").url_refusal(check_url(url)) is None


def test_a_name_waits_for_its_resolution() -> None:
    assert PUBLIC.url_refusal(check_url("http://localhost/")) is None


def test_the_circuit_opens_after_failures_in_a_row_then_lets_one_trial_through() -> None:
    circuit = Circuit()
    for _ in range(BREAKER_FAILURES - 1):
        circuit = circuit.after(succeeded=False, now=T0)
        assert circuit.postponed(in_flight=0, now=T0) is None
    assert circuit.after(succeeded=True, now=T0) == Circuit()  # a success ends the run
    opened = circuit.after(succeeded=False, now=T0)
    assert opened.postponed(in_flight=0, now=T0) == ("circuit_open", BREAKER_OPEN)
    later = T0 + BREAKER_OPEN
    assert opened.postponed(in_flight=0, now=later) is None  # half-open: one trial
    # The others wait out the trial as they waited out the open circuit.
    assert opened.postponed(in_flight=1, now=later) == ("in_flight", BREAKER_OPEN)
    again = opened.after(succeeded=False, now=later)
    assert again.open_until == later + BREAKER_OPEN
    assert again.after(succeeded=True, now=later) == Circuit()


def test_attempts_in_flight_are_capped() -> None:
    closed = Circuit()
    assert closed.postponed(in_flight=MAX_IN_FLIGHT - 1, now=T0) is None
    assert closed.postponed(in_flight=MAX_IN_FLIGHT, now=T0) == ("in_flight", IN_FLIGHT_WAIT)


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "http://127.0.0.1/"),  # fullwidth
        ("http://\u00b9/", "http://0.0.0.1/"),
    ],
)
def test_a_host_that_idna_makes_an_address_is_that_address(url: str, sent: str) -> None:
    assert check_url(url) == sent
