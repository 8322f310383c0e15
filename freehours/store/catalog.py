"""Plans and customers in the database: the catalogue that settlement and billing look things up in.

A plan is stored as its document (the plan file's fields as JSON, decimals as strings), so that
the store keeps exactly what was put and ``freehours.domain.plan`` stays the one place that
reads plans. ``Catalog`` runs in its unit of work's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from freehours.domain import reads
from freehours.domain.contacts import Contact, Delivery
from freehours.domain.fields import MAX_PLAN_NAME
from freehours.domain.offers import Offer, OfferSource, OfferTerms
from freehours.domain.time import Region
from freehours.errors import InputError
from freehours.plans import BUILTIN_IDS, builtin_document
from freehours.store.driver import each_key
from freehours.store.prepared import Prepared
from freehours.store.repository import Repository
from freehours.store.tables import PLAN_ID_LENGTH, customer_contacts, customers, offers, plans


class UnknownPlan(InputError):
    """A plan id neither stored nor built in."""


class UnknownCustomer(InputError):
    """An NMI without a customer, where one is needed."""


class RegionMismatch(InputError):
    """A customer put on a plan of another region, or a plan put with a region other than that
    of customers on it: the plan's clock, free window, holidays and ombudsman would not be the
    customer's. ``nmi`` names the customer where one was being put."""

    def __init__(self, message: str, nmi: str | None = None) -> None:
        super().__init__(message)
        self.nmi = nmi


@dataclass(frozen=True, slots=True)
class StoredPlan:
    """A plan as stored: its id, its document, and when it was last put."""

    plan_id: str
    document: dict[str, Any]
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Customer:
    """A customer: the NMI they are billed for, their plan, and their region (hence clock)."""

    nmi: str
    plan_id: str
    region: Region
    updated_at: datetime


def _json_value(value: object) -> str:
    # Decimals as strings: exact, and how the plan file writes prices.
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


#: NMIs per statement of the batch look-ups: far under both databases' limits on parameters.
_IN_BATCH = 5_000

_PLAN_OF = Prepared(
    sa.select(plans.c.plan_id, plans.c.updated_at)
    .select_from(customers.join(plans, customers.c.plan_id == plans.c.plan_id))
    .where(customers.c.nmi == sa.bindparam("nmi"))
)


def _plan_versions() -> sa.Select[Any]:
    """Customers' plan versions (NMI, plan id, last update): give it a ``where``."""
    return sa.select(customers.c.nmi, plans.c.plan_id, plans.c.updated_at).select_from(
        customers.join(plans, customers.c.plan_id == plans.c.plan_id)
    )


#: NMI by NMI (``each_key``): ``nmi = ANY($1)`` of a file's thousand NMIs was planned as a scan
#: of every customer (8 ms a file at 100,000 customers, ten times that at a million).
_PLAN_VERSIONS_OF = Prepared(
    each_key(_plan_versions(), (customers.c.nmi,), ("k_nmi",), ("nmi",)), plan_each_time=True
)


