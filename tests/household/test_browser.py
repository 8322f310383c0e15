"""A customer's own page in a real browser: Debian's Chromium through Playwright, against a real
``freehours serve`` process over a SQLite database made here, as a household goes: the link from
their email opened (on a phone and a laptop), read by keyboard, a bill read and its PDF
downloaded; an expired link, and another customer's bill through their link.

Each page is looked at as the console's are (``tests/console/browser.py``): a screenshot at both
viewports (``<name>-phone.png``, ``<name>-laptop.png``, in $FREEHOURS_SCREENSHOTS when set),
axe-core's WCAG 2.1 A/AA rules at both, no page wider than the phone, and Tab from the top
reaching the skip link first, then every link, each with a visible focus style.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from freehours.domain.page_links import sign
from freehours.store.database import Store
from tests.console.browser import MISSING, PHONE, Looker, chromium
from tests.console.browser import looker as make_looker
from tests.household.support import SECRET
from tests.mail.test_delivery import invoiced
from tests.servers import api_server, freehours

if MISSING is None:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow


@dataclass
class Made:
    url: str
    database: str
    jane: str
    pat: str
    numbers: dict[str, str]

    def token(self, nmi: str, *, days: int = 30) -> str:
        """A link's token to ``nmi``'s page, as an email carries it (on the real clock, the
        server's)."""
        with Store.open(self.database) as store, store.write() as unit:
            page_id = unit.pages.page_for(nmi, at=datetime.now(UTC))
        return sign(page_id, int(time.time()) + days * 86_400, SECRET.encode())


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    path = tmp_path_factory.mktemp("household") / "freehours.db"
    database = f"sqlite:///{path}"
    freehours("db", "upgrade", env={"FREEHOURS_DATABASE_URL": database})
    with Store.open(database) as store:
        system, jane, pat = invoiced(store)
        numbers = {d.nmi: d.number for d in system.documents()}
    env = {"FREEHOURS_DATABASE_URL": database, "FREEHOURS_PAGE_SECRET": SECRET}
    with api_server(env) as url:
        yield Made(url, database, jane, pat, numbers)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def looker(tmp_path_factory: pytest.TempPathFactory) -> Looker:
    seen = make_looker(tmp_path_factory.mktemp("screenshots"))
    seen.every_phone = True  # a household's page is read on a phone first
    return seen


@pytest.fixture
def phone(browser: Browser, made: Made) -> Iterator[Page]:
    context = browser.new_context(
        viewport=PHONE,  # type: ignore[arg-type]
        base_url=made.url,
        accept_downloads=True,
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert [e for e in errors if "status of 4" not in e] == []


def test_a_household_opens_its_link_reads_its_days_and_its_bill_and_downloads_the_pdf(
    phone: Page, made: Made, looker: Looker
) -> None:
    link = f"/my/{made.token(made.jane)}"
    phone.goto(link)
    assert phone.title().startswith("Your free energy")
    assert phone.locator("h1").inner_text() == "Your free energy"
    assert phone.locator("table").first.locator("tbody tr").count() == 31
    looker.look(phone, "household-page")
    # Read the bill, then download its PDF, as the links say.
    number = made.numbers[made.jane]
    phone.get_by_role("link", name=f"Read it ({number})").click()
    phone.wait_for_url(f"**/documents/{number}.html")
    assert number in phone.content()
    phone.go_back()
    href = phone.get_by_role("link", name=f"Download the PDF ({number})").get_attribute("href")
    assert href is not None
    answer = phone.request.get(href)
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/pdf"
    assert answer.body().startswith(b"%PDF")


def test_an_expired_link_and_another_customers_bill_name_no_one(
    phone: Page, made: Made, looker: Looker
) -> None:
    phone.goto(f"/my/{made.token(made.jane, days=-1)}")
    assert phone.locator("h1").inner_text() == "This link does not open"
    looker.look(phone, "household-expired")
    theirs = made.numbers[made.pat]
    answer = phone.goto(f"/my/{made.token(made.jane)}/documents/{theirs}.pdf")
    assert answer is not None
    assert answer.status == 404
    assert phone.locator("h1").inner_text() == "This link does not open"
    text = phone.content()
    assert made.pat not in text
    assert "Pat" not in text
