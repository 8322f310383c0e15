"""The database schema as SQLAlchemy Core tables: one ``metadata``, the source of every migration.

``meter_days`` holds NEM12's own unit, one row per (NMI, suffix, NEM date): the 300 record. A
row per interval would be 48 times as many rows, and its keyed upsert alone cannot reach the
ingest goal on this hardware (DESIGN.md section 5). A day's values are one text column,
``interval_values``: the exact decimals as written (``str(Decimal)``, which ``Decimal()`` reads
back exactly, trailing zeros included), comma-joined, an empty field where the interval has no
value. ``COPY`` loads that text as is; a ``numeric[]`` column took twice as long to ``COPY`` and
half as much again on disk. ``qualities`` has one NEM12 quality character per interval.

Every timestamp is stored in UTC (``UtcDateTime``): on SQLite the column is text, and only one
fixed offset keeps its string order chronological.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

#: Constraint and index names, fixed so that migrations can name what they alter or drop.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UtcDateTime(sa.TypeDecorator[datetime]):
    """An aware datetime, stored in UTC and read back as an aware UTC datetime.

    A naive datetime is refused: NEM time and local clocks differ by hours, so a time without its
    offset would be a guess.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} cannot be stored")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime from the database, got {type(value).__name__}")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


#: A NMI is 10 characters (AEMO's NMI procedure); the checksum digit is not part of it.
NMI_LENGTH = 10
#: Plan ids are chosen by people (``sso-nsw``, ``acme-solar-2026-v3``): room to be descriptive.
PLAN_ID_LENGTH = 100
#: NEM12 UOM: the longest the NEM12 specification lists is KVARH.
UOM_LENGTH = 5

meter_days = sa.Table(
    "meter_days",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    # NEM12 NMISuffix: two characters, E1, B1, Q1, ...
    sa.Column("suffix", sa.String(2), primary_key=True),
    # The NEM date (AEST) of the 300 record.
    sa.Column("day", sa.Date, primary_key=True),
    sa.Column("interval_minutes", sa.SmallInteger, nullable=False),
    # NEM12 UOM, upper-cased; values of a "KWH" row are in kWh (the reader normalises MWh, Wh).
    sa.Column("uom", sa.String(UOM_LENGTH), nullable=False),
    sa.Column("interval_values", sa.Text, nullable=False),
    sa.Column("qualities", sa.Text, nullable=False),
    # The revision's stamp: NEM12 UpdateDateTime, or for JSON reads the time they were received.
    # NULL (a 300 record without one) is older than any stamp.
    sa.Column("update_datetime", UtcDateTime, nullable=True),
    # When this revision reached freehours.
    sa.Column("received_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("interval_minutes IN (5, 15, 30)", name="interval_minutes"),
    sa.CheckConstraint("length(qualities) * interval_minutes = 1440", name="whole_day"),
    # Which NMIs have data on a date: what the settlement scheduler asks.
    sa.Index(None, "day"),
)

plans = sa.Table(
    "plans",
    metadata,
    sa.Column("plan_id", sa.String(PLAN_ID_LENGTH), primary_key=True),
    # The plan as JSON (the plan file's fields), canonical: sorted keys, decimals as strings.
    sa.Column("document", sa.Text, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

customers = sa.Table(
    "customers",
    metadata,
    sa.Column("nmi", sa.String(NMI_LENGTH), primary_key=True),
    sa.Column("plan_id", sa.String(PLAN_ID_LENGTH), sa.ForeignKey(plans.c.plan_id), nullable=False),
    # A ``Region`` value: NSW, SEQ, SA or VIC.
    sa.Column("region", sa.String(3), nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.Index(None, "plan_id"),
)
