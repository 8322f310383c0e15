"""Quotas and the ledger: the rows the settlement state machine moves, and the credits it books.

``Quotas`` runs in its unit of work's transaction; the settlement service decides what to write
with the pure transitions of ``freehours.domain.settlement`` and writes state and ledger entry in
one transaction.

Every state written (``insert``, ``insert_if_absent`` when it inserts, ``save``, ``save_and_book``,
``reopen_if_settled``) is also recorded in ``quota_events``, with when it was written and the
current trace (``events``: a quota's history). On PostgreSQL the event is part of the write's own
statement (a ``WITH`` whose insert takes the row the write returned); on SQLite, whose ``WITH``
takes no insert or update, it is a second statement in the same transaction
(``Driver.write_and_insert``).

A transition to COMPLETED or ABORTED is also published to the webhook outbox in the same
transaction (``freehours.store.webhooks``): ``quota.completed``, ``quota.aborted``, and
``quota.revised`` when a version after the first completes with a different free energy (its
ledger entry, the difference, is not zero). Every path that settles a quota saves it here, so
this is the one place its events are written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.expression import ClauseElement

from freehours.domain.settlement import Quota, QuotaStatus, new_quota
from freehours.domain.webhooks import EventType
from freehours.observability.trace_ids import current_trace_id
from freehours.store.driver import Driver, columns, each_key
from freehours.store.prepared import Prepared
from freehours.store.repository import Repository
from freehours.store.tables import ledger_entries, quota_events, quotas
from freehours.store.webhooks import NewEvent, Webhooks


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A booked credit: one version's free energy, less what earlier versions booked."""

    nmi: str
    date: date
    version: int
    kwh: Decimal
    amount: Decimal
    booked_at: datetime


@dataclass(frozen=True, slots=True)
class QuotaEvent:
    """A state a quota version was written in: when, and the trace of the request or job that
    wrote it (None outside a trace)."""

    nmi: str
    date: date
    version: int
    at: datetime
    status: QuotaStatus
    fence: int
    attempts: int
    reason: str | None
    trace_id: str | None


# The statements of the settlement's hot path, prepared once (freehours.store.prepared).
_KEY = (quotas.c.nmi == sa.bindparam("k_nmi"), quotas.c.day == sa.bindparam("k_day"))
_SELECT_LATEST = sa.select(quotas).where(*_KEY).order_by(quotas.c.version.desc()).limit(1)
_LATEST = Prepared(_SELECT_LATEST)
#: NMIs per statement of ``settled_among``: far under both databases' limits on parameters.
_IN_BATCH = 5_000
_LATEST_FOR_UPDATE = Prepared(_SELECT_LATEST.with_for_update())
_COLUMNS = [column.name for column in quotas.columns]
_ROW = {name: sa.bindparam(name, type_=quotas.c[name].type) for name in _COLUMNS}

# What an event takes from the quota row written; its time and trace are bound as ``e_at`` and
# ``e_trace_id``.
_EVENT_COLUMNS = ("nmi", "day", "version", "status", "fence", "attempts", "reason")
_EVENT_EXTRA = {
    "at": sa.bindparam("e_at", type_=quota_events.c.at.type),
    "trace_id": sa.bindparam("e_trace_id", type_=quota_events.c.trace_id.type),
}
_WRITTEN = [quotas.c[name] for name in _EVENT_COLUMNS]
_RECORD = Prepared(
    quota_events.insert().values(
        {
            **{
                name: sa.bindparam(name, type_=quota_events.c[name].type) for name in _EVENT_COLUMNS
            },
            **_EVENT_EXTRA,
        }
    )
)


def _recorded(written: sa.CTE) -> sa.Insert:
    """The event of the row a write returned (``written``, a ``WITH``): no row, no event."""
    return quota_events.insert().from_select(
        [*_EVENT_COLUMNS, *_EVENT_EXTRA],
        sa.select(*(written.c[name] for name in _EVENT_COLUMNS), *_EVENT_EXTRA.values()),
    )


def _insert_if_absent(driver: Driver) -> ClauseElement:
    return driver.insert_or_ignore(quotas).values(_ROW).returning(quotas.c.version)


