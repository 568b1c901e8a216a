"""Every code block the lessons mark `runnable` runs on a CPU-only machine (accelerators hidden)."""

from __future__ import annotations

import pytest

from app import ROOT
from app.content.course import load_course
from app.content.runnable import run_block, runnable_blocks

BLOCKS = runnable_blocks(load_course(ROOT / "lessons", ROOT / "exercises"))


def test_the_lessons_have_runnable_blocks():
    assert len(BLOCKS) >= 8
    assert {path.name for path, _ in BLOCKS} == {p.name for p in (ROOT / "lessons").glob("*.md")}


@pytest.mark.parametrize(("path", "block"), BLOCKS, ids=[f"{p.stem}:{b.line}" for p, b in BLOCKS])
def test_runnable_block_runs_on_cpu(path, block):
    error = run_block(path, block)
    assert error is None, str(error)
