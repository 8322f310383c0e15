"""The running system and what an operator does with it.

    runtime     ``Runtime``: the store, cache, services and workers built from the settings
    actions     ``Actions``: retry, cancel, reopen, revoke, each in the audit log

How to run and watch it: ``docs/operations.md``.
"""
