"""Meter data in the database: NEM12 day rows in bulk, JSON reads merged interval by interval.

``Meter`` writes within its unit of work's transaction, so a file or a request is stored all or
nothing. Writers belong in ``Store.write()``.

The revision rule (DESIGN.md section 1) is applied by the database, in the upsert's own
``ON CONFLICT (nmi, suffix, day) DO UPDATE ... WHERE``, so concurrent ingests cannot undo each
other: whichever commits last, the newest revision of each day row is what stays. A stored day
row is replaced when the incoming one

- has a later UpdateDateTime (a stamp at all beats none), or
- has the same stamp and different content. Equal stamps: the later arrival wins, as the later
  row of one file does. An MDP that resends a corrected file without restamping it gets the
  correction; two imports racing with equal stamps and different content leave whichever
  committed last, never a mixture, since each day row is replaced whole. An identical resend
  writes nothing (so ``received_at`` keeps the first arrival) and is counted ``unchanged``.

JSON reads (``POST /v1/meter-readings``) may cover part of a day or several days. Each read
replaces its interval's value and quality in the day row, and the row's stamp becomes the receive
time (never earlier than the stamp it had, so an older NEM12 revision arriving later still loses).
Two requests touching one day row serialise on the row: each locks the rows it merges into
(``FOR UPDATE``; on SQLite the write transaction holds the whole database), and a day row that
does not exist yet is created by ``INSERT ... ON CONFLICT DO NOTHING``, so a request that loses
that race merges into the winner's row instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from freehours.domain.reads import (
    LATEST_DATE,
    DayKey,
    DayReads,
    IntervalDay,
    IntervalRead,
    MergeCounts,
    RangeError,
    check_date,
    check_moment,
    check_nmi,
    check_suffix,
    intervals_in_day,
    reads_by_day,
)
from freehours.errors import InputError
from freehours.store.driver import Driver, each_key
from freehours.store.prepared import Prepared
from freehours.store.repository import Repository
from freehours.store.tables import UOM_LENGTH, UtcDateTime, customers, meter_days, quotas

_KEY = ("nmi", "suffix", "day")
_CONTENT = ("interval_minutes", "uom", "interval_values", "qualities")
_COLUMNS = (*_KEY, *_CONTENT, "update_datetime", "received_at")
#: NMIs per ``IN`` list of ``day_keys_of``: far under both databases' limits on parameters.
_NMIS_PER_STATEMENT = 1_000


@dataclass(frozen=True, slots=True)
class IngestCounts:
    """What an ingest did. Days count day rows; reads count intervals.

    ``accepted``: stored where nothing was (a new day row; a value for an interval that had none).
    ``superseded``: replaced what was stored (an older revision, or one with the same stamp and
    different content; a different value or quality).
    ``unchanged``: stored exactly so already; nothing was written.
    ``stale``: days only: older than the revision stored (or beaten by a newer revision of the
    same day in the same batch), so not stored.
    ``changed``: the (NMI, suffix, NEM date) day rows this ingest wrote: what settlement must
    look at again.
    """

    accepted: int = 0
    superseded: int = 0
    unchanged: int = 0
    stale: int = 0
    # Not part of equality: counts compare as counts.
    changed: frozenset[DayKey] = field(default=frozenset(), compare=False)

    @property
    def total(self) -> int:
        return self.accepted + self.superseded + self.unchanged + self.stale

    def numbers(self) -> IngestCounts:
        """The counts without ``changed``: what a summary keeps. An importer holding each
        file's ``changed`` holds a key per channel-day it wrote, some 0.6 MB a file."""
        return IngestCounts(self.accepted, self.superseded, self.unchanged, self.stale)

    def __add__(self, other: IngestCounts) -> IngestCounts:
        return IngestCounts(
            accepted=self.accepted + other.accepted,
            superseded=self.superseded + other.superseded,
            unchanged=self.unchanged + other.unchanged,
            stale=self.stale + other.stale,
            changed=self.changed | other.changed,
        )


def encode_values(values: Iterable[Decimal | None]) -> str:
    """A day's values as stored: exact decimals, comma-joined, empty where missing."""
    return ",".join(["" if value is None else str(value) for value in values])


