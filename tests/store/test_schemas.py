"""The PostgreSQL schemas the tests run in (``tests/store/schemas.py``): one used again is as the
migrations left it, and one a test changed, or filled, is never handed out again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.store.schemas import REUSE_ROWS_AT_MOST, PostgresSchemas

pytestmark = pytest.mark.postgres

AUDIT_ROWS = (
    "INSERT INTO audit_log (at, key_id, key_name, action, target, outcome)"
    " SELECT now(), 'k', 'k', 'a', 't', 'done' FROM generate_series(1, {rows})"
)


@pytest.fixture(scope="module")
def schemas(postgres_url: str) -> Iterator[PostgresSchemas]:
    with PostgresSchemas(postgres_url) as made:
        yield made


@pytest.fixture(autouse=True)
def _quiet(schemas: PostgresSchemas) -> None:
    """Each test counts from a clerk with nothing left to do by an earlier one."""
    schemas.quiet()


def name_of(url: str) -> str:
    return str(sa.make_url(url).query["options"]).removeprefix("-csearch_path=")


def existing(schemas: PostgresSchemas) -> set[str]:
    engine = sa.create_engine(schemas.postgres_url)
    try:
        with engine.connect() as conn:
            return set(conn.scalars(sa.text("SELECT nspname FROM pg_namespace")))
    finally:
        engine.dispose()


def run(schemas: PostgresSchemas, *statements: str) -> str:
    """A test's schema with ``statements`` run in it, handed back: its name, once the clerk
    has dealt with it."""
    with schemas.migrated() as url:
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                for statement in statements:
                    conn.exec_driver_sql(statement)
        finally:
            engine.dispose()
    schemas.quiet()
    return name_of(url)


def test_a_schema_used_again_holds_only_what_the_migrations_wrote(
    schemas: PostgresSchemas,
) -> None:
    before = schemas.reused
    used = run(
        schemas,
        "UPDATE document_counters SET next_number = 42",
        "INSERT INTO plans VALUES ('p', '{}', now())",
        AUDIT_ROWS.format(rows=2),
    )
    assert schemas.reused == before + 1
    # Every schema ready is taken until the used one comes round again.
    for _ in range(3):
        with schemas.migrated() as url:
            engine = sa.create_engine(url)
            try:
                with engine.connect() as conn:
                    counters = dict(conn.execute(sa.text("SELECT * FROM document_counters")).all())
                    rows = [
                        conn.scalar(sa.text(f"SELECT count(*) FROM {table}"))
                        for table in ("plans", "audit_log")
                    ]
                    first_id = conn.scalar(sa.text("SELECT nextval('audit_log_id_seq')"))
            finally:
                engine.dispose()
        if name_of(url) == used:
            break
    else:
        pytest.fail(f"{used} was not handed out again")
    assert counters == {"invoice": 1, "credit_note": 1}
    assert rows == [0, 0]
    assert first_id == 1


@pytest.mark.parametrize(
    "change",
    [
        "CREATE INDEX test_extra ON customers (updated_at)",
        "ALTER TABLE documents DISABLE TRIGGER USER",
        "ALTER TABLE customers ALTER COLUMN region SET DEFAULT 'NSW'",
        "ALTER TABLE quotas DETACH PARTITION quotas_default",
        "DROP TABLE offers CASCADE",
        "CREATE FUNCTION test_extra() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "UPDATE alembic_version SET version_num = '0001'",
    ],
)
def test_a_schema_a_test_changed_is_dropped(schemas: PostgresSchemas, change: str) -> None:
    before = schemas.reused
    changed = run(schemas, change)
    assert schemas.reused == before
    assert changed not in existing(schemas)


def test_a_schema_with_many_rows_is_dropped(schemas: PostgresSchemas) -> None:
    before = schemas.reused
    filled = run(schemas, AUDIT_ROWS.format(rows=REUSE_ROWS_AT_MOST + 1))
    assert schemas.reused == before
    assert filled not in existing(schemas)
