"""``freehours customers import`` and the customer file's reader: a file stored whole or not at
all, every bad row named by line and column (never by a personal field's value), and the reader
holding to its contract for any bytes (a property test)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.domain.contacts import Delivery
from freehours.errors import InputError
from freehours.operations import customer_csv
from freehours.operations.customer_csv import COLUMNS, CustomerRecord, parse_customers
from freehours.store.database import Store
from tests.support import run_flat

HEADER = "nmi,plan_id,region,billing_cycle,name,supply_address_1,supply_address_2,email,delivery\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "customers.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_is_stored_whole_with_its_contacts(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write(
        tmp_path,
        "\ufeff"
        + HEADER
        + "4103000001,sso-nsw,NSW,quarterly,Sam Citizen,1 Sun St,Newtown NSW 2042,"
        + "sam@example.com,\n"
        + "\n"
        + '4103000002,sso-sa,sa,,"Bloggs, Jo",2 Moon Rd,Adelaide SA 5000,,post\n'
        + "4103000003,sso-nsw,NSW,,,,,,\n",
    )
    code, out, err = run_flat(monkeypatch, capsys, "customers", "import", str(path))
    assert code == 0, err
    assert f"{path}: 3 customers stored (2 with a contact)" in out
    with database.read() as unit:
        accounts = {a.nmi: a for a in unit.invoices.accounts_after(None, 10)}
        contacts = unit.catalog.contacts(list(accounts))
    assert accounts["4103000001"].cycle.frequency.value == "quarterly"
    assert accounts["4103000002"].region.value == "SA"
    assert contacts["4103000001"].delivery is Delivery.EMAIL
    assert contacts["4103000002"].name == "Bloggs, Jo"
    assert contacts["4103000002"].postal_address == ("2 Moon Rd", "Adelaide SA 5000")
    assert "4103000003" not in contacts

    code, out, _ = run_flat(monkeypatch, capsys, "customers", "forget", "4103000001")
    assert (code, out) == (0, "customer 4103000001: contact erased\n")
    code, out, _ = run_flat(monkeypatch, capsys, "customers", "forget", "4103000001")
    assert (code, out) == (0, "customer 4103000001: no contact\n")
    with database.read() as unit:
        assert set(unit.catalog.contacts(list(accounts))) == {"4103000002"}
        assert unit.catalog.get_customer("4103000001") is not None


def test_revoke_page_stops_a_customers_links_audited(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write(tmp_path, HEADER + "4103000001,sso-nsw,NSW,,Sam Citizen,1 Sun St,,,post\n")
    assert run_flat(monkeypatch, capsys, "customers", "import", str(path))[0] == 0
    with database.write() as unit:
        page_id = unit.pages.page_for("4103000001", at=datetime.now(UTC))
    code, out, err = run_flat(monkeypatch, capsys, "customers", "revoke-page", "4103000001")
    assert (code, out) == (0, "customer 4103000001: their page's links stopped opening\n"), err
    with database.read() as unit:
        assert unit.pages.nmi_of(page_id) is None
        (entry,) = unit.audit.page(limit=5, target="customer:4103000001")
    assert (entry.action, entry.outcome, entry.key_name) == ("page.revoke", "done", "command line")
    code, out, _ = run_flat(monkeypatch, capsys, "customers", "revoke-page", "4103000001")
    assert (code, out) == (0, "customer 4103000001: no page link to revoke\n")
    code, _, err = run_flat(monkeypatch, capsys, "customers", "revoke-page", "4109999999")
    assert code == 2
    assert "no customer 4109999999" in err


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("4103000009,sso-nsw,NSW,,Al,,,,\n", ":3: supply_address_1: has at least one line"),
        ("4103000009,sso-nsw,NSW,,Al,1 St,,al at example,\n", ":3: email: is not an email"),
        ("4103000009,sso-nsw,NSW,weekly,,,,,\n", ":3: billing_cycle: is monthly or quarterly"),
        ("4103000009,sso-nsw,MARS,,,,,,\n", ":3: region: is NSW, SEQ, SA or VIC"),
        ("41030,sso-nsw,NSW,,,,,,\n", ":3: nmi: '41030' is not an NMI"),
        ("4103000001,sso-nsw,NSW,,,,,,\n", ":3: nmi: 4103000001 again (first on line 2)"),
        ("4103000009,no-such-plan,NSW,,,,,,\n", ":3: plan_id: no plan 'no-such-plan'"),
        ("4103000009,sso-sa,NSW,,,,,,\n", ":3: region: plan 'sso-sa' is for region SA"),
        ("4103000009,sso-nsw\n", ":3: 2 fields, the header has 9"),
    ],
)
def test_a_bad_row_is_named_and_nothing_is_stored(
    database: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rows: str,
    message: str,
) -> None:
    path = write(tmp_path, HEADER + "4103000001,sso-nsw,NSW,,Sam,1 Sun St,,,\n" + rows)
    code, out, err = run_flat(monkeypatch, capsys, "customers", "import", str(path))
    assert (code, out) == (2, "")
    assert f"error: {path}{message}" in err
    assert "al at example" not in err  # a personal field's value is never repeated
    with database.read() as unit:
        assert unit.catalog.count_customers() == 0


def test_a_header_is_checked(tmp_path: Path) -> None:
    for text, message in (
        ("", "f.csv: empty; its first line names the columns"),
        ("nmi,plan_id\n", "f.csv:1: no column 'region'"),
        ("nmi,plan_id,region,nickname\n", "f.csv:1: unknown column 'nickname'"),
        ("nmi,plan_id,region,NMI\n", "f.csv:1: column 'nmi' twice"),
        ("nmi,plan_id,region\n\n", "f.csv: no customers under its header"),
        ('nmi,plan_id,region\n"4103000001,x\n', "f.csv:2: not CSV"),
    ):
        with pytest.raises(InputError) as refused:
            parse_customers(text.encode(), "f.csv")
        assert str(refused.value).startswith(message), (text, str(refused.value))
    with pytest.raises(InputError, match=r"^f\.csv:1: not UTF-8"):
        parse_customers(b"nmi,\xff\n", "f.csv")


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@given(
    st.binary(max_size=400)
    | st.lists(st.lists(TEXT, max_size=12), max_size=6).map(
        lambda rows: "\n".join(",".join(row) for row in [list(COLUMNS[:5]), *rows]).encode()
    )
)
def test_any_bytes_give_records_or_an_input_error_naming_the_file(data: bytes) -> None:
    try:
        records = parse_customers(data, "f.csv")
    except InputError as exc:
        refusal = str(exc)
        records = []
    else:
        refusal = "f.csv"
    assert refusal.startswith("f.csv")
    assert all(isinstance(r, CustomerRecord) and r.source == "f.csv" for r in records)
    assert len({r.nmi for r in records}) == len(records)


NAME = st.from_regex(r"[A-Za-z][A-Za-z ,.'-]{0,40}[a-z]", fullmatch=True)


@given(
    st.lists(
        st.tuples(st.integers(0, 10**8 - 1), NAME, st.lists(NAME, min_size=1, max_size=2)),
        min_size=1,
        max_size=8,
        unique_by=lambda row: row[0],
    )
)
def test_rows_written_by_a_csv_writer_read_back_as_written(
    rows: list[tuple[int, str, list[str]]],
) -> None:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["nmi", "plan_id", "region", "name", "supply_address_1", "supply_address_2"])
    for number, name, lines in rows:
        writer.writerow(
            [f"41{number:08d}", "sso-nsw", "NSW", name, *lines, *[""] * (2 - len(lines))]
        )
    records = parse_customers(out.getvalue().encode(), "f.csv")
    assert [(r.nmi, r.contact.name if r.contact else None) for r in records] == [
        (f"41{number:08d}", " ".join(name.split())) for number, name, _ in rows
    ]
    assert [r.contact.supply_address for r in records if r.contact] == [
        tuple(" ".join(line.split()) for line in lines) for _, _, lines in rows
    ]


def test_put_sets_a_contact_and_names_a_wrong_option(
    database: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("customers", "put", "4103000001", "--plan", "sso-nsw", "--region", "NSW")
    contact = ("--name", "Sam", "--supply-address", "1 Sun St", "--email", "sam@example.com")
    code, out, _ = run_flat(monkeypatch, capsys, *base, *contact)
    assert code == 0
    assert out.strip().endswith("; its contact set, delivery by email")
    code, _, err = run_flat(monkeypatch, capsys, *base, *contact[:4], "--email", "sam")
    assert (code, err) == (2, "error: --email: is not an email address (name@example.com.au)")
    code, _, err = run_flat(monkeypatch, capsys, *base, "--email", "sam@example.com")
    assert (code, err) == (2, "error: --name: is required with the contact's other options")
    code, out, _ = run_flat(monkeypatch, capsys, *base)  # the contact kept
    with database.read() as unit:
        kept = unit.catalog.contacts(["4103000001"])["4103000001"]
    assert (kept.name, kept.email, "contact" in out) == ("Sam", "sam@example.com", False)


def test_a_file_past_its_bounds_is_refused_before_it_is_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = "nmi,plan_id,region\n" + "".join(f"41030000{n:02d},sso-nsw,NSW\n" for n in range(3))
    monkeypatch.setattr(customer_csv, "MAX_ROWS", 2)
    with pytest.raises(InputError, match=r"^f\.csv:4: more than 2 customers in one file"):
        parse_customers(rows.encode(), "f.csv")
    monkeypatch.setattr(customer_csv, "MAX_BYTES", 10)
    with pytest.raises(InputError, match=r"^f\.csv: more than 10 bytes"):
        parse_customers(rows.encode(), "f.csv")
    monkeypatch.setattr(customer_csv, "MAX_BYTES", 1 << 20)
    long_name = "nmi,plan_id,region,name\n4103000001,sso-nsw,NSW," + "x" * 1001 + "\n"
    with pytest.raises(InputError, match=r"^f\.csv:2: name: 1001 characters, at most 1000"):
        parse_customers(long_name.encode(), "f.csv")
