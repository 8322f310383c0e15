"""The model's transition table is the code's: the allowed (from, step, to) of
verify/settlement.pml (its ``ALLOWED`` block) equal those freehours/domain/settlement.py
performs, found by running every function of the state machine on a quota in every state (and
with attempts and a lock that make each branch happen). A new state or transition in the code
that the model does not know fails here."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from freehours.domain import settlement as machine
from freehours.domain.settlement import Claimed, QuotaStatus, Settled, StaleFence
from tests.protocol.model import check

NOW = datetime(2026, 7, 1, 4, 0, tzinfo=UTC)
LOCK = timedelta(seconds=30)
MAX = 3
#: The functions that move a quota, by the model's step name (``EV_...``).
STEPS = {"claim", "complete", "postpone", "abort", "release"}


def model_table() -> set[tuple[str, str, str]]:
    text = check.MODEL.read_text()
    block = text[text.index("BEGIN TRANSITIONS") : text.index("END TRANSITIONS")]
    found = re.findall(r"\(f == (\w+) && e == EV_(\w+) && t == (\w+)\)", block)
    return {(f, e.lower(), t) for f, e, t in found}


def _quotas() -> list[machine.Quota]:
    """A quota in every state, with the attempts and lock expiries that reach each branch."""
    base = machine.new_quota("4102000001", date(2026, 7, 1))
    return [
        replace(base, status=status, fence=1, attempts=attempts, locked_until=until)
        for status in QuotaStatus
        for attempts in (0, MAX - 1)
        for until in (None, NOW - LOCK, NOW + LOCK)
    ]


def code_table() -> set[tuple[str, str, str]]:
    table = {("NONE", "new_quota", machine.new_quota("4102000001", date(2026, 7, 1)).status)}
    for quota in _quotas():
        calls = {
            "claim": lambda q: machine.claim(q, NOW, LOCK, MAX),
            "complete": lambda q: machine.complete(q, 1, Decimal(1), Decimal(1), NOW),
            "postpone": lambda q: machine.postpone(q, 1, "waiting"),
            "abort": lambda q: machine.abort(q, 1, "never", NOW),
            "release": lambda q: machine.release(q, 1, "failed", NOW, MAX),
        }
        for step, call in calls.items():
            try:
                result = call(quota)
            except StaleFence:
                continue
            if isinstance(result, Claimed) or (isinstance(result, Settled) and result.changed):
                table.add((quota.status.value, step, result.quota.status.value))
            elif isinstance(result, machine.Quota):
                table.add((quota.status.value, step, result.status.value))
    return {(f, e, str(t)) for f, e, t in table}


def test_the_models_transition_table_is_the_codes() -> None:
    assert model_table() == code_table()


def test_every_function_that_moves_a_quota_is_a_step_of_the_model() -> None:
    """A new public function of the state machine returning a quota must be added to the
    model (and to ``code_table``'s calls)."""
    moving = {
        name
        for name in dir(machine)
        if not name.startswith("_")
        and callable(getattr(machine, name))
        and getattr(getattr(machine, name), "__module__", "") == machine.__name__
        and name.islower()
        and getattr(machine, name).__annotations__.get("quota") is not None
        and name not in {"new_quota"}
    }
    assert moving == STEPS
    assert {step for _, step, _ in model_table()} == STEPS | {"new_quota"}


def test_the_models_statuses_are_the_codes() -> None:
    text = check.MODEL.read_text()
    block = text[text.index("Quota statuses") : text.index("#define TERMINAL")]
    statuses = set(re.findall(r"#define (\w+)\s+\d", block)) - {"NONE"}
    assert statuses == {status.value for status in QuotaStatus}
    terminal = set(re.findall(r"\(s\) == (\w+)", text[text.index("#define TERMINAL") :][:80]))
    assert terminal == {status.value for status in QuotaStatus if status.is_terminal}