def _insert_if_absent_recorded(driver: Driver) -> ClauseElement:
    written = driver.insert_or_ignore(quotas).values(_ROW).returning(*_WRITTEN).cte("written")
    return _recorded(written).returning(quota_events.c.version)


_INSERT = Prepared(quotas.insert().values(_ROW).returning(quotas.c.version))
_INSERT_RECORDED = Prepared(
    _recorded(quotas.insert().values(_ROW).returning(*_WRITTEN).cte("written")).returning(
        quota_events.c.version
    )
)

_SAVE_WHERE = (*_KEY, quotas.c.version == sa.bindparam("k_version"))
_SAVE_VALUES = {name: sa.bindparam(name, type_=quotas.c[name].type) for name in _COLUMNS[3:]}
_UPDATE = quotas.update().where(*_SAVE_WHERE).values(_SAVE_VALUES)
_SAVE = Prepared(_UPDATE.returning(quotas.c.version))
_SAVE_RECORDED = Prepared(
    _recorded(_UPDATE.returning(*_WRITTEN).cte("written")).returning(quota_events.c.version)
)
_BOOK = Prepared(
    ledger_entries.insert().values(
        {c.name: sa.bindparam(c.name, type_=c.type) for c in ledger_entries.columns}
    )
)
# Where the database allows it (``Driver.write_and_insert``): a transition, its event and its
# ledger entry in one statement, the event's and the entry's key taken from the row the update
# wrote (no row, neither).
_SAVED = _UPDATE.returning(*_WRITTEN).cte("saved")
_ENTRY_VALUES = ("kwh", "amount", "booked_at")
_SAVE_AND_BOOK = Prepared(
    ledger_entries.insert()
    .from_select(
        ["nmi", "day", "version", *_ENTRY_VALUES],
        sa.select(
            _SAVED.c.nmi,
            _SAVED.c.day,
            _SAVED.c.version,
            *(sa.bindparam(name, type_=ledger_entries.c[name].type) for name in _ENTRY_VALUES),
        ),
    )
    .add_cte(_recorded(_SAVED).cte("recorded"))
    .returning(ledger_entries.c.version)
)
# The writes of many quotas (``save``, ``save_and_book``): the rows are held locked by the
# caller. Where the database takes arrays (PostgreSQL), the whole batch is one statement over
# its rows given column by column (``unnest``); elsewhere each statement runs once per row in
# one ``executemany``, returning nothing.
_SAVE_PLAIN = Prepared(_UPDATE)
_ROWS_IN = ("k_nmi", "k_day", "k_version", *_COLUMNS[3:], "e_at", "e_trace_id")
#: What a batch's update returns of its input besides the row: the event's and the entry's values.
_CARRIED = ("e_at", "e_trace_id", *_ENTRY_VALUES)
_ROW_TYPES = {
    **{name: quotas.c[name].type for name in _COLUMNS},
    **{f"k_{name}": quotas.c[name].type for name in ("nmi", "day", "version")},
    **{name: quotas.c[name].type for name in _COLUMNS[3:]},
    "e_at": quota_events.c.at.type,
    "e_trace_id": quota_events.c.trace_id.type,
    **{name: ledger_entries.c[name].type for name in _ENTRY_VALUES},
}


def _batch(names: Sequence[str], alias: str = "batch") -> sa.TableValuedAlias:
    """A batch's rows as a table: each parameter (``names``, as the single statements bind
    them) an array of one column's values, row by row (``freehours.store.driver.columns``)."""
    return (
        sa.func.unnest(
            *(sa.bindparam(name, type_=postgresql.ARRAY(_ROW_TYPES[name])) for name in names)
        )
        .table_valued(*(sa.column(name, _ROW_TYPES[name]) for name in names))
        .render_derived(name=alias)
    )


def _saved_many(names: Sequence[str]) -> sa.CTE:
    """The batch's transitions, one ``UPDATE ... FROM unnest(...)`` for all of its rows,
    returning each row written with the rest of its input (its event's time and trace, its
    ledger entry)."""
    rows = _batch(names)
    c = quotas.c
    return (
        quotas.update()
        .where(c.nmi == rows.c.k_nmi, c.day == rows.c.k_day, c.version == rows.c.k_version)
        .values({name: rows.c[name] for name in _COLUMNS[3:]})
        .returning(*_WRITTEN, *(rows.c[name] for name in names if name in _CARRIED))
        .cte("saved")
    )


