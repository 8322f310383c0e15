"""schemathesis against /openapi.json: no request the schema allows, or nearly allows, gets a 5xx.

Each operation's cases come from schemathesis' Hypothesis strategy and are sent in-process
through ASGI (schemathesis' pytest loader does not run under this pytest, so the loop is ours).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.api.conftest import Api

pytestmark = pytest.mark.slow

EXAMPLES = 40


def test_no_request_gets_a_server_error(api: Api) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            # One store serves every example, as one database serves a real API.
            suppress_health_check=list(HealthCheck),
        )
        def no_server_error(case: schemathesis.Case) -> None:
            response = case.call(headers=api.auth("admin"))
            assert response.status_code < 500, (case.method, case.path, response.text)

        no_server_error()
