"""The engine factory: URLs it takes, and SQLite set up for one writer and many readers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from freehours.errors import ConfigurationError
from freehours.store.database import Store
from freehours.store.engine import create_engine
from freehours.store.postgresql import POSTGRESQL
from freehours.store.sqlite import SQLITE_BUSY_TIMEOUT_MS
from freehours.store.timeouts import Timeouts


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@db/freehours", "postgres://u@db/freehours", "postgresql+psycopg://u@db/f"],
)
def test_postgresql_urls_use_psycopg_3(url: str) -> None:
    engine = create_engine(url)

    assert engine.dialect.name == "postgresql"
    assert engine.dialect.driver == "psycopg"


@pytest.mark.parametrize(
    "url", ["mysql://u@db/freehours", "not a url", "sqlite://", "sqlite:///:memory:"]
)
def test_a_url_freehours_cannot_use_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError, match="database URL"):
        create_engine(url)


def test_sqlite_runs_in_wal_with_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'f.db'}")
    with engine.connect() as conn:
        pragmas = [
            conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout")
        ]
    engine.dispose()

    assert pragmas == ["wal", 1, SQLITE_BUSY_TIMEOUT_MS]


def test_a_sqlite_write_transaction_holds_the_write_lock_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    with Store.open(f"sqlite:///{path}") as store, store.write():
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            other.execute("BEGIN IMMEDIATE")
        # Readers are not held up by the writer (WAL).
        assert other.execute("SELECT count(*) FROM meter_days").fetchone() == (0,)
        other.close()


def test_a_sqlite_read_transaction_takes_no_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    with Store.open(f"sqlite:///{path}") as store, store.read() as unit:
        unit.connection.execute(sa.text("SELECT count(*) FROM plans"))
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        assert other.in_transaction
        other.execute("ROLLBACK")
        other.close()


@pytest.mark.postgres
def test_postgresql_statements_have_a_timeout_that_bulk_ingest_lifts_for_its_transaction(
    postgres_url: str,
) -> None:
    url = sa.make_url(postgres_url).update_query_dict({"options": "-csearch_path=public"})
    engine = create_engine(url.render_as_string(hide_password=False), Timeouts(statement=0.2))
    try:
        with engine.connect() as conn:
            # The URL's own libpq options are kept beside the timeout.
            assert conn.exec_driver_sql("SHOW search_path").scalar() == "public"
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "200ms"
        with (
            pytest.raises(sa.exc.OperationalError, match="statement timeout"),
            engine.begin() as conn,
        ):
            conn.exec_driver_sql("SELECT pg_sleep(0.5)")
        with engine.begin() as conn, POSTGRESQL.without_statement_timeout(conn):
            conn.exec_driver_sql("SELECT pg_sleep(0.5)")  # not cancelled
        with engine.connect() as conn:  # the next transaction has its timeout back
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "200ms"
            assert conn.connection.driver_connection.answer_timeout == 1.2  # type: ignore[union-attr]
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_quiet_listen_is_an_answer_not_a_dead_database(postgres_url: str) -> None:
    """``notifies(timeout=...)`` with nothing to hear ends quietly and the connection lives on:
    the answer timeout is for statements, not for a caller's own wait (the job workers LISTEN
    this way)."""
    engine = create_engine(postgres_url, Timeouts(statement=0.2))
    try:
        pooled = engine.raw_connection()
        connection = pooled.driver_connection
        assert connection is not None
        connection.rollback()
        connection.autocommit = True
        connection.execute("LISTEN freehours_quiet")
        for _ in range(3):  # three waits, each past the answer timeout (1.2 s) together
            assert list(connection.notifies(timeout=0.5, stop_after=1)) == []
        assert not connection.closed
        connection.execute("NOTIFY freehours_quiet, 'hello'")
        (heard,) = connection.notifies(timeout=5, stop_after=1)
        assert heard.payload == "hello"
        pooled.close()
    finally:
        engine.dispose()
