"""The parsers freehours exposes to untrusted bytes, as fuzz targets: each takes any bytes and
must end in its documented error or a result, never anything else (an undocumented exception, a
hang, unbounded memory).

- ``nem12``: a NEM12 upload (CSV, zip or gzip), read whole as ``POST /v1/meter-readings/nem12``
  reads it: every day, or ``NEM12Error``; the same with and without the reader's C part.
- ``readings``: a ``POST /v1/meter-readings`` body, parsed as the route parses it: a batch of
  interval reads, or the 422 (``RequestValidationError``) naming the field.
- ``cdr_plan``: a CDR energy plan, as ``plans import-cdr`` and ``PUT /v1/plans`` (CDR body) read
  it: a plan document that ``parse_plan`` takes, or ``PlanError``.
- ``toml_plan``: a plan file, as ``plans validate`` and ``PUT /v1/plans`` (TOML body) read it:
  a plan, or ``PlanError``.
- ``customers``: a customer file, as ``customers import`` reads it: its records, or
  ``InputError`` naming the file.

Used by ``tests/fuzz/run.py`` (atheris, coverage-guided; ``make fuzz``) and by
``tests/fuzz/test_fuzz.py`` (the kept corpus replayed, and hypothesis) in every test run.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.exceptions import RequestValidationError

from freehours.api.bodies import parse_body
from freehours.api.routes.meter_readings import MeterReadingsIn
from freehours.domain.time import Region
from freehours.errors import InputError, NEM12Error, PlanError
from freehours.meterdata.nem12 import read_days
from freehours.operations.customer_csv import parse_customers
from freehours.plans import toml_document
from freehours.plans.cdr import plan_document_from_cdr, read_json
from freehours.plans.document import parse_plan
from freehours.store.meter import encode_values
from tests.meterdata.pure import pure_python


def nem12(data: bytes) -> None:
    """Read ``data`` as an uploaded NEM12 file to its end; then again where the reader's C part
    is not used, which must read the same days or refuse with the same error."""
    compiled = _nem12_days(data)
    with pure_python():
        pure = _nem12_days(data)
    if pure != compiled:
        raise AssertionError(f"the C part reads {compiled!r:.300} but Python {pure!r:.300}")


def _nem12_days(data: bytes) -> list[tuple[object, ...]] | str:
    """Every day of ``data`` with its values, qualities and stored text; or the error."""
    days = []
    try:
        for day in read_days(data, name="fuzz.csv"):
            # The fast path (a record's own text stored as it is) agrees with the exact one.
            if day.stored_text() is not None and day.stored_text() != encode_values(day.values):
                raise AssertionError(
                    f"stored form {day.stored_text()[:80]!r} is not the values' exact text"
                )
            days.append((day.key, day.values, day.qualities, day.stored_text(), day.line))
    except NEM12Error as exc:
        if "fuzz.csv" not in str(exc):
            raise AssertionError(f"the error does not name the file: {exc}") from exc
        return str(exc)
    return days


def readings(data: bytes) -> None:
    """Parse ``data`` as a JSON batch of interval reads."""
    try:
        parse_body(MeterReadingsIn, data)
    except RequestValidationError as exc:
        errors = exc.errors()
        if not errors or any(error["loc"][0] != "body" for error in errors):
            raise AssertionError(f"a 422 that does not name a body field: {errors}") from exc


def cdr_plan(data: bytes) -> None:
    """Read ``data`` as a CDR energy plan into a plan document."""
    try:
        document = plan_document_from_cdr(
            read_json(data, source="fuzz.json", limit=1 << 20),
            source="fuzz.json",
            region=Region.NSW,
        )
    except PlanError as exc:
        if "fuzz.json" not in str(exc):
            raise AssertionError(f"the error does not name the source: {exc}") from exc
        return
    parse_plan(document, source="fuzz.json")  # what it returns is a plan


def toml_plan(data: bytes) -> None:
    """Read ``data`` as a plan file into a plan."""
    try:
        parse_plan(toml_document(data, source="fuzz.toml"), source="fuzz.toml")
    except PlanError as exc:
        if "fuzz.toml" not in str(exc):
            raise AssertionError(f"the error does not name the source: {exc}") from exc


def customers(data: bytes) -> None:
    """Read ``data`` as a customer file."""
    try:
        records = parse_customers(data, "fuzz.csv")
    except InputError as exc:
        if not str(exc).startswith("fuzz.csv"):
            raise AssertionError(f"the error does not name the file: {exc}") from exc
        return
    if len({record.nmi for record in records}) != len(records):
        raise AssertionError("an NMI twice among the records")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "nem12": nem12,
    "readings": readings,
    "cdr_plan": cdr_plan,
    "toml_plan": toml_plan,
    "customers": customers,
}
