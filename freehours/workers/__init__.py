"""Running jobs: the worker and the tasks of freehours' own kinds.

    worker      ``Worker``: claims in batches, runs handlers on threads by queue, renews leases
    rescuer     jobs whose worker died: retried or discarded; the stuck-jobs gauge
    telemetry   the metrics and log lines of attempts
    settle      the ``settle`` job and ``schedule_settlements`` for the ingest transaction
    invoice     an invoice run's jobs (``invoice-run``, ``invoice-batch``)
    webhook     webhook jobs (``webhook-fanout``, ``webhook-delivery``)

How jobs are claimed, retried and rescued: ``docs/jobs.md``.
"""
