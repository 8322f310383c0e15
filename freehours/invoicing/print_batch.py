"""A run's print batch (docs/invoices.md, Post): the documents of its customers who chose post,
as PDFs to print in order and a CSV manifest for the mail house (document number, name, the
address lines it goes to, which part and page it starts on).

A batch is made in parts of at most ``PART_DOCUMENTS`` documents, each one PDF: a run of a
million documents is never held in memory at once. The name and address are those printed on
the document when it was finalised (its ``customer``), so the envelope and the page agree; a
customer with no contact then (no address to post to) is counted apart, not printed.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from freehours.domain.contacts import Delivery
from freehours.invoicing.documents import document_of
from freehours.store.database import Store
from freehours.store.invoices import StoredDocument

#: Documents in one part of a batch (one PDF).
PART_DOCUMENTS = 500
#: Documents a batch reads at once.
_PAGE = 1000
MANIFEST_COLUMNS = (
    "part",
    "sequence",
    "number",
    "document_type",
    "name",
    "address_line_1",
    "address_line_2",
    "address_line_3",
    "address_line_4",
)


@dataclass(frozen=True, slots=True)
class Posted:
    """One document to post: its number and where it goes."""

    number: str
    document_type: str
    name: str
    address: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PrintBatch:
    """What a run posts, in order, and the documents it cannot (no address then)."""

    run_id: str
    posted: list[Posted]
    without_address: int

    @property
    def parts(self) -> int:
        return -(-len(self.posted) // PART_DOCUMENTS)

    def part(self, number: int) -> list[Posted]:
        """Part ``number`` (from 1) of the batch."""
        start = (number - 1) * PART_DOCUMENTS
        return self.posted[start : start + PART_DOCUMENTS]

    def manifest(self) -> str:
        """The CSV manifest, a header then a row per document, in print order."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(MANIFEST_COLUMNS)
        for index, posted in enumerate(self.posted):
            lines = list(posted.address[:4]) + [""] * (4 - len(posted.address[:4]))
            writer.writerow(
                [
                    index // PART_DOCUMENTS + 1,
                    index + 1,
                    posted.number,
                    posted.document_type,
                    _cell(posted.name),
                    *(_cell(line) for line in lines),
                ]
            )
        return out.getvalue()


def _cell(text: str) -> str:
    """A value a spreadsheet will not take for a formula (CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def print_batch(store: Store, run_id: str) -> PrintBatch:
    """Run ``run_id``'s documents whose customers have post delivery now, by number."""
    posted: list[Posted] = []
    without = 0
    for page in _documents(store, run_id):
        with store.read() as unit:
            contacts = unit.catalog.contacts([d.nmi for d in page])
        for document in page:
            contact = contacts.get(document.nmi)
            if contact is not None and contact.delivery is Delivery.EMAIL:
                continue
            printed = document.customer
            if printed is None:
                without += 1
                continue
            address = tuple(printed.get("billing_address") or printed["supply_address"])
            posted.append(
                Posted(document.number, document.document_type.value, printed["name"], address)
            )
    posted.sort(key=lambda p: (p.document_type != "invoice", p.number))
    return PrintBatch(run_id, posted, without)


def _documents(store: Store, run_id: str) -> Iterator[list[StoredDocument]]:
    after = None
    while True:
        with store.read() as unit:
            page = unit.invoices.list_documents(run_id=run_id, after=after, limit=_PAGE)
        if not page:
            return
        yield page
        last = page[-1]
        after = (last.period_start, last.nmi, last.sequence)


def render_part(store: Store, posted: Sequence[Posted]) -> bytes:
    """One PDF of ``posted``'s documents, in order, each starting on a page of its own."""
    from pypdf import PdfWriter  # noqa: PLC0415 - only a print batch joins PDFs

    from freehours.documents.pdf import render_pdf  # noqa: PLC0415 - reportlab, only to print

    writer = PdfWriter()
    for item in posted:
        with store.read() as unit:
            stored = unit.invoices.get_document(item.number)
        assert stored is not None, "a posted document was read from the store"
        writer.append(io.BytesIO(render_pdf(document_of(stored))))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
