"""What the console's browser tests share: the data they look at (made through the system's own
parts), Debian's Chromium launched through Playwright, and the checks made on every page (a
screenshot at each viewport, axe-core's WCAG 2 A/AA rules, keyboard use)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from freehours.api.keys import Scope, create_key
from freehours.clock import ManualClock
from freehours.domain.reads import IntervalDay
from freehours.domain.time import Region
from freehours.jobs.decisions import Complete, Finish
from freehours.jobs.job import Done, JobId
from freehours.operations.runtime import Runtime
from freehours.settings import Settings
from freehours.workers.settle import KIND as SETTLE_KIND
from freehours.workers.settle import settlement_tasks
from tests.conftest import _unavailable
from tests.console.support import (
    DAY,
    LEASE,
    aborted_quota,
    discarded_job,
    recovered_job,
    waiting_job,
)

try:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import Browser, Page, Playwright
except ImportError as missing:  # the browser fixture says so, skipping (or failing in CI)
    MISSING: str | None = f"{missing.name} is not installed (pip install -e '.[dev]')"
else:
    MISSING = None

CHROMIUM = Path("/usr/bin/chromium")
#: Headless, and none of the connections Chromium makes by itself (updates, sync, safe browsing):
#: on a closed network they are refused, and waiting on them slows every page.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
#: The pages always shot at the phone's viewport as well as the laptop's.
PHONE_SHOTS = frozenset({"overview", "quota"})
#: axe-core's rules for WCAG 2.0 and 2.1, levels A and AA.
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

#: The customers whose quotas of ``DAY`` settle (and so have reads and a chart): the plan of each
#: region, and how many customers on it. More than a page of the quotas list (50) in all.
PLANS = {Region.NSW: "sso-nsw", Region.SEQ: "sso-seq", Region.SA: "sso-sa"}
PER_REGION = 20
#: After every region's free window of ``DAY`` and its grace: 2026-07-01 18:00 AEST, the first
#: settlement; then one every ``SETTLE_EVERY``, so that the overview's rate chart has a shape.
SETTLED_AT = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
SETTLE_EVERY = timedelta(minutes=3)


@dataclass
class Console:
    """The data a console's browser tests find: the database, a secret for each key, and what
    each action acts on."""

    database_url: str
    keys: dict[str, str]
    discarded: JobId
    waiting: JobId
    #: A waiting job the read-only key tries (and fails) to cancel.
    untouchable: JobId
    spare_key_id: str
    settled_nmis: list[str] = field(default_factory=list)
    #: A COMPLETED job whose first attempt failed.
    recovered: JobId | None = None


def settled_nmi(region: Region, n: int) -> str:
    return f"{4200 + list(PLANS).index(region)}{n:06d}"


def consumption(nmi: str, day: date, n: int, stamp: datetime) -> IntervalDay:
    """A day of half-hourly consumption with a morning and an evening peak, scaled by ``n``."""
    shape = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 4, 3, 2, 2, 2, 2, 2, 3, 4, 4]
    shape += [3, 3, 2, 2, 2, 2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 4, 3, 3, 2, 2, 2, 1, 1, 1]
    scale = Decimal(10 + n % 7) / Decimal(100)
    values = tuple(Decimal(step) * scale for step in shape)
    return IntervalDay(nmi, "E1", day, 30, values, "A" * 48, stamp)


def prepare(path: Path) -> Console:
    """A migrated SQLite database at ``path`` with what the tests look at: settled quotas of
    ``DAY`` in three regions with their reads, an ABORTED quota, a DISCARDED job, a waiting job,
    and keys (admin, read, a spare admin key to revoke)."""
    url = f"sqlite:///{path}"
    clock = ManualClock(SETTLED_AT)
    runtime = Runtime.open(Settings(database_url=url), clock)
    try:
        keys: dict[str, str] = {}
        with runtime.store.write() as unit:
            _, keys["admin"] = create_key(unit.keys, frozenset({Scope.ADMIN}), "admin", SETTLED_AT)
            _, keys["read"] = create_key(unit.keys, frozenset({Scope.READ}), "read", SETTLED_AT)
            spare, keys["spare"] = create_key(
                unit.keys, frozenset({Scope.ADMIN}), "spare", SETTLED_AT
            )
        # First: ``discarded_job`` claims the first settlement job there is.
        aborted_quota(runtime)
        discarded = discarded_job(runtime)
        nmis = []
        for region, plan_id in PLANS.items():
            for n in range(PER_REGION):
                nmi = settled_nmi(region, n)
                runtime.put_customer(nmi, plan_id=plan_id, region=region, cycle={})
                nmis.append(nmi)
        runtime.ingestion.file(
            consumption(nmi, DAY, n, SETTLED_AT - timedelta(hours=2)) for n, nmi in enumerate(nmis)
        )
        settled = _run_settlement_jobs(runtime, clock)
        assert settled == len(nmis), f"{settled} settlement jobs ran, for {len(nmis)} quotas"
        # Last, so that the jobs above do not run them.
        recovered = recovered_job(runtime)
        waiting = waiting_job(runtime)
        untouchable = waiting_job(runtime, "4100000003:2026-07-02")
        return Console(url, keys, discarded, waiting, untouchable, spare.id, nmis, recovered)
    finally:
        runtime.close()


def _run_settlement_jobs(runtime: Runtime, clock: ManualClock) -> int:
    """Run the settlement jobs due, one every ``SETTLE_EVERY``, as a worker does (its task,
    then the job finished with what the task said); how many ran."""
    task = settlement_tasks(runtime.settlements)[SETTLE_KIND]
    ran = 0
    while True:
        with runtime.store.write() as unit:
            claimed = unit.jobs.claim(
                "console-tests", [SETTLE_KIND], 1, now=clock.now(), lease=LEASE
            )
        if not claimed:
            return ran
        (job,) = claimed
        done = task(job)
        assert isinstance(done, Done), f"job {job.id} ({job.key}): {done}"
        with runtime.store.write() as unit:
            unit.jobs.finish([Finish(job, Complete(done.outcome))], now=clock.now())
        ran += 1
        clock.advance(SETTLE_EVERY.total_seconds())


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium through Playwright; without either, the test skipped with one line
    (failed under FREEHOURS_REQUIRE_SERVICES, as in ``make ci``)."""
    if MISSING is not None:
        _unavailable("Playwright", MISSING)
    if not CHROMIUM.exists():
        _unavailable("Chromium", f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - present: checked above

    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


def launch(playwright: Playwright) -> Browser:
    browser: Browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )
    return browser


