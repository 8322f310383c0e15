"""The meter agent: a metering client that neither storms the API nor loses a read.

    sources                       spool (SQLite)             sender thread          API
    NEM12 files in a directory -> every batch, synced  ->  breaker, 3 attempts,  -> POST
    simulated smart meters        before any send          jitter, Retry-After,
                                                            retry budget

- ``batch``: a request's body, its Idempotency-Key derived from its content.
- ``spool``: the durable queue, FIFO by sequence; a batch leaves it only after a 200, or is set
  aside after a refusal.
- ``policy``: the pure decisions (verdict on an answer, backoff, retry budget, breaker timing).
- ``breaker``: pybreaker, shared through Redis when ``FREEHOURS_REDIS_URL`` is set.
- ``http``: the one seam to the API (httpx, timeouts and a total deadline).
- ``sender``: one batch's attempts (tenacity).
- ``inbox`` and ``meters``: the sources (the simulated meters of ``freehours.sim`` are the
  ``Meters`` it has; the agent never imports the simulation). ``meter_agent``: the run that ties
  them together.
- ``settings``: ``AgentSettings``, how it sends (``FREEHOURS_AGENT_*``, the CLI's options).

Errors (all under ``freehours.errors.FreehoursError``)::

    FreehoursError
    +-- ConfigurationError
    |   +-- KeyRefused         the API answered 401 or 403: the run stops, the spool intact
    |   +-- SpoolOwned         the spool belongs to another API: the agent does not start
    +-- Unreachable            no answer within the deadline (retried, never raised to callers)
    +-- Unsendable             no valid request can be made of a batch (it is set aside)
"""
