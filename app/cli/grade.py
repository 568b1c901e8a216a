"""`course grade SLUG FILE [--json]`: grade a file as a submission to one exercise, exactly as the site does."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from app.cli.terminal import echo, echo_output, visible
from app.core.config import get_settings

MARK = {True: "PASS", False: "FAIL"}


def find_exercise(slug: str, exercises_dir: Path):
    """Return the exercise SLUG; a usage error names the known ones, a broken one says what to fix."""
    from app.content.exercises import read_exercises

    exercises, errors = read_exercises(exercises_dir)
    if slug in exercises:
        return exercises[slug]
    broken = [str(e) for e in errors if (exercises_dir / slug) in e.path.parents or e.path == exercises_dir / slug]
    if broken:
        raise click.ClickException(visible(f"exercise `{slug}` is broken; fix it (`course check` lists this too):\n"
                                           + "\n".join(broken)))
    raise click.UsageError(f"no exercise `{slug}`; known: {', '.join(sorted(exercises)) or '(none)'}")


def grade_file(slug: str, code: str, settings, on_output=None):
    """Grade code against one exercise on a runner started for it; return the Verdict."""
    from app.grading.grader import grade_submission
    from app.main import open_runner

    exercise = find_exercise(slug, Path(settings.exercises_dir))

    async def main():
        async with open_runner(settings) as runner:
            return await grade_submission(exercise, code, runner, on_output)

    return asyncio.run(main())


def print_verdict(verdict) -> None:
    """Print the status, the checks (one per line; a check never reached is marked `----`), then any advice."""
    where = f" on {verdict.device}" if verdict.device else ""
    echo(f"\n{verdict.exercise}: {verdict.status}{where} in {verdict.duration_ms} ms")
    for c in verdict.checks:
        mark = MARK[c.passed] if c.passed or c.reached else "----"
        echo(f"  {mark} {c.id}" + (f"  {c.message}" if c.message else ""))
    for a in verdict.advice:
        echo(f"  NOTE {a.message}")


@click.command()
@click.argument("slug")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one Verdict JSON object instead of output and checks.")
def grade(slug: str, file: Path, as_json: bool) -> None:
    """Grade FILE as a submission to exercise SLUG; exit 0 passed, 1 not passed, 2 usage error."""
    if not file.is_file():
        raise click.UsageError(f"{file}: no such file")
    try:
        code = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"{file} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    verdict = grade_file(slug, code, get_settings(), on_output=None if as_json else echo_output)
    if as_json:
        click.echo(verdict.model_dump_json())
    else:
        print_verdict(verdict)
    sys.exit(0 if verdict.status == "passed" else 1)