def decode_values(text: str) -> tuple[Decimal | None, ...]:
    """The inverse of ``encode_values``: ``Decimal(str(d))`` is ``d``, exponent included. Each
    distinct value text is parsed once (``_DECODED``): a month of a meter's rows is 3,000
    values of a few hundred texts."""
    return tuple(map(_DECODED.__getitem__, text.split(",")))


class _Decoded(dict[str, Decimal | None]):
    """Stored value text -> its ``Decimal`` (None for an empty field), shared by every reader of
    stored values: a ``Decimal`` is immutable, so rows may share one. Emptied past
    ``_DECODED_LIMIT`` texts, so it stays small (about 15 MB at most) whatever is read; threads
    may parse the same text at once, each getting an equal value."""

    def __missing__(self, text: str) -> Decimal | None:
        value = Decimal(text) if text else None
        if len(self) >= _DECODED_LIMIT:
            self.clear()
        self[text] = value
        return value


#: Distinct value texts ``decode_values`` keeps parsed: far more than meter data to the Wh has.
_DECODED_LIMIT = 100_000
_DECODED = _Decoded()


# --- NEM12 day rows, in bulk -------------------------------------------------------------------

_staging_metadata = sa.MetaData()

#: Where a batch of day rows lands before the one upsert: a temporary table (per connection,
#: never WAL-logged on PostgreSQL), without keys, so that COPY runs at full speed.
_staging = sa.Table(
    "meter_days_staging",
    _staging_metadata,
    *(sa.Column(column.name, column.type) for column in meter_days.columns),
    sa.Column("seq", sa.Integer, nullable=False),
    prefixes=["TEMPORARY"],
)


def _ingest_days(
    conn: sa.Connection, driver: Driver, days: Iterable[IntervalDay], received_at: datetime
) -> IngestCounts:
    if received_at.utcoffset() is None:
        raise ValueError("received_at must be an aware datetime")
    # Created and dropped in the caller's transaction: if anything here raises, the caller's
    # rollback takes the staging table away with the rest.
    with driver.without_statement_timeout(conn), driver.staging(conn, _staging):
        staged = driver.stage(conn, _staging, _staging_rows(days, received_at))
        return _upsert_from_staging(conn, driver, staged) if staged else IngestCounts()


def _staging_rows(days: Iterable[IntervalDay], received_at: datetime) -> Iterator[tuple[Any, ...]]:
    for seq, day in enumerate(days):
        text = day.stored_text()  # the reader's texts joined, once
        _check_day(day, text)
        yield (
            day.nmi,
            day.suffix,
            day.day,
            day.interval_minutes,
            day.uom,
            encode_values(day.values) if text is None else text,
            day.qualities,
            day.update_datetime,
            received_at,
            seq,
        )


def _check_day(day: IntervalDay, stored: str | None) -> None:
    """An ``InputError`` naming the day (and its file and line) unless it can be stored with
    ``stored``, its values' text as the reader kept it (``IntervalDay.stored_text``). The name is
    made only for the error: this runs for every day row of every file."""
    intervals = intervals_in_day(day.interval_minutes)
    if not intervals:
        raise _bad_day(day, f"interval length {day.interval_minutes} is not 5, 15 or 30")
    if len(day.values) != intervals or len(day.qualities) != intervals:
        raise _bad_day(
            day,
            f"{len(day.values)} values and {len(day.qualities)} qualities, "
            f"a {day.interval_minutes}-minute day has {intervals}",
        )
    if stored is not None and stored.count(",") != len(day.values) - 1:
        raise _bad_day(day, f"its stored form has not {len(day.values)} values")
    if not 0 < len(day.uom) <= UOM_LENGTH:
        raise _bad_day(day, f"unit {day.uom!r} is not 1 to {UOM_LENGTH} characters")
    stamp = day.update_datetime
    if stamp is not None and stamp.utcoffset() is None:
        raise _bad_day(day, f"UpdateDateTime {stamp.isoformat()} has no UTC offset")
    try:
        check_date(day.day)
        if stamp is not None:
            check_moment(stamp, "UpdateDateTime")
        check_nmi(day.nmi)
        check_suffix(day.suffix)
    except RangeError as exc:
        raise _bad_day(day, str(exc)) from None


