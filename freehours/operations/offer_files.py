"""Offers read from files, as ``freehours offers import`` reads them: each a CDR plan (JSON, as
the retailer publishes it) or a freehours plan file (TOML); a folder, every ``.json`` and
``.toml`` file in it. Every file is read and checked before anything is stored; the first
problem raises ``PlanError`` naming the file (and the JSON path or key)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path

from freehours.domain.offers import OfferSource, OfferTerms
from freehours.domain.time import Region
from freehours.errors import PlanError
from freehours.plans import toml_document
from freehours.plans.cdr.offers import offer_from_cdr
from freehours.plans.cdr.reader import read_json
from freehours.plans.document import parse_plan
from freehours.store.catalog import NewOffer

#: The most bytes of one offer's file (a CDR plan is a few kilobytes).
MAX_FILE_BYTES = 1 << 20
#: The most offers one import reads, and the most bytes of all its files together.
MAX_OFFERS = 1_000
MAX_IMPORT_BYTES = 64 << 20


def offer_paths(paths: Sequence[Path]) -> list[Path]:
    """The files named, each folder's ``.json`` and ``.toml`` files in name order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", ".toml"))
        else:
            found.append(path)
    if len(found) > MAX_OFFERS:
        raise PlanError(f"{len(found)} files, at most {MAX_OFFERS} in one import",
                        source=str(paths[0]))  # fmt: skip
    return found


def read_offers(
    paths: Sequence[Path], *, effective_from: date | None = None, region: Region | None = None
) -> list[NewOffer]:
    """The offer of each file (``offer_paths``). A plan file's offer applies from
    ``effective_from`` (None: open) in its plan's region, on every distributor's network; a CDR
    plan's terms are its own, ``region`` standing in where its geography names none."""
    offers: list[NewOffer] = []
    first_file: dict[str, Path] = {}
    read = 0
    for path in offer_paths(paths):
        source = str(path)
        try:
            with path.open("rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise PlanError(f"cannot read it: {exc.strerror}", source=source) from None
        if len(data) > MAX_FILE_BYTES:
            raise PlanError(f"over {MAX_FILE_BYTES} bytes: not an offer", source=source)
        read += len(data)
        if read > MAX_IMPORT_BYTES:
            raise PlanError(
                f"the files so far are over {MAX_IMPORT_BYTES} bytes, an import's most",
                source=source,
            )
        if path.suffix.lower() == ".json":
            document = read_json(data, source=source, limit=MAX_FILE_BYTES)
            plan, terms, name = offer_from_cdr(document, source=source, region=region)
            offer = NewOffer(plan["id"], name, OfferSource.CDR, terms, plan)
        else:
            plan = toml_document(data, source=source)
            parsed = parse_plan(plan, source=source)
            terms = OfferTerms(
                Region(parsed.region),
                controlled_load=parsed.controlled_load is not None,
                effective_from=effective_from,
            )
            offer = NewOffer(parsed.id, parsed.name, OfferSource.PLAN, terms, plan)
        if offer.offer_id in first_file:
            raise PlanError(
                f"offer {offer.offer_id!r} again (first in {first_file[offer.offer_id]})",
                source=source,
            )
        first_file[offer.offer_id] = path
        offers.append(offer)
    if not offers:
        raise PlanError("no offer files (.json or .toml)", source=str(paths[0]))
    return offers
