"""A run's print batch (docs/invoices.md, Post): the documents of its customers who chose post,
as PDFs to print in order and a CSV manifest for the mail house (document number, name, the
address lines it goes to, which part and page it starts on).

A batch is never held whole: going through it reads the run's documents a page at a time, in
print order (its invoices, then its other documents, each by number), no more of each row than
its number, type, NMI and printed address, by the index of (run, number); so a run of a million
documents costs memory of a page. It is made in parts of at most ``PART_DOCUMENTS`` documents,
each one PDF. The name and address are those printed on the document when it was finalised
(its ``customer``), so the envelope and the page agree; a customer with no contact then (no
address to post to) is counted apart, not printed.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from freehours.domain.contacts import Delivery
from freehours.invoicing.documents import document_of
from freehours.store.database import Store
from freehours.store.invoice_records import ToPost

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
class Counts:
    """What a batch holds: documents to post, and documents with no address to post to."""

    posted: int
    without_address: int

    @property
    def parts(self) -> int:
        return -(-self.posted // PART_DOCUMENTS)


@dataclass(frozen=True, slots=True)
class PrintBatch:
    """Run ``run_id``'s print batch, read from ``store`` each time it is gone through."""

    store: Store
    run_id: str

    def __iter__(self) -> Iterator[Posted]:
        """The documents to post, in print order."""
        for page in self._pages():
            yield from (posted for posted in page if posted is not None)

    def counts(self) -> Counts:
        """How many documents the batch posts, and how many it cannot (one pass)."""
        posted = without = 0
        for page in self._pages():
            for item in page:
                if item is None:
                    without += 1
                else:
                    posted += 1
        return Counts(posted, without)

    def part(self, number: int) -> list[Posted]:
        """Part ``number`` (from 1) of the batch (read up to it)."""
        start = (number - 1) * PART_DOCUMENTS
        return list(itertools.islice(self, start, start + PART_DOCUMENTS))

    def parts(self) -> Iterator[list[Posted]]:
        """Every part, in order, in one pass."""
        documents = iter(self)
        while part := list(itertools.islice(documents, PART_DOCUMENTS)):
            yield part

    def manifest(self) -> Iterator[str]:
        """The CSV manifest, a header then a row per document, in print order: a part's rows
        at a time."""
        yield MANIFEST_HEADER
        for number, part in enumerate(self.parts(), 1):
            yield manifest_rows(number, part)

    def _pages(self) -> Iterator[list[Posted | None]]:
        """The run's documents whose customers have no email delivery now, in print order, a
        page at a time: each as a ``Posted``, or None where it has no address to post to."""
        for invoices in (True, False):
            after = None
            while True:
                with self.store.read() as unit:
                    page = unit.invoices.to_post(
                        self.run_id, invoices=invoices, after=after, limit=_PAGE
                    )
                    if not page:
                        break
                    contacts = unit.catalog.contacts(sorted({d.nmi for d in page}))
                yield [
                    _posted(document)
                    for document in page
                    if (contact := contacts.get(document.nmi)) is None
                    or contact.delivery is not Delivery.EMAIL
                ]
                after = page[-1].number


def manifest_rows(number: int, part: Sequence[Posted]) -> str:
    """The manifest's rows of part ``number`` (from 1), ``part`` its documents in order."""
    first = (number - 1) * PART_DOCUMENTS
    rows = []
    for sequence, posted in enumerate(part, first + 1):
        lines = list(posted.address[:4]) + [""] * (4 - len(posted.address[:4]))
        rows.append(
            [
                number,
                sequence,
                posted.number,
                posted.document_type,
                _cell(posted.name),
                *(_cell(line) for line in lines),
            ]
        )
    return _csv(rows)


def _posted(document: ToPost) -> Posted | None:
    printed = document.customer
    if printed is None:
        return None
    address = tuple(printed.get("billing_address") or printed["supply_address"])
    return Posted(document.number, document.document_type, printed["name"], address)


def _csv(rows: Iterable[Sequence[object]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


#: The manifest's first line.
MANIFEST_HEADER = _csv([MANIFEST_COLUMNS])


def _cell(text: str) -> str:
    """A value a spreadsheet will not take for a formula (CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def print_batch(store: Store, run_id: str) -> PrintBatch:
    """Run ``run_id``'s print batch: its documents whose customers have post delivery when it
    is gone through."""
    return PrintBatch(store, run_id)


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
