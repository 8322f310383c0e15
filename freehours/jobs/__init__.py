"""Durable jobs: a job table in the project's own database, workers, retries, a rescuer.

    job         ``JobState``, the ``Job`` row, what a handler answers (``Done``, ``Snooze``)
    queue       the job table's SQL: ``enqueue`` (in the caller's transaction), claim, finish
    retry       ``RetryPolicy``: full-jitter backoff, attempts and deadline; decides, never sleeps
    worker      ``Worker``: claims in batches, runs handlers on threads, renews leases
    rescuer     jobs whose worker died: retried or discarded; the stuck-jobs gauge
    telemetry   the metrics and log lines of attempts
    settle      the ``settle`` job and ``schedule_settlements`` for the ingest transaction

The states and their transitions are drawn in ``docs/jobs.md``.
"""
