"""The placement map in real Chromium (issue 16, item 4): after a run, the editor's gutter marks the lines where
tensors went, in red where two devices met; hovering a mark says what happened; the table under the output holds
the same; axe finds nothing serious in either theme at phone and desktop widths. Screenshots: tests/artifacts/."""

from __future__ import annotations

import pytest

from app import ROOT
from tests.helpers import ARTIFACTS, serious_violations

pytestmark = pytest.mark.browser

LESSON = "/lessons/training-loop"


def source(name: str) -> str:
    return (ROOT / "exercises" / "training-loop" / name).read_text(encoding="utf-8")


def line_of(code: str, text: str) -> int:
    return next(n for n, line in enumerate(code.splitlines(), start=1) if text in line)


def run_code(page, base: str, code: str):
    """Open the lesson, put code in the training-loop editor, run it; return the panel once the verdict shows."""
    from playwright.sync_api import expect

    page.goto(f"{base}{LESSON}")
    panel = page.locator("#exercise-training-loop")
    expect(panel.locator(".cm-editor")).to_be_visible()
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code)
    panel.locator(".exercise-run").click()
    expect(panel.locator(".exercise-checks .check").first).to_be_visible(timeout=30_000)
    return panel


def marked_lines(page, panel) -> dict[int, str]:
    """{line number: kind} of the gutter's marks, read from the editor's own line blocks."""
    marks = page.evaluate("""(root) => {
        const view = root.courseExercise.editor.view;
        const out = {};
        for (const mark of root.querySelectorAll('.cm-placement-mark')) {
            const top = mark.getBoundingClientRect().top + 2;
            const line = view.state.doc.lineAt(view.lineBlockAtHeight(top - view.documentTop).from).number;
            out[line] = mark.dataset.kind;
        }
        return out;
    }""", panel.element_handle())
    return {int(line): kind for line, kind in marks.items()}


def test_unmoved_batches_mark_the_models_move_and_the_mismatch_in_red(live_site, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    code = source("wrong/batch_not_moved.py")
    panel = run_code(page, live_site.url, code)
    model_line, meet_line = line_of(code, ".to(device)  # once"), line_of(code, "loss_fn(model(xb)")
    assert marked_lines(page, panel) == {model_line: "to_device", meet_line: "mismatch"}
    mismatch = panel.locator('.cm-placement-mark[data-kind="mismatch"]')
    color = mismatch.evaluate("(el) => getComputedStyle(el).color")
    red, green, blue = (int(c) for c in color[color.index("(") + 1:color.index(")")].split(",")[:3])
    assert red > 150 and green < 100 and blue < 100, color  # red
    assert panel.locator(".cm-placement-mismatch-line").count() == 1

    mismatch.hover()
    tip = panel.locator(".cm-placement-tip")
    expect(tip).to_have_text(f"line {meet_line}: xb: tensors on cpu and cuda:0 met in one operation, once")
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "placement-map.png"))
    panel.locator('.cm-placement-mark[data-kind="to_device"]').hover()
    expect(tip).to_have_text(f"line {model_line}: model (Sequential's parameters) -> cuda:0, once")

    table = panel.locator(".placement-table tbody tr")
    expect(table).to_have_count(2)
    expect(panel.locator(".placement-totals")).to_contain_text("devices met 1 time")
    assert page.console_errors == []


def test_printing_the_loss_tensor_every_epoch_marks_that_line_as_a_sync(live_site, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    code = source("wrong/prints_loss_tensor.py")
    panel = run_code(page, live_site.url, code)
    print_line = line_of(code, 'print(f"epoch {epoch}: loss", loss)')
    marks = marked_lines(page, panel)
    assert marks[print_line] == "sync"
    assert marks[line_of(code, "xb, yb = xb.to(device)")] == "to_device"
    panel.locator('.cm-placement-mark[data-kind="sync"]').hover()
    expect(panel.locator(".cm-placement-tip")).to_contain_text(
        f"line {print_line}: loss [] read on the host with print, 5 times inside a loop")  # `print` drawn as code
    expect(panel.locator(".placement-totals")).to_contain_text("5 syncs, 5 of them inside a loop")
    assert page.console_errors == []


@pytest.mark.parametrize("width", [360, 1280])
def test_the_lesson_after_a_run_is_axe_clean_in_both_themes(live_site, chromium, width):
    """A failed run shows everything at once: folded frames, the map in the gutter and the table, checks of
    every kind, the keyboard note; axe (target-size included) must find nothing serious or critical."""
    context = chromium.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    panel = run_code(page, live_site.url, source("wrong/batch_not_moved.py"))
    panel.locator(".cm-content").click()  # the keyboard note shows
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert serious_violations(page) == [], (width, scheme)
        panel.screenshot(path=str(ARTIFACTS / f"placement-map-{width}-{scheme}.png"))
    context.close()
