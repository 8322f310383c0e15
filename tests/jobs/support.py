"""What the job tests share: PostgreSQL-only selection."""

from __future__ import annotations

import pytest

#: Run the test on PostgreSQL only: ``store`` and ``store_url`` then give a migrated schema of its
#: own in the session's database (``tests/store/fixtures.py``).
postgres_only = pytest.mark.parametrize(
    "store_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
