"""``freehours serve`` refuses a database whose schema is behind, naming ``freehours db upgrade``;
after the upgrade it starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from freehours.store import schema
from freehours.store.engine import create_engine
from tests.servers import FREEHOURS, api_server, free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("processes", ["1", "2"])
def test_serve_refuses_an_out_of_date_database_until_db_upgrade(
    tmp_path: Path, processes: str
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        config = schema._config(conn)
        command.upgrade(config, "0001")  # a database a previous release left
    engine.dispose()
    env = {**os.environ, "FREEHOURS_DATABASE_URL": url}
    refused = subprocess.run(
        [FREEHOURS, "serve", "--port", str(free_port()), "--processes", processes],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    # One line, from serve itself: with --processes, before any API process starts.
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert "run `freehours db upgrade`" in line
    upgraded = subprocess.run(
        [FREEHOURS, "db", "upgrade"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert upgraded.returncode == 0, upgraded.stderr
    with api_server({"FREEHOURS_DATABASE_URL": url}, extra_args=["--processes", processes]) as base:
        assert base.startswith("http://127.0.0.1:")
    check = sa.create_engine(url)
    with check.connect() as conn:
        assert schema.current_revision(conn) == schema.head_revision()
    check.dispose()
