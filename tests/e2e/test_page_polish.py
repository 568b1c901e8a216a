"""Issue 29's page polish in real Chromium: "On this page" numbers its sections 1, 2, 3 without gaps, the DDP diff
has its colours in both themes, long lines wrap in code blocks and in the editor at 390 px instead of being cut
off, the keyboard focus stays on Run through a run, and a simulated run says so above its output.
Screenshots: tests/artifacts/polish-*.png (gitignored), for a person to look at."""

from __future__ import annotations

import pytest

from tests.helpers import ARTIFACTS

pytestmark = pytest.mark.browser

LESSON_3 = "/lessons/multi-gpu-and-distributed"
# longer than a 390 px editor is wide, and than the desktop one: the end must stay in view, wrapped
LONG_LINE = ("checkpoint = torch.load('a_checkpoint_with_a_long_name.pt', map_location=device, weights_only=True)"
             "  # the end of this line")


def shot(target, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    target.screenshot(path=str(ARTIFACTS / f"polish-{name}.png"))


@pytest.fixture
def open_page(chromium):
    """open_page(width, scheme) -> a fresh page (own cookies) with its console errors in `page.console_errors`."""
    contexts = []

    def make(width: int = 1280, scheme: str = "light"):
        context = chromium.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        page.console_errors = []
        page.on("console", lambda msg: msg.type == "error" and page.console_errors.append(msg.text))
        page.on("pageerror", lambda err: page.console_errors.append(str(err)))
        return page

    yield make
    for context in contexts:
        context.close()


def luminance(rgb: str) -> float:
    """Relative luminance (WCAG 2) of a computed colour "rgb(r, g, b)"."""
    channels = [int(v) / 255 for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_on_this_page_numbers_its_sections_without_gaps(live_site, open_page):
    page = open_page()
    page.goto(live_site.url + LESSON_3)
    toc = page.locator("#toc")
    numbered = page.evaluate("""() => [...document.querySelectorAll('#toc > ol > li')].map(
        (li) => [li.className, getComputedStyle(li).listStyleType, li.querySelector('a').textContent])""")
    # every item of the numbered list is a section, so the markers run 1, 2, 3 ... (they skipped 2, 5, 7, 9 when
    # the exercises and sub-sections were items of the same list)
    assert [kind for kind, _, _ in numbered] == ["toc-level-2"] * len(numbered)
    assert {style for _, style, _ in numbered} == {"decimal"}
    assert [text for _, _, text in numbered][:3] == ["Start with one GPU", "What DDP does",
                                                     "From one GPU to DDP, line by line"]
    nested = page.evaluate("""() => [...document.querySelectorAll('#toc li li')].map(
        (li) => [li.parentElement.tagName, getComputedStyle(li).listStyleType, li.textContent])""")
    # the exercises and sub-sections (as many as the lesson has), each a bullet of a list under its section
    assert len(nested) >= 3 and {(tag, style) for tag, style, _ in nested} == {("UL", "circle")}
    assert [text for _, _, text in nested][0] == "Exercise: Turn the training loop into a DDP script"
    shot(toc, "toc")
    toc.locator('a[href="#exercise-two-machines"]').click()
    page.wait_for_url(f"**{LESSON_3}#exercise-two-machines")
    assert page.console_errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_ddp_diff_has_its_colours_in_both_themes(live_site, open_page, scheme):
    page = open_page(scheme=scheme)
    page.goto(live_site.url + LESSON_3)
    diff = page.locator('.code-block[data-lang="diff"]')
    colours = {}
    for token in ("gi", "gd"):
        colours[token] = page.evaluate(f"""() => {{ const s = getComputedStyle(document.querySelector(
            '.code-block[data-lang="diff"] .{token}')); return [s.color, s.backgroundColor]; }}""")
    added, removed = colours["gi"], colours["gd"]
    assert "rgba(0, 0, 0, 0)" not in (added[1], removed[1]), colours  # a band behind each line, in this theme too
    assert added[0] != removed[0] and added[1] != removed[1]
    assert contrast(*added) >= 4.5 and contrast(*removed) >= 4.5, colours
    diff.scroll_into_view_if_needed()
    shot(diff, f"diff-{scheme}")


def test_long_lines_wrap_in_code_blocks_and_in_the_editor_at_390px(live_site, open_page):
    page = open_page(width=390)
    page.goto(live_site.url + LESSON_3)
    cut = page.evaluate("""() => [...document.querySelectorAll('.lesson-body pre')]
        .filter((pre) => pre.scrollWidth > pre.clientWidth + 1).map((pre) => pre.textContent.slice(0, 40))""")
    assert cut == []  # the diff's long lines among them, which a phone showed cut at the right edge
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page.locator('.code-block[data-lang="diff"]'), "diff-390")

    page.goto(live_site.url + "/lessons/cpu-gpu-border")
    panel = page.locator("#exercise-same-device")
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.insert_text(LONG_LINE)
    scroller = panel.locator(".cm-scroller")
    assert scroller.evaluate("(s) => s.scrollWidth <= s.clientWidth + 1")
    end = panel.locator(".cm-line", has_text="the end of this line")
    box, view = end.bounding_box(), scroller.bounding_box()
    assert box["height"] > 2 * 16 and box["x"] + box["width"] <= view["x"] + view["width"] + 1  # wrapped, in view
    shot(panel.locator(".exercise-form"), "editor-390")
    assert page.console_errors == []


def test_the_focus_stays_on_run_and_a_simulated_run_says_so(live_site, open_page):
    from playwright.sync_api import expect

    page = open_page()
    page.goto(live_site.url + "/lessons/cpu-gpu-border")
    panel = page.locator("#exercise-same-device")
    expect(panel.locator(".cm-editor")).to_be_visible()
    expect(panel.locator(".exercise-simulated")).to_be_hidden()  # nothing ran yet
    run = panel.locator(".exercise-run")
    run.focus()
    page.keyboard.press("Enter")
    expect(panel.locator(".exercise-checks .check").first).to_be_visible(timeout=30_000)
    # the button kept the focus through the run (a disabled button drops it to the page)
    assert run.evaluate("(button) => document.activeElement === button")
    assert run.get_attribute("aria-disabled") is None and not run.is_disabled()
    expect(panel.locator(".exercise-simulated")).to_be_visible()
    expect(panel.locator(".exercise-simulated")).to_contain_text("Simulated: the GPUs in this run were the server")
    # each row names its check; "line 10" is said once, as the link
    same = panel.locator('.exercise-checks .check[data-check="same_device"]')
    expect(same.locator(".check-id")).to_have_text("same_device")
    assert same.inner_text().count("line 10") == 1 and same.locator(".line-link").count() == 1
    shot(panel, "run-focus")  # the Run button with its focus ring, the note above the output

    page.keyboard.press("Space")  # the focus is still on Run: the keyboard runs it again
    expect(panel.locator(".exercise-attempts li")).to_have_count(2, timeout=30_000)
    assert run.evaluate("(button) => document.activeElement === button")
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+Enter")  # from the editor, the focus stays in the editor
    expect(panel.locator(".exercise-attempts li")).to_have_count(3, timeout=30_000)
    assert panel.locator(".cm-content").evaluate("(content) => content.contains(document.activeElement)")
    assert page.console_errors == []
