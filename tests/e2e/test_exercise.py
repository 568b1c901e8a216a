"""A learner in real Chromium: edit code in the lesson's editor, run it, watch output stream, follow a failing
check to its line, fix it, pass, see the solution and the progress, and find the code again after a reload."""

from __future__ import annotations

import pytest

from app import ROOT
from tests.helpers import ARTIFACTS, LiveServer, make_settings

pytestmark = pytest.mark.browser

# prints one line, then keeps running, so the page must show the line before the verdict exists
STREAMING_PREFIX = 'print("before the pause", flush=True)\nimport time\ntime.sleep(1.5)\n'


def editor_text(page, panel) -> str:
    return page.evaluate("(el) => el.courseExercise.editor.getValue()", panel.element_handle())


def cursor_line(page, panel) -> int:
    return page.evaluate("(el) => el.courseExercise.editor.cursorLine()", panel.element_handle())


def test_edit_run_fix_pass_and_come_back(live_site, browser_page):
    page = browser_page
    from playwright.sync_api import expect

    solution = (ROOT / "exercises" / "same-device" / "solution.py").read_text(encoding="utf-8")
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    panel = page.locator("#exercise-same-device")
    expect(panel.locator(".cm-editor")).to_be_visible()  # CodeMirror replaced the plain textarea
    expect(panel.locator("textarea.exercise-code")).to_be_hidden()

    # A wrong answer: the starter (x left on the host) with a line printed before a pause.
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+Home")
    page.keyboard.type(STREAMING_PREFIX)
    assert editor_text(page, panel).startswith(STREAMING_PREFIX)
    panel.locator(".exercise-run").click()

    output = panel.locator(".exercise-output")
    # 30 s: the job's start waits on the sandbox, which shares the cores with a second test process
    expect(output).to_contain_text("before the pause", timeout=30_000)
    expect(panel.locator(".exercise-checks .check")).to_have_count(0)  # streamed while still running
    failing = panel.locator('.exercise-checks .check.failed[data-check="same_device"]')
    expect(failing).to_be_visible(timeout=15_000)
    expect(panel.locator(".exercise-status")).to_contain_text("Not yet")
    link = failing.locator(".line-link")
    line = int(link.get_attribute("data-line"))
    assert editor_text(page, panel).splitlines()[line - 1].startswith("y = weights @ x")
    page.keyboard.press("Control+Home")
    link.click()
    assert cursor_line(page, panel) == line
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "live-exercise-failing.png"))
    expect(panel.locator(".exercise-solution")).to_be_hidden()

    # Fix it (insert_text: typed code would be re-indented by the editor) and run with the keyboard.
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(solution)
    page.keyboard.press("Control+Enter")
    expect(panel.locator(".exercise-status")).to_contain_text("Passed", timeout=15_000)
    expect(panel.locator(".exercise-checks .check.failed")).to_have_count(0)
    expect(panel.locator(".exercise-checks .check.passed")).not_to_have_count(0)
    expect(panel.locator(".exercise-solution")).to_be_visible()
    expect(panel.locator(".exercise-passed-badge")).to_be_visible()
    expect(panel.locator(".exercise-attempts li")).to_have_count(2)
    panel.screenshot(path=str(ARTIFACTS / "live-exercise-passed.png"))

    # Come back: the last code is in the editor, the pass and the solution are still there.
    page.reload()
    expect(panel.locator(".cm-editor")).to_be_visible()
    assert editor_text(page, panel) == solution
    expect(panel.locator(".exercise-passed-badge")).to_be_visible()
    expect(panel.locator(".exercise-solution")).to_be_visible()
    expect(page.locator("#lesson-progress")).to_contain_text("Exercises passed: 1 of")
    assert page.console_errors == []


def test_hints_reveal_in_order_and_reset_restores_the_starter(live_site, browser_page):
    page = browser_page
    from playwright.sync_api import expect

    starter = (ROOT / "exercises" / "same-device" / "starter.py").read_text(encoding="utf-8")
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    panel = page.locator("#exercise-same-device")
    hints = panel.locator(".exercise-hints > li")
    count = hints.count()
    assert count >= 3
    expect(hints.first).to_be_hidden()
    button = panel.locator(".exercise-hint-next")
    for shown in range(1, count + 1):
        button.click()
        expect(hints.nth(shown - 1)).to_be_visible()
        if shown < count:
            expect(hints.nth(shown)).to_be_hidden()
    expect(button).to_be_hidden()

    panel.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text("print('scratch')\n")
    panel.locator(".exercise-reset").click()
    assert editor_text(page, panel) == starter
    assert page.console_errors == []


def test_a_full_queue_says_busy_then_retries_by_itself(tmp_path, browser_page):
    """One sandbox slot, no queue: while another learner holds the slot, Run shows "the course is busy,
    retrying in N s", then runs by itself once the slot is free."""
    import httpx
    from playwright.sync_api import expect

    from app.main import create_app
    page = browser_page
    app = create_app(make_settings(tmp_path, migrate=True, runner_concurrency=1, runner_queue_size=0))
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as other:
        other.headers["X-CSRF-Token"] = other.get("/api/auth/csrf").json()["csrf_token"]
        warm = other.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})
        other.get(f"/api/submissions/{warm.json()['id']}/events")  # fork server up: the held slot counts
        page.goto(f"{server.url}/lessons/cpu-gpu-border")
        panel = page.locator("#exercise-same-device")
        expect(panel.locator(".cm-editor")).to_be_visible()
        held = other.post("/api/exercises/same-device/submissions",
                          json={"code": "import time\ntime.sleep(2.5)\n"})
        assert held.status_code == 202

        panel.locator(".exercise-run").click()

        expect(panel.locator(".exercise-status")).to_contain_text("The course is busy, retrying in", timeout=5_000)
        expect(panel.locator(".exercise-checks .check")).not_to_have_count(0, timeout=20_000)
        expect(panel.locator(".exercise-status")).to_contain_text("Not yet")  # the starter ran, and failed
    app.state.db.dispose()
    # Chromium logs the refused request itself ("status of 429"); nothing else may go wrong
    assert all("429" in error for error in page.console_errors), page.console_errors


def test_without_javascript_the_panel_reads_and_runs_as_a_form(live_site, chromium):
    from playwright.sync_api import expect

    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_site.url}/lessons/cpu-gpu-border")
    panel = page.locator("#exercise-same-device")
    expect(panel.locator(".exercise-prompt")).to_contain_text("weights")
    textarea = panel.locator("textarea.exercise-code")
    expect(textarea).to_be_visible()
    assert textarea.input_value() == (ROOT / "exercises" / "same-device" / "starter.py").read_text(encoding="utf-8")
    panel.locator(".exercise-hints summary").first.click()
    expect(panel.locator(".exercise-hints .hint-body").first).to_be_visible()

    panel.locator(".exercise-run").click()  # posts the form; the server grades, then shows the lesson again
    page.wait_for_url("**/lessons/cpu-gpu-border#exercise-same-device")
    expect(panel.locator('.exercise-checks .check.failed[data-check="same_device"]')).to_be_visible()
    expect(panel.locator(".exercise-status")).to_contain_text("Last run: failed")
    expect(panel.locator(".exercise-history li")).to_have_count(1)
    context.close()
