"""Page 1 drawn as a person sees it: poppler's pdftoppm renders it to PNG, and the picture has
the page's shape, its text in dark ink and the chart's bars in their two colours, in the
chart's part of the page. (A developer looked at the same picture: docs/invoices.md.)

pdftoppm comes with Debian's poppler-utils, which .ci/run installs where it is missing; without
it the test is skipped, or fails under FREEHOURS_REQUIRE_SERVICES."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from PIL import Image

from freehours.documents.model import FreeEnergy, InvoiceDocument
from freehours.documents.pdf import _first_page_layout, render_pdf
from tests.conftest import _unavailable
from tests.documents.builders import days, invoice

#: The chart's colours (pdf.FREE and pdf.USE), as 8-bit RGB.
AMBER = (180, 83, 9)
BLUE = (11, 79, 108)


@pytest.fixture(scope="module")
def pdftoppm() -> str:
    path = shutil.which("pdftoppm")
    if path is None:
        _unavailable("pdftoppm", "poppler-utils is not installed")
    assert path is not None
    return path


def near(pixel: tuple[int, ...], colour: tuple[int, int, int], within: int = 12) -> bool:
    return all(abs(a - b) <= within for a, b in zip(pixel[:3], colour, strict=True))


def colours(picture: Image.Image) -> Counter[tuple[int, int, int]]:
    """How many pixels of each colour."""
    width, height = picture.size
    return Counter({colour: count for count, colour in picture.getcolors(width * height) or []})


def counted(picture: Image.Image, colour: tuple[int, int, int], within: int = 12) -> int:
    return sum(count for seen, count in colours(picture).items() if near(seen, colour, within))


def page_1(pdftoppm: str, document: InvoiceDocument, dpi: int, folder: Path) -> Image.Image:
    """Page 1 of ``document``'s PDF as pdftoppm renders it at ``dpi``, in RGB (the PDF and the
    PNG written in ``folder``)."""
    pdf = folder / "document.pdf"
    pdf.write_bytes(render_pdf(document))
    subprocess.run(
        [pdftoppm, "-r", str(dpi), "-f", "1", "-l", "1", "-png", str(pdf), str(folder / "page")],
        check=True,
        capture_output=True,
    )
    with Image.open(folder / "page-1.png") as image:
        return image.convert("RGB")


def test_page_1_rendered_shows_the_chart_in_its_colours(pdftoppm: str, tmp_path: Path) -> None:
    picture = page_1(pdftoppm, invoice(), 50, tmp_path)
    width, height = picture.size
    assert round(height / width, 2) == 1.41  # A4
    dark = sum(count for colour, count in colours(picture).items() if max(colour) < 80)
    # text in ink (how much depends on the font poppler puts in for Helvetica: 0.4% to 0.6%)
    assert dark > 0.002 * width * height
    # the bars: amber and blue, in the panel between a quarter and three fifths down the page
    band = picture.crop((0, height // 4, width, height * 3 // 5))
    assert counted(band, AMBER) > 300
    assert counted(band, BLUE) > 1000
    # and no amber further down
    assert counted(picture.crop((0, height * 3 // 5, width, height)), AMBER) < 50


def test_a_small_free_share_is_seen_on_the_rendered_chart(pdftoppm: str, tmp_path: Path) -> None:
    # 20 kWh a day, 0.1 of it free (0.5%): drawn to scale it is a line no one sees.
    small = tuple(
        replace(day, consumption_kwh=Decimal(20), free_kwh=Decimal("0.1")) for day in days()
    )
    free = FreeEnergy(Decimal("3.100"), Decimal("0.93"), "11:00", "14:00", Decimal(24))
    document = invoice(days=small, free_energy=free)
    picture = page_1(pdftoppm, document, 72, tmp_path)
    # The chart's plot alone (at 72 dpi a pixel is a point): below the panel's text, above its
    # legend, so that amber text and the legend's swatch are not counted.
    layout = _first_page_layout(document)
    top, bottom = layout.panel_top + 108, layout.panel_top + layout.panel_height - 24
    plot = picture.crop((0, int(top), picture.size[0], int(bottom)))
    # 31 amber bars, each at least 8 x 4 pixels (drawn to scale: 31 rows of a pixel or none)
    assert counted(plot, AMBER, within=40) > 31 * 8 * 3
