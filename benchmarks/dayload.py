"""A retailer's day of meter data as MDPs deliver it: customers registered, then NEM12 files.

``write_day_files`` writes one NEM date for ``customers`` NMIs across the four regions, split into
MDP-style files of ``per_file`` NMIs each: a 100 header, then per NMI a 200 and a 300 record for
E1 (consumption) and for B1 (export), 30-minute, or 5-minute for every tenth customer, then 900.
Values are kWh to three decimals from a seeded generator (a few percent of them zero, as night
solar export is), and each 300 record carries an UpdateDateTime, as an MDP's does.

``register_customers`` puts every NMI on its region's built-in plan in one statement per
thousand customers, the way a retailer's bulk load would (``customers put`` one by one runs a
process per customer).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import sqlalchemy as sa

from freehours.store import tables
from freehours.store.database import Store

#: Region, built-in plan, NMI prefix: a quarter of the customers each.
REGIONS = (
    ("NSW", "sso-nsw", "4"),
    ("SEQ", "sso-seq", "3"),
    ("SA", "sso-sa", "2"),
    ("VIC", "mps-vic", "6"),
)
FIVE_MINUTE_EVERY = 10  # every tenth customer's meter reads 5-minute intervals


def nmi_of(index: int) -> str:
    """The ``index``-th customer's NMI: its region's first digit, then nine digits."""
    return f"{REGIONS[index % len(REGIONS)][2]}{index:09d}"


def write_day_files(
    out: Path, customers: int, day: date, *, per_file: int = 1_000, seed: int = 18
) -> list[Path]:
    """Write the day's files into ``out`` (made if missing); their paths, in order."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    # A pool of value texts drawn once: the per-value cost of writing stays out of the way.
    pool = [f"{rng.randint(0, 2500) / 1000:.3f}" for _ in range(4096)] + ["0"] * 200
    paths = []
    for number, first in enumerate(range(0, customers, per_file), 1):
        path = out / f"nem12_day_{day:%Y%m%d}_mdp{number:05d}.csv"
        last = min(first + per_file, customers)
        with path.open("w", encoding="ascii", newline="\n") as file:
            file.writelines(_records(first, last, day, number, rng=rng, pool=pool))
        paths.append(path)
    return paths


def _records(
    first: int, last: int, day: date, number: int, *, rng: random.Random, pool: list[str]
) -> Iterator[str]:
    stamp = f"{day:%Y%m%d}"
    yield f"100,NEM12,{stamp}0600,MDP{number % 100:02d},RETAILER\n"
    for index in range(first, last):
        nmi = nmi_of(index)
        minutes = 5 if index % FIVE_MINUTE_EVERY == 0 else 30
        count = 1440 // minutes
        for register, suffix in (("1", "E1"), ("2", "B1")):
            yield f"200,{nmi},E1B1,{register},{suffix},N{register},M{index:07d},KWH,{minutes},\n"
            values = ",".join(rng.choices(pool, k=count))
            yield f"300,{stamp},{values},A,,,{stamp}235959,\n"
    yield "900\n"


def register_customers(store: Store, customers: int, *, batch: int = 1_000) -> None:
    """Put the first ``customers`` NMIs on their regions' built-in plans."""
    now = datetime.now(UTC)
    with store.write() as unit:
        for _, plan_id, _ in REGIONS:
            unit.catalog.ensure_plan(plan_id, updated_at=now)
        for start in range(0, customers, batch):
            rows = [
                {
                    "nmi": nmi_of(index),
                    "plan_id": REGIONS[index % len(REGIONS)][1],
                    "region": REGIONS[index % len(REGIONS)][0],
                    "updated_at": now,
                }
                for index in range(start, min(start + batch, customers))
            ]
            unit.connection.execute(sa.insert(tables.customers), rows)
