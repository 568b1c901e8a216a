"""A lesson block's Run in real Chromium at 360 px: the "Run on" picker beside the block, Run streams the output
under it on one H100 by default, the machine is named, a picked laptop prints `cpu`, an edited block runs as
edited, and the page stays axe clean."""

from __future__ import annotations

import pytest

from tests.helpers import ARTIFACTS, serious_violations

pytestmark = pytest.mark.browser


def test_run_a_lesson_block_on_the_picked_machine(live_site, chromium):
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 360, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    code = page.locator(".code-block[id^=block-]", has_text="batch = batch.to(device)")
    number = code.get_attribute("id").removeprefix("block-")
    block = page.locator(f"#block-{number}-run")
    picker = block.locator("select.run-on-select")
    expect(picker).to_have_value("h100")
    expect(block.locator(".run-on-use")).to_be_hidden()
    output = block.locator(".block-output")
    expect(output).to_be_hidden()  # no run yet: no empty box

    block.locator(".block-run-button").click()
    expect(block.locator(".block-run-status")).to_contain_text("Finished", timeout=30_000)
    expect(block.locator(".block-run-status")).to_contain_text("on One H100")
    expect(block.locator(".run-machine")).to_have_text("Ran on One H100")
    expect(output).to_contain_text("cuda:0")
    assert serious_violations(page) == []

    with page.expect_response("**/api/machine") as picked:
        picker.select_option("laptop")
    assert picked.value.status == 200
    block.locator(".block-run-button").click()
    expect(block.locator(".run-machine")).to_have_text("Ran on A laptop without a GPU", timeout=30_000)
    expect(output).to_contain_text("cpu")
    expect(output).not_to_contain_text("cuda:0")

    block.locator(".block-edit").click()
    expect(block.locator(".block-reset")).to_be_visible()
    editor = code.locator(".cm-content")
    expect(editor).to_be_visible()
    page.evaluate("(el) => el.courseBlock.editor.setValue('print(\"edited in the page\")\\n')",
                  block.element_handle())
    block.locator(".block-run-button").click()
    expect(output).to_contain_text("edited in the page", timeout=30_000)
    assert serious_violations(page) == []
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the page scrolls sideways at 360 px ({width} px wide)"
    ARTIFACTS.mkdir(exist_ok=True)
    code.screenshot(path=str(ARTIFACTS / "lesson-block-code-360.png"))
    block.screenshot(path=str(ARTIFACTS / "lesson-block-run-360.png"))

    block.locator(".block-reset").click()
    expect(code.locator(".highlight")).to_be_visible()
    page.reload()  # the pick is remembered; the edit is not (nothing is stored)
    expect(page.locator(f"#block-{number}-run select.run-on-select")).to_have_value("laptop")
    expect(page.locator(f"#block-{number} .highlight")).to_contain_text("batch = batch.to(device)")
    assert errors == []
    context.close()