def _recorded_many(saved: sa.CTE) -> sa.Insert:
    """The event of every row a batch's update wrote."""
    return quota_events.insert().from_select(
        [*_EVENT_COLUMNS, *_EVENT_EXTRA],
        sa.select(*(saved.c[name] for name in _EVENT_COLUMNS), saved.c.e_at, saved.c.e_trace_id),
    )


def _inserted_many() -> sa.Select[tuple[str, date]]:
    """The batch's new quotas, one ``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO
    NOTHING`` in the arrays' (key) order, each inserted row's event (at ``e_at``, in its row's
    trace), and the (NMI, date) of the rows inserted."""
    rows = _batch(_COLUMNS)
    written = (
        postgresql.insert(quotas)
        .from_select(_COLUMNS, sa.select(*(rows.c[name] for name in _COLUMNS)))
        .on_conflict_do_nothing()
        .returning(*_WRITTEN)
        .cte("written")
    )
    traced = _batch(["nmi", "day", "version", "e_trace_id"], "traced")
    recorded = quota_events.insert().from_select(
        [*_EVENT_COLUMNS, *_EVENT_EXTRA],
        sa.select(
            *(written.c[name] for name in _EVENT_COLUMNS), _EVENT_EXTRA["at"], traced.c.e_trace_id
        ).join(
            traced,
            sa.and_(
                written.c.nmi == traced.c.nmi,
                written.c.day == traced.c.day,
                written.c.version == traced.c.version,
            ),
        ),
    )
    return sa.select(written.c.nmi, written.c.day).add_cte(recorded.cte("recorded"))


_INSERT_MANY = Prepared(_inserted_many(), plan_each_time=True)


def _latest_many() -> sa.Select[Any]:
    """Every version of some quotas (give it a ``where``), in key and version order."""
    return sa.select(quotas).order_by(quotas.c.nmi, quotas.c.day, quotas.c.version)


_EACH_KEY = (
    sa.select(quotas),
    (quotas.c.nmi, quotas.c.day),
    ("k_nmi", "k_day"),
    ("nmi", "day", "version"),
)
_LATEST_MANY = Prepared(each_key(*_EACH_KEY), plan_each_time=True)
#: Every version's status of some quotas, key by key: an ingest's thousand (NMI, day) keys were an
#: ``IN`` list, a new statement to compile and plan for every number of keys.
_STATUSES_MANY = Prepared(
    each_key(
        sa.select(quotas.c.nmi, quotas.c.day, quotas.c.version, quotas.c.status),
        *_EACH_KEY[1:],
    ),
    plan_each_time=True,
)
_LATEST_MANY_FOR_UPDATE = Prepared(each_key(*_EACH_KEY, for_update=True), plan_each_time=True)
_SAVED_MANY = _saved_many(_ROWS_IN)
_SAVE_MANY = Prepared(_recorded_many(_SAVED_MANY), plan_each_time=True)
_SAVED_AND_BOOKED_MANY = _saved_many((*_ROWS_IN, *_ENTRY_VALUES))
_SAVE_AND_BOOK_MANY = Prepared(
    ledger_entries.insert()
    .from_select(
        ["nmi", "day", "version", *_ENTRY_VALUES],
        sa.select(
            _SAVED_AND_BOOKED_MANY.c.nmi,
            _SAVED_AND_BOOKED_MANY.c.day,
            _SAVED_AND_BOOKED_MANY.c.version,
            *(_SAVED_AND_BOOKED_MANY.c[name] for name in _ENTRY_VALUES),
        ),
    )
    .add_cte(_recorded_many(_SAVED_AND_BOOKED_MANY).cte("recorded")),
    plan_each_time=True,
)
_EVENTS = (
    sa.select(quota_events)
    .where(quota_events.c.nmi == sa.bindparam("nmi"), quota_events.c.day == sa.bindparam("day"))
    .order_by(quota_events.c.id)
)


