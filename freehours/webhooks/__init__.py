"""Webhooks: endpoints and each delivery's attempts (the outbox itself is the store's).

    service     ``Webhooks``: endpoints registered and rotated, events fanned out, an attempt
    sender      ``HttpSender``: one attempt sent within one deadline, to an allowed address
    gate        ``EndpointGate``: each endpoint's circuit breaker and attempts in flight

Events, signatures, retries and the limits on receivers: ``docs/webhooks.md``.
"""
