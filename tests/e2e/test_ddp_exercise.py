"""Lesson 3 in real Chromium: run the single-GPU starter of `ddp-training` as two ranks, read each rank's output
and the failing checks, follow one to its line, paste the DDP solution, run it again and pass."""

from __future__ import annotations

import re

import pytest

from app import ROOT
from tests.helpers import ARTIFACTS

pytestmark = pytest.mark.browser

EXERCISE = ROOT / "exercises" / "ddp-training"
# every check but these fails on the starter: it runs on both ranks, and its two copies train the same model
STARTER_PASSES = {"runs", "in_sync"}


def editor_text(page, panel) -> str:
    return page.evaluate("(el) => el.courseExercise.editor.getValue()", panel.element_handle())


def cursor_line(page, panel) -> int:
    return page.evaluate("(el) => el.courseExercise.editor.cursorLine()", panel.element_handle())


def test_lesson_3_runs_the_starter_on_two_ranks_then_the_ddp_solution_passes(live_site, browser_page):
    page = browser_page
    from playwright.sync_api import expect

    starter = (EXERCISE / "starter.py").read_text(encoding="utf-8")
    solution = (EXERCISE / "solution.py").read_text(encoding="utf-8")
    page.goto(f"{live_site.url}/lessons/multi-gpu-and-distributed")
    panel = page.locator("#exercise-ddp-training")
    expect(panel.locator(".cm-editor")).to_be_visible()
    assert editor_text(page, panel) == starter

    # The starter, as it is: lesson 4's single-GPU loop, started twice as torchrun would.
    panel.locator(".exercise-run").click()
    expect(panel.locator(".exercise-status")).to_contain_text("Not yet", timeout=30_000)
    # both ranks' GPUs in one level of brackets, and the output says they were simulated (issue 29)
    expect(panel.locator(".exercise-status")).to_contain_text(" ms on cuda:0, cuda:1, 2 ranks, simulated on CPU)")
    expect(panel.locator(".exercise-simulated")).to_be_visible()
    output = panel.locator(".exercise-output")
    for rank in (0, 1):  # each rank's lines, with torchrun's --tee prefix
        expect(output).to_contain_text(f"[default{rank}]:epoch 4: loss")
    checks = panel.locator(".exercise-checks .check")
    ids = [checks.nth(i).get_attribute("data-check") for i in range(checks.count())]
    assert ids == ["runs", "process_group", "rank_device", "ddp_wrapped", "sharded_data", "set_epoch", "in_sync",
                   "rank0_only"]
    failed = panel.locator(".exercise-checks .check.failed")
    assert sorted(failed.nth(i).get_attribute("data-check") for i in range(failed.count())) == sorted(
        set(ids) - STARTER_PASSES)
    # rank 1 put its model on cuda:0 too: the check names the rank and the starter's `.to(device)` line
    rank_device = panel.locator('.exercise-checks .check.failed[data-check="rank_device"]')
    expect(rank_device).to_contain_text(re.compile(r"rank 1: .*cuda:0"))
    line = int(rank_device.locator(".line-link").get_attribute("data-line"))
    assert ".to(device)" in starter.splitlines()[line - 1]
    page.keyboard.press("Control+Home")
    rank_device.locator(".line-link").click()
    assert cursor_line(page, panel) == line
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "ddp-exercise-starter.png"))

    # The DDP script (insert_text: typed code would be re-indented by the editor), run with the keyboard.
    panel.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(solution)
    assert editor_text(page, panel) == solution
    page.keyboard.press("Control+Enter")
    expect(panel.locator(".exercise-status")).to_contain_text("Passed", timeout=30_000)
    expect(panel.locator(".exercise-checks .check.failed")).to_have_count(0)
    expect(panel.locator(".exercise-checks .check.passed")).to_have_count(len(ids))
    expect(output).to_contain_text("[default0]:epoch 4: loss")
    expect(output).not_to_contain_text("[default1]:")  # only rank 0 prints now
    expect(panel.locator(".exercise-passed-badge")).to_be_visible()
    panel.screenshot(path=str(ARTIFACTS / "ddp-exercise-passed.png"))
    assert page.console_errors == []
