"""An invoice prints the customer's name and addresses as their contact was when it was
finalised, and keeps them: a contact changed or erased later does not change a document issued."""

from __future__ import annotations

from freehours.documents.html import render_html
from freehours.domain.contacts import Contact, Delivery
from freehours.invoicing.documents import document_of
from freehours.store.database import Store
from tests.invoicing.support import System

SAM = Contact(
    "Sam Citizen",
    ("1 Sun Street", "Newtown NSW 2042"),
    ("PO Box 7", "Newtown NSW 2042"),
    "sam@example.com",
    Delivery.EMAIL,
)


def test_an_invoice_prints_the_contact_it_was_finalised_with(store: Store) -> None:
    system = System.on(store)
    with_contact, without = system.customers(2)
    with store.write() as unit:
        unit.catalog.put_contacts({with_contact: SAM}, updated_at=system.clock.now())
    system.month([with_contact, without])
    system.run()
    documents = {document.nmi: document for document in system.documents()}
    assert documents[with_contact].customer == {
        "name": "Sam Citizen",
        "supply_address": ["1 Sun Street", "Newtown NSW 2042"],
        "billing_address": ["PO Box 7", "Newtown NSW 2042"],
    }  # never the email address or the delivery preference
    assert documents[without].customer is None

    with store.write() as unit:
        unit.catalog.forget_contact(with_contact)
    (kept,) = [d for d in system.documents() if d.nmi == with_contact]
    readable = document_of(kept)
    assert readable.customer_name == "Sam Citizen"
    assert readable.supply_address == ("1 Sun Street", "Newtown NSW 2042")
    page = render_html(readable)
    assert "Sam Citizen" in page
    assert "1 Sun Street, Newtown NSW 2042" in page
    assert "PO Box 7" in page
    assert "sam@example.com" not in page
    assert document_of(documents[without]).customer_name is None
