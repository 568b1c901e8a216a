"""Every code block the lessons mark `runnable` runs on a CPU-only machine (accelerators hidden) and prints what its
```output blocks say; on the simulated H100 too, through the real sandbox, as a learner's Run in the page runs it."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from app import ROOT
from app.content.course import load_course
from app.content.runnable import outputs_of, run_block, runnable_blocks

COURSE = load_course(ROOT / "lessons", ROOT / "exercises")
BLOCKS = runnable_blocks(COURSE)
OUTPUTS = outputs_of(COURSE)


def test_the_lessons_have_runnable_blocks():
    assert len(BLOCKS) >= 8
    assert {path.name for path, _ in BLOCKS} == {p.name for p in (ROOT / "lessons").glob("*.md")}


@pytest.fixture(scope="module")
def cpu_runs() -> dict[tuple[Path, int], Future]:
    """Every block's run on the CPU, two at a time: each is one interpreter importing torch, mostly on one core, so
    on two cores they overlap instead of taking turns. Each test below still judges its own block."""
    with ThreadPoolExecutor(2) as pool:
        futures = {(path, block.line): pool.submit(run_block, path, block, expected=OUTPUTS.get((path, block.line)))
                   for path, block in BLOCKS}
    return futures  # done: leaving the pool waited for every run


@pytest.mark.parametrize(("path", "block"), BLOCKS, ids=[f"{p.stem}:{b.line}" for p, b in BLOCKS])
def test_runnable_block_runs_on_cpu(cpu_runs, path, block):
    error = cpu_runs[(path, block.line)].result()
    assert error is None, str(error)


def test_the_lessons_state_outputs_per_machine():
    stated = [machines for machines in OUTPUTS.values()]
    assert len(stated) >= 4
    assert any(set(machines) == {"cpu", "h100"} and machines["cpu"] is not machines["h100"] for machines in stated)


@pytest.mark.slow  # every block in the sandbox
def test_every_runnable_block_runs_on_the_simulated_h100_as_its_output_blocks_say(tmp_path):
    import asyncio

    from app.main import open_runner
    from app.submissions.block_runs import check_blocks_on
    from tests.helpers import make_settings

    async def check():
        async with open_runner(make_settings(tmp_path)) as runner:
            return await check_blocks_on(COURSE, runner, "h100")

    assert [str(e) for e in asyncio.run(check())] == []


def test_a_python_blocks_flags_are_runnable_and_loopback_only(tmp_path):
    from app.content.validate import check_lessons
    from tests.helpers import small_course

    folder = small_course(tmp_path)
    alpha = folder / "lessons" / "01-alpha.md"
    blocks = ("python runnable loopback", "python loopback", "python runnable not-in-sandbox")
    alpha.write_text(alpha.read_text() + "".join(f"\n```{info}\nprint({n})\n```\n" for n, info in enumerate(blocks)))
    course = load_course(folder / "lessons", folder / "exercises")
    problems = [str(e) for e in check_lessons(course)]
    assert len(problems) == 2, problems
    assert any("write ```python runnable loopback" in p for p in problems), problems
    assert any("flags are runnable, loopback, not not-in-sandbox" in p for p in problems), problems
    blocks = course.get("alpha").runnable_blocks
    assert [b.loopback for b in blocks] == [True, False]  # a flag no longer known runs as a plain runnable block
