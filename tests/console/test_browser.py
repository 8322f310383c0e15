"""The console in a real browser: Debian's Chromium, driven through Playwright, against a real
``freehours serve`` process over a SQLite database made here (tests/console/browser.py).

Through the pages as an operator goes: signing in (a wrong key first), the overview, filtering
quotas and paging on, a quota's page and its chart, each action from its button through its
confirmation to its outcome and its audit entry, a read-only key refused, signing out.

Every page visited is looked at (``Looker.look``): a full-page PNG at a laptop's viewport
(1280x800), named ``<page>-laptop.png``, and the overview and a quota's page at a phone's
(390x844) too, ``<page>-phone.png``: in $FREEHOURS_SCREENSHOTS if set, with every page at the
phone's viewport too (``FREEHOURS_SCREENSHOTS=out/screens pytest tests/console/test_browser.py``
keeps them to look at), else in a pytest temporary directory; axe-core's WCAG 2 A/AA rules
at both viewports, each violation failing the test with its rule, impact and nodes; no page wider
than the phone's screen (a wide table scrolls in itself); and Tab from the top reaching the skip
link first, then every link, button and field, each with a visible focus style.

Without /usr/bin/chromium or the playwright package these tests are skipped with one line, and
fail under FREEHOURS_REQUIRE_SERVICES (``make ci``, whose .ci/run installs Chromium).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.browser import (
    LAPTOP,
    MISSING,
    Console,
    Looker,
    chromium,
    prepare,
)
from tests.console.browser import looker as console_looker
from tests.console.support import DAY, LEASE_EXPIRED, NMI
from tests.servers import api_server, freehours

if MISSING is None:
    from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Console:
    path = tmp_path_factory.mktemp("console") / "console.db"
    freehours("db", "upgrade", env={"FREEHOURS_DATABASE_URL": f"sqlite:///{path}"})
    return prepare(path)


@pytest.fixture(scope="module")
def url(console: Console) -> Iterator[str]:
    with api_server({"FREEHOURS_DATABASE_URL": console.database_url}) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def looker(tmp_path_factory: pytest.TempPathFactory) -> Looker:
    return console_looker(tmp_path_factory.mktemp("screenshots"))


@pytest.fixture
def page(browser: Browser, url: str) -> Iterator[Page]:
    context = browser.new_context(viewport=LAPTOP, base_url=url)  # type: ignore[arg-type]
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    # A script error or a refused load (the pages' CSP) is a failure too; a 4xx page the test
    # meant to reach is logged by Chromium as a failed resource, and is not one.
    assert [e for e in errors if "status of 4" not in e] == []


def sign_in(page: Page, secret: str, then: str = "/console/") -> None:
    page.goto(then)
    page.fill("#key", secret)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(f"**{then}")


def test_sign_in_announces_a_wrong_key_and_lets_an_admin_in(
    page: Page, console: Console, looker: Looker
) -> None:
    page.goto("/console/quotas?state=ABORTED")
    assert page.url.endswith("/console/sign-in?next=/console/quotas%3Fstate%3DABORTED")
    looker.look(page, "sign-in")
    page.reload()  # focus back at the top
    # By keyboard: Tab past the skip link to the key's field, type, Enter.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "key"
    page.keyboard.type("fh_not-a-key")
    page.keyboard.press("Enter")
    alert = page.get_by_role("alert")
    expect(alert).to_have_text("That key is unknown or revoked.")
    field = page.get_by_label("API key")
    assert field.get_attribute("aria-invalid") == "true"
    assert field.get_attribute("aria-describedby") == alert.get_attribute("id")
    looker.look(page, "sign-in-refused")
    field.fill(console.keys["admin"])
    field.press("Enter")
    page.wait_for_url("**/console/quotas?state=ABORTED")
    expect(page.locator("h1")).to_have_text("Quotas")
    assert page.locator("tbody tr").count() == 1
    expect(page.locator(".who")).to_contain_text("admin · admin")


def test_the_overview_filtering_and_a_quota_with_its_chart(
    page: Page, console: Console, looker: Looker
) -> None:
    sign_in(page, console.keys["admin"])
    # Opened without a day: the latest day with data, not an empty today.
    expect(page.locator("h1")).to_have_text(f"Overview of {DAY}")
    expect(page.get_by_text("The latest day with quotas.")).to_be_visible()
    looker.look(page, "overview-default")
    page.fill("#day", DAY.isoformat())
    page.click("button:has-text('Show')")
    page.wait_for_url(f"**/console/?day={DAY}")
    expect(page.locator("h1")).to_have_text(f"Overview of {DAY}")
    settled = page.locator(".tile", has_text="settlements completed").locator(".figure")
    expect(settled).to_have_text(str(len(console.settled_nmis)))
    expect(page.locator("section[aria-labelledby=by-region] svg[role=img]")).to_have_count(1)
    looker.look(page, "overview")

    page.get_by_role("navigation", name="Console").get_by_role("link", name="Quotas").click()
    expect(page.locator("h1")).to_have_text("Quotas")
    page.select_option("#state", "COMPLETED")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/console/quotas?state=COMPLETED*")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(50)
    looker.look(page, "quotas")
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(len(console.settled_nmis) - 50)
    expect(page.get_by_text("End of the list")).to_be_visible()
    looker.look(page, "quotas-next-page", keys=False)

    page.select_option("#region", "SA")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(20)
    assert set(rows.locator("td:nth-child(3)").all_inner_texts()) == {"SA"}
    nmi = console.settled_nmis[-1]
    page.fill("#nmi", nmi)
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    assert page.url.endswith(f"state=COMPLETED&day=&region=SA&nmi={nmi}")
    looker.look(page, "quotas-filtered", keys=False)

    page.get_by_role("link", name=nmi).click()
    expect(page.locator("h1")).to_have_text(f"Quota {nmi} {DAY}")
    chart = page.locator("section[aria-labelledby=reads] svg[role=img]")
    expect(chart).to_have_count(1)
    assert chart.locator("rect").count() > 40  # a bar per half hour with consumption
    expect(page.locator(".badge").first).to_have_text("COMPLETED")
    assert chart.locator("text", has_text="kWh").count() == 1
    # An SA customer: the window and the reads on Adelaide's clock, and the footer says so.
    expect(page.locator("main p").first).to_contain_text("free window 12:00\u201315:00 ACST")
    expect(page.locator("footer.foot")).to_contain_text("local time, ACST (Australia/Adelaide)")
    looker.look(page, "quota")


def test_a_completed_job_shows_its_earlier_failure_as_an_earlier_attempt(
    page: Page, console: Console, looker: Looker
) -> None:
    sign_in(page, console.keys["read"], "/console/jobs?state=COMPLETED")
    row = page.locator("tbody tr", has=page.get_by_role("link", name=str(console.recovered)))
    expect(row.locator(".badge")).to_have_text("COMPLETED")
    expect(row).to_contain_text(f"An earlier attempt failed: {LEASE_EXPIRED}")
    looker.look(page, "jobs-completed")
    row.get_by_role("link", name=str(console.recovered)).click()
    expect(page.locator("dl.facts")).to_contain_text(f"failed before it completed: {LEASE_EXPIRED}")
    expect(page.get_by_text("The job completed after 1 failed attempt")).to_be_visible()
    looker.look(page, "job-recovered")


def test_retry_a_discarded_job(page: Page, console: Console, looker: Looker) -> None:
    sign_in(page, console.keys["admin"], f"/console/?day={DAY}")
    page.locator(".tile", has_text="jobs discarded").get_by_role("link").click()
    page.get_by_role("link", name=str(console.discarded), exact=True).click()
    expect(page.locator("h1")).to_have_text(f"Job {console.discarded}")
    looker.look(page, "job-discarded")
    page.get_by_role("link", name="Retry as a new job").click()
    expect(page.locator("h1")).to_have_text(f"Retry job {console.discarded}")
    looker.look(page, "confirm-retry")
    page.get_by_role("button", name="Confirm").click()
    status = page.get_by_role("status").first
    expect(status).to_contain_text("retried as job")
    looker.look(page, "outcome-retry")
    _audit_entry_shows(page, looker, "retry", "job.retry", f"job:{console.discarded}")


def test_cancel_a_waiting_job(page: Page, console: Console, looker: Looker) -> None:
    sign_in(page, console.keys["admin"], f"/console/jobs/{console.waiting}")
    expect(page.locator(".badge").first).to_have_text("AVAILABLE")
    page.get_by_role("link", name="Cancel").click()
    looker.look(page, "confirm-cancel")
    # The confirmation's own Cancel leads back, doing nothing.
    page.get_by_role("link", name="Cancel").click()
    expect(page.locator("h1")).to_have_text(f"Job {console.waiting}")
    expect(page.locator(".badge").first).to_have_text("AVAILABLE")
    page.get_by_role("link", name="Cancel").click()
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status").first).to_contain_text(f"job {console.waiting} cancelled")
    looker.look(page, "outcome-cancel")
    _audit_entry_shows(page, looker, "cancel", "job.cancel", f"job:{console.waiting}")


def test_reopen_an_aborted_quota_with_a_reason(
    page: Page, console: Console, looker: Looker
) -> None:
    sign_in(page, console.keys["admin"], f"/console/quotas/{NMI}/{DAY}")
    expect(page.locator(".badge").first).to_have_text("ABORTED")
    looker.look(page, "quota-aborted")
    page.get_by_role("link", name="Reopen as version 2").click()
    reason = page.get_by_label("Reason")
    looker.look(page, "confirm-reopen")
    # No reason: the browser itself holds the form back.
    page.get_by_role("button", name="Confirm").click()
    assert reason.evaluate("(e) => e.validity.valueMissing") is True
    expect(page.locator("h1")).to_contain_text("Reopen")
    reason.fill("the meter data service is back")
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status").first).to_contain_text("reopened as version 2")
    looker.look(page, "outcome-reopen")
    entry = _audit_entry_shows(page, looker, "reopen", "quota.reopen", f"quota:{NMI}:{DAY}")
    expect(entry).to_contain_text("the meter data service is back")


def test_revoke_a_key(page: Page, browser: Browser, console: Console, looker: Looker) -> None:
    sign_in(page, console.keys["admin"], "/console/keys")
    looker.look(page, "keys")
    page.get_by_role("link", name=f"Revoke key {console.spare_key_id}").click()
    looker.look(page, "confirm-revoke")
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status").first).to_contain_text("revoked")
    looker.look(page, "outcome-revoke")
    _audit_entry_shows(page, looker, "revoke", "key.revoke", f"key:{console.spare_key_id}")
    other = browser.new_context(base_url=page.context.pages[0].url.split("/console")[0])
    try:
        theirs = other.new_page()
        theirs.goto("/console/sign-in")
        theirs.fill("#key", console.keys["spare"])
        theirs.click("button:has-text('Sign in')")
        expect(theirs.get_by_role("alert")).to_have_text("That key is unknown or revoked.")
    finally:
        other.close()


def test_a_read_only_key_may_look_but_is_refused_an_action(
    page: Page, console: Console, looker: Looker
) -> None:
    job = f"/console/jobs/{console.untouchable}"
    sign_in(page, console.keys["read"], job)
    expect(page.locator(".who")).to_contain_text("read · read-only")
    page.get_by_role("link", name="Cancel").click()
    expect(page.get_by_role("alert")).to_contain_text("This key may only look")
    looker.look(page, "confirm-read-only")
    page.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("alert")).to_contain_text("acting needs an admin key")
    looker.look(page, "refused-read-only")
    page.goto(job)
    expect(page.locator(".badge").first).to_have_text("AVAILABLE")
    actions = page.locator("section[aria-labelledby=actions]")
    expect(actions).to_contain_text("No actions recorded.")
    page.goto(f"/console/audit?target=job:{console.untouchable}")
    expect(page.locator("tbody")).to_have_text("No actions recorded.")


def test_every_page_of_the_console_and_signing_out(
    page: Page, console: Console, looker: Looker
) -> None:
    sign_in(page, console.keys["read"])
    nav = page.get_by_role("navigation", name="Console")
    names = nav.get_by_role("link").all_inner_texts()
    assert len(names) >= 6
    for name in names:
        nav.get_by_role("link", name=name, exact=True).click()
        link = nav.get_by_role("link", name=name, exact=True)
        expect(link).to_have_attribute("aria-current", "page")
        looker.look(page, f"nav-{name.lower().replace(' ', '-')}")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/console/sign-in*")
    page.goto("/console/")
    assert "/console/sign-in" in page.url


def _audit_entry_shows(page: Page, looker: Looker, name: str, action: str, target: str) -> Any:
    """From an outcome page, its audit entry: the row of ``action`` on ``target``, done."""
    page.get_by_role("link", name="audit entry").click()
    expect(page.locator("h1")).to_have_text("Audit log")
    assert page.get_by_label("Target").input_value() == target
    row = page.locator("tbody tr", has_text=action)
    expect(row).to_have_count(1)
    expect(row).to_contain_text("done")
    expect(row).to_contain_text(target)
    looker.look(page, f"audit-{name}")
    return row
