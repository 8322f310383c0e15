"""The protocol's model (verify/settlement.pml) checked by Spin in its bounded configuration:
every property holds, and every mutant (a guard of freehours removed, a bug of the incident put
back, the bug the model found) fails with a counterexample that replays (docs/protocol.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.protocol.model import check, require_spin

pytestmark = pytest.mark.slow  # Spin and cc run for each: up to 40 s on a busy 2-core machine

RUNS = {run.name: run for run in check.CONFIGS["bounded"]}
HOLDS = [name for name, run in RUNS.items() if not run.expect_error]
MUTANTS = [name for name, run in RUNS.items() if run.expect_error]


def _checked(name: str) -> Any:
    require_spin()
    return check.check(RUNS[name])


@pytest.mark.parametrize("name", HOLDS)
def test_every_property_holds_in_the_bounded_configuration(name: str) -> None:
    result = _checked(name)
    assert result.errors == 0, result.output
    assert result.states > 0, result.output
    assert "Search not completed" not in result.output, result.output
    print(f"{name}: {result.states:,} states, {result.seconds:.1f} s")


@pytest.mark.parametrize("name", MUTANTS)
def test_each_mutant_fails_with_a_counterexample_that_replays(name: str) -> None:
    result = _checked(name)
    assert result.errors > 0, f"{name} survived the checker:\n{result.output}"
    assert "PROPERTY VIOLATED" in result.counterexample, result.counterexample
    steps = [line for line in result.counterexample.splitlines() if "proc " in line]
    assert steps, "the trail replays into the steps of the counterexample"
    print(f"{name}: {check.violated(result)} after {len(steps)} steps")


def test_every_mutant_of_the_model_is_checked() -> None:
    """A MUTANT_ macro in the model that no run names would be a guard nobody checks."""
    text = check.MODEL.read_text()
    named = {word for word in text.split() if word.startswith("MUTANT_")}
    named = {word.strip("(){};") for word in named}
    assert named == {run.name for run in check.MUTANTS if run.name.startswith("MUTANT_")}
