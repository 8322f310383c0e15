"""What the command tests share: a database with customers whose July is settled."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from freehours.settings import get_settings
from freehours.store.database import Store
from tests.invoicing.support import System


@pytest.fixture
def system(store: Store, store_url: str, clean_env: pytest.MonkeyPatch) -> Iterator[System]:
    """Two customers with July settled, and the commands pointed at their database."""
    clean_env.setenv("FREEHOURS_DATABASE_URL", store_url)
    get_settings.cache_clear()
    built = System.on(store)
    built.month(built.customers(2))
    yield built
    get_settings.cache_clear()


@pytest.fixture
def database(store: Store, database_url: str) -> Store:
    """The store, the commands pointed at it."""
    return store
