"""The second pass: every record checked and every value parsed, the winners yielded in file
order as ``IntervalDay``'s."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from datetime import date, datetime, time
from decimal import Decimal
from typing import IO, Any

from freehours.domain import reads
from freehours.domain.reads import IntervalDay, RangeError, StoredForm
from freehours.domain.time import NEM_TIME
from freehours.errors import NEM12Error
from freehours.meterdata.nem12.common import (
    _BOM,
    _CACHE_LIMIT,
    _FIELDS_200,
    _FIELDS_400,
    _NAME,
    _QUALITY_METHODS,
    ENERGY_UNITS,
    MAX_LINE,
    ChannelStats,
    ReadStats,
    _BadValue,
    _Channel,
    _is_digits,
    _Values,
    _Waiting,
)
from freehours.meterdata.nem12.source import (
    _continues,
    _lines,
)


class _Scanner:
    """The second pass: every record checked in order, every value parsed, winners yielded."""

    def __init__(
        self,
        stats: ReadStats,
        losers: set[int],
        today: date,
        max_line: int = MAX_LINE,
        *,
        future: bool = False,
    ) -> None:
        self.stats = stats
        self.losers = losers
        self.today = today
        self.future = future  # IntervalDates past what a meter can have read: noted, not refused
        self.latest = reads.latest_read_date(today)
        self.max_line = max_line
        self.seq = 0  # 300 records seen in the source so far
        self.source = ""
        self.dates: dict[str, date] = {}
        self.stamps: dict[str, datetime] = {}  # UpdateDateTime text -> its moment
        # yyyymmdd -> that date, for the stamps already checked in range: a file's stamps are
        # many (one a row, near enough) but fall on few days.
        self.stamp_days: dict[str, date] = {}
        self.values: dict[int, _Values] = {}  # unit scale -> its value cache
        # interval count -> flag -> that flag for every interval of a day: shared strings
        self.uniform: dict[int, dict[str, str]] = {}
        self.last_400 = 0  # line of the latest 400 record

    def error(self, message: str, line: int | None, field: str | None = None) -> NEM12Error:
        return NEM12Error(message, source=self.source, line=line, field=field)

    def days(self, source: str, binary: IO[bytes]) -> Iterator[IntervalDay]:
        """The winning days of one CSV text, each yielded once its records are all checked."""
        self.source = source
        losers = self.losers
        methods = _QUALITY_METHODS
        null = reads.NULL_QUALITY
        dates = self.dates
        stamps = self.stamps
        seq = self.seq
        header = ended = False
        channel: _Channel | None = None
        channel_stats: ChannelStats | None = None
        waiting: _Waiting | None = None
        value_cache = self.value_cache(0)
        value_of = value_cache.__getitem__
        read_row = value_cache.read_row
        stored_as = value_cache.written_as_stored
        blanks = ""  # a day of missing values, as stored
        plain = True
        count = 0
        at = 0  # the field of a 300 record of the channel in force that is its QualityMethod
        uniform: dict[str, str] = {}  # flag -> that flag for every interval of a day
        # flag -> the winning rows of the channel in force that have it throughout (a plain dict:
        # a Counter's item is slower to add to), added to its stats when the channel ends
        flag_rows = dict.fromkeys(reads.QUALITY_FLAGS, 0)
        kind = ""
        max_line = self.max_line
        lines = _lines(binary, source, max_line)
        number = line = 0
        first_seq = seq
        for physical in lines:
            number += 1
            record = physical.rstrip()
            if number == 1 or len(physical) >= max_line:
                record = self.rare_line(physical, record, number)
            if not record:  # a blank line: nothing to check, and bombs are made of them
                continue
            line = number
            if ended:
                raise self.error(
                    "a record after the 900 end-of-data record", line, "RecordIndicator"
                )
            # RecordIndicator, the field after it (a 300 record's IntervalDate), the rest
            fields = record.split(",", 2)
            previous, kind = kind, fields[0]
            if waiting is not None and kind != "400":
                day = self.close(waiting)
                waiting = None
                if day is not None:
                    yield day
            if kind == "300" and channel is not None:
                # The hot path: one NEM date of the channel in force. Its values read first, in
                # C where compiled (``_read_row``), up to QualityMethod; the fields after split.
                row = values = None
                if len(fields) == 3:
                    rest = fields[2]
                    try:  # noqa: SIM105 - contextlib.suppress would be a call a row
                        row = read_row(rest, count, value_of)
                    except _BadValue:
                        pass  # read again below, as a whole, where it is named
                flag = None
                if row is not None:
                    values, past = row
                    text = rest[: past - 1]  # the values' texts, as written
                    tail = rest[past:].split(",")  # QualityMethod and the fields after it
                    flag = methods.get(tail[0])
                if flag is None:
                    # Split over lines (joined here), the wrong shape, or a value that is not
                    # one: checked as a whole, in the order of its fields.
                    value_cache.missed = 0  # the look-ups above count again below
                    fields, joined = self.rejoin(record, channel, line, lines)
                    number += joined
                    tail = fields[at:]
                    flag = methods[tail[0]]
                    values = None
                date_text = fields[1]
                day_of = dates.get(date_text) or self.date(date_text, line, "IntervalDate")
                stamp_text = tail[3] if len(tail) > 3 else ""
                stamp = stamps.get(stamp_text)
                if stamp is None and stamp_text:  # a stamp not met yet (or none at all)
                    stamp = self.stamp(stamp_text, line, "UpdateDateTime")
                # (Many files end each record with a comma: one empty field past the last.)
                if any(tail[5:]):
                    raise self.error(
                        "a field after MSATSLoadDateTime", line, f"field {at + len(tail)}"
                    )
                if values is None:
                    texts = fields[2:at]
                    try:
                        values = tuple(map(value_of, texts))
                    except _BadValue as bad:
                        raise self.error(
                            bad.message,
                            line,
                            f"IntervalValue{texts.index(bad.text) + 1}",
                        ) from None
                    text = ",".join(texts)
                missed = value_cache.missed
                if missed:  # blank texts among them: missing values, which the cache counts
                    value_cache.missed = 0
                seq += 1
                if channel_stats is None:
                    channel_stats = self.channel_stats(channel, day_of)
                channel_stats.rows += 1
                if day_of < channel_stats.first_day:
                    channel_stats.first_day = day_of
                elif day_of > channel_stats.last_day:
                    channel_stats.last_day = day_of
                loser = seq in losers
                if loser:
                    channel_stats.superseded += 1
                if flag == "V":
                    waiting = _Waiting(channel, day_of, values, stamp, line=line, loser=loser)
                    continue
                if loser:
                    continue
                stored: StoredForm | None
                if flag == null:
                    values = (None,) * count
                    stored = (values, blanks, None)
                    channel_stats.missing += count
                else:
                    channel_stats.missing += missed
                    # Every value was parsed and checked above; where the texts are written as
                    # the store writes those values, they are stored as they are (asked when
                    # the day is stored: the answer cannot change, as ``_Values`` says).
                    stored = (values, text, stored_as) if plain else None
                qualities = uniform[flag]
                flag_rows[flag] += 1
                yield _interval_day(
                    channel.nmi,
                    channel.suffix,
                    day_of,
                    channel.minutes,
                    values,
                    qualities,
                    stamp,
                    channel.uom,
                    source,
                    line,
                    stored,
                )
                continue
            fields = record.split(",")
            if not header and kind != "100":
                raise self.error(
                    "no 100 header: a NEM12 file starts with 100,NEM12,... but this one starts"
                    f" with a {kind[:20]!r} record",
                    line,
                    "RecordIndicator",
                )
            elif kind == "300":
                raise self.error("a 300 record before any 200 record", line, "RecordIndicator")
            elif kind == "400":
                if waiting is None:
                    raise self.error(
                        "a 400 record must follow a 300 record whose QualityMethod is V",
                        line,
                        "RecordIndicator",
                    )
                self.run(waiting, fields, line)
            elif kind == "200":
                if channel_stats is not None:
                    _add_flags(channel_stats, flag_rows, count)
                channel = self.channel(fields, line)
                channel_stats = None
                count = channel.count
                at = count + 2
                uniform = self.uniform.get(count) or self.uniform.setdefault(
                    count, {flag: flag * count for flag in reads.QUALITY_FLAGS}
                )
                value_cache = self.value_cache(channel.scale or 0)
                value_of = value_cache.__getitem__
                read_row = value_cache.read_row
                stored_as = value_cache.written_as_stored
                blanks = "," * (count - 1)
                plain = not channel.scale  # values as written, not moved to kWh
            elif kind == "500":
                if previous not in ("300", "400", "500"):
                    raise self.error(
                        "a 500 record must follow a 300 or 400 record", line, "RecordIndicator"
                    )
            elif kind == "900":
                if seq == first_seq:
                    raise self.error("no interval data: the file has no 300 records", line)
                ended = True
            elif kind == "100":
                if header:
                    raise self.error("a second 100 header", line, "RecordIndicator")
                self.header(fields, line)
                header = True
            elif kind in ("250", "550"):
                raise self.error(
                    f"a {kind} record is NEM13 accumulation data, which cannot be rated for a"
                    " free window; a NEM12 file holds 200/300 interval data",
                    line,
                    "RecordIndicator",
                )
            else:
                raise self.error(
                    f"unknown record indicator {kind[:20]!r}: NEM12 records are 100, 200, 300,"
                    " 400, 500 and 900",
                    line,
                    "RecordIndicator",
                )
        self.seq = seq
        if channel_stats is not None:
            _add_flags(channel_stats, flag_rows, count)
        if not ended:
            if line == 0:
                raise self.error("the file is empty: no 100 header", None)
            raise self.error("the file ends without its 900 end-of-data record", line)

    def value_cache(self, scale: int) -> _Values:
        """The parsed values of a unit's scale, shared by every channel in that unit."""
        cache = self.values.get(scale)
        if cache is None:
            cache = self.values[scale] = _Values(scale)
        return cache

    def channel_stats(self, channel: _Channel, day: date) -> ChannelStats:
        """The stats of ``channel``'s NMI and suffix, made on their first row."""
        key = (channel.nmi, channel.suffix)
        stats = self.stats.channels.get(key)
        if stats is None:
            stats = self.stats.channels[key] = ChannelStats(channel.nmi, channel.suffix, day, day)
        stats.units.add(channel.uom)
        stats.interval_minutes.add(channel.minutes)
        return stats

    def header(self, fields: list[str], line: int) -> None:
        """Check a 100 record: NEM12, with a valid DateTime when it has one."""
        version = fields[1].upper() if len(fields) > 1 else ""
        if version == "NEM13":
            raise self.error(
                "NEM13 accumulation data cannot be rated for a free window: it holds register"
                " reads between two dates, not interval values; freehours needs NEM12",
                line,
                "VersionHeader",
            )
        if version != "NEM12":
            raise self.error(
                f"VersionHeader {version[:20]!r}: not a NEM12 file", line, "VersionHeader"
            )
        created = fields[2] if len(fields) > 2 else ""
        if created:
            moment = self.stamp(created, line, "DateTime")
            if self.stats.created is None:
                self.stats.created = moment

    def channel(self, fields: list[str], line: int) -> _Channel:
        """Check a 200 record and return the channel it opens."""
        size = len(fields)
        if size < 9:
            raise self.error(
                f"the 200 record has {size} fields; it needs at least 9, up to IntervalLength",
                line,
                _FIELDS_200[size],
            )
        if size > 10 and any(fields[10:]):
            raise self.error("a field after NextScheduledReadDate", line, f"field {size}")
        nmi, suffix = fields[1], fields[4]
        try:
            reads.check_nmi(nmi, "NMI")
            reads.check_suffix(suffix, "NMISuffix")
        except RangeError as exc:
            raise self.error(exc.reason, line, exc.field) from None
        unit = fields[7]
        if not _NAME.fullmatch(unit):
            raise self.error(f"UOM {unit[:20]!r} is not a unit of measure", line, "UOM")
        scale = ENERGY_UNITS.get(unit.lower())
        length = fields[8]
        minutes = int(length) if _is_digits(length) else 0
        if minutes not in reads.INTERVAL_MINUTES:
            raise self.error(
                f"IntervalLength {length[:20]!r} is not 5, 15 or 30 minutes",
                line,
                "IntervalLength",
            )
        if size > 9 and fields[9]:
            self.any_date(fields[9], line, "NextScheduledReadDate")
        uom = "KWH" if scale is not None else unit.upper()
        return _Channel(nmi, suffix, uom, scale=scale, minutes=minutes, line=line)

    def rare_line(self, physical: str, line: str, number: int) -> str:
        """The first line, or one that may be too long: refused when it is; the first without
        its byte order mark; otherwise as it is."""
        if len(physical) >= self.max_line:
            raise self.error(f"a line longer than {self.max_line:,} characters", number)
        if number == 1 and line.startswith(_BOM):
            return line[len(_BOM) :]
        return line

    def rejoin(
        self, record: str, channel: _Channel, line: int, lines: Iterator[str]
    ) -> tuple[list[str], int]:
        """A 300 record that stops short of its QualityMethod, joined with the lines that
        continue it (see ``_continues``): its fields and how many more lines it took. Refused
        with the reason its shape is wrong when no line continues it."""
        at = channel.count + 2
        taken = 0
        while True:
            fields = record.split(",")
            if len(fields) > at and fields[at] in _QUALITY_METHODS:
                return fields, taken
            rest = ""
            for physical in lines:
                taken += 1
                if len(physical) >= self.max_line:
                    raise self.error(
                        f"a line longer than {self.max_line:,} characters", line + taken
                    )
                rest = physical.rstrip()
                if rest:
                    break
            if not rest or not _continues(record, rest):
                raise self.shape_error(fields, channel, line)
            record += rest
            self.stats.joined_lines += 1
            if len(record) > self.max_line:
                raise self.error(f"a record longer than {self.max_line:,} characters", line)

    def shape_error(self, fields: list[str], channel: _Channel, line: int) -> NEM12Error:
        """Why a 300 record has no QualityMethod where its channel's IntervalLength puts it."""
        count = channel.count
        needs = (
            f"IntervalLength {channel.minutes} (the 200 record on line {channel.line}) needs"
            f" {count} interval values"
        )
        found = next((i for i, text in enumerate(fields[2:]) if text[:1].isalpha()), None)
        if found is None:
            return self.error(
                f"the 300 record ends after {len(fields) - 2} fields without a QualityMethod;"
                f" {needs} and then a QualityMethod",
                line,
                f"IntervalValue{min(len(fields) - 1, count)}",
            )
        if found < count:
            return self.error(
                f"the 300 record has {found} interval values; {needs}",
                line,
                f"IntervalValue{found + 1}",
            )
        if found > count:
            return self.error(
                f"the 300 record has {found} interval values; {needs}", line, "QualityMethod"
            )
        return self.error(
            f"QualityMethod {fields[found + 2][:20]!r} is not a quality flag (A, E, F, N, S or V)"
            " with an optional two-digit method",
            line,
            "QualityMethod",
        )

    def run(self, waiting: _Waiting, fields: list[str], line: int) -> None:
        """Check a 400 record and add its run of intervals to the V row waiting for it."""
        size = len(fields)
        if size < 4:
            raise self.error(
                f"the 400 record has {size} fields; it needs StartInterval, EndInterval and"
                " QualityMethod",
                line,
                _FIELDS_400[size],
            )
        if size > 6 and any(fields[6:]):
            raise self.error("a field after ReasonDescription", line, f"field {size}")
        first_text, last_text = fields[1], fields[2]
        if not _is_digits(first_text):
            raise self.error(
                f"StartInterval {first_text[:20]!r} is not a number", line, "StartInterval"
            )
        if not _is_digits(last_text):
            raise self.error(f"EndInterval {last_text[:20]!r} is not a number", line, "EndInterval")
        first, last, count = int(first_text), int(last_text), waiting.channel.count
        if first != waiting.next_interval:
            raise self.error(
                f"StartInterval {first} where {waiting.next_interval} was due: the 400 records"
                " of a day cover its intervals in order from 1, without gaps or overlaps",
                line,
                "StartInterval",
            )
        if not first <= last <= count:
            raise self.error(
                f"EndInterval {last} is outside {first}-{count}, the rest of a day of"
                f" {count} intervals",
                line,
                "EndInterval",
            )
        flag = _QUALITY_METHODS.get(fields[3])
        if flag is None or flag == "V":
            raise self.error(
                f"QualityMethod {fields[3][:20]!r} is not a quality flag (A, E, F, N or S) with"
                " an optional two-digit method",
                line,
                "QualityMethod",
            )
        waiting.runs.append((first - 1, last, flag))
        waiting.next_interval = last + 1
        self.last_400 = line

    def close(self, waiting: _Waiting) -> IntervalDay | None:
        """A V row whose 400 records are all in, checked: its day, or None when superseded."""
        channel = waiting.channel
        count = channel.count
        if not waiting.runs:
            raise self.error(
                "QualityMethod V needs 400 records giving each interval's quality",
                waiting.line,
                "QualityMethod",
            )
        if waiting.next_interval <= count:
            raise self.error(
                f"the 400 records cover intervals 1-{waiting.next_interval - 1} of the day's"
                f" {count}",
                self.last_400,
                "EndInterval",
            )
        if waiting.loser:
            return None
        qualities = "".join(flag * (end - first) for first, end, flag in waiting.runs)
        values = waiting.values
        null = reads.NULL_QUALITY
        if null in qualities:
            values = tuple(
                None if flag == null else value
                for value, flag in zip(values, qualities, strict=True)
            )
        stats = self.stats.channels[(channel.nmi, channel.suffix)]
        for flag in set(qualities):
            stats.qualities[flag] += qualities.count(flag)
        stats.missing += sum(value is None for value in values)
        return IntervalDay(
            channel.nmi,
            channel.suffix,
            waiting.day,
            channel.minutes,
            values,
            qualities,
            waiting.stamp,
            channel.uom,
            self.source,
            waiting.line,
        )

    def any_date(self, text: str, line: int, field: str) -> date:
        """A date written yyyymmdd, inside ``freehours.domain.reads``' range."""
        day = _date(text)
        if day is None:
            raise self.error(f"{field} {text[:20]!r} is not a date (yyyymmdd)", line, field)
        try:
            return reads.check_date(day, field)
        except RangeError as exc:
            raise self.error(exc.reason, line, field) from None

    def date(self, text: str, line: int, field: str) -> date:
        """An IntervalDate written yyyymmdd: a day a meter can have read by ``today``, or with
        ``future`` any day from ``EARLIEST_DATE`` to ``LATEST_DATE`` (those past the first noted
        in ``stats``)."""
        day = _date(text)
        if day is None:
            raise self.error(f"{field} {text[:20]!r} is not a date (yyyymmdd)", line, field)
        try:
            if self.future:
                reads.check_date(day, field)
            else:
                reads.check_read_date(day, self.today, field)
        except RangeError as exc:
            raise self.error(exc.reason, line, field) from None
        if day > self.latest:
            self.stats.ahead(day)
        if len(self.dates) > _CACHE_LIMIT:
            self.dates.clear()
        self.dates[text] = day
        return day

    def stamp(self, text: str, line: int, field: str) -> datetime:
        """A NEM time written yyyymmddhhmmss (or yyyymmddhhmm)."""
        digits = text + "00" if len(text) == 12 else text
        day = self.stamp_days.get(digits[:8])
        clock = digits[8:]
        if day is not None and len(clock) == 6 and clock.isdigit():
            # A day met before (its date read and checked): only the time of day left to read,
            # the most of a file's stamps.
            try:
                moment = datetime.combine(day, time.fromisoformat(clock), NEM_TIME)
            except ValueError:  # 24 hours or more, 60 minutes or seconds, digits not ASCII
                raise self.not_a_stamp(text, line, field) from None
        else:
            moment = self.first_stamp(digits, text, line, field)
        if len(self.stamps) > _CACHE_LIMIT:
            self.stamps.clear()
        self.stamps[text] = moment
        return moment

    def first_stamp(self, digits: str, text: str, line: int, field: str) -> datetime:
        """A stamp (``text``, ``digits`` with its seconds) whose day is not in ``stamp_days``:
        read whole, its moment checked in range, its day kept."""
        moment = _moment(digits)
        if moment is None:
            raise self.not_a_stamp(text, line, field)
        try:
            reads.check_moment(moment, field)
        except RangeError as exc:
            raise self.error(exc.reason, line, field) from None
        if len(self.stamp_days) > _CACHE_LIMIT:
            self.stamp_days.clear()
        self.stamp_days[digits[:8]] = moment.date()
        return moment

    def not_a_stamp(self, text: str, line: int, field: str) -> NEM12Error:
        return self.error(
            f"{field} {text[:20]!r} is not a date and time (yyyymmddhhmmss)", line, field
        )


