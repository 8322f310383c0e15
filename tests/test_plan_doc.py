"""docs/plan.md and docs/plan.schema.json: every built-in plan and the page's example are valid
to the schema and to the model, and the schema refuses what it can say is wrong."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from freehours.cli import docs
from freehours.errors import PlanError
from freehours.plans import BUILTIN_IDS, builtin_document, parse_plan_text, toml_document
from freehours.plans.document import parse_plan

DOCS = Path(__file__).resolve().parent.parent / "docs"
SCHEMA = json.loads((DOCS / "plan.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema_rs.validator_for(SCHEMA)


def toml_blocks(page: Path) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_the_schema_is_a_json_schema_and_the_models_own() -> None:
    assert jsonschema_rs.meta.is_valid(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert (DOCS / "plan.schema.json").read_text(encoding="utf-8") == docs.plan_schema(), (
        f"docs/plan.schema.json is stale: run {docs.REGENERATE}"
    )


@pytest.mark.parametrize("plan_id", BUILTIN_IDS)
def test_every_builtin_plan_is_valid_to_the_schema_and_the_model(plan_id: str) -> None:
    document = builtin_document(plan_id)
    assert list(VALIDATOR.iter_errors(document)) == []
    assert parse_plan(document, source=plan_id).id == plan_id


def test_the_pages_example_is_valid_and_is_the_contracts() -> None:
    (example,) = toml_blocks(DOCS / "plan.md")
    assert list(VALIDATOR.iter_errors(toml_document(example, source="plan.md"))) == []
    plan = parse_plan_text(example, source="plan.md")
    assert (plan.id, plan.zone_name) == ("sso-sa-example", "Australia/Adelaide")


def test_the_page_lists_every_builtin_plan() -> None:
    page = (DOCS / "plan.md").read_text(encoding="utf-8")
    for plan_id in BUILTIN_IDS:
        assert f"| [`{plan_id}`](../freehours/plans/builtin/{plan_id}.toml) |" in page


def wrong(change: str) -> dict[str, Any]:
    document = copy.deepcopy(builtin_document("sso-sa"))
    if change == "misspelt key":
        document["daily_supply_charges"] = document.pop("daily_supply_charge")
    elif change == "float price":
        document["time_of_use"][0]["unit_price"] = 0.48
    elif change == "hour 25":
        document["time_of_use"][0]["periods"][0]["end"] = "25:00"
    elif change == "24:00 as a start":
        document["time_of_use"][0]["periods"][0]["start"] = "24:00"
    elif change == "day name":
        document["time_of_use"][0]["periods"][0]["days"] = ["MONDAY"]
    elif change == "region":
        document["region"] = "WA"
    return document


@pytest.mark.parametrize(
    "change", ["misspelt key", "float price", "hour 25", "24:00 as a start", "day name", "region"]
)
def test_the_schema_and_the_model_both_refuse(change: str) -> None:
    document = wrong(change)
    assert list(VALIDATOR.iter_errors(document)) != []
    with pytest.raises(PlanError, match="sso-sa: "):
        parse_plan(document, source="sso-sa")
