"""The lessons' figures in Debian's Chromium: light and dark, 360 px and 1280 px wide, axe finds nothing serious.

Each figure loads, fits the page, keeps its text at a readable scale, and draws its own palette for the page's
colour scheme (its panel is light on a light page, dark on a dark one). A screenshot of every figure, in every
scheme and width, is written to tests/artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.helpers import ARTIFACTS

pytestmark = pytest.mark.browser
LESSONS = {"cpu-gpu-border": 2, "training-loop": 2, "multi-gpu-and-distributed": 3}  # lesson -> figures it shows
# the figures are drawn ~440 units wide with 13-15 unit text; below this share of that, the text gets too small
MIN_SCALE = 0.7
PANEL_PIXEL = """async (png) => {
  const img = new Image();
  img.src = "data:image/png;base64," + png;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.width; canvas.height = img.height;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(img, 0, 0);
  // the middle of the top edge: panel, above every box and line of text
  return Array.from(ctx.getImageData(Math.floor(img.width / 2), 4, 1, 1).data.slice(0, 3));
}"""


def serious_violations(page) -> list[str]:
    results = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
            for v in results.response["violations"] if v["impact"] in ("serious", "critical")]


def check_figure(page, figure, width: int, scheme: str, slug: str) -> None:
    figure.scroll_into_view_if_needed()
    img = figure.locator("img")
    img.evaluate("img => img.decode()")  # lazy images load once scrolled to
    natural = img.evaluate("img => img.naturalWidth")
    box = img.bounding_box()
    assert natural > 400 and box["width"] <= width - 16, (slug, natural, box)
    assert box["width"] / natural >= MIN_SCALE, f"{slug}: a figure is shown at {box['width'] / natural:.0%}"
    assert img.get_attribute("alt") and figure.locator("figcaption").inner_text().strip()
    name = Path(img.get_attribute("src")).stem
    ARTIFACTS.mkdir(exist_ok=True)
    png = img.screenshot(path=str(ARTIFACTS / f"figure-{slug}-{name}-{width}-{scheme}.png"))
    r, g, b = page.evaluate(PANEL_PIXEL, base64.b64encode(png).decode())
    brightness = (r + g + b) / 3
    assert (brightness > 200) if scheme == "light" else (brightness < 70), (name, scheme, (r, g, b))


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [360, 1280])
def test_lessons_with_figures_are_accessible_and_legible(live_server, chromium, width, scheme):
    context = chromium.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        for slug, count in LESSONS.items():
            page.goto(f"{live_server}/lessons/{slug}")
            figures = page.locator("figure.lesson-figure")
            assert figures.count() == count, slug
            for i in range(count):
                check_figure(page, figures.nth(i), width, scheme, slug)
            assert page.evaluate("document.documentElement.scrollWidth") <= width, slug
            assert serious_violations(page) == [], slug
        assert errors == []
    finally:
        context.close()
