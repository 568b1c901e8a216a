"""Run the lessons' runnable code blocks (```` ```python runnable ````), each in its own fresh interpreter on the CPU,
and hold what the lesson says they print (the ```` ```output ```` blocks after them) against what they print.

These are the instructor's own examples, not learner code, so on the CPU they run in a plain subprocess (no
sandbox), the way a learner would paste them into a terminal: one block = one complete program. `course check`
also runs each on the simulated H100, in the sandbox as a learner's Run does (app/submissions/block_runs.py,
`check_blocks_on`), and compares that output here too.

An ```` ```output ```` block states the output of the runnable block before it (text between them is fine): with no
flag on every machine checked, with `cpu` or `h100` on that one (a block printing its device shows `cpu` on one
and `cuda:0` on the other). Lines are compared without trailing spaces; `...` stands for any text, as in doctest's
ELLIPSIS (random numbers, timings).
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from app.content.markdown import OUTPUT_MACHINES, CodeBlock
from app.content.schema import ContentError
from app.content.validate import PYTHON_LANGS, Expected, expected_outputs

if TYPE_CHECKING:
    from app.content.course import Course

# seconds per block; importing torch alone takes about one
BLOCK_TIMEOUT_S = 120
# blocks run at once; each is mostly one CPU-bound interpreter
PARALLEL_BLOCKS = max(1, min(4, os.cpu_count() or 1))


def _normal(text: str) -> str:
    return "".join(line.rstrip() + "\n" for line in text.strip("\n").splitlines())


def output_error(path: Path, block: CodeBlock, printed: str, expected: CodeBlock | None, machine: str
                 ) -> ContentError | None:
    """The block printed `printed` on `machine`; an error at the ```output block when the lesson says otherwise."""
    if expected is None:
        return None
    want, got = _normal(expected.code), _normal(printed)
    if doctest.OutputChecker().check_output(want, got, doctest.ELLIPSIS):
        return None
    return ContentError(path, expected.line, f"the block at line {block.line} prints otherwise "
                                             f"{OUTPUT_MACHINES[machine]} than this ```output says: "
                                             f"{_first_difference(want, got)}; fix the text (or the code); `...` "
                                             "stands for any text")


def _first_difference(want: str, got: str) -> str:
    """Where two outputs part, in words: the first line that differs (`...` matching any text), or the line count."""
    checker, wanted, printed = doctest.OutputChecker(), want.splitlines(), got.splitlines()
    for number, (a, b) in enumerate(zip(wanted, printed), 1):
        if not checker.check_output(a + "\n", b + "\n", doctest.ELLIPSIS):
            return f"line {number} is {b[:200]!r}, not {a[:200]!r}"
    return f"it prints {len(printed)} line(s), not {len(wanted)}"


def runnable_blocks(course: Course) -> list[tuple[Path, CodeBlock]]:
    """Return every block marked runnable, with the lesson file it sits in."""
    return [(lesson.path, block) for lesson in course.lessons for block in lesson.facts.code_blocks if block.runnable]


def cpu_only_env() -> dict[str, str]:
    """The environment a block runs in: ours, with every accelerator hidden so it proves the CPU path."""
    env = dict(os.environ)
    env.update(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    return env


def outputs_of(course: Course) -> dict[tuple[Path, int], Expected]:
    """Every runnable block's stated outputs, by (lesson file, line of the block)."""
    outputs = {}
    for lesson in course.lessons:
        paired, _errors = expected_outputs(lesson.path, lesson.facts.code_blocks,
                                           [h.line for h in lesson.facts.headings])
        outputs.update({(lesson.path, line): expected for line, expected in paired.items()})
    return outputs


def run_block(path: Path, block: CodeBlock, python: str = sys.executable, expected: Expected | None = None
              ) -> ContentError | None:
    """Run one block; return an error at the failing line of the Markdown file, or at its ```output block when it
    prints otherwise than that says on the CPU, or None."""
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
        return output_error(path, block, proc.stdout, (expected or {}).get("cpu"), "cpu")
    lines = [int(n) for n in re.findall(rf'File "{re.escape(str(script))}", line (\d+)', proc.stderr)]
    line = block.line + lines[-1] if lines else block.line
    last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return ContentError(path, line, f"runnable block failed on CPU: {last}; fix the code, or drop `runnable` "
                                    "from the fence if it cannot run without a GPU")


def run_runnable_blocks(course: Course, python: str = sys.executable) -> list[ContentError]:
    """Run every runnable block of the course (a few at once); return the failures."""
    blocks, outputs = runnable_blocks(course), outputs_of(course)
    with ThreadPoolExecutor(PARALLEL_BLOCKS) as pool:
        results = list(pool.map(lambda item: run_block(item[0], item[1], python, outputs.get((item[0], item[1].line))),
                                blocks))
    return [r for r in results if r is not None]
