"""Settling free-energy quotas, and the one path meter data takes in.

    model       what a settlement is asked and answers: ``SettleRequest``, ``Outcome``, ``Answer``
    energy      a day's free energy from its reads (``free_energy``, ``window_complete``)
    days        ``QuotaDays``: which days have a quota, and how each stands, settling nothing
    service     ``Settlements``: settle quotas exactly once (one request is a batch of one)
    ingest      ``Ingestion``: meter data stored, the quotas it affects reopened and scheduled

The protocol, its states and the functions that perform each step: ``docs/protocol.md``.
"""
