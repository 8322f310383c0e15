"""The job model, pure: what a job is and what becomes of an attempt. The job table's SQL is the
store's (``freehours.store.jobs``); running jobs is the workers' (``freehours.workers``).

    job         ``JobState``, the ``Job`` row, what a handler answers (``Done``, ``Snooze``)
    retry       ``RetryPolicy``: full-jitter backoff, attempts and deadline; decides, never sleeps
    decisions   what a worker writes of a finished attempt (``Finish``: complete, retry, release)

The states and their transitions are drawn in ``docs/jobs.md``.
"""
