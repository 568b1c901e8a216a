"""The modeled timeline in real Chromium (issue 26, part 4): after fast-loop's starter runs on the simulated H100
at 360 px, the panel draws one row for the host, the GPU's stream and its copy engine, with kernels, hatched
copies, the host's dotted waiting and the syncs marked; it says what the times are modeled for and which real
card calibrated them; its tables hold the same figures; axe finds nothing serious; no CSP violation; and
"Download trace (Chrome JSON)" gives the same run as a Chrome trace. Screenshots: the test's tmp dir and
tests/artifacts/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import ROOT
from tests.helpers import ARTIFACTS, serious_violations

pytestmark = pytest.mark.browser

LESSON = "/lessons/training-loop"
STARTER = (ROOT / "exercises" / "fast-loop" / "starter.py").read_text(encoding="utf-8")
# runs before any page script: counts what the Content-Security-Policy blocked (as tests/e2e/test_csp.py does)
COUNT_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline")));
"""


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(STARTER.splitlines(), start=1) if text in line)


def test_fast_loop_draws_its_timeline_at_360px_and_downloads_its_trace(live_site, chromium, tmp_path: Path):
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 360, "height": 900}, accept_downloads=True)
    context.add_init_script(COUNT_VIOLATIONS)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{live_site.url}{LESSON}")
    panel = page.locator("#exercise-fast-loop")
    expect(panel.locator(".cm-editor")).to_be_visible()
    section = panel.locator(".exercise-timeline")
    expect(section).to_be_hidden()  # nothing has run yet
    page.evaluate("([el, code]) => el.courseExercise.editor.setValue(code)", [panel.element_handle(), STARTER])
    panel.locator(".exercise-run").click()
    expect(panel.locator(".exercise-checks .check").first).to_be_visible(timeout=90_000)

    svg = section.locator("svg.timeline-svg")
    expect(svg).to_be_visible()
    rows = section.locator(".tl-row")
    assert rows.evaluate_all("(gs) => gs.map((g) => g.dataset.row)") == [
        "host", "cuda:0 stream default", "cuda:0 copy engine"]
    host, stream, engine = (section.locator(f'.tl-row[data-row="{name}"]')
                            for name in ("host", "cuda:0 stream default", "cuda:0 copy engine"))
    assert host.locator(".tl-sync-mark").count() >= 10  # a .item() and two .cpu() every step: the ▼s
    assert host.locator(".tl-wait").count() >= 1  # the host's waiting, dotted
    assert stream.locator(".tl-kernel").count() >= 1
    assert engine.locator(".tl-copy").count() >= 1  # the dataset's copy every step, hatched
    # readable without colour: each kind has its own fill (solid, a hatch pattern, dots) and every row its name
    fills = {kind: section.locator(f'.tl-span[data-kind="{kind}"]').first.evaluate(
        "(el) => getComputedStyle(el).fill") for kind in ("kernel", "copy", "sync")}
    assert "url(" in fills["copy"] and "url(" in fills["sync"] and "url(" not in fills["kernel"], fills
    assert fills["copy"] != fills["sync"]
    assert section.locator(".tl-row-name").all_text_contents() == [
        "host", "cuda:0 stream default", "cuda:0 copy engine"]
    name = svg.get_attribute("aria-label")
    assert "one row each for host, cuda:0 stream default, cuda:0 copy engine" in name and "syncs marked" in name

    label = section.locator(".timeline-label")
    expect(label).to_contain_text("Modeled for one H100")  # the "Run on" choice it ran on
    expect(label).to_contain_text("recorded on a real NVIDIA H200")
    expect(section.locator(".timeline-totals")).to_contain_text("one training step")
    expect(section.locator(".timeline-rows tbody tr")).to_have_count(3)
    copy_line = line_of("data, target = X.to(device), Y.to(device)")
    line_row = section.locator(".timeline-lines tbody tr").filter(
        has=page.locator(f'a.line-link[data-line="{copy_line}"]'))
    expect(line_row).to_have_count(1)
    assert float(line_row.locator("td").nth(1).inner_text()) > 1.0  # 60 copies of 12 MiB: ms of GPU-side work

    # 360 px: the drawing fits the panel and the page does not scroll sideways
    width = svg.evaluate("(el) => el.getBoundingClientRect().width")
    assert 200 <= width <= 360, width
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    assert serious_violations(page) == []
    shot = tmp_path / "timeline-360.png"
    section.screenshot(path=str(shot))
    assert shot.stat().st_size > 1000
    ARTIFACTS.mkdir(exist_ok=True)
    section.screenshot(path=str(ARTIFACTS / "timeline-360.png"))

    with page.expect_download() as download:
        section.locator(".timeline-download").click()
    assert download.value.suggested_filename.startswith("fast-loop-")
    trace = json.loads(Path(download.value.path()).read_text())
    threads = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
    assert threads == ["host", "cuda:0 stream default", "cuda:0 copy engine"]
    assert trace["otherData"]["modeled"] is True and trace["otherData"]["machine"] == "h100"
    syncs = [e for e in trace["traceEvents"] if e["ph"] == "i" and e["name"] == "sync"]
    assert len(syncs) >= 60 and all(e["tid"] == 0 for e in syncs)

    page.reload()  # the stored verdict draws the same timeline
    expect(page.locator("#exercise-fast-loop .exercise-timeline svg.timeline-svg")).to_be_visible()
    assert page.evaluate("window.__cspViolations") == []
    assert [e for e in errors if "Content Security Policy" in e] == [] and errors == []
    context.close()