class Quotas(Repository):
    """The quota versions and the ledger, in the unit of work's transaction."""

    __slots__ = ()

    def latest(self, nmi: str, day: date, *, for_update: bool = False) -> Quota | None:
        """The quota's newest version, locked for the transaction when ``for_update``:
        ``latest_many`` of one key."""
        return self.latest_many([(nmi, day)], for_update=for_update).get((nmi, day))

    def settled_among(self, keys: Collection[tuple[str, date]]) -> set[tuple[str, date]]:
        """Of the (NMI, day) quotas ``keys``, those whose newest version is COMPLETED: one
        statement (on SQLite, one per ``_IN_BATCH`` NMIs), nothing locked (callers lock what they
        then change)."""
        return self._newest_in(keys, (QuotaStatus.COMPLETED.value,))

    def terminal_among(self, keys: Collection[tuple[str, date]]) -> set[tuple[str, date]]:
        """Of the (NMI, day) quotas ``keys``, those whose newest version is final (COMPLETED or
        ABORTED): what scheduling a settlement again would only replay. As ``settled_among``."""
        return self._newest_in(keys, (QuotaStatus.COMPLETED.value, QuotaStatus.ABORTED.value))

    def stored_among(self, keys: Collection[tuple[str, date]]) -> set[tuple[str, date]]:
        """Of the (NMI, day) quotas ``keys``, those stored (any version, any state). As
        ``settled_among``."""
        return self._newest_in(keys, tuple(status.value for status in QuotaStatus))

    def _newest_in(
        self, keys: Collection[tuple[str, date]], statuses: tuple[str, ...]
    ) -> set[tuple[str, date]]:
        """Of the quotas ``keys``, those whose newest version has one of ``statuses``."""
        if self._driver.takes_arrays:
            if not keys:
                return set()
            wanted = sorted(set(keys))
            statuses_of = _STATUSES_MANY.rows(
                self._conn, columns([{"k_nmi": n, "k_day": d} for n, d in wanted])
            )
            status = {}
            for nmi, day, _, of_version in statuses_of:
                status[(nmi, day)] = of_version  # ascending versions: the newest wins
            return {key for key, of in status.items() if of in statuses}
        by_nmi: dict[str, set[date]] = {}
        for nmi, day in keys:
            by_nmi.setdefault(nmi, set()).add(day)
        nmis = sorted(by_nmi)
        c = quotas.c
        found: set[tuple[str, date]] = set()
        for start in range(0, len(nmis), _IN_BATCH):
            batch = nmis[start : start + _IN_BATCH]
            days = sorted({day for nmi in batch for day in by_nmi[nmi]})
            newest = (
                sa.select(c.nmi, c.day, sa.func.max(c.version).label("version"))
                .where(c.nmi.in_(batch), c.day.in_(days))
                .group_by(c.nmi, c.day)
                .subquery()
            )
            rows = self._conn.execute(
                sa.select(c.nmi, c.day)
                .join(
                    newest,
                    sa.and_(
                        c.nmi == newest.c.nmi,
                        c.day == newest.c.day,
                        c.version == newest.c.version,
                    ),
                )
                .where(c.status.in_(statuses))
            )
            found.update((row.nmi, row.day) for row in rows if row.day in by_nmi[row.nmi])
        return found

    def insert(self, quota: Quota, *, at: datetime) -> None:
        """Insert a new version, and its event (``at``); its key must be new."""
        self._driver.write_and_insert(
            self._conn,
            _event_params(_values(quota), at),
            together=_INSERT_RECORDED,
            write=_INSERT,
            inserts=(_RECORD,),
        )

    def latest_many(
        self, keys: Collection[tuple[str, date]], *, for_update: bool = False
    ) -> dict[tuple[str, date], Quota]:
        """The newest version of each quota (NMI, date) of ``keys`` that has one: one statement
        (for one key, its newest version's row alone).

        ``for_update`` locks every version of them, in (NMI, date, version) order, so that two
        transactions locking overlapping batches take their rows in one order and never wait
        for each other in a cycle. (Older versions are terminal: nothing else locks them.)
        """
        if not keys:
            return {}
        wanted = sorted(set(keys))
        rows: Sequence[Sequence[Any]]
        if len(wanted) == 1:  # the API's one quota: a plain statement, prepared on the server
            nmi, day = wanted[0]
            single = _LATEST_FOR_UPDATE if for_update else _LATEST
            rows = single.rows(self._conn, {"k_nmi": nmi, "k_day": day})
        elif self._driver.takes_arrays:
            prepared = _LATEST_MANY_FOR_UPDATE if for_update else _LATEST_MANY
            rows = prepared.rows(self._conn, columns([{"k_nmi": n, "k_day": d} for n, d in wanted]))
        else:
            statement = _latest_many().where(sa.tuple_(quotas.c.nmi, quotas.c.day).in_(wanted))
            rows = self._conn.execute(
                statement.with_for_update() if for_update else statement
            ).all()
        newest: dict[tuple[str, date], Quota] = {}
        for row in rows:
            quota = _quota(tuple(row))
            newest[(quota.nmi, quota.date)] = quota  # ascending versions: the last one wins
        return newest

    def insert_if_absent(
        self,
        new: Sequence[Quota],
        *,
        at: datetime,
        trace_ids: Mapping[str, str | None] | None = None,
    ) -> set[tuple[str, date]]:
        """Insert each of ``new`` unless its (NMI, date, version) exists, in key order: the
        (NMI, date) of those inserted, each with its event (``at``, in the trace ``trace_ids``
        names by quota key, else the current one). A key a concurrent transaction inserts first
        waits for it and is not inserted. One statement where the database allows it."""
        if not new:
            return set()
        traces = trace_ids or {}
        ordered = sorted(new, key=lambda quota: (quota.nmi, quota.date, quota.version))
        if len(ordered) == 1:  # the API's one quota: plain statements, prepared on the server
            quota = ordered[0]
            inserted = self._driver.write_and_insert(
                self._conn,
                _event_params(_values(quota), at, traces.get(quota.key)),
                together=self._driver.prepared(_insert_if_absent_recorded),
                write=self._driver.prepared(_insert_if_absent),
                inserts=(_RECORD,),
            )
            return {(quota.nmi, quota.date)} if inserted else set()
        if self._driver.takes_arrays:
            traced = [
                {**_values(quota), "e_trace_id": traces.get(quota.key) or current_trace_id()}
                for quota in ordered
            ]
            rows = _INSERT_MANY.rows(self._conn, {**columns(traced), "e_at": at})
            return {(nmi, day) for nmi, day in rows}
        insert = self._driver.insert_or_ignore(quotas).returning(quotas.c.nmi, quotas.c.day)
        inserted_keys = {(row[0], row[1]) for row in self._conn.execute(insert, _rows(ordered))}
        events = [
            _event_params(_values(quota), at, traces.get(quota.key))
            for quota in ordered
            if (quota.nmi, quota.date) in inserted_keys
        ]
        _RECORD.many(self._conn, events)
        return inserted_keys

    def save(
        self,
        changed: Sequence[Quota],
        *,
        at: datetime,
        trace_ids: Mapping[str, str | None] | None = None,
    ) -> None:
        """Write transitions of existing rows (same NMI, date and version) that this
        transaction holds locked (``latest_many`` with ``for_update``), each with its event
        (``at``, the time of the transition, in its trace: ``trace_ids`` by quota key, else the
        current one). A quota whose row is not there is not written, nor its event."""
        traces = trace_ids or {}
        params = [
            _event_params(_save_params(quota), at, traces.get(quota.key)) for quota in changed
        ]
        if len(params) == 1:  # the API's one quota: plain statements, prepared on the server
            self._driver.write_and_insert(
                self._conn, params[0], together=_SAVE_RECORDED, write=_SAVE, inserts=(_RECORD,)
            )
        else:
            self._driver.write_and_insert_many(
                self._conn, params, arrays=_SAVE_MANY, separate=(_SAVE_PLAIN, _RECORD)
            )
        self._publish([(quota, None, at) for quota in changed])

    def save_and_book(
        self,
        booked: Sequence[tuple[Quota, LedgerEntry]],
        *,
        trace_ids: Mapping[str, str | None] | None = None,
    ) -> None:
        """Write transitions of rows this transaction holds locked, each with its event (at the
        quota's ``completed_at``, else the entry's ``booked_at``; in its trace, as ``save``),
        and book each one's ledger entry (of the same NMI, date and version): one statement for
        all where the database allows it (PostgreSQL), three where its ``WITH`` takes no
        update (SQLite)."""
        traces = trace_ids or {}
        params = []
        for quota, entry in booked:
            assert (entry.nmi, entry.date, entry.version) == (quota.nmi, quota.date, quota.version)
            at = quota.completed_at or entry.booked_at
            params.append(
                {
                    **_event_params(_save_params(quota), at, traces.get(quota.key)),
                    **_entry_params(entry),
                }
            )
        if len(params) == 1:  # the API's one quota: plain statements, prepared on the server
            written = self._driver.write_and_insert(
                self._conn,
                params[0],
                together=_SAVE_AND_BOOK,
                write=_SAVE,
                inserts=(_RECORD, _BOOK),
            )
            assert written, f"quota {booked[0][0].key} is not there to save"
        else:
            self._driver.write_and_insert_many(
                self._conn,
                params,
                arrays=_SAVE_AND_BOOK_MANY,
                separate=(_SAVE_PLAIN, _RECORD, _BOOK),
            )
        self._publish(
            [(quota, entry, quota.completed_at or entry.booked_at) for quota, entry in booked]
        )

    def _publish(self, saved: Sequence[tuple[Quota, LedgerEntry | None, datetime]]) -> None:
        """The webhook events of the transitions ``saved`` (each quota with its ledger entry,
        if booked, and when it was written): only COMPLETED and ABORTED have any."""
        events = [
            event
            for quota, entry, at in saved
            if quota.status in _TERMINAL
            for event in _quota_events(quota, entry, at)
        ]
        if events:
            Webhooks(self._conn, self._driver).publish(events)

    def events(self, nmi: str, day: date) -> list[QuotaEvent]:
        """Every state the quota's versions were written in, oldest first."""
        rows = self._conn.execute(_EVENTS, {"nmi": nmi, "day": day})
        return [
            QuotaEvent(
                r.nmi,
                r.day,
                r.version,
                r.at,
                QuotaStatus(r.status),
                r.fence,
                r.attempts,
                r.reason,
                r.trace_id,
            )
            for r in rows
        ]

    def book(self, entry: LedgerEntry) -> None:
        """Book a credit. The ledger's key (nmi, date, version) refuses a second one for a
        version."""
        _BOOK.rows(self._conn, _entry_params(entry))

    def booked_before(self, nmi: str, day: date, version: int) -> tuple[Decimal, Decimal]:
        """kWh and amount booked by the versions before ``version``: what an adjustment nets
        off."""
        if version == 1:
            return Decimal(0), Decimal(0)
        row = self._conn.execute(
            sa.select(ledger_entries.c.kwh, ledger_entries.c.amount).where(
                ledger_entries.c.nmi == nmi,
                ledger_entries.c.day == day,
                ledger_entries.c.version < version,
            )
        ).all()
        return (
            sum((r.kwh for r in row), Decimal(0)),
            sum((r.amount for r in row), Decimal(0)),
        )

    def ledger(self, nmi: str, day: date | None = None) -> list[LedgerEntry]:
        """The NMI's booked credits, oldest first."""
        q = sa.select(ledger_entries).where(ledger_entries.c.nmi == nmi)
        if day is not None:
            q = q.where(ledger_entries.c.day == day)
        rows = self._conn.execute(q.order_by(ledger_entries.c.day, ledger_entries.c.version))
        return [LedgerEntry(r.nmi, r.day, r.version, r.kwh, r.amount, r.booked_at) for r in rows]

    def reopen_if_settled(self, nmi: str, day: date, *, at: datetime) -> Quota | None:
        """After new meter data for a settled day: the next version, PENDING (written ``at``),
        or None.

        Only a COMPLETED newest version is reopened; a PENDING or LOCKED one will read the new
        data when it settles (the holder re-reads under the row lock before completing), and an
        ABORTED one stays aborted.
        """
        quota = self.latest(nmi, day, for_update=True)
        if quota is None or quota.status is not QuotaStatus.COMPLETED:
            return None
        successor = new_quota(nmi, day, version=quota.version + 1)
        self.insert(successor, at=at)
        return successor

    def every_credit(self) -> list[LedgerEntry]:
        """Every booked credit, by NMI, date and version."""
        t = ledger_entries.c
        rows = self._conn.execute(sa.select(ledger_entries).order_by(t.nmi, t.day, t.version))
        return [LedgerEntry(r.nmi, r.day, r.version, r.kwh, r.amount, r.booked_at) for r in rows]

    def duplicate_credits(self) -> int:
        """Credits beyond the first booked for one version of a quota: the ledger's key makes
        this 0, which is what a run that checks its invariants asserts."""
        t = ledger_entries.c
        repeated = self._conn.execute(
            sa.select(sa.func.count())
            .select_from(ledger_entries)
            .group_by(t.nmi, t.day, t.version)
            .having(sa.func.count() > 1)
        ).scalars()
        return sum(count - 1 for count in repeated)

    def count_versions(self) -> int:
        """How many quota versions are stored, of every quota."""
        return int(self._conn.scalar(sa.select(sa.func.count()).select_from(quotas)) or 0)

    def sum_attempts(self) -> int:
        """Failed settlement attempts, summed over every quota version."""
        return int(self._conn.scalar(sa.select(sa.func.sum(quotas.c.attempts))) or 0)

    def first_versions_completed_at(self) -> list[datetime]:
        """When each quota's first version was completed (those completed)."""
        c = quotas.c
        return list(
            self._conn.scalars(
                sa.select(c.completed_at).where(
                    c.version == 1, c.status == QuotaStatus.COMPLETED.value
                )
            )
        )