def _bad_day(day: IntervalDay, message: str) -> InputError:
    where = f"{day.source}:{day.line}: " if day.source else ""
    return InputError(f"{where}{day.nmi} {day.suffix} {day.day.isoformat()}: {message}")


def _keys_equal(
    a: sa.ColumnCollection[str, Any], b: sa.ColumnCollection[str, Any]
) -> sa.ColumnElement[bool]:
    return sa.and_(*(a[name] == b[name] for name in _KEY))


def _stamp_newer(
    newer: sa.ColumnElement[Any], older: sa.ColumnElement[Any]
) -> sa.ColumnElement[bool]:
    """``newer`` is a later stamp than ``older``; a stamp is later than none."""
    return sa.or_(newer > older, sa.and_(older.is_(None), newer.is_not(None)))


def _replaces(
    stored: sa.ColumnCollection[str, Any], incoming: sa.ColumnCollection[str, Any]
) -> sa.ColumnElement[bool]:
    """The revision rule: ``incoming`` replaces ``stored``."""
    return sa.or_(
        _stamp_newer(incoming["update_datetime"], stored["update_datetime"]),
        sa.and_(
            incoming["update_datetime"].is_not_distinct_from(stored["update_datetime"]),
            sa.or_(*(incoming[name] != stored[name] for name in _CONTENT)),
        ),
    )


def _upsert_from_staging(conn: sa.Connection, driver: Driver, staged: int) -> IngestCounts:
    staging = _staging.c
    losers = 0
    duplicated = (
        sa.select(sa.literal(1))
        .select_from(_staging)
        .group_by(*(staging[name] for name in _KEY))
        .having(sa.func.count() > 1)
    )
    if conn.scalar(sa.select(sa.exists(duplicated))):
        # Two revisions of one day in one batch: keep the one the rule prefers, the later on a
        # tie. Ranked in one sort: a self-join would be quadratic where SQLite has no index.
        ranked = sa.select(
            staging.seq,
            sa.func.row_number()
            .over(
                partition_by=[staging[name] for name in _KEY],
                order_by=[staging.update_datetime.desc().nulls_last(), staging.seq.desc()],
            )
            .label("rank"),
        ).subquery()
        beaten = sa.select(ranked.c.seq).where(ranked.c.rank > 1)
        losers = conn.execute(sa.delete(_staging).where(staging.seq.in_(beaten))).rowcount
    rows = staged - losers
    accepted, written = driver.upsert_counting(
        conn,
        _upsert_statement(driver),
        _WRITTEN_KEY,
        incoming=rows,
        existing=sa.select(sa.func.count()).select_from(
            _staging.join(meter_days, _keys_equal(meter_days.c, staging))
        ),
    )
    superseded = len(written) - accepted
    changed = frozenset((row.nmi, row.suffix, row.day) for row in written)
    stale = 0
    if accepted < rows:  # some day was stored already: it may hold a later revision
        found = conn.scalar(
            sa.select(sa.func.count())
            .select_from(_staging.join(meter_days, _keys_equal(meter_days.c, staging)))
            .where(_stamp_newer(meter_days.c.update_datetime, staging.update_datetime))
        )
        stale = int(found or 0)
    return IngestCounts(
        accepted=accepted,
        superseded=superseded,
        unchanged=rows - accepted - superseded - stale,
        stale=stale + losers,
        changed=changed,
    )


def _upsert_statement(driver: Driver) -> sa.Insert:
    columns = [_staging.c[name] for name in _COLUMNS]
    # SQLite needs a WHERE in INSERT ... SELECT ... ON CONFLICT, or it reads ON as a join's.
    return driver.upsert(
        meter_days,
        key=_KEY,
        update=[name for name in _COLUMNS if name not in _KEY],
        where=lambda excluded: _replaces(meter_days.c, excluded),
    ).from_select(_COLUMNS, sa.select(*columns).where(sa.true()))


