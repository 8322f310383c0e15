"""``freehours demo``: the whole system end to end, and its exit status when an invariant fails."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from freehours.cli import app
from freehours.settings import Settings
from freehours.sim.demo import DemoConfig, DemoProgress, DemoResult
from tests.sim.test_demo_report import NO_FAULTS


@pytest.mark.slow
def test_the_demo_settles_every_customer_day_under_its_faults_and_writes_its_report(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(
        app, ["demo", "--out", str(tmp_path), "--customers", "4", "--days", "1", "--seed", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "quotas settled: 4 of 4 customer-days" in result.stdout
    assert "all hold" in result.stdout
    report = (tmp_path / "report.html").read_text()
    assert report.count('src="data:image/png;base64,') == 3
    assert "a worker died holding" in report
    # An invoice per customer for July, then a credit note for the revised day, each linked.
    text = " ".join(result.stdout.split())
    assert "as of 04 Aug 2026: 4 invoices, 0 credit notes" in text
    assert "as of 05 Aug 2026: 0 invoices, 1 credit note" in text
    assert "4 invoices, 1 credit note, 0 adjustment invoices; numbers gapless" in text
    assert "CN-00000001 corrects INV-0000000" in text
    # The demo's webhook receiver got every event once: a quota.completed per version (4 and the
    # revision's), the revision, the invoices and the credit note; its own 503s were retried.
    assert (
        "1 credit_note.issued, 4 invoice.finalised, 5 quota.completed, 1 quota.revised received"
        in text
    )
    assert "0 bad signatures; 0 deliveries pending, 0 failed" in text
    # The retailer's offers compared on a customer's data, cheapest first, in the report too.
    compared = re.search(r"plans compared NMI (\w+)'s data under the 5 offers: (.*?) AUD", text)
    assert compared is not None
    totals = [Decimal(part.split()[1]) for part in compared.group(2).split(", ")]
    assert totals == sorted(totals)
    assert "<h2>Plans compared</h2>" in report
    # The better offer check: NSW's saver is a better offer for NSW customers, the others are on
    # the best plan for them.
    assert re.search(r"better offer check [1-9]\d* of 4 invoices name a better offer", text)
    assert "You could save $" in text
    assert "You are on our best plan for you" in text
    # The customers' contacts are printed on their invoices.
    assert "Sam Citizen" in (tmp_path / "documents" / "INV-00000001.html").read_text()
    documents = sorted(path.name for path in (tmp_path / "documents").iterdir())
    numbers = [f"INV-0000000{n}" for n in range(1, 5)] + ["CN-00000001"]
    assert documents == sorted(f"{n}.{kind}" for n in numbers for kind in ("pdf", "html"))
    for number in numbers:
        assert f'<a href="documents/{number}.pdf">PDF</a>' in report
        assert f'<a href="documents/{number}.html">HTML</a>' in report
        assert (tmp_path / "documents" / f"{number}.pdf").read_bytes().startswith(b"%PDF-")
    assert "4 invoices, 1 credit note" in " ".join(report.split())
    # Every region's free kWh to the watt-hour; one with none is said why, here and in the report.
    rows = re.findall(r"│ (NSW|SEQ|SA|VIC)\s+│\s+\d+ │\s+(\S+) │", result.stdout)
    assert [region for region, _ in rows] == ["NSW", "SA", "SEQ", "VIC"]
    assert all(re.fullmatch(r"\d+\.\d{3,}", kwh) for _, kwh in rows), rows
    for region, kwh in rows:
        if kwh == "0.000":
            said = " ".join(result.stdout.split()).split(f"{region}: 0.000 kWh free: ")[1]
            assert said.startswith("its ")
            assert f"{region}: 0.000 kWh free: its " in " ".join(report.split())


def test_a_broken_invariant_is_named_and_the_exit_status_is_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(config: DemoConfig, settings: Settings, progress: DemoProgress) -> DemoResult:
        result = DemoResult(config, date(2026, 7, 1))
        result.faults.update(NO_FAULTS)
        result.failures.append("4100000001:2026-07-01: not settled, and no reason given")
        return result

    monkeypatch.setattr("freehours.sim.demo.run_demo", broken)
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "invariant broken: 4100000001:2026-07-01: not settled" in result.stderr
