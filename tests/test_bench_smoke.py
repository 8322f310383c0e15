"""Every section of ``make bench`` runs to its end, small (``FREEHOURS_BENCH_SMOKE=1``,
``benchmarks.scale``): a section that breaks (a seed the schema now refuses, a command that
changed) fails the suite here, not the next ``make bench``.

Each section in a process of its own, as ``make bench`` runs it, in a scratch directory (its
``bench-out`` files), against the tests' PostgreSQL and Redis. What it measures is not checked:
at these sizes the figures mean nothing, and a missed goal does not fail a smoke run; its own
checks of what it did (every answer a 200, every invoice once, the readers agreeing) do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[1]
#: The longest a small section may take here (the hostile one builds its bombs at full size).
TIMEOUT = 600


@pytest.mark.parametrize("section", BENCHMARKS)
def test_the_bench_section_runs_small(
    section: str, postgres_admin_url: str, redis_url: str, tmp_path: Path
) -> None:
    # Sizes given to this shell (FREEHOURS_BENCH_*_ACCOUNTS, say) are not the smoke run's.
    env = {name: value for name, value in os.environ.items() if "FREEHOURS_BENCH_" not in name}
    env |= {
        "FREEHOURS_BENCH_SMOKE": "1",
        "FREEHOURS_BENCH_DATABASE_URL": postgres_admin_url,
        "FREEHOURS_BENCH_REDIS_URL": redis_url,
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", section],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    shown = f"make bench {section}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert done.returncode == 0, shown
    assert done.stdout.strip(), f"make bench {section} printed no figure"
