"""The site in Debian's Chromium: index -> lesson -> table of contents, no console errors, axe, 360 px, dark mode.

Screenshots are written to tests/artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import pytest

from app.core.config import ROOT
from tests.helpers import ARTIFACTS, serious_violations

pytestmark = pytest.mark.browser
FIRST_LESSON = "The CPU/GPU border"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"site-{name}.png"), full_page=True)


def test_index_lesson_and_toc_link(live_server, browser_page):
    page = browser_page
    page.goto(live_server + "/")
    assert page.locator("h1").inner_text() == "Devices and Tensor Placement"
    assert page.locator(".lesson-list h3 a").count() == len(list((ROOT / "lessons").glob("*.md")))
    assert serious_violations(page) == []
    shot(page, "index")

    page.get_by_role("link", name=FIRST_LESSON).click()
    page.wait_for_url("**/lessons/cpu-gpu-border")
    assert page.locator("h1").inner_text() == FIRST_LESSON
    shot(page, "lesson")

    toc_link = page.locator("#toc a").nth(2)
    target = toc_link.get_attribute("href")
    toc_link.click()
    page.wait_for_url(f"**/lessons/cpu-gpu-border{target}")
    heading = page.locator(target)
    assert heading.is_visible()
    box = heading.bounding_box()
    assert 0 <= box["y"] < page.viewport_size["height"] / 2  # scrolled to the heading
    assert serious_violations(page) == []
    assert page.console_errors == []


def test_skip_link_is_first_and_reaches_main(live_server, browser_page):
    page = browser_page
    page.goto(live_server + "/lessons/picking-a-device")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.className")
    assert focused == "skip-link"
    assert page.locator(".skip-link").is_visible()  # visible while focused
    page.keyboard.press("Tab")  # the next stop, the site name, shows a focus ring
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle + ' ' + "
                            "getComputedStyle(document.activeElement).outlineWidth")
    assert outline.startswith("solid") and not outline.endswith(" 0px"), outline
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    page.wait_for_url("**#main")
    assert page.console_errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_is_accessible_and_fits_360px(live_server, chromium, scheme):
    context = chromium.new_context(viewport={"width": 360, "height": 780}, color_scheme=scheme)
    page = context.new_page()
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        paths = ["/", "/lessons/cpu-gpu-border", "/lessons/picking-a-device", "/lessons/multi-gpu-and-distributed",
                 "/lessons/training-loop"]
        for path in paths:
            page.goto(live_server + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 360, f"{path} is {width}px wide at a 360px viewport"
            assert serious_violations(page) == [], path
        shot(page, f"lesson-360-{scheme}")
        page.goto(live_server + "/lessons/no-such-lesson")
        assert page.locator("h1").inner_text() == "Page not found"
        assert serious_violations(page) == []
        shot(page, f"404-{scheme}")
        assert [e for e in errors if "404" not in e] == []  # the 404 page's own status is logged by Chromium
    finally:
        context.close()
