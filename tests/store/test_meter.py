"""Meter data in the store, on SQLite and PostgreSQL: exact values, the revision rule, merges."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from freehours.domain.reads import IntervalDay, IntervalRead
from freehours.domain.time import NEM_TIME
from freehours.errors import InputError, NEM12Error
from freehours.store import meter
from freehours.store.database import Store
from freehours.store.meter import IngestCounts, decode_values, encode_values
from freehours.store.tables import meter_days
from tests.support import eventually

NMI = "4103035611"
DAY = date(2026, 7, 1)
STAMP = datetime(2026, 7, 2, 6, 30, tzinfo=NEM_TIME)
RECEIVED = datetime(2026, 7, 2, 1, 0, tzinfo=UTC)


def make_day(
    values: list[Decimal | None] | None = None,
    *,
    nmi: str = NMI,
    suffix: str = "E1",
    day: date = DAY,
    stamp: datetime | None = STAMP,
    minutes: int = 30,
    qualities: str | None = None,
) -> IntervalDay:
    count = 1440 // minutes
    if values is None:
        values = [Decimal("0.250")] * count
    if qualities is None:
        qualities = "".join("N" if value is None else "A" for value in values)
    return IntervalDay(nmi, suffix, day, minutes, tuple(values), qualities, stamp)


def ingest(store: Store, *days: IntervalDay, at: datetime = RECEIVED) -> IngestCounts:
    with store.write() as unit:
        return unit.meter.ingest_days(days, received_at=at)


def stored(store: Store, nmi: str = NMI, *days: date) -> list[IntervalDay]:
    with store.read() as unit:
        return unit.meter.days_for(nmi, days or [DAY])


def read(start: datetime, kwh: str | None, quality: str = "A", minutes: int = 30) -> IntervalRead:
    value = None if kwh is None else Decimal(kwh)
    return IntervalRead(NMI, "E1", start, start + timedelta(minutes=minutes), value, quality)


def merge(store: Store, *reads: IntervalRead, at: datetime = RECEIVED) -> IngestCounts:
    with store.write() as unit:
        return unit.meter.ingest_reads(reads, received_at=at)


def at_nem(hour: int, minute: int = 0, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=NEM_TIME)


# --- day rows ----------------------------------------------------------------------------------


def test_a_day_round_trips_exactly(store: Store) -> None:
    awkward = ["0.410", "1E+2", "0E-3", "123456.789012", "0", "-0.5"]
    values: list[Decimal | None] = [Decimal(text) for text in awkward]
    values += [None] * 2 + [Decimal("0.001")] * 40
    day = make_day(values, qualities="A" * 6 + "NN" + "E" * 40)

    assert ingest(store, day) == IngestCounts(accepted=1)
    [back] = stored(store)

    assert back == day
    # Equal as numbers is not enough: digits and exponent come back as they went in.
    assert [value.as_tuple() for value in back.values[:6] if value is not None] == [
        Decimal(text).as_tuple() for text in awkward
    ]
    assert back.update_datetime == STAMP


def test_five_minute_days_and_other_units_are_kept(store: Store) -> None:
    five = make_day([Decimal("0.01")] * 288, minutes=5)
    kvarh = IntervalDay(NMI, "Q1", DAY, 30, (Decimal("2.5"),) * 48, "A" * 48, STAMP, uom="KVARH")

    ingest(store, five, kvarh)

    assert stored(store) == [five, kvarh]


def test_days_for_returns_the_dates_asked_by_date_then_suffix(store: Store) -> None:
    days = [
        make_day(suffix=suffix, day=DAY + timedelta(days=offset))
        for offset in range(3)
        for suffix in ("E1", "B1")
    ]
    ingest(store, *days, make_day(nmi="4103035612"))

    got = stored(store, NMI, DAY + timedelta(days=2), DAY)

    assert [(day.day, day.suffix) for day in got] == [
        (DAY, "B1"),
        (DAY, "E1"),
        (DAY + timedelta(days=2), "B1"),
        (DAY + timedelta(days=2), "E1"),
    ]


def test_nmis_with_data_on_a_date(store: Store) -> None:
    ingest(
        store,
        make_day(nmi="B000000002"),
        make_day(nmi="A000000001", suffix="B1"),
        make_day(nmi="A000000001"),
        make_day(nmi="C000000003", day=DAY + timedelta(days=1)),
    )
    with store.read() as unit:
        assert unit.meter.nmis_with_data_on(DAY) == ["A000000001", "B000000002"]


def test_a_newer_revision_supersedes_and_an_older_one_is_stale(store: Store) -> None:
    first = make_day()
    newer = make_day([Decimal("0.9")] * 48, stamp=STAMP + timedelta(hours=1))
    older = make_day([Decimal("0.1")] * 48, stamp=STAMP - timedelta(hours=1))

    ingest(store, first)
    assert ingest(store, newer) == IngestCounts(superseded=1)
    assert ingest(store, older) == IngestCounts(stale=1)
    assert stored(store) == [newer]


def test_an_identical_resend_is_unchanged_and_keeps_the_first_arrival(store: Store) -> None:
    ingest(store, make_day(), at=RECEIVED)

    assert ingest(store, make_day(), at=RECEIVED + timedelta(days=1)) == IngestCounts(unchanged=1)
    with store.read() as unit:
        assert unit.connection.scalar(sa.select(meter_days.c.received_at)) == RECEIVED


def test_equal_stamps_with_different_content_the_later_arrival_wins(store: Store) -> None:
    corrected = make_day([Decimal("0.7")] * 48)
    ingest(store, make_day())

    assert ingest(store, corrected) == IngestCounts(superseded=1)
    assert stored(store) == [corrected]


def test_a_stamp_beats_no_stamp_whichever_arrives_first(store: Store) -> None:
    undated = make_day([Decimal("0.1")] * 48, stamp=None)
    dated = make_day([Decimal("0.2")] * 48)

    ingest(store, undated)
    assert ingest(store, dated) == IngestCounts(superseded=1)
    assert ingest(store, undated) == IngestCounts(stale=1)
    assert stored(store) == [dated]


def test_in_one_batch_the_newest_revision_wins_and_the_later_on_a_tie(store: Store) -> None:
    newest = make_day([Decimal("0.3")] * 48, stamp=STAMP + timedelta(hours=2))
    tied_first = make_day([Decimal("0.4")] * 48, suffix="B1")
    tied_later = make_day([Decimal("0.5")] * 48, suffix="B1")

    counts = ingest(store, make_day(), newest, make_day(), tied_first, tied_later)

    assert counts == IngestCounts(accepted=2, stale=3)
    assert stored(store) == [tied_later, newest]


def test_counts_add_up_across_a_mixed_batch(store: Store) -> None:
    ingest(store, make_day(suffix="E1"), make_day(suffix="E2"), make_day(suffix="B1"))

    counts = ingest(
        store,
        make_day(suffix="E1"),
        make_day(suffix="E2", stamp=STAMP + timedelta(minutes=1)),
        make_day(suffix="B1", stamp=STAMP - timedelta(minutes=1)),
        make_day(suffix="B2"),
    )

    assert counts == IngestCounts(accepted=1, superseded=1, unchanged=1, stale=1)
    assert counts.total == 4


def test_an_error_in_the_stream_stores_nothing_of_it(store: Store) -> None:
    ingest(store, make_day(suffix="B1"))

    def days() -> Iterator[IntervalDay]:
        yield make_day()
        yield make_day(suffix="B1", stamp=STAMP + timedelta(days=1))
        raise NEM12Error("bad interval value 'x'", source="bad.csv", line=7)

    with pytest.raises(NEM12Error, match=r"bad\.csv:7"), store.write() as unit:
        unit.meter.ingest_days(days(), received_at=RECEIVED)

    assert stored(store) == [make_day(suffix="B1")]


def test_a_day_with_the_wrong_number_of_values_is_refused(store: Store) -> None:
    short = IntervalDay(NMI, "E1", DAY, 30, (Decimal(1),) * 47, "A" * 47, STAMP, source="f", line=3)

    with pytest.raises(InputError, match=r"f:3: .* 47 values and 47 qualities"), store.write() as c:
        c.meter.ingest_days([short], received_at=RECEIVED)


def test_an_empty_batch_counts_nothing(store: Store) -> None:
    assert ingest(store) == IngestCounts()


def test_two_ingests_of_one_day_keep_the_newest_whatever_the_commit_order(store: Store) -> None:
    newer = make_day([Decimal("0.9")] * 48, stamp=STAMP + timedelta(hours=1))
    older = make_day([Decimal("0.1")] * 48)
    results: list[IngestCounts] = []

    with store.write() as unit:
        unit.meter.ingest_days([newer], received_at=RECEIVED)
        worker = threading.Thread(target=lambda: results.append(ingest(store, older)))
        worker.start()
        wait_until_blocked(store)
    worker.join(timeout=30)

    assert results == [IngestCounts(stale=1)]
    assert stored(store) == [newer]


def wait_until_blocked(store: Store) -> None:
    """On PostgreSQL, return once another session waits for a lock (the worker is where the
    test wants it). SQLite cannot be asked; there the worker waits on the write lock anyway."""
    if store.dialect != "postgresql":
        return
    probe = sa.create_engine(store.engine.url, poolclass=sa.pool.NullPool)

    def waiting() -> int | None:
        with probe.connect() as conn:
            return conn.scalar(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            )

    try:
        eventually(waiting, within=10, what="the second session waiting for the lock")
    finally:
        probe.dispose()


# --- JSON reads --------------------------------------------------------------------------------


def test_reads_for_a_new_day_are_accepted_and_the_rest_is_missing(store: Store) -> None:
    counts = merge(store, read(at_nem(11), "0.412"), read(at_nem(11, 30), "0.5", "E"))

    assert counts == IngestCounts(accepted=2)
    [day] = stored(store)
    assert day.values[22:24] == (Decimal("0.412"), Decimal("0.5"))
    assert day.qualities[22:24] == "AE"
    assert day.values.count(None) == 46
    assert day.qualities.count("N") == 46
    assert day.update_datetime == RECEIVED


def test_reads_merge_into_a_stored_day_interval_by_interval(store: Store) -> None:
    ingest(store, make_day())

    counts = merge(
        store,
        read(at_nem(0), "0.250"),  # same value: unchanged
        read(at_nem(0, 30), "0.2500"),  # numerically the same: unchanged
        read(at_nem(1), "0.9"),  # replaces 0.250
        read(at_nem(1, 30), "0.250", "F"),  # same value, new quality: superseded
        at=STAMP + timedelta(days=1),
    )

    assert counts == IngestCounts(superseded=2, unchanged=2)
    [day] = stored(store)
    assert day.values[:4] == (Decimal("0.250"), Decimal("0.250"), Decimal("0.9"), Decimal("0.250"))
    assert day.qualities[:4] == "AAAF"
    assert day.update_datetime == STAMP + timedelta(days=1)


def test_reads_fill_missing_intervals_as_accepted(store: Store) -> None:
    ingest(store, make_day([None] * 48))

    assert merge(store, read(at_nem(12), "1.5")) == IngestCounts(accepted=1)


def test_unchanged_reads_write_nothing(store: Store) -> None:
    merge(store, read(at_nem(12), "1.5"), at=RECEIVED)

    assert merge(store, read(at_nem(12), "1.5"), at=RECEIVED + timedelta(hours=1)) == IngestCounts(
        unchanged=1
    )
    [day] = stored(store)
    assert day.update_datetime == RECEIVED


def test_reads_spanning_days_and_offsets_land_on_their_nem_days(store: Store) -> None:
    sydney_summer = datetime(2026, 12, 31, 23, 30, tzinfo=UTC)  # 09:30 AEST on 1 January
    counts = merge(
        store,
        read(at_nem(23, 30, date(2026, 12, 31)), "0.1"),
        read(sydney_summer, "0.2"),
    )

    assert counts == IngestCounts(accepted=2)
    last_of_2026, first_of_2027 = stored(store, NMI, date(2026, 12, 31), date(2027, 1, 1))
    assert last_of_2026.values[47] == Decimal("0.1")
    assert first_of_2027.values[19] == Decimal("0.2")


def test_a_read_with_quality_n_is_missing_whatever_its_value(store: Store) -> None:
    ingest(store, make_day())

    assert merge(store, read(at_nem(0), "0.3", "N")) == IngestCounts(superseded=1)
    [day] = stored(store)
    assert (day.values[0], day.qualities[0]) == (None, "N")


def test_reads_never_lower_a_newer_stamp(store: Store) -> None:
    ingest(store, make_day())
    early = STAMP - timedelta(days=1)

    merge(store, read(at_nem(0), "0.3"), at=early)

    [day] = stored(store)
    assert day.update_datetime == STAMP
    assert ingest(store, make_day(stamp=early)) == IngestCounts(stale=1)


def test_an_older_nem12_revision_after_reads_is_stale(store: Store) -> None:
    merge(store, read(at_nem(12), "1.5"), at=STAMP)

    assert ingest(store, make_day(stamp=STAMP - timedelta(minutes=1))) == IngestCounts(stale=1)
    assert ingest(store, make_day(stamp=STAMP + timedelta(minutes=1))) == IngestCounts(superseded=1)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (read(at_nem(11, 10), "1"), r"read 1: start .* not on the NEM day's 30-minute grid"),
        (read(at_nem(11), "1", minutes=20), "read 1: an interval of 0:20:00 is not 5, 15 or 30"),
        (read(at_nem(11), "1", "V"), "read 1: quality 'V'"),
        (read(at_nem(11), "-1"), "read 1: kwh: -1 is negative"),
        (read(at_nem(11), "1e999999"), "read 1: kwh: .* is not below 1000000"),
        (read(at_nem(11), "1e-999999"), "read 1: kwh: .* more than 6 decimal places"),
        (read(at_nem(11), "NaN"), "read 1: kwh: NaN is not a finite kWh value"),
        (
            replace(read(at_nem(11), "1"), nmi="nlower0001"),
            "read 1: nmi: 'nlower0001' is not an NMI",
        ),
        (replace(read(at_nem(11), "1"), suffix="e1"), "read 1: suffix: 'e1' is not a channel"),
        (
            read(datetime(1, 1, 1, tzinfo=NEM_TIME), "1"),
            "read 1: start: 0001-01-01T00:00:00[+]10:00 is outside 2000-01-01 to 2099-12-31",
        ),
        (read(at_nem(11), "1", minutes=15), "read 1: 15-minute interval on a day that has 30"),
        (read(datetime(2026, 7, 1, 11), "1"), "read 1: start and end need a UTC offset"),
    ],
)
def test_a_read_that_cannot_be_stored_is_refused_and_nothing_is_stored(
    store: Store, bad: IntervalRead, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        merge(store, read(at_nem(10), "1"), bad)

    assert stored(store) == []


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (make_day(day=date(9999, 12, 31)), "date: 9999-12-31 is outside 2000-01-01 to 2099-12-31"),
        (make_day(day=date(1999, 12, 31)), "date: 1999-12-31 is outside"),
        (make_day(nmi="ABC"), "nmi: 'ABC' is not an NMI"),
        (make_day(suffix="1E"), "suffix: '1E' is not a channel suffix"),
        (
            make_day(stamp=datetime(9999, 12, 31, 23, 59, tzinfo=NEM_TIME)),
            "UpdateDateTime: 9999-12-31T23:59:00[+]10:00 is outside",
        ),
    ],
)
def test_a_day_outside_the_ranges_is_refused_and_nothing_is_stored(
    store: Store, bad: IntervalDay, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        ingest(store, make_day(), bad)

    assert stored(store) == []


def test_reads_at_another_interval_length_than_the_stored_day_are_refused(store: Store) -> None:
    ingest(store, make_day())

    with pytest.raises(InputError, match="stored at 30-minute intervals; 15-minute reads"):
        merge(store, read(at_nem(0), "1", minutes=15))


def test_reads_into_a_day_stored_in_another_unit_are_refused(store: Store) -> None:
    kvarh = IntervalDay(NMI, "E1", DAY, 30, (Decimal("2.5"),) * 48, "A" * 48, STAMP, uom="KVARH")
    ingest(store, kvarh)

    with pytest.raises(InputError, match="is stored in KVARH; reads in kWh cannot merge"):
        merge(store, read(at_nem(0), "1"))


@pytest.mark.parametrize("day_exists", [True, False], ids=["into-a-stored-day", "creating-it"])
def test_concurrent_merges_into_one_day_lose_no_interval(store: Store, day_exists: bool) -> None:
    if day_exists:
        merge(store, read(at_nem(0), "0.1"))
    results: list[IngestCounts] = []

    with store.write() as unit:
        unit.meter.ingest_reads([read(at_nem(1), "0.2")], received_at=RECEIVED)
        worker = threading.Thread(
            target=lambda: results.append(merge(store, read(at_nem(2), "0.3")))
        )
        worker.start()
        wait_until_blocked(store)
    worker.join(timeout=30)

    assert results == [IngestCounts(accepted=1)]
    [day] = stored(store)
    assert day.values[2:5:2] == (Decimal("0.2"), Decimal("0.3"))
    assert day.values[0] == (Decimal("0.1") if day_exists else None)


def test_changed_names_exactly_the_day_rows_an_ingest_wrote(store: Store) -> None:
    first = make_day()
    assert ingest(store, first).changed == {(NMI, "E1", DAY)}
    assert ingest(store, first).changed == frozenset()  # identical resend
    older = make_day([Decimal("9.999")] * 48, stamp=STAMP - timedelta(days=1))
    assert ingest(store, older).changed == frozenset()  # stale
    newer = make_day([Decimal("0.777")] * 48, stamp=STAMP + timedelta(days=1))
    export = make_day(suffix="B1")
    assert ingest(store, newer, export).changed == {(NMI, "E1", DAY), (NMI, "B1", DAY)}


def test_changed_names_the_day_rows_reads_created_or_changed(store: Store) -> None:
    assert merge(store, read(at_nem(11), "0.5")).changed == {(NMI, "E1", DAY)}
    assert merge(store, read(at_nem(11), "0.5")).changed == frozenset()
    assert merge(store, read(at_nem(12), "0.5")).changed == {(NMI, "E1", DAY)}


_STORED = st.one_of(
    st.none(),
    *(st.decimals(min_value=0, max_value=10**6, places=places) for places in (0, 1, 3, 6)),
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(_STORED, min_size=1, max_size=48))
def test_stored_values_read_back_exactly_exponent_and_all(values: list[Decimal | None]) -> None:
    """``decode_values`` (shared, cached texts) gives back what ``encode_values`` wrote: each
    value equal and written the same (1.50 stays 1.50), missing ones None."""
    decoded = decode_values(encode_values(values))
    assert [None if v is None else str(v) for v in decoded] == [
        None if v is None else str(v) for v in values
    ]


def test_the_decoded_texts_kept_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meter, "_DECODED_LIMIT", 50)
    meter._DECODED.clear()
    for n in range(1_000):
        assert decode_values(f"{n}.5,,{n}.25") == (Decimal(f"{n}.5"), None, Decimal(f"{n}.25"))
        assert len(meter._DECODED) <= 50
