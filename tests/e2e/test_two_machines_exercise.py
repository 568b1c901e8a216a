"""Lesson 3 in real Chromium: run `two-machines`' starter (the one-machine DDP script) on two simulated machines
of two GPUs, read each machine's output and the second machine's invalid-ordinal failure, the per-rank placement
table, then paste the solution, run it again and pass."""

from __future__ import annotations

import re

import pytest

from app import ROOT
from tests.helpers import ARTIFACTS

pytestmark = pytest.mark.browser

EXERCISE = ROOT / "exercises" / "two-machines"


def editor_text(page, panel) -> str:
    return page.evaluate("(el) => el.courseExercise.editor.getValue()", panel.element_handle())


def test_two_machines_fails_on_the_second_machine_then_the_solution_passes(live_site, browser_page):
    page = browser_page
    from playwright.sync_api import expect

    starter = (EXERCISE / "starter.py").read_text(encoding="utf-8")
    solution = (EXERCISE / "solution.py").read_text(encoding="utf-8")
    page.goto(f"{live_site.url}/lessons/multi-gpu-and-distributed")
    panel = page.locator("#exercise-two-machines")
    expect(panel.locator(".cm-editor")).to_be_visible()
    assert editor_text(page, panel) == starter

    # The one-machine script on two machines: cuda:RANK asks node1 for a cuda:2 it does not have.
    panel.locator(".exercise-run").click()
    expect(panel.locator(".exercise-status")).to_contain_text("Not yet", timeout=45_000)
    output = panel.locator(".exercise-output")
    # both of node1's ranks (cuda:2, cuda:3) ask for a device it lacks; the first to reach set_device fails and its
    # torchrun stops the other, as a real one does, so either local rank can be the one whose traceback shows
    expect(output).to_contain_text(re.compile(r"node1: \[default[01]\]:"))
    expect(output).to_contain_text("invalid device ordinal")
    expect(output).to_contain_text("node1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError")
    runs = panel.locator('.exercise-checks .check[data-check="runs"]')
    expect(runs).to_contain_text(re.compile(r"rank [23]: line \d+: .*invalid device ordinal"))
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "two-machines-starter.png"))

    # The solution: each machine's cuda:LOCAL_RANK, the sampler over the job, one checkpoint.
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(solution)
    assert editor_text(page, panel) == solution
    page.keyboard.press("Control+Enter")
    expect(panel.locator(".exercise-status")).to_contain_text("Passed", timeout=45_000)
    expect(panel.locator(".exercise-checks .check.failed")).to_have_count(0)
    expect(output).to_contain_text("node0: [default0]:")
    # the placement table names every rank with its machine and local rank, each on its own GPU
    table = panel.locator(".exercise-placement")
    expect(table.locator("th.placement-rank-head")).to_have_text("Rank")
    expect(table).to_contain_text("rank 3 (node1, local rank 1)")
    rows = table.locator("tbody tr")
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        who, what = cells.nth(0).inner_text(), cells.nth(3).inner_text()
        local = re.search(r"local rank (\d)", who).group(1)
        if "-> cuda:" in what:
            assert f"-> cuda:{local}" in what, (who, what)
    expect(panel.locator(".exercise-passed-badge")).to_be_visible()
    panel.screenshot(path=str(ARTIFACTS / "two-machines-passed.png"))
    assert page.console_errors == []
