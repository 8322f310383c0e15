"""The HTTP API: FastAPI app, access keys, idempotency, rate limits, problem details."""
