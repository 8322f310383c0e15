"""What ``freehours bill`` and ``freehours compare`` say of a file's meters: a file with nothing
billable refused (exit 2) after the notes of why, and the notes on stderr
(``freehours.domain.billing`` bills them)."""

from __future__ import annotations

from pathlib import Path

from freehours.cli import err_console
from freehours.domain.billing import billable
from freehours.domain.plan import Plan
from freehours.domain.rating import MeterRating
from freehours.errors import InputError


def billable_or_refused(
    plan: Plan, meters: dict[str, MeterRating], source: Path, nmi: str | None = None
) -> tuple[dict[str, MeterRating], list[str]]:
    """``billable``, and ``InputError`` where nothing can be billed (or there is no data), the
    notes of the meters before the last said first."""
    if not meters:
        whose = "" if nmi is None else f" for NMI {nmi}"
        raise InputError(f"{source}: no consumption or export data{whose}")
    ratings, notes = billable(plan, meters)
    if not ratings:
        print_notes(notes[:-1])
        raise InputError(f"{source}: {notes[-1]}")
    return ratings, notes


def print_notes(notes: list[str]) -> None:
    for note in notes:
        err_console.print(f"[bold]note:[/] {note}", highlight=False, soft_wrap=True)
