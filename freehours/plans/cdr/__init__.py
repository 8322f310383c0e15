"""Consumer Data Right energy plans (``EnergyPlanDetailV3``, CDS release 1.36.0) in and out.

A retailer publishes every plan it sells in the CDR shape (``GET /energy/plans/{planId}``).
``plan_document_from_cdr`` turns such a document into a freehours plan document (the TOML plan
file's fields, which ``parse_plan`` then checks as it checks any plan), and ``cdr_from_plan``
writes a ``Plan`` back as a document that validates against the published schema. docs/plans.md
is the user's guide; what follows is the mapping.

**In.** The electricity contract's tariff periods become bands (their ``startDate``/``endDate``
the periods' ``dates``), single and time-of-use rates with their days and times and their steps
(stepped rates), the daily supply charge, the retailer's solar feed-in tariff, a controlled load
(rated on channel E2 unless told otherwise) and the time zone (``LOCAL`` or ``AEST``; AEST when
absent, as the standard says). CDR prices exclude GST; the plan adds 10%. The region is not a CDR
field: it comes from the caller, or from the plan's ``geography`` (its distributors, else its
postcodes).

**The free window.** The CDR has no free window yet. freehours writes one as a time-of-use rate
whose first step is free for a daily volume and whose second step is the price over the cap::

    {"type": "OFF_PEAK", "displayName": "Free window",
     "rates": [{"unitPrice": "0", "volume": 24}, {"unitPrice": "0.2300"}], "period": "P1D",
     "timeOfUse": [{"days": ["MON", ...], "startTime": "11:00", "endTime": "14:00"}]}

A window under several bands (weekdays SHOULDER, weekends OFF_PEAK) is several such rates with
one volume, the day's cap shared between them. ``"0.00"`` or ``0`` for the free price, any
rate type, days and times written any way the standard allows all read the same.

**Refused, never ignored.** Whatever changes a bill that freehours cannot rate (demand charges,
banded supply charges, discounts, account-credit incentives, metering charges,
recurring fees, time-varying or stepped feed-in tariffs, flexible and quota pricing) is a
``PlanError`` whose key is the JSON path (``electricityContract.tariffPeriod[0].demandCharges``)
and whose message says why. What is only informational (one-off fees, eligibility, gifts, green
power options, a government's premium feed-in scheme) is kept in the plan's ``information``, which
``plans validate`` and the API show.
"""

from freehours.plans.cdr.common import CDR_MEDIA_TYPE, CDS_RELEASE
from freehours.plans.cdr.reader import plan_document_from_cdr, read_json
from freehours.plans.cdr.writer import cdr_from_plan

__all__ = ["CDR_MEDIA_TYPE", "CDS_RELEASE", "cdr_from_plan", "plan_document_from_cdr", "read_json"]
