"""The machine picker in real Chromium: pick Colab's T4 beside an exercise, run, and the output line, the verdict's
status and the placement map name the T4; the pick survives a reload; axe clean at 360 px."""

from __future__ import annotations

import pytest

from app import ROOT
from tests.helpers import ARTIFACTS, serious_violations

pytestmark = pytest.mark.browser


def test_pick_t4_run_and_every_part_names_it(live_site, chromium):
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 360, "height": 900})
    page = context.new_page()
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    panel = page.locator("#exercise-same-device")
    picker = panel.locator("select.run-on-select")
    expect(picker).to_have_value("h100")
    expect(panel.locator(".run-on-use")).to_be_hidden()  # with JavaScript a change is remembered at once
    with page.expect_response("**/api/machine") as picked:
        picker.select_option("t4")
    assert picked.value.status == 200
    solution = (ROOT / "exercises" / "same-device" / "solution.py").read_text(encoding="utf-8")
    page.evaluate("([el, code]) => el.courseExercise.editor.setValue(code)", [panel.element_handle(), solution])
    panel.locator(".exercise-run").click()
    expect(panel.locator(".exercise-status")).to_contain_text("on Colab's T4", timeout=20_000)
    expect(panel.locator(".run-machine")).to_have_text("Ran on Colab's T4")
    expect(panel.locator(".placement-devices")).to_contain_text("cuda:0 is Tesla T4")
    assert serious_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "machine-picker-360.png"))
    page.reload()
    expect(page.locator("#exercise-same-device select.run-on-select")).to_have_value("t4")
    context.close()