def _add_flags(stats: ChannelStats, flag_rows: dict[str, int], count: int) -> None:
    """Add the rows of each flag (each ``count`` intervals) to ``stats``, and zero them."""
    for flag, rows in flag_rows.items():
        if rows:
            stats.qualities[flag] += rows * count
            flag_rows[flag] = 0


def _date(text: str) -> date | None:
    """``yyyymmdd`` as a date, or None."""
    if len(text) != 8 or not _is_digits(text):
        return None
    try:
        return date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        return None


def _moment(digits: str) -> datetime | None:
    """``yyyymmddhhmmss`` as a moment in NEM time, or None."""
    if len(digits) != 14 or not _is_digits(digits):
        return None
    try:
        return datetime.combine(
            date.fromisoformat(digits[:8]), time.fromisoformat(digits[8:]), NEM_TIME
        )
    except ValueError:
        return None


# IntervalDay is frozen, so its generated __init__ sets each field through object.__setattr__, a
# call that finds the slot by name every time. The hot path above (one day per 300 record) fills
# the same slots in a class without that __setattr__, plain attribute stores, then makes the
# object an IntervalDay: CPython allows ``__class__`` assignment between classes whose layouts
# are the same, and checks that they are. The same object in less than half the time. Importing
# fails if IntervalDay's fields (or its layout) ever change, so this cannot silently fall behind.
_DAY_FIELDS = (
    "nmi",
    "suffix",
    "day",
    "interval_minutes",
    "values",
    "qualities",
    "update_datetime",
    "uom",
    "source",
    "line",
    "stored_form",
)
if tuple(day_field.name for day_field in fields(IntervalDay)) != _DAY_FIELDS:
    raise ImportError("IntervalDay's fields changed: update _interval_day in this module")


