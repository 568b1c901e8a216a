"""`course check`: passes on the real lessons, and reports each kind of error as file:line on a fixture course."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app import ROOT
from tests.helpers import FIXTURES, side_by_side

COURSE = str(Path(sys.executable).parent / "course")


def course_check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([COURSE, "check", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_check_passes_on_the_real_lessons():
    """The check as an instructor runs it, static checks and exercise grading, without running the lessons'
    blocks: tests/content/test_runnable.py runs each of them on a CPU and on the simulated H100 (the functions
    `course check` calls), and the good fixture course below runs blocks through the command. Running them here
    too was the same 24 torch imports twice, most of this test's minute."""
    result = course_check("lessons/", "--no-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: 5 lesson(s)" in result.stdout


@pytest.fixture(scope="module")
def fixture_checks() -> dict[str, subprocess.CompletedProcess]:
    """`course check` of the good and of the broken fixture course, side by side: each is mostly one interpreter
    at a time (its blocks on a CPU, then in a sandbox), so on two cores the pair takes about the time of one."""
    good, broken = side_by_side(lambda: course_check(str(FIXTURES / "good"), "--no-grade"),
                                lambda: course_check("tests/fixtures/broken", "--no-grade"))
    return {"good": good, "broken": broken}


def test_check_passes_on_a_good_fixture_course(fixture_checks):
    result = fixture_checks["good"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: 2 lesson(s), 1 exercise(s), 1 runnable block(s) ran on a CPU and the simulated H100" in result.stdout


BROKEN = "tests/fixtures/broken/lessons/"
EXPECTED = [
    # schema errors, each at the line of the field
    (BROKEN + "a-schema.md:1:", "add `summary:`"),
    (BROKEN + "a-schema.md:4:", "fix `order`"),
    (BROKEN + "a-schema.md:6:", "remove `colour`"),
    (BROKEN + "g-no-front-matter.md:1:", "no front matter"),
    # broken internal links and anchors
    (BROKEN + "b-links.md:11:", "no lesson with slug `no-such-lesson`"),
    (BROKEN + "b-links.md:13:", "has no heading with anchor `#nowhere`"),
    (BROKEN + "b-links.md:13:", "has no heading with anchor `#nope`"),
    (BROKEN + "b-links.md:15:", "write links between lessons as `/lessons/<slug>`"),
    # unknown exercise slugs, and a placed exercise missing from the front matter
    (BROKEN + "c-exercise.md:8:", "unknown exercise `ghost-exercise`"),
    (BROKEN + "c-exercise.md:16:", "exercise `demo-move` is placed but not listed"),
    # duplicate slugs
    (BROKEN + "e-dup-two.md:3:", "duplicate slug `dup-one`, also used by d-dup-one.md"),
    # code: a runnable block that fails (at the failing line), a block that does not compile, a skipped heading
    (BROKEN + "f-code.md:15:", "runnable block failed on CPU: RuntimeError: boom on line 4 of the block"),
    (BROKEN + "f-code.md:15:", "runnable block failed on One H100 (simulated): RuntimeError: boom on line 4"),
    # what a block prints against its ```output blocks: the H100's is wrong (the CPU's, with `...`, is right),
    # and an output block that follows no runnable block
    (BROKEN + "h-output.md:26:", "the block at line 11 prints otherwise on one H100 than this ```output says: "
                                 "line 1 is 'cuda:0', not 'cpu'"),
    (BROKEN + "h-output.md:33:", "an ```output block says what the runnable block before it prints"),
    (BROKEN + "f-code.md:21:", "Python block does not compile"),
    (BROKEN + "f-code.md:25:", "heading jumps from level 2 to 4"),
]


@pytest.fixture(scope="module")
def broken_output(fixture_checks) -> subprocess.CompletedProcess:
    return fixture_checks["broken"]


def test_check_fails_on_a_broken_course(broken_output):
    assert broken_output.returncode == 1
    assert f"{len(EXPECTED)} problem(s) found" in broken_output.stderr, broken_output.stdout


@pytest.mark.parametrize(("where", "what"), EXPECTED, ids=[f"{w.rsplit('/', 1)[1]}{m[:20]}" for w, m in EXPECTED])
def test_check_names_file_line_and_fix(broken_output, where, what):
    lines = broken_output.stdout.splitlines()
    assert any(line.startswith(where) and what in line for line in lines), broken_output.stdout


def test_check_accepts_a_single_lesson_file_and_static_only_mode(fixtures_dir):
    result = course_check(str(fixtures_dir / "broken" / "lessons" / "f-code.md"), "--no-run", "--no-grade")
    assert result.returncode == 1
    assert "f-code.md:21:" in result.stdout and "runnable block failed" not in result.stdout


def test_a_broken_exercise_yaml_is_one_problem_at_its_line(tmp_path, fixtures_dir):
    """With grading on (the path that also re-loaded exercises), a bad field is reported once, file:line: fix."""
    course = tmp_path / "course"
    shutil.copytree(fixtures_dir / "good", course)
    spec = course / "exercises" / "demo-move" / "exercise.yaml"
    spec.write_text(spec.read_text().replace("checks:", "colour: red\nchecks:", 1))
    result = course_check(str(course), "--no-run")
    assert result.returncode == 1
    about = [line for line in result.stdout.splitlines() if "exercise.yaml" in line]
    allowed = "title, lesson, checks, hints, limits, needs_gpu, gpus, launch, machine, machines, solution_unlock"
    assert about == [f"{spec}:3: remove `colour` (allowed fields: {allowed})"], result.stdout
    assert "pydantic" not in result.stdout


@pytest.mark.slow  # grades one exercise's solution and wrong answers in the sandbox
def test_check_one_exercise_folder():
    """`course check exercises/<slug>` checks and grades that exercise alone (issue 27's runs-on-a-mac)."""
    result = course_check("exercises/runs-on-a-mac")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok: exercise runs-on-a-mac, solution and wrong answers graded"
