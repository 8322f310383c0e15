"""Who a customer is and how their documents reach them: a name, a supply address, a billing
address where it differs, an email address and a delivery preference (email or post).

This is the personal data freehours keeps (docs/security.md, Personal data): it is printed on the
customer's documents and used to send them, and it appears nowhere else, not in logs, metrics,
traces, webhook payloads or URLs. So the checks here say what is wrong with a field and never
repeat its value: a message may be logged.

The limits are those of the documents the data is printed on (``freehours.domain.fields``), so
that a contact that can be stored can always be shown on an invoice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from freehours.domain.fields import MAX_ADDRESS, MAX_CUSTOMER_NAME
from freehours.domain.reads import RangeError

#: An address has at most this many lines (the street, a second line, the locality, state and
#: postcode); the document's address block shows them joined with ", " in three lines.
MAX_ADDRESS_LINES = 4
#: RFC 5321's longest forward path, less the angle brackets.
MAX_EMAIL = 254
#: An email address as a retailer's mail relay takes it: a local part of the characters RFC 5322
#: allows unquoted (dots between atoms), an ``@``, and a domain of at least two labels of letters,
#: digits and hyphens. Quoted local parts and address literals are refused: no retailer's
#: customer record holds one, and each is a way to smuggle text into a header.
_EMAIL = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}"
)


class Delivery(StrEnum):
    """How a customer's documents reach them."""

    EMAIL = "email"
    POST = "post"


@dataclass(frozen=True, slots=True)
class Contact:
    """A customer's name, addresses, email address and delivery preference, checked
    (``contact``)."""

    name: str
    supply_address: tuple[str, ...]
    billing_address: tuple[str, ...] = ()  # none: documents go to the supply address
    email: str | None = None
    delivery: Delivery = Delivery.POST

    @property
    def postal_address(self) -> tuple[str, ...]:
        """Where a document is posted: the billing address, else the supply address."""
        return self.billing_address or self.supply_address


def contact(
    name: str,
    supply_address: list[str] | tuple[str, ...],
    billing_address: list[str] | tuple[str, ...] = (),
    email: str | None = None,
    delivery: str | None = None,
) -> Contact:
    """A ``Contact`` from what a caller gave, each field checked; ``RangeError`` naming the first
    field that is wrong (and never its value). The delivery defaults to email when an email
    address is given, else post; email delivery needs an email address."""
    checked_name = _line("name", name, MAX_CUSTOMER_NAME)
    supply = _address("supply_address", supply_address, required=True)
    billing = _address("billing_address", billing_address, required=False)
    if billing == supply:
        billing = ()
    address = None if email is None or email == "" else _email(email)
    if delivery is None or delivery == "":
        chosen = Delivery.EMAIL if address is not None else Delivery.POST
    else:
        try:
            chosen = Delivery(delivery)
        except ValueError:
            raise RangeError("delivery", "is email or post") from None
    if chosen is Delivery.EMAIL and address is None:
        raise RangeError("delivery", "email needs an email address")
    return Contact(checked_name, supply, billing, address, chosen)


def _line(field: str, text: str, most: int) -> str:
    """One line of printable text, trimmed: not empty, at most ``most`` characters."""
    if not isinstance(text, str):
        raise RangeError(field, "is text")
    line = " ".join(text.split())
    if not line:
        raise RangeError(field, "is empty")
    if not line.isprintable():
        raise RangeError(field, "holds a character that is not printable")
    if len(line) > most:
        raise RangeError(field, f"{len(line)} characters, at most {most}")
    return line


def _address(field: str, lines: list[str] | tuple[str, ...], *, required: bool) -> tuple[str, ...]:
    """An address's lines, each trimmed and none empty; at most ``MAX_ADDRESS_LINES``, and at
    most ``MAX_ADDRESS`` characters joined with ", "."""
    if isinstance(lines, str) or not isinstance(lines, list | tuple):
        raise RangeError(field, "is a list of lines")
    kept = tuple(_line(f"{field}[{n}]", line, MAX_ADDRESS) for n, line in enumerate(lines))
    if required and not kept:
        raise RangeError(field, "has at least one line")
    if len(kept) > MAX_ADDRESS_LINES:
        raise RangeError(field, f"{len(kept)} lines, at most {MAX_ADDRESS_LINES}")
    joined = len(", ".join(kept))
    if joined > MAX_ADDRESS:
        raise RangeError(field, f"{joined} characters with its lines joined, at most {MAX_ADDRESS}")
    return kept


def _email(text: str) -> str:
    """An email address, its domain in lower case."""
    if not isinstance(text, str):
        raise RangeError("email", "is text")
    if len(text) > MAX_EMAIL:
        raise RangeError("email", f"{len(text)} characters, at most {MAX_EMAIL}")
    if not _EMAIL.fullmatch(text) or len(text.partition("@")[0]) > 64:
        raise RangeError("email", "is not an email address (name@example.com.au)")
    local, _, domain = text.partition("@")
    return f"{local}@{domain.lower()}"