def looker(tmp_path: Path) -> Looker:
    """Screenshots into FREEHOURS_SCREENSHOTS if set (made if need be; every page at both
    viewports), else into ``tmp_path``."""
    chosen = os.environ.get("FREEHOURS_SCREENSHOTS")
    where = Path(chosen) if chosen else tmp_path
    where.mkdir(parents=True, exist_ok=True)
    return Looker(where, every_phone=bool(chosen))


def violations(page: Page) -> list[str]:
    """axe-core's WCAG 2 A/AA violations on ``page`` as it is: one line each, its rule, impact
    and the nodes it found."""
    results = Axe().run(
        page, options={"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]}
    )
    lines = []
    for violation in results.response["violations"]:
        targets = [" ".join(map(str, node["target"])) for node in violation["nodes"]]
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {targets}")
    return lines


#: What is reached with Tab: links, buttons and fields, each shown (not in a closed <details>).
_FOCUSABLE = (
    "a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]),"
    " select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex='-1'])"
)
_MARK = f"""() => {{
  const found = [...document.querySelectorAll("{_FOCUSABLE}")]
    .filter((e) => e.checkVisibility());
  found.forEach((e, i) => {{ e.dataset.kb = String(i); }});
  return found.map((e) => e.outerHTML.slice(0, 120));
}}"""
_FOCUSED = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) { return null; }
  const style = getComputedStyle(e);
  const outline = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2;
  return { kb: e.dataset.kb ?? null, html: e.outerHTML.slice(0, 120),
           visible: outline || style.boxShadow !== "none" };
}"""

#: Resolves once the page has drawn twice: what a resize set off (console.js) has run.
_SETTLED = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


def keyboard(page: Page) -> None:
    """Tab through ``page`` from the top, as it was just loaded: the skip link comes first, every
    link, button and field is reached, each with a visible focus style; the skip link followed
    with Enter puts focus in <main>, and the next Tab stays there."""
    page.evaluate("() => window.scrollTo(0, 0)")
    focusable = page.evaluate(_MARK)
    reached: list[str] = []
    unstyled = []
    for _ in range(len(focusable) + 12):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED)
        if focused is not None and reached and focused["kb"] == reached[-1]:
            continue  # the next part of the same field (a date's day, month and year)
        if focused is None or focused["kb"] in reached:
            break  # off the page's end, or round to its start again
        reached.append(focused["kb"])
        if not focused["visible"]:
            unstyled.append(focused["html"])
    assert reached, f"{page.url}: Tab focuses nothing"
    assert reached[0] == "0", f"{page.url}: Tab first focuses {focusable[int(reached[0])]}"
    assert "skip" in focusable[0], f"{page.url}: the first focusable is {focusable[0]}"
    missed = [html for n, html in enumerate(focusable) if str(n) not in reached]
    assert not missed, f"{page.url}: never reached with Tab: {missed}"
    assert not unstyled, f"{page.url}: focused without a visible focus style: {unstyled}"
    page.focus("a.skip")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main", f"{page.url}: skip link"
    if page.evaluate(f"() => document.querySelector('main').querySelector(`{_FOCUSABLE}`)"):
        page.keyboard.press("Tab")
        inside = "() => document.getElementById('main').contains(document.activeElement)"
        assert page.evaluate(inside), f"{page.url}: Tab after the skip link leaves <main>"


@dataclass
class Looker:
    """Looks at each page a test visits: a screenshot at the laptop viewport (and the phone's),
    axe-core at both, and (unless told not to) the keyboard check."""

    shots: Path
    #: Every page at the phone's viewport too, not only those in ``PHONE_SHOTS``: when someone
    #: asked for the screenshots (FREEHOURS_SCREENSHOTS) to look at them.
    every_phone: bool = False
    seen: list[str] = field(default_factory=list)

    def look(self, page: Page, name: str, *, keys: bool = True) -> None:
        page.wait_for_load_state("load")
        problems = []
        for viewport, suffix in ((LAPTOP, "laptop"), (PHONE, "phone")):
            page.set_viewport_size(viewport)  # type: ignore[arg-type]
            page.evaluate(_SETTLED)
            if viewport is LAPTOP or self.every_phone or name in PHONE_SHOTS:
                page.screenshot(path=self.shots / f"{name}-{suffix}.png", full_page=True)
            problems += [f"{suffix}: {line}" for line in violations(page)]
            if viewport is PHONE:
                wide = page.evaluate("() => document.documentElement.scrollWidth")
                if wide > PHONE["width"]:
                    problems.append(f"phone: the page is {wide} px wide, wider than the screen")
        page.set_viewport_size(LAPTOP)  # type: ignore[arg-type]
        page.evaluate(_SETTLED)
        self.seen.append(name)
        assert not problems, f"{name} ({page.url}):\n" + "\n".join(problems)
        if keys:  # last: it moves the focus, which the screenshots are better without
            keyboard(page), f"{name} ({page.url}):\n" + "\n".join(problems)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
