"""The document model refuses what a reader would be first to notice: figures that do not add
up, a credit that charges, a correction of nothing, days outside the period."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

import pytest

from freehours.documents.model import (
    AccountSummary,
    BetterOffer,
    DailyUse,
    DocumentError,
    DocumentKind,
    FreeEnergy,
    check_abn,
)
from tests.documents.builders import EXAMPLE_RETAILER, credit_note, days, invoice

D = Decimal


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"subtotal": D("80.15")}, "subtotal: 80.15 is not the lines' sum 80.16"),
        ({"gst": D("8.01")}, "total: 88.18 is not subtotal 80.16 + GST 8.01"),
        (
            {"amount_due": D("88.00")},
            "amount_due: 88.00 is not previous balance 50.00 - payments 50.00 + total 88.18",
        ),
        (
            {"account": None, "amount_due": D("0.00")},
            "amount_due: 0.00 is not the total 88.18 (no account summary)",
        ),
        ({"subtotal": D("80.160"), "gst": D("8.020")}, None),  # trailing zeros are still cents
        ({"gst": D("8.015"), "total": D("88.175")}, "gst: 8.015 is not an amount in cents"),
        ({"lines": ()}, "lines: a document has at least one line"),
        ({"period_end": date(2026, 6, 30)}, "period: the last day 2026-06-30 is before"),
        ({"period_end": date(2026, 10, 1)}, "period: 93 days (2026-07-01 to 2026-10-01)"),
        ({"due_date": None}, "due_date: an amount due (88.18) needs a due date"),
        ({"due_date": date(2026, 8, 2)}, "due_date: 2026-08-02 is before the issue date"),
        ({"corrects": "INV-000001"}, "corrects: an invoice corrects nothing"),
        (
            {"days": (DailyUse(date(2026, 8, 1), D(1), D(0)),)},
            "days: 2026-08-01 is outside the period 2026-07-01 to 2026-07-31",
        ),
        (
            {
                "days": (
                    DailyUse(date(2026, 7, 2), D(1), D(0)),
                    DailyUse(date(2026, 7, 2), D(1), D(0)),
                )
            },
            "days: 2026-07-02 after 2026-07-02: in order, once each",
        ),
        (
            {"days": (DailyUse(date(2026, 7, 2), D(1), D(2)),)},
            "days: 2026-07-02: free 2 kWh is not within 0 and the day's consumption 1 kWh",
        ),
        ({"number": " "}, "number: empty"),
        ({"plan_name": "x" * 121}, "plan_name: 121 characters, at most 120"),
        ({"supply_address": ("a" * 100, "b" * 49)}, "supply_address: 151 characters, at most 150"),
    ],
)
def test_an_invoice_that_does_not_add_up_is_refused(changes: dict, message: str | None) -> None:
    if message is None:
        invoice(**changes)
        return
    with pytest.raises(DocumentError) as refused:
        invoice(**changes)
    assert message in str(refused.value)


def test_corrections_name_their_document_and_go_the_right_way() -> None:
    with pytest.raises(DocumentError, match="corrects: a credit note names the document"):
        credit_note(corrects=None)
    with pytest.raises(DocumentError, match="CN-000031 cannot correct itself"):
        credit_note(corrects="CN-000031")
    with pytest.raises(DocumentError, match=r"a credit note credits \(total 2.57 is > 0\)"):
        credit_note(
            lines=(replace(credit_note().lines[0], amount=D("2.34")), credit_note().lines[1]),
            subtotal=D("2.34"),
            gst=D("0.23"),
            total=D("2.57"),
            amount_due=D("2.57"),
            due_date=date(2026, 9, 7),
        )
    with pytest.raises(DocumentError, match="an adjustment invoice charges"):
        credit_note(kind=DocumentKind.ADJUSTMENT_INVOICE)
    # a correction's days are changes: below zero is allowed
    assert credit_note().days[0].consumption_kwh < 0


def test_the_parts_check_themselves() -> None:
    with pytest.raises(DocumentError, match="window_start: '11' is not HH:MM"):
        FreeEnergy(D(1), D("0.10"), "11", "14:00", D(24))
    with pytest.raises(DocumentError, match=r"cap_kwh_per_day: 0 is not > 0"):
        FreeEnergy(D(1), D("0.10"), "11:00", "14:00", D(0))
    with pytest.raises(DocumentError, match=r"account payments: 1\.001 is not an amount in cents"):
        AccountSummary(D(0), D("1.001"))
    with pytest.raises(DocumentError, match="a saving is positive and names its plan"):
        BetterOffer(plan_name=None, saving=D("10.00"))
    with pytest.raises(DocumentError, match="retailer postal_address: at least one line"):
        replace(EXAMPLE_RETAILER, postal_address=())


def test_an_abn_is_checked_by_its_check_digits() -> None:
    check_abn("51 824 753 556")  # the ATO's example ABN
    check_abn("53004085616")
    with pytest.raises(DocumentError, match="'51 824 753 557' fails the ABN check digits"):
        check_abn("51 824 753 557")
    with pytest.raises(DocumentError, match="is not 11 digits"):
        check_abn("5182475355")


def test_a_day_without_meter_data_has_no_energy() -> None:
    unread = DailyUse(date(2026, 7, 1), Decimal("1.000"), Decimal(0), metered=False)
    with pytest.raises(DocumentError, match=r"2026-07-01 has no meter data but 1\.000 kWh used"):
        invoice(days=(unread, *days()[1:]))
