"""The real example files (tests/data/nem12-examples): every invalid one is refused with
its line and field; every NEM12 one is read, or refused for a reason pinned here; a few exact
totals, worked out by hand from the files, pin the values themselves."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import NEM12Reader, read_days

NEM13 = "NEM13 accumulation data cannot be rated for a free window"

# file -> (line, field, words of the reason). The four files with mismatched interval lengths
# name the NMI 123, which is refused first (freehours.domain.reads); test_nem12_errors covers the
# mismatches themselves.
INVALID: dict[str, tuple[int | None, str | None, str]] = {
    "Example_NEM12_15min_200_30min_300.csv": (2, "NMI", "'123' is not an NMI"),
    "Example_NEM12_15min_200_30min_400.csv": (2, "NMI", "'123' is not an NMI"),
    "Example_NEM12_30min_200_15min_300.csv": (2, "NMI", "'123' is not an NMI"),
    "Example_NEM12_30min_200_15min_400.csv": (2, "NMI", "'123' is not an NMI"),
    "Example_NEM12_empty.csv": (2, None, "no interval data"),
    "Example_NEM12_incomplete_interval.csv": (3, "IntervalValue1", "0 interval values"),
    "Example_NEM12_missing_header.csv": (2, "RecordIndicator", "no 100 header"),
    "Example_NEM12_powercor.csv": (2, "RecordIndicator", "no 100 header"),
    "Example_NEM12_powercor.csv.zip": (2, "RecordIndicator", "no 100 header"),
    "Example_NEM12_powercor_missing_fields.csv": (2, "RecordIndicator", "no 100 header"),
    "Example_empty_file.csv": (None, None, "the file is empty"),
}

# file -> (days, interval qualities), or (line, field, words of the reason) where refused
UNZIPPED: dict[str, tuple[int, dict[str, int]] | tuple[int, str, str]] = {
    "Example_NEM12_actual_interval.csv": (2, {"A": 96}),
    # Its NMI C123 is not 10 characters (and its V1 channel has no unit and 10-minute intervals).
    "Example_NEM12_different_interval_length.csv": (2, "NMI", "'C123' is not an NMI"),
    "Example_NEM12_month_solar.csv": (62, {"A": 17856}),
    "Example_NEM12_multiple_meters.csv": (12, {"A": 1152}),
    "Example_NEM12_multiple_quality.csv": (1, {"A": 4, "F": 20, "S": 24}),
    # NMI111 is not an NMI (10 characters): the API could never address its data.
    "Example_NEM12_no_scheduled_read.csv": (2, "NMI", "'NMI111' is not an NMI"),
    "Example_NEM12_partialchannel.csv": (32, {"A": 9216}),
    "Example_NEM12_substituted_interval.csv": (2, {"F": 96}),
    "Example_NEM12_upper_case_units.csv": (2, {"A": 96}),
    "Example_NEM13_consumption_data.csv": (1, "VersionHeader", NEM13),
    "Example_NEM13_forward_estimate.csv": (1, "VersionHeader", NEM13),
    "Example_WesternPower.csv": (4, {"A": 192}),
}

# file -> (days, interval qualities): every scenario file is read
SCENARIOS: dict[str, tuple[int, dict[str, int]]] = {
    "NEM12#000000000000001#CNRGYMDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#000000000000002#CNRGYMDP#NEMMCO.zip": (16, {"A": 768}),
    "NEM12#000000000000003#CNRGYMDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#000000000000004#CNRGYMDP#NEMMCO.zip": (3, {"E": 134, "F": 10}),
    "NEM12#000000000000005#CNRGYMDP#NEMMCO.zip": (4, {"A": 288}),
    "NEM12#000000000000006#CNRGYMDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#000000000000007#CNRGYMDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#000000000000008#CNRGYMDP#NEMMCO.zip": (2, {"A": 18, "F": 39, "S": 39}),
    "NEM12#000000000000009#CNRGYMDP#NEMMCO.zip": (7, {"A": 168, "E": 168}),
    "NEM12#000000000000010#CNRGYMDP#NEMMCO.zip": (5, {"A": 240}),
    "NEM12#01010_05030502#WBAYM#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#02030_05030501#WBAYM#NEMMCO.zip": (16, {"A": 768}),
    "NEM12#03050_05031001#WBAYM#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#05090_05031401#WBAYM#NEMMCO.zip": (4, {"A": 288}),
    "NEM12#06110_05021206#WBAYM#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#07130_05021202#WBAYM#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#08150_05031502#WBAYM#NEMMCO.zip": (2, {"A": 22, "F": 48, "S": 26}),
    "NEM12#10190_05031401#WBAYM#NEMMCO.zip": (5, {"A": 240}),
    "NEM12#SCENARIO1#UNITEDDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#SCENARIO10#UNITEDDP#NEMMCO.zip": (6, {"A": 220, "F": 68}),
    "NEM12#SCENARIO1005032705#ENERGEXM#NEMMCO.zip": (10, {"A": 408, "N": 72}),
    "NEM12#SCENARIO105032701#ENERGEXM#NEMMCO.zip": (8, {"A": 768}),
    "NEM12#SCENARIO2#UNITEDDP#NEMMCO.zip": (16, {"A": 768}),
    "NEM12#SCENARIO205032701#ENERGEXM#NEMMCO.zip": (16, {"A": 768}),
    "NEM12#SCENARIO3#UNITEDDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#SCENARIO305032701#ENERGEXM#NEMMCO.zip": (8, {"S": 768}),
    "NEM12#SCENARIO4#UNITEDDP#NEMMCO.zip": (3, {"E": 122, "F": 22}),
    "NEM12#SCENARIO5#UNITEDDP#NEMMCO.zip": (4, {"A": 288}),
    "NEM12#SCENARIO505033001#ENERGEXM#NEMMCO.zip": (4, {"A": 288}),
    "NEM12#SCENARIO6#UNITEDDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#SCENARIO605033001#ENERGEXM#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#SCENARIO7#UNITEDDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#SCENARIO705033001#ENERGEXM#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#SCENARIO8#UNITEDDP#NEMMCO.zip": (2, {"A": 20, "E": 74, "F": 2}),
    "NEM12#SCENARIO805040401#ENERGEXM#NEMMCO.zip": (2, {"A": 50, "F": 9, "S": 37}),
    "NEM12#SCENARIO9#UNITEDDP#NEMMCO.zip": (7, {"A": 164, "E": 172}),
    "NEM12#Scenario01#ETSAMDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#Scenario01#POWERMDP#NEMMCO.zip": (8, {"A": 384}),
    "NEM12#Scenario04#ETSAMDP#NEMMCO.zip": (3, {"E": 124, "F": 20}),
    "NEM12#Scenario04#POWERMDP#NEMMCO.zip": (3, {"E": 124, "F": 20}),
    "NEM12#Scenario05#ETSAMDP#NEMMCO.zip": (4, {"A": 288}),
    "NEM12#Scenario05#POWERMDP#NEMMCO.zip": (4, {"A": 288}),
    "NEM12#Scenario06#ETSAMDP#NEMMCO.zip": (8, {"A": 336, "E": 48}),
    "NEM12#Scenario06#POWERMDP#NEMMCO.zip": (8, {"A": 336, "E": 48}),
    "NEM12#Scenario07#ETSAMDP#NEMMCO.zip": (8, {"A": 336, "E": 48}),
    "NEM12#Scenario07#POWERMDP#NEMMCO.zip": (8, {"A": 336, "E": 48}),
    "NEM12#Scenario08#ETSAMDP#NEMMCO.zip": (2, {"A": 24, "E": 24, "F": 11, "S": 37}),
    "NEM12#Scenario08#POWERMDP#NEMMCO.zip": (2, {"A": 24, "E": 24, "F": 11, "S": 37}),
    "NEM12#Scenario09#ETSAMDP#NEMMCO.zip": (7, {"A": 165, "E": 171}),
    "NEM12#Scenario09#POWERMDP#NEMMCO.zip": (7, {"A": 165, "E": 171}),
    "NEM12#Scenario10#ETSAMDP#NEMMCO.zip": (8, {"A": 276, "E": 48, "F": 60}),
    "NEM12#Scenario10#POWERMDP#NEMMCO.zip": (8, {"A": 276, "E": 48, "F": 60}),
    "NEM12#mdffl0000000001#ACTEWM#NEMMCO.zip": (8, {"A": 768}),
    "NEM12#mdffl0000000004#ACTEWM#NEMMCO.zip": (3, {"E": 287, "F": 1}),
    "NEM12#mdffl0000000008#ACTEWM#NEMMCO.zip": (2, {"A": 96, "F": 2, "S": 94}),
    "nem12#S01#INTEGM#NEMMCO.zip": (8, {"A": 768}),
    "nem12#S02#INTEGM#NEMMCO.zip": (16, {"S": 1536}),
    "nem12#S03#INTEGM#NEMMCO.zip": (8, {"A": 768}),
    "nem12#S04#INTEGM#NEMMCO.zip": (3, {"E": 278, "F": 10}),
    "nem12#S05#INTEGM#NEMMCO.zip": (4, {"A": 288}),
    "nem12#S06#INTEGM#NEMMCO.zip": (8, {"A": 768}),
    "nem12#S07#INTEGM#NEMMCO.zip": (8, {"A": 768}),
    "nem12#S08#INTEGM#NEMMCO.zip": (2, {"A": 4, "E": 182, "F": 2, "S": 4}),
    "nem12#S09#INTEGM#NEMMCO.zip": (7, {"A": 338, "E": 334}),
    "nem12#S10#INTEGM#NEMMCO.zip": (4, {"A": 377, "S": 7}),
    "nem12#SCENARIO01#TCAUSTM#NEMMCO.zip": (8, {"A": 384}),
    "nem12#SCENARIO01NEM1201003#ELECTDSM#NEMMCO.zip": (8, {"A": 768}),
    "nem12#SCENARIO02#TCAUSTM#NEMMCO.zip": (16, {"A": 768}),
    "nem12#SCENARIO02NEM1202023#ELECTDSM#NEMMCO.zip": (16, {"A": 1536}),
    "nem12#SCENARIO03#TCAUSTM#NEMMCO.zip": (8, {"A": 384}),
    "nem12#SCENARIO03NEM1203043#ELECTDSM#NEMMCO.zip": (8, {"A": 768}),
    "nem12#SCENARIO04#TCAUSTM#NEMMCO.zip": (3, {"E": 120, "F": 24}),
    "nem12#SCENARIO05#TCAUSTM#NEMMCO.zip": (4, {"A": 288}),
    "nem12#SCENARIO05NEM1205083#ELECTDSM#NEMMCO.zip": (4, {"A": 288}),
    "nem12#SCENARIO06#TCAUSTM#NEMMCO.zip": (8, {"A": 384}),
    "nem12#SCENARIO06NEM1206103#ELECTDSM#NEMMCO.zip": (10, {"A": 960}),
    "nem12#SCENARIO07#TCAUSTM#NEMMCO.zip": (8, {"A": 384}),
    "nem12#SCENARIO07NEM1206103#ELECTDSM#NEMMCO.zip": (10, {"A": 960}),
    "nem12#SCENARIO08#TCAUSTM#NEMMCO.zip": (2, {"A": 76, "F": 3, "S": 17}),
    "nem12#SCENARIO08NEM1208143#ELECTDSM#NEMMCO.zip": (2, {"A": 64, "F": 93, "S": 35}),
    "nem12#SCENARIO09#TCAUSTM#NEMMCO.zip": (7, {"A": 168, "E": 168}),
    "nem12#SCENARIO10#TCAUSTM#NEMMCO.zip": (6, {"A": 216, "F": 72}),
    "nem12#SCENARIO10NEM1210183#ELECTDSM#NEMMCO.zip": (5, {"A": 480}),
}


def assert_refused(path: Path, line: int | None, field: str | None, words: str) -> None:
    with pytest.raises(NEM12Error) as caught:
        list(read_days(path))
    error = caught.value
    assert (error.line, error.field) == (line, field)
    assert error.source.startswith(str(path))
    assert words in error.reason


def assert_read(path: Path, days: int, qualities: dict[str, int]) -> None:
    reader = NEM12Reader(path)
    assert sum(1 for _ in reader.days()) == days
    assert (reader.stats.days, reader.stats.superseded) == (days, 0)
    assert dict(reader.stats.qualities) == qualities


@pytest.mark.parametrize(
    ("folder", "expected"),
    [("invalid", INVALID), ("unzipped", UNZIPPED), ("aemo-scenarios", SCENARIOS)],
)
def test_every_example_file_has_a_pinned_outcome(
    nem12_examples: Path, folder: str, expected: dict[str, object]
) -> None:
    assert sorted(path.name for path in (nem12_examples / folder).iterdir()) == sorted(expected)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_file_is_refused_with_its_line_and_field(nem12_examples: Path, name: str) -> None:
    assert_refused(nem12_examples / "invalid" / name, *INVALID[name])


@pytest.mark.parametrize("name", sorted(UNZIPPED))
def test_unzipped_file_is_read_or_refused_as_pinned(nem12_examples: Path, name: str) -> None:
    path = nem12_examples / "unzipped" / name
    outcome = UNZIPPED[name]
    if isinstance(outcome[1], dict):
        assert_read(path, outcome[0], outcome[1])
    else:
        line, field, words = outcome
        assert_refused(path, line, str(field), str(words))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_file_is_read_as_pinned(nem12_examples: Path, name: str) -> None:
    assert_read(nem12_examples / "aemo-scenarios" / name, *SCENARIOS[name])


def totals(path: Path) -> dict[tuple[str, str, str], Decimal]:
    return {(d.nmi, d.suffix, d.day.isoformat()): d.total() for d in read_days(path)}


def test_wh_file_values_are_kwh_to_the_watt_hour(nem12_examples: Path) -> None:
    # 96 intervals of 10 Wh on E1 and 100 Wh on E2 each day
    got = totals(nem12_examples / "unzipped" / "Example_NEM12_multiple_meters.csv")
    assert got[("NCDE001111", "E1", "2003-12-04")] == Decimal("0.960")
    assert got[("NCDE001111", "E2", "2003-12-05")] == Decimal("9.600")
    assert got[("NCDE001111", "Q1", "2003-12-04")] == Decimal(4800)  # VArh, not scaled


def test_multiple_quality_day_total(nem12_examples: Path) -> None:
    got = totals(nem12_examples / "unzipped" / "Example_NEM12_multiple_quality.csv")
    assert got == {("CCCC123456", "E1", "2004-04-17"): Decimal("896.990")}


def test_actual_interval_day_totals(nem12_examples: Path) -> None:
    got = totals(nem12_examples / "unzipped" / "Example_NEM12_actual_interval.csv")
    assert got[("VABD000163", "E1", "2004-02-01")] == Decimal("53.328")  # 48 x 1.111
    assert got[("VABD000163", "Q1", "2004-02-01")] == Decimal("106.656")  # 48 x 2.222


def test_month_of_5_minute_solar_export_total(nem12_examples: Path) -> None:
    got = totals(nem12_examples / "unzipped" / "Example_NEM12_month_solar.csv")
    assert sum(got.values()) == Decimal("859.910")


def test_null_intervals_are_missing(nem12_examples: Path) -> None:
    path = nem12_examples / "aemo-scenarios" / "NEM12#SCENARIO1005032705#ENERGEXM#NEMMCO.zip"
    days = {(d.suffix, d.day.isoformat()): d for d in read_days(path)}
    e1 = days[("E1", "2005-03-28")]
    assert e1.values[24:] == (None,) * 24
    assert e1.total() == Decimal("35037.94")  # intervals 1-24, worked out by hand


def test_the_300_record_broken_across_lines_is_joined(nem12_examples: Path) -> None:
    path = nem12_examples / "aemo-scenarios" / "NEM12#Scenario10#ETSAMDP#NEMMCO.zip"
    reader = NEM12Reader(path)
    days = {(d.suffix, d.day.isoformat()): d for d in reader.days()}
    broken = days[("B2", "2005-01-13")]
    # Lines 27-29 hold the same 48 values as line 3, in three pieces.
    assert broken.line == 27
    assert broken.values == days[("E1", "2005-01-10")].values
    assert broken.total() == Decimal(1520)
    assert broken.qualities == "A" * 24 + "E" * 24
    assert reader.stats.joined_lines == 2
