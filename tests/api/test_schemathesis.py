"""schemathesis against /openapi.json: every answer to a request the schema allows, or nearly
allows, is one the document describes (its status code, content type, body schema and headers),
and none is a 5xx.

Each operation's cases come from schemathesis' Hypothesis strategy, positive and negative, and
are sent in-process through ASGI (schemathesis' pytest loader does not run under this pytest, so
the loop is ours), with a key of every scope or none. Then a stateful run follows the document's
links from the answers schemathesis starts from (its roots are the POSTs: reads -> their NMI's
settlement -> the quota's state), so that requests reach stored data rather than only 404s and
422s. (The links from a plan to its customer and from a customer to its reads, settlements and
bill are documented for clients; schemathesis does not start from a PUT while a POST has links.)
"""

from __future__ import annotations

import contextlib
import shutil
from collections import Counter
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as settings_of
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from freehours.settings import Settings
from freehours.store.database import Store
from tests.api.conftest import Api, serving
from tests.api.test_settlements import NMI, set_up

pytestmark = pytest.mark.slow

EXAMPLES = 25

#: What each answer is held to: documented, and no server error.
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.response_schema_conformance,
]

SETTLEMENTS = "POST /v1/free-energy/settlements"

#: Days around the test clock's today (1 July 2026), to settle and bill.
DAYS = ["2026-06-29", "2026-06-30", "2026-07-01", "2026-07-02"]

#: The key a case is sent with: mostly one that may do anything; a narrower one, or none.
KEYS = st.sampled_from(["admin", "admin", "admin", "admin", "read", "settle", None])

#: The operations that take no parameter and no body: nothing to send them wrong.
NOTHING_TO_NEGATE = {"GET /healthz", "GET /readyz", "GET /metrics"}

#: In the first test one store serves every example, as one database serves a real API.
SETTINGS = settings_of(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def test_every_answer_is_documented_and_none_is_a_server_error(api: Api) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode), key=KEYS)
            @SETTINGS
            def documented(case: schemathesis.Case, key: str | None) -> None:
                headers = {} if key is None else api.auth(key)
                case.call_and_validate(headers=headers, checks=CHECKS)

            try:
                documented()
            except Unsatisfiable:
                # Nothing of the operation can be made invalid (no parameter, no body).
                assert mode is GenerationMode.NEGATIVE, operation.label
                assert operation.label in NOTHING_TO_NEGATE, operation.label


def realistic(case: schemathesis.Case) -> None:
    """What a schema cannot say, written into most generated cases: the NMI of a customer, a day
    near the clock's today to settle or bill (else nearly every chain stops at a 404 or 422).
    The choice is made from the generated value, so that Hypothesis can shrink it."""
    body = case.body if isinstance(case.body, dict) else None
    label = case.operation.label
    if label == "POST /v1/free-energy/settlements" and body is not None:
        body["date"] = DAYS[_pick(body.get("date"), len(DAYS))]
        if _pick(body.get("nmi"), 4):
            body["nmi"] = NMI
    elif label == "POST /v1/meter-readings" and body is not None:
        if _pick(body.get("nmi"), 2):
            body["nmi"] = NMI
    elif label == "GET /v1/customers/{nmi}/bill" and isinstance(case.query, dict):
        case.query.update({"from": DAYS[0], "to": DAYS[-1]})


def _pick(generated: object, choices: int) -> int:
    """One of ``choices``, chosen by a generated value."""
    return sum(map(ord, str(generated))) % choices


def test_linked_requests_are_answered_as_documented(
    sqlite_template: Path, tmp_path: Path, settings: Settings
) -> None:
    """Each scenario runs on an API and a database of its own, with a customer and a day of
    reads: Hypothesis must see the same answers when it runs a scenario again. (SQLite: what
    the document says does not depend on the backend, which the test above runs on both.)"""
    with _scenario_api(sqlite_template, tmp_path / "schema.db", settings) as first:
        # The webhook routes, the offers, the better offer check, a household's days, the
        # documents' deliveries and print batches and the page's revocation have no links to follow
        # and are held to the document by the test above: left out here, they do not dilute
        # the scenarios' steps along the links.
        schema = (
            schemathesis.openapi.from_asgi("/openapi.json", first.client.app)
            .exclude(tag="webhooks")
            .exclude(
                path_regex=r"^/v1/offers|/better-offer$|/usage$|/deliveries$|/print-batch|/page$"
            )
        )
    answered: Counter[tuple[str, int]] = Counter()
    scenarios = count()

    class Machine(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            self.opened = contextlib.ExitStack()
            path = tmp_path / f"scenario-{next(scenarios)}.db"
            self.api = self.opened.enter_context(_scenario_api(sqlite_template, path, settings))

        def teardown(self) -> None:
            self.opened.close()

        def before_call(self, case: schemathesis.Case) -> None:
            realistic(case)

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"headers": self.api.auth("admin"), "app": self.api.client.app}

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            answered[case.operation.label, response.status_code] += 1

        def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs or None)

    Machine.run(settings=settings_of(SETTINGS, max_examples=30, stateful_step_count=6))
    # The links were followed to stored data: quotas settled, and then read.
    settled = [answered[SETTLEMENTS, status] for status in (200, 409)]
    assert all(settled), answered
    assert answered["GET /v1/free-energy/settlements/{nmi}/{day}", 200], answered


@contextlib.contextmanager
def _scenario_api(template: Path, path: Path, settings: Settings) -> Iterator[Api]:
    """An API over a copy of ``template`` at ``path``, with a customer and a day of reads."""
    shutil.copyfile(template, path)
    with Store.open(f"sqlite:///{path}") as store, serving(store, settings) as api:
        set_up(api)
        yield api