class Catalog(Repository):
    """Plans and customers, in the unit of work's transaction."""

    __slots__ = ()

    def put_plan(
        self, plan_id: str, document: Mapping[str, Any], *, updated_at: datetime
    ) -> StoredPlan:
        """Create or replace a plan; ``RegionMismatch`` when its document names a region other
        than that of a customer on it."""
        if not 0 < len(plan_id) <= PLAN_ID_LENGTH:
            raise InputError(f"plan id {plan_id!r} is not 1 to {PLAN_ID_LENGTH} characters")
        region = document.get("region")
        if region is not None:
            other = self._conn.scalar(
                sa.select(customers.c.region)
                .where(customers.c.plan_id == plan_id, customers.c.region != str(region))
                .limit(1)
            )
            if other is not None:
                raise RegionMismatch(
                    f"plan {plan_id!r} is for region {region}, but customers on it are in"
                    f" region {other}: move them to a plan of their region first"
                )
        text = _canonical(document)
        self._upsert(plans, {"plan_id": plan_id, "document": text, "updated_at": updated_at})
        return StoredPlan(plan_id, json.loads(text), updated_at)

    def get_plan(self, plan_id: str) -> StoredPlan | None:
        """The plan ``plan_id``, or None."""
        row = self._conn.execute(sa.select(plans).where(plans.c.plan_id == plan_id)).one_or_none()
        if row is None:
            return None
        return StoredPlan(row.plan_id, json.loads(row.document), row.updated_at)

    def ensure_plan(self, plan_id: str, *, updated_at: datetime) -> None:
        """Make sure plan ``plan_id`` is stored: a built-in one (``sso-nsw``, ...) is stored the
        first time it is asked for, unless a plan of that id is stored already; any other id
        not stored is an ``UnknownPlan``."""
        if self.get_plan(plan_id) is not None:
            return
        if plan_id not in BUILTIN_IDS:
            raise UnknownPlan(
                f"no plan {plan_id!r} (stored, or built in: {', '.join(BUILTIN_IDS)})"
            )
        self.put_plan(plan_id, builtin_document(plan_id), updated_at=updated_at)

    def list_plans(self) -> list[StoredPlan]:
        """Every plan, by id."""
        rows = self._conn.execute(sa.select(plans).order_by(plans.c.plan_id))
        return [StoredPlan(row.plan_id, json.loads(row.document), row.updated_at) for row in rows]

    def put_customer(
        self, nmi: str, *, plan_id: str, region: Region, updated_at: datetime
    ) -> Customer:
        """Create or update the customer of ``nmi``; ``InputError`` when the plan is not
        stored, ``RegionMismatch`` when it is of another region."""
        self.put_customers([(nmi, plan_id, region)], updated_at=updated_at)
        return Customer(nmi, plan_id, region, updated_at)

    def put_customers(
        self, customers_: Sequence[tuple[str, str, Region]], *, updated_at: datetime
    ) -> None:
        """Create or update each customer (NMI, plan id, region) in one statement, each checked
        as ``put_customer`` checks one: the first that fails raises, and nothing is written."""
        plan_regions: dict[str, str | None] = {}
        for nmi, plan_id, region in customers_:
            try:
                reads.check_nmi(nmi)
            except reads.RangeError as exc:
                raise InputError(str(exc)) from None
            if plan_id not in plan_regions:
                # Checked first, not left to the foreign key: on PostgreSQL a violated constraint
                # would abort the caller's whole transaction. Plans are never deleted.
                document = self._conn.scalar(
                    sa.select(plans.c.document).where(plans.c.plan_id == plan_id)
                )
                if document is None:
                    raise InputError(f"customer {nmi}: plan {plan_id!r} is not known")
                # Every plan document names its region (a document stored without one is no
                # plan's: the store's own tests keep such, and nothing of them is rated).
                plan_regions[plan_id] = json.loads(document).get("region")
            plan_region = plan_regions[plan_id]
            if plan_region is not None and plan_region != region.value:
                raise RegionMismatch(
                    f"plan {plan_id!r} is for region {plan_region}, the customer's region is"
                    f" {region.value}",
                    nmi,
                )
        if not customers_:
            return
        rows = [
            {"nmi": nmi, "plan_id": plan_id, "region": region.value, "updated_at": updated_at}
            for nmi, plan_id, region in customers_
        ]
        upsert = self._driver.upsert(
            customers, key=["nmi"], update=["plan_id", "region", "updated_at"]
        )
        self._conn.execute(upsert, rows)

    def get_customer(self, nmi: str) -> Customer | None:
        """The customer of ``nmi``, or None."""
        row = self._conn.execute(sa.select(customers).where(customers.c.nmi == nmi)).one_or_none()
        if row is None:
            return None
        return Customer(row.nmi, row.plan_id, Region(row.region), row.updated_at)

    def customer_nmis(self, *, after: str | None, limit: int) -> list[str]:
        """The NMIs of up to ``limit`` customers after ``after`` (None: from the first), in
        order: a page of the primary key."""
        statement = sa.select(customers.c.nmi).order_by(customers.c.nmi).limit(limit)
        if after is not None:
            statement = statement.where(customers.c.nmi > after)
        return list(self._conn.scalars(statement))

    def count_customers(self) -> int:
        """How many customers there are."""
        return int(self._conn.scalar(sa.select(sa.func.count()).select_from(customers)) or 0)

    def plan_version_of(self, nmi: str) -> tuple[str, datetime] | None:
        """The id and last update of the plan of ``nmi``'s customer, or None without a customer:
        one round trip, for callers that keep parsed plans by version."""
        return self.plan_versions_of([nmi]).get(nmi)

    def plan_versions_of(self, nmis: Collection[str]) -> dict[str, tuple[str, datetime]]:
        """``plan_version_of`` for many NMIs: one round trip per ``_IN_BATCH`` of them; an NMI
        without a customer is left out."""
        found: dict[str, tuple[str, datetime]] = {}
        wanted = sorted(set(nmis))
        if len(wanted) == 1:  # a settlement request's: a statement prepared once
            row = _PLAN_OF.first(self._conn, {"nmi": wanted[0]})
            return {} if row is None else {wanted[0]: (row[0], row[1])}
        for start in range(0, len(wanted), _IN_BATCH):
            some = wanted[start : start + _IN_BATCH]
            rows: Sequence[Sequence[Any]]
            if self._driver.takes_arrays:
                rows = _PLAN_VERSIONS_OF.rows(self._conn, {"k_nmi": some})
            else:
                rows = self._conn.execute(_plan_versions().where(customers.c.nmi.in_(some))).all()
            found.update((nmi, (plan_id, updated_at)) for nmi, plan_id, updated_at in rows)
        return found

    def put_contacts(self, contacts: Mapping[str, Contact], *, updated_at: datetime) -> None:
        """Create or replace the contact of each customer in ``contacts`` (by NMI), in one
        statement; ``UnknownCustomer`` naming the first NMI that has no customer."""
        if not contacts:
            return
        nmis = sorted(contacts)
        known: set[str] = set()
        for start in range(0, len(nmis), _IN_BATCH):
            some = nmis[start : start + _IN_BATCH]
            known.update(
                self._conn.scalars(sa.select(customers.c.nmi).where(customers.c.nmi.in_(some)))
            )
        missing = [nmi for nmi in nmis if nmi not in known]
        if missing:
            raise UnknownCustomer(f"nmi: no customer {missing[0]}")
        rows = [_contact_row(nmi, contacts[nmi], updated_at) for nmi in nmis]
        key = [column.name for column in customer_contacts.primary_key]
        upsert = self._driver.upsert(
            customer_contacts, key=key, update=[n for n in rows[0] if n not in key]
        )
        self._conn.execute(upsert, rows)

    def contacts(self, nmis: Collection[str]) -> dict[str, Contact]:
        """The contacts of ``nmis`` that have one, by NMI."""
        found: dict[str, Contact] = {}
        wanted = sorted(set(nmis))
        c = customer_contacts.c
        for start in range(0, len(wanted), _IN_BATCH):
            some = wanted[start : start + _IN_BATCH]
            for row in self._conn.execute(sa.select(customer_contacts).where(c.nmi.in_(some))):
                found[row.nmi] = Contact(
                    row.name,
                    tuple(json.loads(row.supply_address)),
                    tuple(json.loads(row.billing_address)),
                    row.email,
                    Delivery(row.delivery),
                )
        return found

    def forget_contact(self, nmi: str) -> bool:
        """Erase the contact of ``nmi``'s customer (its name, addresses and email address);
        whether there was one. The customer, its meter data and its documents stay."""
        erased = self._conn.execute(
            customer_contacts.delete().where(customer_contacts.c.nmi == nmi)
        )
        return bool(erased.rowcount)

    def put_offers(self, new: Sequence[NewOffer], *, at: datetime) -> list[Offer]:
        """Store each offer of ``new`` (by id, each once): a new version where its plan, name or
        terms differ from its latest, else nothing. The offers as they now stand, each its
        latest version."""
        ids = [offer.offer_id for offer in new]
        latest = {offer.offer_id: offer for offer in self.current_offers(ids=ids)}
        stored: list[Offer] = []
        rows = []
        for offer in new:
            document = _canonical(offer.document)
            before = latest.get(offer.offer_id)
            same = before is not None and (
                before.name,
                before.source,
                before.terms,
                _canonical(before.document),
            ) == (offer.name, offer.source, offer.terms, document)
            if before is not None and same:
                stored.append(before)
                continue
            version = 1 if before is None else before.version + 1
            made = Offer(offer.offer_id, version, offer.name, offer.source, offer.terms,
                         json.loads(document))  # fmt: skip
            rows.append(_offer_row(made, document, at))
            stored.append(made)
        if rows:
            self._conn.execute(offers.insert(), rows)
        return stored

    def current_offers(
        self, *, region: Region | None = None, ids: Collection[str] | None = None
    ) -> list[Offer]:
        """The latest version of every offer (of ``region``, or of ``ids``, where given), by
        id."""
        o = offers.c
        newest = (
            sa.select(o.offer_id, sa.func.max(o.version).label("version"))
            .group_by(o.offer_id)
            .subquery()
        )
        statement = sa.select(offers).join(
            newest, sa.and_(o.offer_id == newest.c.offer_id, o.version == newest.c.version)
        )
        if region is not None:
            statement = statement.where(o.region == region.value)
        if ids is not None:
            if not ids:
                return []
            statement = statement.where(o.offer_id.in_(sorted(set(ids))))
        return [_offer(row) for row in self._conn.execute(statement.order_by(o.offer_id))]

    def offer(self, offer_id: str, version: int | None = None) -> Offer | None:
        """One version of an offer (its latest where ``version`` is None), or None."""
        o = offers.c
        statement = sa.select(offers).where(o.offer_id == offer_id)
        if version is not None:
            statement = statement.where(o.version == version)
        row = self._conn.execute(statement.order_by(o.version.desc()).limit(1)).one_or_none()
        return None if row is None else _offer(row)

    def _upsert(self, table: sa.Table, row: dict[str, Any]) -> None:
        key = [column.name for column in table.primary_key]
        upsert = self._driver.upsert(table, key=key, update=[n for n in row if n not in key])
        self._conn.execute(upsert.values(row))


