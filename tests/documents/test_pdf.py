"""The PDF read back (pypdf): every Tier 1 item on page 1 with its value, for an invoice, a
credit note and an adjustment invoice; the detail after it; the layout's limits."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pypdf
import pytest

from freehours.documents.examples import EXAMPLE_DISTRIBUTOR, EXAMPLE_RETAILER
from freehours.documents.model import (
    MAX_ADDRESS,
    MAX_CUSTOMER_NAME,
    MAX_MESSAGES,
    FreeEnergy,
    Line,
)
from freehours.documents.pdf import TWO_PAGE_LINES, render_pdf
from freehours.domain.time import Region
from tests.documents.builders import (
    adjustment_invoice,
    credit_note,
    days,
    flat,
    invoice,
    pdf_pages,
    with_unread_days,
)

D = Decimal

#: What page 1 of every document shows, whatever its kind: who issued it, how to reach them,
#: the customer's account, and where to get help.
EVERY_FIRST_PAGE = [
    "Example Energy Retail Pty Ltd",
    "ABN 51 824 753 556",
    "NMI 4103035611",
    "Account number 1000 2345 6789",
    "Customer Alex Example",
    "Supply address 12 Example Street, Newtown NSW 2042",
    "Billing period 1 July 2026 to 31 July 2026 (31 days)",
    "Account enquiries and complaints Example Energy Retail Pty Ltd: 1300 975 707",
    "Trouble paying? Call 1800 975 709",
    "Power failures and emergencies (24 hours) Example Distribution: 1800 975 708",
    "Translating and Interpreting Service (TIS National): 131 450",
    "Energy & Water Ombudsman NSW (EWON): 1800 246 545",
    "Energy Made Easy (www.energymadeeasy.gov.au)",
    "Sample document: the retailer details on it are example values.",
    "Page 1 of 2",
]
#: How to pay, on page 1 of a document that charges (never on a credit note's).
PAYING = ["BPAY Biller code 999999, reference 1000234567"]
#: What a credit note's page 1 says of its credit, where another document says how to pay.
CREDITING = [
    "Credit to your account $2.57 We will take it off your next bill.",
    "What happens to your credit",
    "We will take $2.57 off your next bill. You do not need to do anything.",
    "Would you rather have the money paid to you? Call us on 1300 975 707.",
]
#: What page 1 of the example invoice shows, beyond every document's, in either format.
INVOICE_FIRST_PAGE = [
    *PAYING,
    "Tax invoice",
    "Invoice number INV-004217",
    "Issued 3 August 2026",
    "Amount due $88.18 Due by 17 August 2026",
    "How to pay",
    "Free energy used: 93.250 kWh",
    "Worth $27.98 at your plan's prices (excl. GST)",
    "from 11:00 to 14:00 each day is free, up to 24 kWh a day",
]
#: What the example invoice's detail (page 2) shows in either format.
INVOICE_DETAIL = [
    "Off peak energy 100.000 kWh $0.2300/kWh $23.00",
    "Solar feed-in credit 80.000 kWh $0.0400/kWh $3.20 credit",
    "Subtotal (excl. GST) $80.16",
    "GST (10%) $8.02",
    "Total of this tax invoice (incl. GST) $88.18",
    "Previous balance $50.00",
    "Plan Solar Sharer Offer, New South Wales (sso-nsw)",
]


def test_an_invoice_shows_every_tier_1_item_on_page_1() -> None:
    first, second = pdf_pages(render_pdf(invoice()))
    page = flat(first)
    for item in [
        *EVERY_FIRST_PAGE,
        *INVOICE_FIRST_PAGE,
        "Issue date 3 August 2026",
    ]:
        assert item in page, item
    # the detail is not on page 1, and is on page 2
    assert "Your bill in detail" not in page
    detail = flat(second)
    for item in [
        *INVOICE_DETAIL,
        "Your bill in detail",
        "Peak energy 50.500 kWh $0.5200/kWh $26.26",
        "Daily supply charge 31 days $1.1000/day $34.10",
        "Payments received, thank you $50.00 credit",
        "Free window 11:00 to 14:00 every day",
        "1 Jul 10.500 kWh 3.008 kWh",
        "31 Jul 12.500 kWh 3.008 kWh",
        "Page 2 of 2",
    ]:
        assert item in detail, item


def test_a_credit_note_shows_its_credit_and_the_invoice_it_corrects_on_page_1() -> None:
    first, second = pdf_pages(render_pdf(credit_note()))
    page = flat(first)
    for item in [
        *EVERY_FIRST_PAGE,
        *CREDITING,
        "Credit note",
        "Credit note number CN-000031",
        "Issued 24 August 2026",
        "This credit note corrects invoice INV-004217 for 1 July 2026 to 31 July 2026 (31 days):"
        " it credits $2.57 including GST. Your meter data for 14 to 16 July 2026 was revised.",
        "Free energy: 1.250 kWh less than invoiced",
        "Worth $0.41 less",
    ]:
        assert item in page, item
    # a credit, not a bill: no ways to pay
    for item in (*PAYING, "BPAY", "pay your bills", "How to pay", "Nothing to pay"):
        assert item not in page, item
    # no amount is written with a minus sign: credits say so
    assert "-$" not in page
    assert "$-" not in page
    detail = flat(second)
    for item in [
        "Peak energy -4.500 kWh $0.5200/kWh $2.34 credit",
        "Subtotal (excl. GST) $2.34 credit",
        "GST (10%) $0.23 credit",
        "Total of this credit note (incl. GST) $2.57 credit",
        "This credit note is an adjustment note for GST purposes.",
        "14 Jul -1.500 kWh -0.417 kWh",
    ]:
        assert item in detail, item
    assert "-$" not in detail
    assert "$-" not in detail


def test_an_adjustment_invoice_shows_what_it_charges_and_what_it_corrects_on_page_1() -> None:
    first, _ = pdf_pages(render_pdf(adjustment_invoice()))
    page = flat(first)
    for item in [
        *EVERY_FIRST_PAGE,
        *PAYING,
        "Adjustment invoice",
        "Invoice number INV-004388",
        "Amount due $1.72 Due by 7 September 2026",
        "This adjustment invoice corrects invoice INV-004217",
        "it charges $1.72 more including GST",
        "Free energy: unchanged",
    ]:
        assert item in page, item


def test_an_account_in_credit_has_nothing_to_pay() -> None:
    document = invoice(
        account=invoice().account.__class__(D("0.00"), D("100.00")),
        amount_due=D("-11.82"),
        due_date=None,
    )
    page = flat(pdf_pages(render_pdf(document))[0])
    assert "Your account is in credit $11.82 Nothing to pay" in page
    assert "Ways to pay your bills" in page


def test_a_final_bill_says_so_and_gives_no_better_offer() -> None:
    page = flat(pdf_pages(render_pdf(invoice(final_bill=True)))[0])
    assert "This is your final bill for this account." in page
    assert "You could save" not in page


def test_the_pdf_is_a4_with_its_title_and_language() -> None:
    reader = pypdf.PdfReader(io.BytesIO(render_pdf(invoice())))
    for page in reader.pages:
        assert (round(float(page.mediabox.width)), round(float(page.mediabox.height))) == (595, 842)
    assert reader.metadata is not None
    assert reader.metadata.title == "Tax invoice INV-004217"
    assert reader.metadata.author == "Example Energy Retail Pty Ltd"
    assert reader.trailer["/Root"]["/Lang"] == "en-AU"


def test_the_same_document_makes_the_same_bytes() -> None:
    assert render_pdf(invoice()) == render_pdf(invoice())


def test_lines_past_two_pages_continue_on_a_third_with_the_table_heading_again() -> None:
    lines = tuple(
        Line(f"L{n}", f"Adjustment line number {n}", D(1), "kWh", D("0.10"), D("0.10"))
        for n in range(60)
    )
    document = invoice(
        lines=lines, subtotal=D("6.00"), gst=D("0.60"), total=D("6.60"), amount_due=D("6.60")
    )
    pages = pdf_pages(render_pdf(document))
    assert len(pages) == 3
    text = flat(" ".join(pages[1:]))
    for n in range(60):
        assert f"Adjustment line number {n} 1.000 kWh" in text, n
    assert "Charge Quantity Rate (excl. GST) Amount" in flat(pages[2])
    assert "Page 3 of 3" in flat(pages[2])


def test_up_to_the_two_page_limit_of_lines_the_document_is_two_pages() -> None:
    lines = tuple(
        Line(f"L{n}", f"Charge {n}", D(1), "kWh", D("0.10"), D("0.10"))
        for n in range(TWO_PAGE_LINES)
    )
    total = D("0.10") * TWO_PAGE_LINES
    gst = (total / 10).quantize(D("0.01"))
    document = invoice(
        lines=lines,
        subtotal=total,
        gst=gst,
        total=total + gst,
        amount_due=total + gst,
        period_end=invoice().period_start + timedelta(days=91),
        days=days(92),
    )
    assert len(pdf_pages(render_pdf(document))) == 2


@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("Nguyễn Thị Ánh", "Nguyen Thi Ánh"),  # no ễ in the standard fonts: the plain letter
        ("Zoë Ó Briain", "Zoë Ó Briain"),  # Latin-1: as it is
        ("王小明", "???"),  # no plain form
    ],
)
def test_a_name_outside_the_fonts_is_written_in_letters_they_have(name: str, written: str) -> None:
    page = flat(pdf_pages(render_pdf(invoice(customer_name=name)))[0])
    assert f"Customer {written}" in page


def test_the_longest_plan_name_and_address_are_shown_whole() -> None:
    plan = "Solar Sharer " + "Extraordinarily" * 7 + " p"  # 120 characters, one word of 105
    address = (
        "Apartment 1234, Level 56, The Extraordinarily Long Building Name Tower",
        "9876 Thoroughfare-Of-Many-Syllables Boulevard, Wollongbar NSW 2477",
        "Australia",
    )
    assert (len(plan), len(", ".join(address))) == (120, 149)
    document = invoice(plan_name=plan, supply_address=address)
    first, second = pdf_pages(render_pdf(document))
    assert ", ".join(address).replace(" ", "") in first.replace("\n", "").replace(" ", "")
    assert plan.replace(" ", "") in second.replace("\n", "").replace(" ", "")
    assert "\u2026" not in first + second


def test_a_first_page_crowded_by_every_message_the_model_allows_keeps_its_tier_1_items() -> None:
    """The longest names, two AER-approved messages, a final bill's message and a correction's
    reason, in the widest letters: the panel loses its chart, which opens page 2 instead, and
    every Tier 1 item stays on page 1."""
    wide = "W" * 30
    retailer = replace(
        EXAMPLE_RETAILER, name=f"{wide} Energy Retail {wide}", hardship_phone="1800 975 709"
    )
    document = credit_note(
        retailer=retailer,
        customer_name=("WWWW " * 16)[:MAX_CUSTOMER_NAME],
        supply_address=(("WWWWWWWW " * 20)[:MAX_ADDRESS],),
        billing_address=(("MMMMMMMM " * 20)[:MAX_ADDRESS],),
        messages=(("W" * 9 + " ") * 16,) * MAX_MESSAGES,
        reason="W " * 200,
        final_bill=True,
        distributor=replace(EXAMPLE_DISTRIBUTOR, name=wide * 3),
    )
    first, second = pdf_pages(render_pdf(document))
    page = flat(first)
    for item in [
        "Credit note number CN-000031",
        "NMI 4103035611",
        "Credit to your account $2.57",
        "Billing period 1 July 2026 to 31 July 2026 (31 days)",
        "This is your final bill for this account.",
        "This credit note corrects invoice INV-004217",
        "Free energy: 1.250 kWh less than invoiced",
        "The chart of your daily use is at the top of page 2.",
        "Translating and Interpreting Service (TIS National): 131 450",
        "Energy & Water Ombudsman NSW (EWON): 1800 246 545",
        "Could you save money on another plan?",
        "Page 1 of 2",
    ]:
        assert item in page, item
    assert flat(second).startswith("Your daily use, as a chart")


def test_days_without_meter_data_are_marked_and_told_apart_from_a_zero() -> None:
    detail = flat(pdf_pages(render_pdf(with_unread_days()))[1])
    for day in (1, 2, 3):
        assert f"{day} Jul No meter data*" in detail
    assert "4 Jul 0.000 kWh 0.000 kWh" in detail
    assert (
        "* No meter data: we have no readings from your meter for these 3 days. We charged the"
        " daily supply charge only, and no energy. This is not the same as using no energy."
    ) in detail
    first = flat(pdf_pages(render_pdf(with_unread_days()))[0])
    assert "No meter data (3 days)" in first
    # a document with every day read says nothing of it
    assert "No meter data" not in flat("".join(pdf_pages(render_pdf(invoice()))))


def test_an_invoice_without_free_energy_says_why() -> None:
    none = FreeEnergy(D(0), D("0.00"), "12:00", "15:00", D(24))
    read = tuple(replace(day, free_kwh=D(0)) for day in days())
    sa = invoice(region=Region.SA, free_energy=none, days=read)
    page = flat(pdf_pages(render_pdf(sa))[0])
    assert "Free energy used: 0.000 kWh" in page
    assert (
        "Energy you use from 12:00 to 15:00 each day is free, up to 24 kWh a day (Solar Sharer)."
        " Your meter shows you took no energy from the grid in those hours on any day of this"
        " bill, so none was free. Your solar panels may have covered your use then."
    ) in page
    unread = tuple(replace(day, consumption_kwh=D(0), free_kwh=D(0), metered=False) for day in read)
    page = flat(pdf_pages(render_pdf(replace(sa, days=unread)))[0])
    assert "We have no meter data for this bill yet, so there is no free energy to show." in page
    # with free energy, no reason is needed
    assert "none was free" not in flat(pdf_pages(render_pdf(invoice()))[0])
    # a plan without a window says so
    page = flat(pdf_pages(render_pdf(invoice(free_energy=None)))[0])
    assert "Your plan has no free energy window, so all the energy you use is charged." in page
