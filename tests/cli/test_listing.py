"""Lists (``freehours.cli.listing``): a table that fits 80 columns, its figures and identifiers
whole, the columns left out named; JSON when piped, the API's items key for key."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.api.routes.webhooks import endpoint_json
from freehours.cli.listing import FOLD_WIDTH, fitting
from freehours.cli.tables import Column
from tests.cli.test_invoices_cli import AS_OF
from tests.invoicing.support import System
from tests.support import run_flat

CELL = st.text("abcdefghij0123456789.-", max_size=30)
COLUMN = st.builds(
    Column,
    header=st.text("abcdefghij ", min_size=1, max_size=12),
    drop=st.integers(0, 5),
    fold=st.booleans(),
)


@given(columns=st.lists(COLUMN, min_size=1, max_size=8), data=st.data(), width=st.integers(20, 200))
def test_columns_are_left_out_in_their_order_until_the_table_fits(
    columns: list[Column], data: st.DataObject, width: int
) -> None:
    rows = data.draw(st.lists(st.lists(CELL, min_size=len(columns), max_size=len(columns))))
    kept = fitting(columns, rows, width)

    def needed(positions: list[int]) -> int:
        total = 1
        for n in positions:
            widest = max([len(columns[n].header), *(len(row[n]) for row in rows)])
            if columns[n].fold:
                widest = min(widest, max(FOLD_WIDTH, len(columns[n].header)))
            total += widest + 3
        return total

    dropped = [n for n in range(len(columns)) if n not in kept]
    assert all(columns[n].drop for n in dropped)  # a column of drop 0 is always kept
    droppable = sorted((n for n, c in enumerate(columns) if c.drop), key=lambda n: columns[n].drop)
    assert dropped == sorted(droppable[: len(dropped)])  # the lowest drops first
    if dropped:  # left out only while it did not fit, and no more than it took
        assert needed([*kept, droppable[len(dropped) - 1]]) > width
    if needed(kept) > width:  # still too wide: nothing more could go
        assert dropped == sorted(droppable)


def fits(out: str, width: int = 80) -> list[str]:
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    return lines


def cell(table: str, column: int, joiner: str) -> str:
    """The text of a one-row table's ``column`` (from 1), its lines joined by ``joiner``."""
    lines = [line.split("│")[column].strip() for line in table.splitlines() if line[0] == "│"]
    return joiner.join(lines)


def test_every_list_fits_80_columns_whole_and_is_json_when_piped(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def table(*args: str) -> str:
        code, out, err = run_flat(monkeypatch, capsys, *args, "--format", "table", width=80)
        assert code == 0, err
        fits(out)
        return out

    def piped(*args: str) -> list[dict[str, object]]:
        code, out, err = run_flat(monkeypatch, capsys, *args)
        assert code == 0, err
        items = json.loads(out)
        assert isinstance(items, list)
        return items

    assert run_flat(monkeypatch, capsys, "invoices", "run", "--as-of", AS_OF)[0] == 0
    documents = piped("invoices", "list")
    assert len(documents) == 2
    out = table("invoices", "list")
    for document in documents:  # number, NMI, period and total whole on one row
        (row,) = [line for line in out.splitlines() if str(document["number"]) in line]
        assert str(document["nmi"]) in row
        assert f"{document['period_start']} to {document['period_end']}" in row
        assert f" {document['total']} " in row
    assert "…" not in out
    caption = "2 documents; not shown at 80 columns: type, issued, due, corrects"
    assert caption in " ".join(out.split())
    wide = run_flat(monkeypatch, capsys, "invoices", "list", "--format", "table", width=160)[1]
    assert "not shown" not in wide
    assert "corrects" in wide

    customers = piped("customers", "list")
    assert [c["nmi"] for c in customers] == sorted(str(d["nmi"]) for d in documents)
    assert customers[0].keys() == {
        "nmi",
        "plan_id",
        "region",
        "billing_cycle",
        "anchor_day",
        "payment_term_days",
    }
    out = table("customers", "list")
    assert all(str(c["nmi"]) in out for c in customers)
    assert piped("customers", "list", "--region", "VIC") == []

    name = "the retailer's reporting dashboard, read only, rotated every quarter"
    assert (
        run_flat(monkeypatch, capsys, "keys", "create", "--scope", "read", "--name", name)[0] == 0
    )
    (key,) = piped("keys", "list")
    assert (key["name"], key["scopes"], key["revoked_at"]) == (name, ["read"], None)
    out = table("keys", "list")
    assert str(key["id"]) in out
    assert cell(out, 2, " ") == name  # broken over lines, not cut

    url = "https://hooks.retailer.example/freehours/settlement-events/production/receiver"
    added = run_flat(monkeypatch, capsys, "webhooks", "add", url, "--event", "quota.completed")
    endpoint = added[1].split()[0]
    (listed,) = piped("webhooks", "list")
    assert (listed["id"], listed["url"]) == (endpoint, url)
    with system.store.read() as unit:
        assert listed == endpoint_json(
            unit.webhooks.endpoint(endpoint)
        )  # GET /v1/webhook-endpoints's
    out = table("webhooks", "list")
    assert cell(out, 2, "") == url  # broken over lines, every character there
