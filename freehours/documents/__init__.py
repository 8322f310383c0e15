"""Invoices and credit notes as documents a household reads, HTML and PDF, after the AER's
Better Bills Guideline (docs/invoices.md, "The document").

- ``model``: the document, frozen values checked to add up (``InvoiceDocument``);
- ``from_bill``: a document's figures from the domain's bill;
- ``html.render_html`` and ``pdf.render_pdf``: the renderers (the PDF one imports ReportLab,
  so import it where a PDF is made, not at start-up);
- ``examples``: example retailer details, the ombudsmen and interpreter service;
- ``sample``: ``python -m freehours.documents.sample --pdf out.pdf --html out.html``.

This package imports nothing of its own at import time, so that naming it costs nothing.
"""
