"""Grading fixtures: one warm sandbox runner for the whole session (starting a fork server takes seconds)."""

from __future__ import annotations

import pytest

from app.content.exercises import load_exercises
from app.core.config import ROOT
from app.grading import grade_submission
from app.runner import BlockingRunner
from tests.helpers import make_settings


@pytest.fixture(scope="session")
def exercises():
    """The course's exercises, by slug."""
    return load_exercises(ROOT / "exercises")


@pytest.fixture(scope="session", params=["prefork", "spawn"])
def grading_runner(request, tmp_path_factory):
    """A runner (real fork server, real isolation) shared by every grading test, once per pool: the default one,
    and the spawn-then-isolate pool of GPU slots in its CPU mode."""
    with BlockingRunner(make_settings(tmp_path_factory.mktemp("grading"), sandbox_pool=request.param)) as runner:
        yield runner


@pytest.fixture(scope="session")
def grade(grading_runner, exercises):
    """grade(slug, code) -> Verdict, through the real sandbox."""

    def run(slug: str, code: str, on_output=None):
        return grading_runner.call(grade_submission(exercises[slug], code, grading_runner.runner, on_output))

    return run
