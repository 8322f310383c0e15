"""The HTML read back (html.parser): every Tier 1 item in the first page's section with its
value, the detail in the second; nothing fetched from anywhere; the markup a screen reader
needs."""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal

from freehours.documents.chart import MIN_FREE
from freehours.documents.html import NO_DATA_FILL, render_html
from freehours.documents.model import FreeEnergy
from tests.documents.builders import (
    adjustment_invoice,
    credit_note,
    days,
    html_sections,
    invoice,
    with_unread_days,
)
from tests.documents.test_pdf import (
    CREDITING,
    EVERY_FIRST_PAGE,
    INVOICE_DETAIL,
    INVOICE_FIRST_PAGE,
    PAYING,
)

D = Decimal

#: The PDF's page count is its own; the HTML's first sheet is a section.
FIRST_PAGE = [item for item in EVERY_FIRST_PAGE if not item.startswith("Page 1 of")]


def test_an_invoice_shows_every_tier_1_item_in_its_first_page() -> None:
    sections, _ = html_sections(render_html(invoice()))
    page = sections["page-1"]
    for item in [
        *FIRST_PAGE,
        *INVOICE_FIRST_PAGE,
    ]:
        assert item in page, item
    detail = sections["page-2"]
    assert "Your bill in detail" not in page
    for item in [
        *INVOICE_DETAIL,
        "1 July 2026 10.500 kWh 3.008 kWh",
        "31 July 2026 12.500 kWh 3.008 kWh",
    ]:
        assert item in detail, item


def test_a_credit_note_shows_its_credit_and_the_invoice_it_corrects_first() -> None:
    sections, _ = html_sections(render_html(credit_note()))
    page = sections["page-1"]
    for item in [
        *FIRST_PAGE,
        *CREDITING,
        "Credit note number CN-000031",
        "This credit note corrects invoice INV-004217",
        "it credits $2.57 including GST",
        "Free energy: 1.250 kWh less than invoiced",
    ]:
        assert item in page, item
    for item in (*PAYING, "BPAY", "pay your bills", "How to pay", "Nothing to pay"):
        assert item not in page, item
    whole = sections[""]
    assert "Total of this credit note (incl. GST) $2.57 credit" in whole
    assert not re.search(r"-\$|\$-", whole)


def test_an_adjustment_invoice_shows_what_it_charges_first() -> None:
    page = html_sections(render_html(adjustment_invoice()))[0]["page-1"]
    for item in [
        *PAYING,
        "Adjustment invoice",
        "Amount due $1.72 Due by 7 September 2026",
        "This adjustment invoice corrects invoice INV-004217",
    ]:
        assert item in page, item


def test_nothing_is_fetched_and_nothing_runs() -> None:
    page = render_html(invoice())
    _, tags = html_sections(page)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "link", "img", "iframe", "object", "embed"}
    for _, attributes in tags:
        for name in ("src", "href"):
            assert not (attributes.get(name) or "").startswith(("http:", "https:", "//")), tags
    assert "url(" not in page
    assert "@import" not in page


def test_the_markup_says_what_each_part_is() -> None:
    page = render_html(invoice())
    _, tags = html_sections(page)
    assert tags[0] == ("html", {"lang": "en-AU"})
    headings = [tag for tag, _ in tags if re.fullmatch(r"h[1-6]", tag)]
    assert headings.count("h1") == 1
    assert headings[0] == "h1"
    svg = next(attributes for tag, attributes in tags if tag == "svg")
    assert svg["role"] == "img"
    assert svg["aria-labelledby"] == "chart-title chart-description"
    assert {"title", "desc"} <= {tag for tag, _ in tags}
    # each table has a caption and header cells
    assert sum(tag == "table" for tag, _ in tags) == sum(tag == "caption" for tag, _ in tags)
    assert any(tag == "th" and attributes.get("scope") == "col" for tag, attributes in tags)


def test_text_is_escaped() -> None:
    page = render_html(invoice(customer_name="<b>Ann & Bob</b>"))
    assert "&lt;b&gt;Ann &amp; Bob&lt;/b&gt;" in page
    sections, tags = html_sections(page)
    assert "Customer <b>Ann & Bob</b>" in sections["page-1"]
    assert "b" not in {tag for tag, _ in tags}


def test_a_name_in_any_script_is_written_as_it_is() -> None:
    sections, _ = html_sections(render_html(invoice(customer_name="Nguyễn 王小明")))
    assert "Customer Nguyễn 王小明" in sections["page-1"]


def test_the_chart_has_a_bar_a_day_and_the_free_part_drawn_over_it() -> None:
    page = render_html(invoice())
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count('fill="#0b4f6c"') == 31  # a bar a day of July
    assert svg.count('fill="#b45309"') == 31  # its free part


def test_days_without_meter_data_are_marked_in_the_table_and_the_chart() -> None:
    document = with_unread_days()
    page = render_html(document)
    sections, _ = html_sections(page)
    detail = sections["page-2"]
    for day in (1, 2, 3):
        assert f"{day} July 2026 No meter data*" in detail
    assert "4 July 2026 0.000 kWh 0.000 kWh" in detail
    assert "* No meter data: we have no readings from your meter for these 3 days." in detail
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count(f'fill="{NO_DATA_FILL}"') == 3  # the 1st to 3rd shaded, the 4th not
    assert "A grey band is a day without meter data" in svg
    assert "No meter data (3 days)" in sections["page-1"]


def test_a_free_part_too_small_to_see_is_drawn_tall_enough_and_its_kwh_labelled() -> None:
    # 20 kWh a day, 0.1 of it free: 0.5% of the bar, under a pixel of the plot.
    small = tuple(replace(day, consumption_kwh=D(20), free_kwh=D("0.1")) for day in days())
    free = FreeEnergy(D("3.100"), D("0.93"), "11:00", "14:00", D(24))
    page = render_html(invoice(days=small, free_energy=free))
    svg = page[page.index("<svg") : page.index("</svg>")]
    heights = [float(h) for h in re.findall(r'height="([0-9.]+)" fill="#b45309"', svg)]
    assert len(heights) == 31
    plot = 200.0 - 12.0 - 30.0  # html._HEIGHT less its top and bottom margins
    assert min(heights) >= MIN_FREE * plot - 0.01
    assert "Free in the window: 3.100 kWh" in html_sections(page)[0]["page-1"]