_TERMINAL = (QuotaStatus.COMPLETED, QuotaStatus.ABORTED)


def _quota_events(quota: Quota, entry: LedgerEntry | None, at: datetime) -> list[NewEvent]:
    """A terminal transition's webhook events (docs/webhooks.md#events)."""
    data: dict[str, object] = {
        "nmi": quota.nmi,
        "date": quota.date,
        "version": quota.version,
        "status": quota.status.value,
        "attempts": quota.attempts,
    }
    if quota.status is QuotaStatus.ABORTED:
        return [NewEvent(EventType.QUOTA_ABORTED.value, at, {**data, "reason": quota.reason})]
    data.update(
        free_kwh=quota.free_kwh,
        free_value=quota.free_value,
        completed_at=quota.completed_at or at,
    )
    events = [NewEvent(EventType.QUOTA_COMPLETED.value, at, data)]
    if entry is not None and quota.version > 1 and (entry.kwh != 0 or entry.amount != 0):
        revised = {
            **data,
            "previous_free_kwh": (quota.free_kwh or Decimal(0)) - entry.kwh,
            "previous_free_value": (quota.free_value or Decimal(0)) - entry.amount,
            "change_kwh": entry.kwh,
            "change_value": entry.amount,
        }
        events.append(NewEvent(EventType.QUOTA_REVISED.value, at, revised))
    return events


