"""The contacts a document names, and example retailer details for samples and tests.

``EXAMPLE_RETAILER``, ``EXAMPLE_DISTRIBUTOR`` and ``EXAMPLE_PAYMENT_METHODS`` are EXAMPLE
VALUES, not a real retailer's: the ABN is the Australian Taxation Office's published example
ABN, the phone numbers are in the ranges the ACMA sets aside for fiction (1300 975 7xx,
1800 975 7xx), the website is ``example.com``. A document made with ``EXAMPLE_RETAILER`` says
on its first page that its retailer details are examples. A retailer issuing documents gives
its own ``Retailer``.

The energy ombudsmen and the interpreter service are real bodies (docs/invoices.md, "The
document", says where each number was checked).
"""

from __future__ import annotations

from freehours.documents.model import Contact, PaymentMethod, Retailer
from freehours.domain.time import Region

#: EXAMPLE VALUES: a retailer that does not exist.
EXAMPLE_RETAILER = Retailer(
    name="Example Energy Retail Pty Ltd",
    abn="51 824 753 556",
    phone="1300 975 707",
    hardship_phone="1800 975 709",
    website="www.example.com/energy",
    email="help@example.com",
    postal_address=("PO Box 1234", "Sydney NSW 2001"),
    example=True,
)

#: EXAMPLE VALUES: the distributor's faults and emergencies line (each supply address has its
#: distributor; the invoicing core names the real one where it knows it).
EXAMPLE_DISTRIBUTOR = Contact(name="Example Distribution", phone="1800 975 708")

#: EXAMPLE VALUES: ways to pay, with the customer's reference filled in by ``payment_methods``.
EXAMPLE_PAYMENT_METHODS = (
    ("BPAY", "Biller code 999999, reference {reference}"),
    ("Card", "Online at www.example.com/energy/pay or call 1300 975 707"),
    ("Direct debit", "Set up at www.example.com/energy/direct-debit"),
    ("Centrepay", "Through Services Australia, reference {reference}"),
)


def example_payment_methods(reference: str) -> tuple[PaymentMethod, ...]:
    """``EXAMPLE_PAYMENT_METHODS`` with the customer's payment reference."""
    return tuple(
        PaymentMethod(name, detail.format(reference=reference))
        for name, detail in EXAMPLE_PAYMENT_METHODS
    )


#: The energy ombudsman of each region: free, independent dispute resolution for small
#: customers, whose details a bill gives.
OMBUDSMEN: dict[Region, Contact] = {
    Region.NSW: Contact("Energy & Water Ombudsman NSW (EWON)", "1800 246 545", "www.ewon.com.au"),
    Region.SEQ: Contact(
        "Energy and Water Ombudsman Queensland (EWOQ)", "1800 662 837", "www.ewoq.com.au"
    ),
    Region.SA: Contact("Energy and Water Ombudsman SA (EWOSA)", "1800 665 565", "www.ewosa.com.au"),
    Region.VIC: Contact(
        "Energy and Water Ombudsman Victoria (EWOV)", "1800 500 509", "www.ewov.com.au"
    ),
}

#: The Australian Government's Translating and Interpreting Service.
INTERPRETER = Contact("Translating and Interpreting Service (TIS National)", "131 450")

#: Where a customer compares offers: the Australian Government's comparator, and Victoria's own.
COMPARATORS: dict[Region, str] = {
    Region.NSW: "Energy Made Easy (www.energymadeeasy.gov.au)",
    Region.SEQ: "Energy Made Easy (www.energymadeeasy.gov.au)",
    Region.SA: "Energy Made Easy (www.energymadeeasy.gov.au)",
    Region.VIC: "Victorian Energy Compare (compare.energy.vic.gov.au)",
}