class _DayBeingBuilt:
    """IntervalDay's slots, in its order, without its frozen ``__setattr__``."""

    __slots__ = _DAY_FIELDS


def _interval_day(  # noqa: PLR0917 - the positional fields of IntervalDay(...) itself
    nmi: str,
    suffix: str,
    day: date,
    interval_minutes: int,
    values: tuple[Decimal | None, ...],
    qualities: str,
    update_datetime: datetime | None,
    uom: str,
    source: str,
    line: int,
    stored_form: StoredForm | None,
) -> IntervalDay:
    """``IntervalDay(nmi, suffix, ...)``, built faster (see above)."""
    built: Any = object.__new__(_DayBeingBuilt)  # (its slots typed by this function's parameters)
    built.nmi = nmi
    built.suffix = suffix
    built.day = day
    built.interval_minutes = interval_minutes
    built.values = values
    built.qualities = qualities
    built.update_datetime = update_datetime
    built.uom = uom
    built.source = source
    built.line = line
    built.stored_form = stored_form
    built.__class__ = IntervalDay  # the same layout: CPython checks
    return built  # type: ignore[no-any-return]  # an IntervalDay now (cast() would be a call)


# One built at import: a layout that stopped matching fails here (TypeError), not in a read.
_interval_day("", "", date.min, 30, (), "", None, "KWH", "", 0, None)
