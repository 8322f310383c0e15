"""One message through a real SMTP server (its own process, STARTTLS and AUTH): accepted, refused
for good, not sent for now, within the deadline; no reply kept with the recipient's address."""

from __future__ import annotations

import time
from dataclasses import replace
from email.message import EmailMessage

import pytest

from freehours.invoicing.smtp import NotSent, Refused, SmtpClient, SmtpServer, send
from tests.mail.conftest import Smtp
from tests.servers import free_port

TO = "jane.citizen@example.net"


def message() -> EmailMessage:
    made = EmailMessage()
    made["From"] = "billing@retailer.example"
    made["To"] = TO
    made["Subject"] = "Your bill"
    made["Message-ID"] = "<IN-0001.1@retailer.example>"
    made.set_content("Hello\n")
    return made


def test_a_message_is_sent_over_starttls_with_auth_and_read_back(smtp: Smtp) -> None:
    assert send(smtp.server, message(), TO) == 250
    (received,) = smtp.messages()
    assert received["X-Envelope-To"] == TO
    assert received["Message-ID"] == "<IN-0001.1@retailer.example>"
    assert received.get_content().strip() == "Hello"


def test_a_recipient_refused_for_good_is_refused_without_its_address(smtp: Smtp) -> None:
    smtp.reply_next("rcpt", f"550 5.1.1 <{TO}>: Recipient address rejected")
    with pytest.raises(Refused) as refused:
        send(smtp.server, message(), TO)
    assert refused.value.code == 550
    assert TO not in refused.value.reply
    assert "<recipient>" in refused.value.reply
    assert smtp.messages() == []


@pytest.mark.parametrize(
    ("stage", "reply"),
    [("rcpt", "451 4.7.1 Greylisted, try again later"), ("data", "452 4.3.1 Out of space")],
)
def test_a_temporary_refusal_is_not_sent_for_now(smtp: Smtp, stage: str, reply: str) -> None:
    smtp.reply_next(stage, reply)
    with pytest.raises(NotSent) as not_sent:
        send(smtp.server, message(), TO)
    assert not isinstance(not_sent.value, Refused)
    assert not_sent.value.code == int(reply[:3])
    assert send(smtp.server, message(), TO) == 250  # the next attempt goes through


def test_the_message_refused_for_good_at_data(smtp: Smtp) -> None:
    smtp.reply_next("data", "554 5.7.1 Message rejected")
    with pytest.raises(Refused):
        send(smtp.server, message(), TO)


def test_this_sides_set_up_wrong_is_never_refused_for_good(smtp: Smtp) -> None:
    with pytest.raises(NotSent) as wrong_password:
        send(replace(smtp.server, password="wrong"), message(), TO)
    assert not isinstance(wrong_password.value, Refused)
    assert wrong_password.value.code == 535
    # Without STARTTLS the server wants it first: set-up, not the recipient.
    with pytest.raises(NotSent) as plain:
        send(replace(smtp.server, security="none", username=""), message(), TO)
    assert not isinstance(plain.value, Refused)
    # A certificate not trusted (the system's CAs do not know the test's).
    with pytest.raises(NotSent) as untrusted:
        send(replace(smtp.server, ca_file=""), message(), TO)
    assert "CERTIFICATE" in untrusted.value.reply.upper()
    assert smtp.messages() == []


def test_a_slow_server_is_given_up_at_the_deadline(smtp: Smtp) -> None:
    smtp.delay_data(5)
    started = time.monotonic()
    with pytest.raises(NotSent) as slow:
        send(replace(smtp.server, deadline_seconds=1), message(), TO)
    assert time.monotonic() - started < 3
    assert not isinstance(slow.value, Refused)


def test_nothing_listening_is_not_sent() -> None:
    with pytest.raises(NotSent):
        send(SmtpServer("127.0.0.1", free_port(), deadline_seconds=2), message(), TO)


def test_a_kept_connection_carries_the_next_message_and_one_found_closed_is_made_again(
    smtp: Smtp,
) -> None:
    client = SmtpClient(smtp.server)
    assert client.send(message(), TO) == 250
    assert client.send(message(), TO) == 250
    first, second = smtp.messages()
    assert first["X-Peer"] == second["X-Peer"]  # one connection: TLS and AUTH done once
    kept = client._kept.client
    assert kept is not None
    kept.close()  # the server, or the network, closed it meanwhile
    assert client.send(message(), TO) == 250
    third = smtp.messages()[2]
    assert third["X-Peer"] != first["X-Peer"]
    # The server closed it without a word, or said 421 (closing) at MAIL FROM: nothing of the
    # message was sent, so it goes through a new connection, once.
    for reply in ("close", "421 4.4.2 idle too long, closing"):
        smtp.reply_next("mail", reply)
        peer = smtp.messages()[-1]["X-Peer"]
        assert client.send(message(), TO) == 250
        assert smtp.messages()[-1]["X-Peer"] != peer
    # After a refusal (its connection dropped, as after any failure) the next message goes.
    smtp.reply_next("rcpt", "550 5.1.1 no such user")
    with pytest.raises(Refused):
        client.send(message(), TO)
    assert client.send(message(), TO) == 250
    assert len(smtp.messages()) == 6
