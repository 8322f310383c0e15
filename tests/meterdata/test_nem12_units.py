"""Units: energy in Wh, kWh or MWh (any letter case) becomes kWh exactly; other units stay."""

from __future__ import annotations

from decimal import Decimal

import pytest

from freehours.meterdata.nem12 import read_days
from tests.meterdata.nem12_text import channel, day, nem12


def first_day(uom: str, value: str) -> tuple[str, Decimal | None]:
    [only] = read_days(nem12(channel(uom=uom), day(value=value)).encode())
    return only.uom, only.values[0]


@pytest.mark.parametrize("uom", ["kWh", "KWH", "kwh", "KWh"])
def test_kwh_in_any_letter_case_is_kept_as_written(uom: str) -> None:
    assert first_day(uom, "1.234") == ("KWH", Decimal("1.234"))


@pytest.mark.parametrize("uom", ["Wh", "WH", "wh"])
def test_wh_becomes_kwh_exactly(uom: str) -> None:
    unit, value = first_day(uom, "1234.5")
    assert (unit, value) == ("KWH", Decimal("1.2345"))
    assert str(value) == "1.2345"


def test_a_small_wh_value_keeps_every_digit() -> None:
    assert str(first_day("Wh", "7")[1]) == "0.007"
    assert str(first_day("Wh", "0.001")[1]) == "0.000001"


@pytest.mark.parametrize("uom", ["MWh", "MWH", "mwh"])
def test_mwh_becomes_kwh_exactly_and_prints_plainly(uom: str) -> None:
    unit, value = first_day(uom, "1.5")
    assert (unit, value) == ("KWH", Decimal(1500))
    assert str(value) == "1500"
    assert str(first_day(uom, "0.0000012")[1]) == "0.0012"


@pytest.mark.parametrize(
    ("uom", "kept"), [("kVArh", "KVARH"), ("kvarh", "KVARH"), ("VArh", "VARH")]
)
def test_other_units_are_kept_upper_cased_and_not_scaled(uom: str, kept: str) -> None:
    unit, value = first_day(uom, "50")
    assert (unit, value) == (kept, Decimal(50))
