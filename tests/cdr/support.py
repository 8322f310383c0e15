"""What the CDR plan tests share: the published schema, the test documents, bills on the
reference NEM12 files."""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema_rs

from freehours.domain.bill import make_bill
from freehours.domain.plan import Plan
from freehours.domain.rating import rate_meters
from freehours.meterdata.nem12 import read_days
from freehours.plans.cdr import plan_document_from_cdr
from freehours.plans.document import parse_plan

CDR = Path(__file__).resolve().parent.parent / "data" / "cdr"
SPEC = json.loads((CDR / "cds_energy-1.36.0.json").read_text("utf-8"))
#: EnergyPlanDetailV3 as a JSON Schema: the definition's components, the plan's one referred to.
SCHEMA = {"$ref": "#/components/schemas/EnergyPlanDetailV3", "components": SPEC["components"]}
VALIDATOR = jsonschema_rs.Draft4Validator(SCHEMA)
DOCUMENTS = sorted(path.stem for path in (CDR / "plans").glob("*.json"))
NEM12 = Path(__file__).resolve().parent.parent / "data" / "nem12-examples" / "unzipped"
#: The reference files: E1 and B1 over a month (the reference file of docs/bill.md), several
#: meters with E1, E2 and B1, a partial channel.
REFERENCE_FILES = (
    "Example_NEM12_month_solar.csv",
    "Example_NEM12_multiple_meters.csv",
    "Example_NEM12_partialchannel.csv",
)


def schema_problems(document: object) -> list[str]:
    """Where ``document`` breaks the CDR schema (none: it validates)."""
    return [f"{error.instance_path}: {error.message}" for error in VALIDATOR.iter_errors(document)]


def cdr_document(name: str) -> dict[str, Any]:
    """A test document, its numbers read exactly."""
    data = json.loads((CDR / "plans" / f"{name}.json").read_text("utf-8"), parse_float=Decimal)
    assert isinstance(data, dict)
    return data


def imported(name: str) -> Plan:
    """A test document imported, as the plan it rates as."""
    document = plan_document_from_cdr(cdr_document(name), source=name)
    return parse_plan(document, source=name)


def hand_written(name: str) -> Plan:
    """The plan file written by hand beside a test document."""
    text = (CDR / "plans" / f"{name}.toml").read_text("utf-8")
    return parse_plan(tomllib.loads(text), source=name)


def bills(plan: Plan) -> dict[tuple[str, str], Any]:
    """Every NMI's bill on every reference file, lines by code (their order is cosmetic)."""
    found = {}
    for name in REFERENCE_FILES:
        meters = rate_meters(plan, read_days(NEM12 / name))
        for nmi, rating in meters.items():
            if not rating.rated:
                continue
            bill = make_bill(plan, nmi, rating.days().values()).as_json()
            bill["lines"] = sorted(bill["lines"], key=lambda line: line["code"])
            found[(name, nmi)] = bill
    return found