def _entry_params(entry: LedgerEntry) -> dict[str, object]:
    return {
        "nmi": entry.nmi,
        "day": entry.date,
        "version": entry.version,
        "kwh": entry.kwh,
        "amount": entry.amount,
        "booked_at": entry.booked_at,
    }


def _event_params(
    params: dict[str, object], at: datetime, trace_id: str | None = None
) -> dict[str, object]:
    """``params`` with the event's time and its trace: ``trace_id``, else the current one."""
    params["e_at"] = at
    params["e_trace_id"] = trace_id or current_trace_id()
    return params


def _rows(changed: Sequence[Quota]) -> list[dict[str, object]]:
    return [_values(quota) for quota in changed]


def _save_params(quota: Quota) -> dict[str, object]:
    return {**_values(quota), "k_nmi": quota.nmi, "k_day": quota.date, "k_version": quota.version}


def _values(quota: Quota) -> dict[str, object]:
    return {
        "nmi": quota.nmi,
        "day": quota.date,
        "version": quota.version,
        "status": quota.status.value,
        "fence": quota.fence,
        "attempts": quota.attempts,
        "locked_until": quota.locked_until,
        "free_kwh": quota.free_kwh,
        "free_value": quota.free_value,
        "completed_at": quota.completed_at,
        "reason": quota.reason,
        "revision": quota.revision,
    }


# ``_quota`` reads rows positionally: the table's columns are the quota's fields, in order.
assert [c.name.replace("day", "date") for c in quotas.columns] == [f.name for f in fields(Quota)], (
    "quotas columns and Quota fields differ"
)


def _quota(row: tuple[Any, ...]) -> Quota:
    """A quota from a row of ``quotas`` in its column order (that of ``Quota``'s fields)."""
    nmi, day, version, status, *rest = row
    return Quota(nmi, day, version, QuotaStatus(status), *rest)
