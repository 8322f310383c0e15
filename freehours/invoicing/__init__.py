"""Invoicing: billing periods, invoice runs, documents numbered and finalised exactly once.

    service     ``Invoicing``: runs, drafts, finalising, credit notes
    journal     a run's documents as accounting journals (CSV)

What an invoice holds and how a run goes: ``docs/invoices.md``.
"""
