"""Public holidays, from the ``holidays`` package: what a plan's ``PUBLIC_HOLIDAYS`` periods
apply on. Given to each plan as its ``holiday_calendar`` (``freehours.plans.document``), so that
the rating in ``freehours.domain`` needs no package of its own.
"""

from __future__ import annotations

from collections.abc import Container
from datetime import date

from freehours.domain.time import Region


def public_holidays(region: Region) -> Container[date]:
    """The calendar of ``region``'s public holidays, filled a year at a time as dates are asked.

    ``holidays`` is imported here, when a rating first asks (a twentieth of a second): a command
    that parses plans without rating them, or rates none with holiday periods, does without it."""
    import holidays  # noqa: PLC0415 - imported when first asked

    calendar: Container[date] = holidays.country_holidays("AU", subdiv=region.holiday_subdivision)
    return calendar


def load_holiday_calendars() -> None:
    """Load the public holiday calendars now: the first call imports every country's module
    (about 0.2 s), which a long-running process should pay at start, not in a request."""
    import holidays  # noqa: PLC0415 - imported when first asked

    holidays.country_holidays("AU")
