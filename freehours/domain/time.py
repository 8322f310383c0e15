"""NEM time and the customers' local clocks.

NEM12 data is always in NEM time: AEST, UTC+10, no daylight saving, in every state. A customer's
free window and bands are on the local clock of the customer's region (daylight saving included),
unless the plan says ``time_zone = "AEST"``. Offsets come from ``zoneinfo`` and ``tzdata``; the
only fixed offset here is NEM time itself, which is defined as one.
"""

from __future__ import annotations

from datetime import timedelta, timezone
from enum import StrEnum
from zoneinfo import ZoneInfo

#: NEM time: AEST, UTC+10 all year, by the National Electricity Rules' definition.
NEM_TIME = timezone(timedelta(hours=10), "AEST")


class Region(StrEnum):
    """The regions that offer a daily free window, each with its local clock."""

    NSW = "NSW"  # New South Wales: Solar Sharer Offer from 1 July 2026
    SEQ = "SEQ"  # South-East Queensland: Solar Sharer Offer; Queensland keeps no daylight saving
    SA = "SA"  # South Australia: Solar Sharer Offer; UTC+9:30, +10:30 in summer
    VIC = "VIC"  # Victoria: Midday Power Saver from 1 October 2026

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(REGION_ZONES[self])

    @property
    def holiday_subdivision(self) -> str:
        """The region's state code in the ``holidays`` package."""
        return {"NSW": "NSW", "SEQ": "QLD", "SA": "SA", "VIC": "VIC"}[self.value]


REGION_ZONES: dict[Region, str] = {
    Region.NSW: "Australia/Sydney",
    Region.SEQ: "Australia/Brisbane",
    Region.SA: "Australia/Adelaide",
    Region.VIC: "Australia/Melbourne",
}
