"""A file of customers, as ``freehours customers import`` reads it (docs/cli.md, Customer files).

One row a customer, under a header line naming the columns, in any order::

    nmi,plan_id,region,billing_cycle,anchor_day,payment_term_days,name,supply_address_1,...

``nmi``, ``plan_id`` and ``region`` are required; the billing cycle's columns, where given and
not empty, set those fields (the others keep what is stored, or the defaults for a new
customer); the contact's columns (``name``, ``supply_address_1`` to ``_4``,
``billing_address_1`` to ``_4``, ``email``, ``delivery``), where a row fills any of them, give
the customer's whole contact, checked as ``PUT /v1/customers/{nmi}`` checks it. UTF-8 (a byte
order mark allowed), comma-separated, fields quoted as RFC 4180 quotes them.

A file is read whole before anything is stored: the first problem raises ``InputError`` naming
the file, the line and the column, and never a personal field's value (the message may be
logged). The bounds (bytes, rows, a field's length) keep a hostile file from costing more than a
large honest one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from freehours.domain import reads
from freehours.domain.contacts import MAX_ADDRESS_LINES, Contact, contact
from freehours.domain.invoicing import BillingCycle, CycleError, Frequency
from freehours.domain.reads import RangeError
from freehours.domain.time import Region
from freehours.errors import InputError

#: The most bytes a customer file may have: 320 bytes a row of ``MAX_ROWS``.
MAX_BYTES = 64 * 1024 * 1024
#: The most customers one file holds: one transaction stores them all, and the file is read
#: whole first (about 1.3 kB of memory a customer); a larger book goes in several files.
MAX_ROWS = 200_000
#: The longest field: an address line is at most 150 characters, an email address 254.
MAX_FIELD = 1_000

REQUIRED = ("nmi", "plan_id", "region")
CYCLE = ("billing_cycle", "anchor_day", "payment_term_days")
SUPPLY = tuple(f"supply_address_{n}" for n in range(1, MAX_ADDRESS_LINES + 1))
BILLING = tuple(f"billing_address_{n}" for n in range(1, MAX_ADDRESS_LINES + 1))
CONTACT = ("name", *SUPPLY, *BILLING, "email", "delivery")
COLUMNS = (*REQUIRED, *CYCLE, *CONTACT)


@dataclass(frozen=True, slots=True)
class CustomerRecord:
    """One row: the customer, the cycle fields it sets, its contact (None: left as it is)."""

    line: int
    nmi: str
    plan_id: str
    region: Region
    cycle: dict[str, object] = field(default_factory=dict)
    contact: Contact | None = None
    source: str = ""  # the file it is a row of ("": none)


def read_customers(path: Path) -> list[CustomerRecord]:
    """Every row of the customer file at ``path``; ``InputError`` naming the first problem."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    return parse_customers(data, str(path))


def parse_customers(data: bytes, name: str) -> list[CustomerRecord]:
    """Every row of a customer file's bytes (``name`` names it in errors)."""
    if len(data) > MAX_BYTES:
        raise InputError(f"{name}: more than {MAX_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not UTF-8") from None
    rows = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(rows, None)
        if header is None:
            raise InputError(f"{name}: empty; its first line names the columns")
        columns = _columns(header, name)
        records: list[CustomerRecord] = []
        first_line: dict[str, int] = {}
        for values in rows:
            line = rows.line_num
            if not any(value.strip() for value in values):
                continue  # a blank line
            if len(records) >= MAX_ROWS:
                raise InputError(f"{name}:{line}: more than {MAX_ROWS:,} customers in one file")
            record = _record(dict(zip(columns, values, strict=False)), values, columns, name, line)
            if record.nmi in first_line:
                raise InputError(
                    f"{name}:{line}: nmi: {record.nmi} again (first on line"
                    f" {first_line[record.nmi]})"
                )
            first_line[record.nmi] = line
            records.append(record)
    except csv.Error as exc:
        raise InputError(f"{name}:{rows.line_num}: not CSV ({exc})") from None
    if not records:
        raise InputError(f"{name}: no customers under its header")
    return records


def _columns(header: list[str], name: str) -> list[str]:
    columns = [column.strip().lower() for column in header]
    unknown = [column for column in columns if column not in COLUMNS]
    if unknown:
        raise InputError(
            f"{name}:1: unknown column {unknown[0][:40]!r}; the columns are {', '.join(COLUMNS)}"
        )
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            raise InputError(f"{name}:1: column {column!r} twice")
        seen.add(column)
    missing = [column for column in REQUIRED if column not in seen]
    if missing:
        raise InputError(f"{name}:1: no column {missing[0]!r} (required: {', '.join(REQUIRED)})")
    return columns


def _record(
    row: dict[str, str], values: list[str], columns: list[str], name: str, line: int
) -> CustomerRecord:
    def fail(column: str, reason: str) -> InputError:
        return InputError(f"{name}:{line}: {column}: {reason}")

    if len(values) != len(columns):
        raise InputError(f"{name}:{line}: {len(values)} fields, the header has {len(columns)}")
    for column, value in row.items():
        if len(value) > MAX_FIELD:
            raise fail(column, f"{len(value)} characters, at most {MAX_FIELD}")
    nmi = row["nmi"].strip()
    try:
        reads.check_nmi(nmi, "nmi")
    except RangeError as exc:
        raise fail("nmi", exc.reason) from None
    plan_id = row["plan_id"].strip()
    if not plan_id:
        raise fail("plan_id", "is empty")
    try:
        region = Region(row["region"].strip().upper())
    except ValueError:
        raise fail("region", "is NSW, SEQ, SA or VIC") from None
    cycle: dict[str, object] = {}
    if frequency := row.get("billing_cycle", "").strip().lower():
        try:
            cycle["frequency"] = Frequency(frequency)
        except ValueError:
            raise fail("billing_cycle", "is monthly or quarterly") from None
    for column in ("anchor_day", "payment_term_days"):
        if text := row.get(column, "").strip():
            if not (text.isascii() and text.isdigit() and len(text) <= 3):
                raise fail(column, f"{text[:10]!r} is not a whole number")
            cycle[column] = int(text)
    try:
        BillingCycle(**cycle)  # type: ignore[arg-type]
    except CycleError as exc:
        column, _, reason = str(exc).partition(": ")
        raise fail(column, reason) from None
    return CustomerRecord(line, nmi, plan_id, region, cycle, _contact(row, fail), name)


def _contact(row: dict[str, str], fail: Callable[[str, str], InputError]) -> Contact | None:
    """The row's contact, or None where it fills none of the contact's columns."""
    if not any(row.get(column, "").strip() for column in CONTACT):
        return None
    supply = [row[c] for c in SUPPLY if row.get(c, "").strip()]
    billing = [row[c] for c in BILLING if row.get(c, "").strip()]
    try:
        return contact(
            row.get("name", ""),
            supply,
            billing,
            row.get("email", "").strip() or None,
            row.get("delivery", "").strip().lower() or None,
        )
    except RangeError as exc:
        # The field as the file names it: supply_address[1] is the column supply_address_2.
        column = exc.field
        for prefix in ("supply_address", "billing_address"):
            if column.startswith(f"{prefix}["):
                column = f"{prefix}_{int(column[len(prefix) + 1 : -1]) + 1}"
            elif column == prefix:
                column = f"{prefix}_1"
        raise fail(column, exc.reason) from None
