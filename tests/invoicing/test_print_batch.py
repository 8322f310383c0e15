"""A run's print batch: the documents of the customers who chose post, in order, as PDFs of at
most ``PART_DOCUMENTS`` each and a manifest of where each goes (the API's: tests/api)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pypdf
import pytest

from freehours.domain.contacts import Contact
from freehours.invoicing import print_batch as batches
from freehours.invoicing.print_batch import print_batch, render_part
from freehours.store.database import Store
from freehours.store.invoices import Invoices
from tests.invoicing.support import System
from tests.mail.test_delivery import JANE, POSTED

#: Whose name a spreadsheet would take for a formula, were it written as it is.
FORMULA = Contact(
    "=HYPERLINK(1)", ("3 Star Lane", "Newtown NSW 2042"), ("PO Box 9", "Newtown NSW 2042")
)


def posted_run(store: Store) -> tuple[System, dict[str, str]]:
    """A run of four customers: email, post, post with a billing address, and no contact."""
    system = System.on(store)
    jane, pat, formula, nobody = system.customers(4)
    with store.write() as unit:
        unit.catalog.put_contacts(
            {jane: JANE, pat: POSTED, formula: FORMULA}, updated_at=system.clock.now()
        )
    system.month([jane, pat, formula, nobody])
    system.run()
    numbers = {d.nmi: d.number for d in system.documents()}
    return system, {"jane": numbers[jane], "pat": numbers[pat], "formula": numbers[formula]}


def test_the_batch_holds_the_posted_documents_in_order_with_their_addresses(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    system, numbers = posted_run(store)
    (run,) = [d.run_id for d in system.documents()][:1]
    assert run is not None
    batch = print_batch(store, run)
    posted = list(batch)
    assert [p.number for p in posted] == sorted([numbers["pat"], numbers["formula"]])
    assert batch.counts() == batches.Counts(2, 1)  # the customer with no contact: no address
    rows = list(csv.DictReader(io.StringIO("".join(batch.manifest()))))
    by_number = {row["number"]: row for row in rows}
    pat = by_number[numbers["pat"]]
    assert (pat["name"], pat["address_line_1"], pat["address_line_2"]) == (
        "Pat Post",
        "2 Moon Road",
        "Newtown NSW 2042",
    )
    formula = by_number[numbers["formula"]]
    assert formula["name"] == "'=HYPERLINK(1)"  # never a formula in a spreadsheet
    assert formula["address_line_1"] == "PO Box 9"  # the billing address, where it differs
    assert [row["part"] for row in rows] == ["1", "1"]

    pdf = pypdf.PdfReader(io.BytesIO(render_part(store, batch.part(1))))
    text = "\n".join(page.extract_text() for page in pdf.pages)
    assert text.index(posted[0].number) < text.index(posted[1].number)
    assert "Pat Post" in text
    assert JANE.name not in text

    # More documents than a part holds: parts, in order.
    monkeypatch.setattr(batches, "PART_DOCUMENTS", 1)
    assert batch.counts().parts == 2
    assert [p.number for p in batch.part(2)] == [posted[1].number]
    assert batch.part(3) == []
    assert [[p.number for p in part] for part in batch.parts()] == [[p.number] for p in posted]
    rows = list(csv.DictReader(io.StringIO("".join(batch.manifest()))))
    assert [(row["part"], row["sequence"]) for row in rows] == [("1", "1"), ("2", "2")]


def test_the_batch_is_read_a_page_at_a_time_in_print_order(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invoices, then the other documents, each by number, through pages of ``_PAGE``: the
    batch reads no more of the run at once, however many documents it has."""
    system = System.on(store)
    customers = system.customers(5)
    with store.write() as unit:
        unit.catalog.put_contacts(dict.fromkeys(customers, POSTED), updated_at=system.clock.now())
    system.month(customers)
    system.run()
    (run,) = {d.run_id for d in system.documents()}
    assert run is not None
    pages: list[int] = []
    to_post = Invoices.to_post

    def counted(self: Invoices, run_id: str, **given: Any) -> Any:
        page = to_post(self, run_id, **given)
        pages.append(len(page))
        return page

    monkeypatch.setattr(batches, "_PAGE", 2)
    monkeypatch.setattr(Invoices, "to_post", counted)
    numbers = [p.number for p in print_batch(store, run)]
    assert numbers == sorted(d.number for d in system.documents())
    assert pages == [2, 2, 1, 0, 0]  # the invoices by twos, then none of another type
