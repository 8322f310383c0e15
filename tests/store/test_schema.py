"""Migrations: they build the schema ``tables.py`` describes, and an old database is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.config import Config
from alembic.script import ScriptDirectory

from freehours.errors import ConfigurationError
from freehours.store import schema
from freehours.store.database import Store
from freehours.store.engine import create_engine
from tests.store.fixtures import schema_differences

NEXT_REVISION = '''
"""A later release's migration."""

import sqlalchemy as sa
from alembic import op

revision = "0099"
down_revision = "{head}"


def upgrade() -> None:
    op.create_table("later_release", sa.Column("id", sa.Integer, primary_key=True))


def downgrade() -> None:
    op.drop_table("later_release")
'''


@pytest.fixture
def engine(empty_store_url: str) -> Iterator[sa.Engine]:
    engine = create_engine(empty_store_url)
    yield engine
    engine.dispose()


@pytest.fixture
def later_migrations(tmp_path: Path) -> Path:
    """The migrations as a later freehours ships them: one revision past this one's head."""
    migrations = tmp_path / "later-migrations"
    shutil.copytree(schema.MIGRATIONS, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    revision = NEXT_REVISION.format(head=schema.head_revision())
    (migrations / "versions" / "0099_later.py").write_text(revision)
    return migrations


def test_each_migration_is_named_after_its_revision_in_one_line() -> None:
    """What lets opening a database skip Alembic: the head is the newest file's name."""
    config = Config()
    config.set_main_option("script_location", str(schema.MIGRATIONS))
    script = ScriptDirectory.from_config(config)
    revisions = list(reversed(list(script.walk_revisions())))  # oldest first
    assert [Path(r.path).name.split("_", 1)[0] for r in revisions] == [
        r.revision for r in revisions
    ]
    assert [r.down_revision for r in revisions] == [None] + [r.revision for r in revisions[:-1]]
    assert schema.head_revision() == script.get_current_head() == revisions[-1].revision


def test_opening_a_current_database_imports_no_alembic(tmp_path: Path) -> None:
    """Start-up is part of speed: a command on a current database reads its revision in SQL."""
    url = f"sqlite:///{tmp_path / 'current.db'}"
    with Store.open(url):
        pass  # migrated here, in this process (Alembic imported)
    code = (
        "import sys\n"
        "from freehours.store.database import Store\n"
        f"with Store.open({url!r}): pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


def test_migrations_build_exactly_the_tables_schema(engine: sa.Engine) -> None:
    schema.upgrade(engine)
    with engine.connect() as conn:
        assert schema_differences(conn) == []


def test_opening_a_new_database_migrates_it_to_head(empty_store_url: str) -> None:
    with Store.open(empty_store_url) as store, store.read() as unit:
        assert schema.current_revision(unit.connection) == schema.head_revision()
        assert set(sa.inspect(unit.connection).get_table_names()) >= {
            "meter_days",
            "plans",
            "customers",
        }


def test_upgrading_a_current_database_changes_nothing(engine: sa.Engine) -> None:
    assert schema.upgrade(engine) == schema.head_revision()
    assert schema.upgrade(engine) == schema.head_revision()


def test_require_current_on_an_empty_database_names_db_upgrade(engine: sa.Engine) -> None:
    with pytest.raises(ConfigurationError, match="no freehours schema: run `freehours db upgrade`"):
        schema.require_current(engine)


def test_an_out_of_date_database_is_refused_until_upgraded(
    empty_store_url: str, engine: sa.Engine, later_migrations: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = schema.upgrade(engine)
    monkeypatch.setattr(schema, "MIGRATIONS", later_migrations)

    with pytest.raises(
        ConfigurationError,
        match=rf"revision {current}, this freehours needs 0099: run `freehours db upgrade`",
    ):
        Store.open(empty_store_url)
    assert schema.upgrade(engine) == "0099"
    with Store.open(empty_store_url) as store, store.read() as unit:
        assert schema.current_revision(unit.connection) == "0099"


def test_a_database_migrated_by_a_later_release_is_refused(
    empty_store_url: str, engine: sa.Engine, later_migrations: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "MIGRATIONS", later_migrations)
    schema.upgrade(engine)
    monkeypatch.undo()

    with pytest.raises(ConfigurationError, match="0099, which this freehours does not know"):
        Store.open(empty_store_url)
    with pytest.raises(ConfigurationError, match="does not know"):
        schema.upgrade(engine)


def test_a_database_that_cannot_be_reached_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-directory" / "freehours.db"

    with pytest.raises(ConfigurationError, match=r"database at sqlite:///.*unable to open"):
        Store.open(f"sqlite:///{missing}")
