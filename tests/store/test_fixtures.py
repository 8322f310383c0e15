"""The databases the fixtures hand out: a copy of the migrated template is what migrating gives."""

from __future__ import annotations

from freehours.store import schema
from freehours.store.engine import create_engine
from tests.store.fixtures import schema_differences


def test_a_copied_database_is_at_head_with_exactly_the_tables_schema(store_url: str) -> None:
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            assert schema.current_revision(conn) == schema.head_revision()
            assert schema_differences(conn) == []
    finally:
        engine.dispose()