def _contact_row(nmi: str, contact: Contact, updated_at: datetime) -> dict[str, Any]:
    return {
        "nmi": nmi,
        "name": contact.name,
        "supply_address": json.dumps(list(contact.supply_address), ensure_ascii=False),
        "billing_address": json.dumps(list(contact.billing_address), ensure_ascii=False),
        "email": contact.email,
        "delivery": contact.delivery.value,
        "updated_at": updated_at,
    }


@dataclass(frozen=True, slots=True)
class NewOffer:
    """An offer to store (``Catalog.put_offers``): its version is the store's to give."""

    offer_id: str
    name: str
    source: OfferSource
    terms: OfferTerms
    document: dict[str, Any]

    def __post_init__(self) -> None:
        if not self.name.strip() or len(self.name) > MAX_PLAN_NAME:
            raise ValueError(
                f"offer {self.offer_id}: name: {len(self.name)} characters; an invoice prints"
                f" it whole, 1 to {MAX_PLAN_NAME}"
            )


def _canonical(document: Mapping[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), default=_json_value)


def _offer_row(offer: Offer, document: str, at: datetime) -> dict[str, Any]:
    terms = offer.terms
    return {
        "offer_id": offer.offer_id,
        "version": offer.version,
        "name": offer.name,
        "source": offer.source.value,
        "region": terms.region.value,
        "distributors": json.dumps(list(terms.distributors)),
        "controlled_load": terms.controlled_load,
        "effective_from": terms.effective_from,
        "effective_to": terms.effective_to,
        "document": document,
        "created_at": at,
    }


def _offer(row: sa.Row[Any]) -> Offer:
    terms = OfferTerms(
        Region(row.region),
        tuple(json.loads(row.distributors)),
        bool(row.controlled_load),
        row.effective_from,
        row.effective_to,
    )
    return Offer(
        row.offer_id, row.version, row.name, OfferSource(row.source), terms,
        json.loads(row.document),
    )  # fmt: skip
