"""Run every benchmark in order, or the ones named: ``python -m benchmarks [NAME ...]``.

``python -m benchmarks day --customers N [N ...]`` runs the day at scale alone, with its options
(``benchmarks.bench_day``).
"""

from __future__ import annotations

import importlib
import sys

# Each module has ``run() -> None`` that prints its figures and ratios.
BENCHMARKS = [
    "startup",
    "nem12",
    "ingest",
    "bill",
    "compare",
    "documents",
    "api",
    "processes",
    "jobs",
    "invoicing",
    "better_offer",
    "customers",
    "bulkheads",
    "hostile",
    "webhooks",
    "mail",
    "household",
    "faults",
    "day",
    "history",
    # Last: a page over its goal fails the run (SystemExit) after every other figure is out.
    "console",
]


def main(argv: list[str]) -> None:
    if argv[:1] == ["day"]:
        from benchmarks import bench_day  # noqa: PLC0415 - the others are imported by name

        bench_day.main(argv[1:])
        return
    names = argv or BENCHMARKS
    for name in names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        module.run()


if __name__ == "__main__":
    main(sys.argv[1:])