_WRITTEN_KEY = [meter_days.c[name] for name in _KEY]


# --- JSON reads, merged interval by interval ---------------------------------------------------


def _ingest_reads(
    conn: sa.Connection, driver: Driver, reads: Iterable[IntervalRead], received_at: datetime
) -> IngestCounts:
    """Merge interval reads into their day rows; counts are in intervals.

    The reads are checked, grouped and merged by the rule of ``freehours.domain.reads``
    (``reads_by_day``, ``DayReads.merge``): reads for one interval in one call, the last one
    counts. Raises ``InputError`` naming the read (0-based) that cannot be stored, and for a day
    row stored at another interval length or in another unit.
    """
    if received_at.utcoffset() is None:
        raise ValueError("received_at must be an aware datetime")
    by_day = reads_by_day(reads)
    if not by_day:
        return IngestCounts()
    counts = IngestCounts()
    fresh: dict[DayKey, tuple[list[str], list[str], IngestCounts]] = {}
    for key, day_reads in sorted(by_day.items()):
        values, qualities = day_reads.blank()
        merged = day_reads.merge(values, qualities)
        if merged.changes:
            fresh[key] = (values, qualities, _counted(merged))
    created = _create_days(conn, driver, by_day, fresh, received_at)
    for key in created:
        counts += fresh[key][2]
    counts += IngestCounts(changed=frozenset(created))
    rest = [key for key in sorted(by_day) if key not in created]
    if rest:
        counts += _merge_into_stored(conn, rest, by_day, received_at)
    return counts


def _counted(merged: MergeCounts) -> IngestCounts:
    return IngestCounts(merged.accepted, merged.superseded, merged.unchanged)


def _create_days(
    conn: sa.Connection,
    driver: Driver,
    by_day: dict[DayKey, DayReads],
    fresh: dict[DayKey, tuple[list[str], list[str], IngestCounts]],
    received_at: datetime,
) -> set[DayKey]:
    """Insert the day rows not stored yet; return the keys inserted (not those found stored)."""
    if not fresh:
        return set()
    rows = [
        {
            "nmi": key[0],
            "suffix": key[1],
            "day": key[2],
            "interval_minutes": by_day[key].interval_minutes,
            "uom": "KWH",
            "interval_values": ",".join(values),
            "qualities": "".join(qualities),
            "update_datetime": received_at,
            "received_at": received_at,
        }
        for key, (values, qualities, _) in fresh.items()
    ]
    statement = (
        driver.insert_or_ignore(meter_days, index_elements=_KEY)
        .values(rows)
        .returning(*(meter_days.c[name] for name in _KEY))
    )
    return {(row.nmi, row.suffix, row.day) for row in conn.execute(statement)}


_update_day = (
    sa.update(meter_days)
    .where(
        meter_days.c.nmi == sa.bindparam("key_nmi"),
        meter_days.c.suffix == sa.bindparam("key_suffix"),
        meter_days.c.day == sa.bindparam("key_day"),
    )
    .values(
        interval_values=sa.bindparam("new_values"),
        qualities=sa.bindparam("new_qualities"),
        update_datetime=sa.bindparam("new_stamp", type_=UtcDateTime()),
        received_at=sa.bindparam("new_received_at", type_=UtcDateTime()),
    )
)


def _merge_into_stored(
    conn: sa.Connection,
    keys: Sequence[DayKey],
    by_day: dict[DayKey, DayReads],
    received_at: datetime,
) -> IngestCounts:
    key_columns = [meter_days.c[name] for name in _KEY]
    stored = conn.execute(
        sa.select(meter_days)
        .where(sa.tuple_(*key_columns).in_(keys))
        .order_by(*key_columns)
        .with_for_update()
    ).all()
    counts = IngestCounts()
    updates: list[dict[str, Any]] = []
    found: set[DayKey] = set()
    for row in stored:
        key = (row.nmi, row.suffix, row.day)
        found.add(key)
        day_reads = by_day[key]
        day_reads.check_stored(key, row.interval_minutes, row.uom)
        values, qualities = row.interval_values.split(","), list(row.qualities)
        merged = day_reads.merge(values, qualities)
        counts += _counted(merged)
        if merged.changes:
            counts += IngestCounts(changed=frozenset({key}))
            stamp = row.update_datetime
            updates.append(
                {
                    "key_nmi": row.nmi,
                    "key_suffix": row.suffix,
                    "key_day": row.day,
                    "new_values": ",".join(values),
                    "new_qualities": "".join(qualities),
                    "new_stamp": received_at if stamp is None else max(stamp, received_at),
                    "new_received_at": received_at,
                }
            )
    if updates:
        conn.execute(_update_day, updates)
    # A day neither inserted nor stored had reads that change nothing (no value, quality N).
    for key in keys:
        if key not in found:
            counts += IngestCounts(unchanged=len(by_day[key].values))
    return counts


