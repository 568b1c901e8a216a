"""Run the lessons' runnable code blocks (```` ```python runnable ````), each in its own fresh interpreter on the CPU.

These are the instructor's own examples, not learner code, so they run in a plain subprocess (no sandbox), the
way a learner would paste them into a terminal: one block = one complete program.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from app.content.markdown import CodeBlock
from app.content.schema import ContentError
from app.content.validate import PYTHON_LANGS

if TYPE_CHECKING:
    from app.content.course import Course

# seconds per block; importing torch alone takes about one
BLOCK_TIMEOUT_S = 120
# blocks run at once; each is mostly one CPU-bound interpreter
PARALLEL_BLOCKS = max(1, min(4, os.cpu_count() or 1))


def runnable_blocks(course: Course) -> list[tuple[Path, CodeBlock]]:
    """Return every block marked runnable, with the lesson file it sits in."""
    return [(lesson.path, block) for lesson in course.lessons for block in lesson.facts.code_blocks if block.runnable]


def cpu_only_env() -> dict[str, str]:
    """The environment a block runs in: ours, with every accelerator hidden so it proves the CPU path."""
    env = dict(os.environ)
    env.update(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    return env


def run_block(path: Path, block: CodeBlock, python: str = sys.executable) -> ContentError | None:
    """Run one block; return an error at the failing line of the Markdown file, or None when it exits 0."""
    if block.lang not in PYTHON_LANGS:
        return ContentError(path, block.line, f"only Python blocks can be runnable, not `{block.lang or 'plain'}`")
    with tempfile.TemporaryDirectory(prefix="lesson-block-") as tmp:
        script = Path(tmp) / "block.py"
        script.write_text(block.code, encoding="utf-8")
        try:
            proc = subprocess.run([python, str(script)], cwd=tmp, env=cpu_only_env(), capture_output=True,
                                  text=True, timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return ContentError(path, block.line, f"runnable block ran past {BLOCK_TIMEOUT_S} s; make it smaller")
    if proc.returncode == 0:
        return None
    lines = [int(n) for n in re.findall(rf'File "{re.escape(str(script))}", line (\d+)', proc.stderr)]
    line = block.line + lines[-1] if lines else block.line
    last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return ContentError(path, line, f"runnable block failed on CPU: {last}; fix the code, or drop `runnable` "
                                    "from the fence if it cannot run without a GPU")


def run_runnable_blocks(course: Course, python: str = sys.executable) -> list[ContentError]:
    """Run every runnable block of the course (a few at once); return the failures."""
    blocks = runnable_blocks(course)
    with ThreadPoolExecutor(PARALLEL_BLOCKS) as pool:
        results = list(pool.map(lambda item: run_block(item[0], item[1], python), blocks))
    return [r for r in results if r is not None]
