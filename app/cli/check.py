"""`course check [PATH]`: everything an instructor must fix before publishing, as `file:line: what to fix`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from app.cli.terminal import echo
from app.content.course import Course, load_course
from app.content.runnable import run_runnable_blocks, runnable_blocks
from app.content.schema import ContentError
from app.core.config import Settings, get_settings
from app.grading import check_loaded


def resolve_paths(path: Path | None, exercises: Path | None, settings: Settings) -> tuple[Path, Path]:
    """Return (lessons, exercises) for PATH: a course folder (with lessons/), a lessons folder, or one lesson."""
    if path is None:
        return settings.lessons_dir, exercises or settings.exercises_dir
    if path.is_dir() and (path / "lessons").is_dir():
        return path / "lessons", exercises or path / "exercises"
    folder = path if path.is_dir() else path.parent
    sibling = folder.parent / "exercises"
    return path, exercises or (sibling if sibling.is_dir() else settings.exercises_dir)


def collect_errors(course: Course, settings: Settings, run: bool, grade: bool) -> list[ContentError]:
    """Return the static errors (exercises that do not load among them), then failing runnable blocks (run) and
    the course's standard and grading errors of the exercises that loaded (grade)."""
    errors = sorted(course.errors, key=lambda e: (str(e.path), e.line))
    if run:
        errors += run_runnable_blocks(course)
        errors += asyncio.run(_blocks_on_h100(course, settings))
    if grade:
        errors += check_loaded(course.exercises.values(), settings)
    return errors


async def _blocks_on_h100(course: Course, settings: Settings) -> list[ContentError]:
    """Every runnable block on the simulated H100, in the sandbox as a learner's Run in the page runs it."""
    from app.main import open_runner  # the runner COURSE_RUNNER names (imported late: it is the whole site)
    from app.submissions.block_runs import check_blocks_on

    if not runnable_blocks(course):
        return []
    async with open_runner(settings) as runner:
        return await check_blocks_on(course, runner, "h100")


def _check_one_exercise(folder: Path, no_grade: bool) -> None:
    """`course check exercises/<slug>`: the exercise's own static problems, then its answers graded."""
    from app.content.exercises import read_exercises
    from app.grading.content_check import check_loaded

    exercises, errors = read_exercises(folder.parent)
    exercise = next((e for e in exercises.values() if Path(e.path).resolve() == folder), None)
    errors = [e for e in errors if folder.name in str(e.path)]
    if exercise is not None:
        errors += check_loaded([exercise], get_settings(), grade=not no_grade)
    for error in errors:
        echo(str(error))
    if errors or exercise is None:
        click.echo(f"{len(errors)} problem(s) found", err=True)
        sys.exit(1)
    click.echo(f"ok: exercise {exercise.slug}{'' if no_grade else ', solution and wrong answers graded'}")


@click.command()
@click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--exercises", "exercises_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Exercise folders (default: exercises/ beside the lessons, else COURSE_EXERCISES_DIR).")
@click.option("--no-run", is_flag=True, help="Do not run the lessons' runnable code blocks (on the CPU and on the "
                                             "simulated H100) nor compare their ```output blocks.")
@click.option("--no-grade", is_flag=True, help="Do not grade exercise solutions and wrong answers in the sandbox.")
def check(path: Path | None, exercises_dir: Path | None, no_run: bool, no_grade: bool) -> None:
    """Check lessons and exercises; print `file:line: what to fix` per problem, exit 1 on any. PATH may also be
    one exercise's folder (`exercises/runs-on-a-mac`): only that exercise is checked and graded."""
    settings = get_settings()
    if path is not None and (path / "exercise.yaml").is_file():
        _check_one_exercise(path.resolve(), no_grade)
        return
    lessons_dir, exercises_dir = resolve_paths(path, exercises_dir, settings)
    course = load_course(lessons_dir, exercises_dir, settings.static_dir)
    errors = collect_errors(course, settings, run=not no_run, grade=not no_grade)
    for error in errors:
        echo(str(error))
    if errors:
        click.echo(f"{len(errors)} problem(s) found", err=True)
        sys.exit(1)
    ran = "" if no_run else f", {len(runnable_blocks(course))} runnable block(s) ran on a CPU and the simulated H100"
    click.echo(f"ok: {len(course.lessons)} lesson(s), {len(course.exercises)} exercise(s){ran}")
