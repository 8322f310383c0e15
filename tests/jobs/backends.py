"""Backend selection for job tests that need PostgreSQL itself (SKIP LOCKED, LISTEN, processes)."""

from __future__ import annotations

import pytest

#: Run the test on PostgreSQL only: ``store`` and ``store_url`` then give a schema of its own in
#: the session's database (``tests/store/fixtures.py``).
postgres_only = pytest.mark.parametrize(
    "store_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