# --- reading -----------------------------------------------------------------------------------


# On the settlement's hot path (freehours.store.prepared): the dates wanted are one or two
# consecutive NEM days there, a bill's a run of them, so a range and a filter serve both.
_DAYS_FOR = Prepared(
    sa.select(
        meter_days.c.suffix,
        meter_days.c.day,
        meter_days.c.interval_minutes,
        meter_days.c.interval_values,
        meter_days.c.qualities,
        meter_days.c.update_datetime,
        meter_days.c.uom,
    )
    .where(
        meter_days.c.nmi == sa.bindparam("nmi"),
        meter_days.c.day >= sa.bindparam("first", type_=meter_days.c.day.type),
        meter_days.c.day <= sa.bindparam("last", type_=meter_days.c.day.type),
    )
    .order_by(meter_days.c.day, meter_days.c.suffix)
)


def _days_for_many() -> sa.Select[Any]:
    """Day rows of some NMIs on some NEM dates (give it a ``where``), by NMI, date and suffix."""
    c = meter_days.c
    return sa.select(
        c.nmi,
        c.suffix,
        c.day,
        c.interval_minutes,
        c.interval_values,
        c.qualities,
        c.update_datetime,
        c.uom,
    ).order_by(c.nmi, c.day, c.suffix)


_DAYS_FOR_MANY = Prepared(
    each_key(
        _days_for_many().order_by(None),
        (meter_days.c.nmi, meter_days.c.day),
        ("nmis", "days"),
        order_by=("nmi", "day", "suffix"),
    ),
    plan_each_time=True,
)


