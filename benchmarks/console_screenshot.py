"""docs/console-overview.png, the console's overview as docs/console.md shows it: the data the
browser tests look at (tests/console/browser.py ``prepare``: 60 customers in three regions whose
quotas of 1 July 2026 settled through their jobs over an evening, an ABORTED quota, a DISCARDED
job, two jobs waiting), ``freehours serve`` over it, and Debian's Chromium signed in with its
admin key, the overview of that day at a laptop's width (1280 px, the whole page).

    .venv/bin/python -m benchmarks.console_screenshot [PATH]

A few seconds. PATH is docs/console-overview.png unless given. (``freehours demo``'s own data
settles its days at the time it runs, so its overview of a day shows few of its figures.)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.console.browser import LAPTOP, launch, prepare
from tests.console.support import DAY
from tests.servers import api_server, freehours

DEFAULT = Path(__file__).resolve().parents[1] / "docs" / "console-overview.png"
#: What docs/console.md can carry.
MOST_BYTES = 250_000


def run(path: Path = DEFAULT) -> None:
    with tempfile.TemporaryDirectory(prefix="freehours-shot-") as scratch:
        database = Path(scratch) / "console.db"
        env = {"FREEHOURS_DATABASE_URL": f"sqlite:///{database}"}
        freehours("db", "upgrade", env=env)
        console = prepare(database)
        with api_server(env) as url, sync_playwright() as playwright:
            browser = launch(playwright)
            page = browser.new_page(viewport=LAPTOP, base_url=url)  # type: ignore[arg-type]
            page.goto(f"/console/?day={DAY}")
            page.fill("#key", console.keys["admin"])
            page.click("button:has-text('Sign in')")
            page.wait_for_url(f"**/console/?day={DAY}")
            page.screenshot(path=path, full_page=True)
            browser.close()
    size = path.stat().st_size
    print(f"{path}: the overview of {DAY}, {size:,} bytes")
    if size > MOST_BYTES:
        raise SystemExit(f"{path} is {size:,} bytes, over {MOST_BYTES:,}")


if __name__ == "__main__":
    run(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
