"""Invoicing: billing periods, invoice runs, documents numbered and finalised exactly once.

    model       a run's job kinds, the policy, a draft, what a batch made
    service     ``Invoicing``: runs, drafts, finalising, credit notes
    documents   a stored document drawn again (``document_of``)
    journal     a run's documents as accounting journals (CSV)

What an invoice holds and how a run goes: ``docs/invoices.md``.
"""