class Meter(Repository):
    """Meter data, in the unit of work's transaction."""

    __slots__ = ()

    def ingest_days(self, days: Iterable[IntervalDay], *, received_at: datetime) -> IngestCounts:
        """Store NEM12 day rows under the revision rule; all or nothing with the unit's
        transaction.

        ``days`` is consumed once, streaming (a ``read_days`` iterator: a ``NEM12Error`` it
        raises propagates, and the caller's rollback discards everything). The rows are loaded
        into a temporary table as fast as the database takes them (``COPY`` on PostgreSQL) and
        upserted in one statement.
        """
        return _ingest_days(self._conn, self._driver, days, received_at)

    def ingest_reads(self, reads: Iterable[IntervalRead], *, received_at: datetime) -> IngestCounts:
        """Merge interval reads into their day rows; counts are in intervals.

        A read names its interval by ``start`` and ``end`` (any UTC offset; the interval must
        lie on the NEM day's grid of 5, 15 or 30 minutes). Quality N makes the interval missing
        whatever ``kwh`` says. Reads for one interval in one call: the last one counts. Raises
        ``InputError`` naming the read (0-based) that cannot be stored, and for a day row stored
        at another interval length.
        """
        return _ingest_reads(self._conn, self._driver, reads, received_at)

    def days_for(self, nmi: str, nem_dates: Iterable[date]) -> list[IntervalDay]:
        """The stored day rows of ``nmi`` (every suffix) on ``nem_dates``, by date, then suffix:
        ``days_for_many`` of one NMI."""
        return self.days_for_many({nmi: set(nem_dates)})[nmi]

    def days_for_many(
        self,
        wanted: Mapping[str, Collection[date]],
        keep: Callable[[str, str], bool] | None = None,
    ) -> dict[str, list[IntervalDay]]:
        """The stored day rows (every suffix) of each NMI of ``wanted`` on its NEM dates, in one
        round trip: by NMI, each NMI's rows by date, then suffix (an NMI without rows on its
        dates maps to []). With
        ``keep``, only the rows of the (NMI, suffix) it accepts, the others not even decoded."""
        found: dict[str, list[IntervalDay]] = {nmi: [] for nmi in wanted}
        dates = {day for days in wanted.values() for day in days}
        if not dates:
            return found
        c = meter_days.c
        nmis, days = sorted(wanted), sorted(dates)
        rows: Sequence[Sequence[Any]]
        if len(nmis) == 1:  # a settlement's, a bill's: a range, by a statement prepared once
            (nmi,) = nmis
            rows = [
                (nmi, *row)
                for row in _DAYS_FOR.rows(
                    self._conn, {"nmi": nmi, "first": days[0], "last": days[-1]}
                )
            ]
        elif self._driver.takes_arrays:
            pairs = [(nmi, day) for nmi in nmis for day in sorted(wanted[nmi])]
            keys = {"nmis": [nmi for nmi, _ in pairs], "days": [day for _, day in pairs]}
            rows = _DAYS_FOR_MANY.rows(self._conn, keys)
        else:
            statement = _days_for_many().where(c.nmi.in_(nmis), c.day.in_(days))
            rows = self._conn.execute(statement).all()
        for nmi, suffix, day, minutes, values, qualities, stamp, uom in rows:
            if day in wanted[nmi] and (keep is None or keep(nmi, suffix)):
                found[nmi].append(
                    IntervalDay(
                        nmi=nmi,
                        suffix=suffix,
                        day=day,
                        interval_minutes=minutes,
                        values=decode_values(values),
                        qualities=qualities,
                        update_datetime=stamp,
                        uom=uom,
                    )
                )
        return found

    def day_keys_since(self, nmi: str, first: date, last: date = LATEST_DATE) -> list[DayKey]:
        """The (NMI, suffix, NEM date) of every day row of ``nmi`` from ``first`` to ``last``."""
        return self.day_keys_of([nmi], first, last)

    def day_keys_of(self, nmis: Collection[str], first: date, last: date) -> list[DayKey]:
        """``day_keys_since`` for many NMIs: one statement per ``_NMIS_PER_STATEMENT`` of them,
        each a range of the primary key (NMI, suffix, day) per NMI."""
        wanted = sorted(set(nmis))
        found: list[DayKey] = []
        m = meter_days.c
        for start in range(0, len(wanted), _NMIS_PER_STATEMENT):
            some = wanted[start : start + _NMIS_PER_STATEMENT]
            rows = self._conn.execute(
                sa.select(m.nmi, m.suffix, m.day).where(
                    m.nmi.in_(some), m.day >= first, m.day <= last
                )
            )
            found.extend((row.nmi, row.suffix, row.day) for row in rows)
        return found

    def days_without_quota(self, first: date, last: date, *, limit: int) -> list[DayKey]:
        """Day rows from NEM date ``first`` to ``last`` of NMIs that have a customer, where no
        quota of that NMI is stored for that date (any version): at most ``limit`` of them, by
        the ``day`` index, each probed in the quotas' primary key. What
        ``freehours_settlements_unscheduled_days`` starts from."""
        m, q = meter_days.c, quotas.c
        statement = (
            sa.select(m.nmi, m.suffix, m.day)
            .select_from(meter_days.join(customers, customers.c.nmi == m.nmi))
            .where(
                m.day >= first,
                m.day <= last,
                ~sa.exists().where(q.nmi == m.nmi, q.day == m.day),
            )
            .limit(limit)
        )
        return [(row.nmi, row.suffix, row.day) for row in self._conn.execute(statement)]

    def nmis_with_data_on(self, nem_date: date) -> list[str]:
        """The NMIs with at least one day row (any suffix) on ``nem_date``, sorted."""
        return list(
            self._conn.scalars(
                sa.select(meter_days.c.nmi)
                .where(meter_days.c.day == nem_date)
                .distinct()
                .order_by(meter_days.c.nmi)
            )
        )
