"""What the job tests share: PostgreSQL-only selection, and polling with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

#: Run the test on PostgreSQL only: ``store`` and ``store_url`` then give a migrated schema of its
#: own in the session's database (``tests/store/fixtures.py``).
postgres_only = pytest.mark.parametrize(
    "store_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)

#: Between two looks at something another thread or process is doing.
POLL_SECONDS = 0.02


def eventually(look: Callable[[], T | None], *, within: float = 20.0, what: str = "it") -> T:
    """Look until ``look`` answers something truthy, and return it; fail after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        seen = look()
        if seen:
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {within:g} s (last seen: {seen!r})")
        time.sleep(POLL_SECONDS)
