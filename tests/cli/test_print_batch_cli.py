"""``freehours invoices print-batch RUN --out DIR``: the run's print batch written as files."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from freehours.domain.contacts import Contact
from tests.invoicing.support import System, nmi
from tests.support import run_flat

POSTED = Contact("Pat Post", ("2 Moon Road", "Newtown NSW 2042"))


def test_the_batch_is_written_as_a_manifest_and_parts(
    system: System,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    nmis = [nmi(0), nmi(1)]  # the fixture's two customers, July settled
    with system.store.write() as unit:
        unit.catalog.put_contacts({nmis[0]: POSTED}, updated_at=system.clock.now())
    system.run()
    (document,) = [d for d in system.documents() if d.nmi == nmis[0]]
    code, out, _ = run_flat(
        monkeypatch, capsys, "invoices", "print-batch", str(document.run_id), "--out", str(tmp_path)
    )
    assert code == 0
    assert "1 document(s) to post in 1 part(s)" in out
    assert "1 without an address to post to" in out
    (row,) = csv.DictReader((tmp_path / f"print-{document.run_id}.csv").open())
    assert (row["number"], row["name"]) == (document.number, "Pat Post")
    assert (tmp_path / f"print-{document.run_id}-1.pdf").read_bytes().startswith(b"%PDF")
    code, _, err = run_flat(monkeypatch, capsys, "invoices", "print-batch", "nope")
    assert code == 1
    assert "no invoice run 'nope'" in err
