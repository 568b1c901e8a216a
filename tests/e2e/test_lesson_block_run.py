"""A lesson block's Run in real Chromium at 360 px: the "Run on" picker beside the block, Run streams the output
under it on one H100 by default, the machine is named, a picked laptop prints `cpu`, an edited block runs as
edited, and the page stays axe clean. Without JavaScript the block's "Run on" form runs it and answers a page with its
output, also axe clean at 360 px."""

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
    expect(block.locator(".block-run-nojs")).to_be_hidden()  # the form's Run is for a page without JavaScript
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


def test_without_javascript_run_answers_a_page_with_the_blocks_output(live_site, chromium):
    from playwright.sync_api import expect

    context = chromium.new_context(java_script_enabled=False, viewport={"width": 360, "height": 900})
    page = context.new_page()
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    number = page.locator(".code-block[id^=block-]", has_text="batch = batch.to(device)").get_attribute("id")
    block = page.locator(f"#{number}-run")
    expect(block.locator(".block-run-button")).to_be_hidden()  # the in-page Run needs the script
    block.locator("select.run-on-select").select_option("laptop")
    block.locator(".block-run-nojs").click()  # posts the picker's form to the block's run; the answer is a page
    page.wait_for_url(f"**/lessons/cpu-gpu-border/blocks/{number.removeprefix('block-')}/run")
    expect(page.locator(".block-run-status")).to_contain_text("Finished", timeout=30_000)
    expect(page.locator(".run-machine")).to_contain_text("Ran on A laptop without a GPU")
    expect(page.locator(".exercise-output")).to_contain_text("cpu")
    page.locator("textarea.exercise-code").fill('print("edited without a script")\n')
    page.locator(".block-run-again button[type=submit]").click()
    expect(page.locator(".exercise-output")).to_contain_text("edited without a script", timeout=30_000)
    expect(page.locator("h1")).to_contain_text("as you edited it")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the answer page scrolls sideways at 360 px ({width} px wide)"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lesson-block-run-without-js-360.png"), full_page=True)
    context.close()

    # axe needs a script of its own: the same answer page, reached by the same button in a browser with scripts
    # (run-on.js lets that button's submit through; lesson-block.js hides it, so the test shows it again)
    context = chromium.new_context(viewport={"width": 360, "height": 900})
    page = context.new_page()
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    button = page.locator(f"#{number}-run .block-run-nojs")
    expect(button).to_be_hidden()
    button.evaluate("(b) => { b.hidden = false; }")
    button.click()
    expect(page.locator(".block-run-status")).to_contain_text("Finished", timeout=30_000)
    assert serious_violations(page) == []
    context.close()
