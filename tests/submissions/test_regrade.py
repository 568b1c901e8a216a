"""Regrading after a change to an exercise's checks.py, through the real sandbox, on a copy of same-device in a
temp course (the real exercises stay untouched).

The story: same-device's checks once had two bugs. `y_value` passed any `y` (so a placeholder `y = zeros` passed)
and `y_on_device` refused a move made with `.cuda()` (so a correct answer failed). 240 submissions of 60 learners
were stored under those checks (graded once per distinct program through the sandbox, then inserted). The fix is
the real checks.py; `course regrade same-device` grades every stored submission again, and the test reads the new
verdicts, the kept history, the progress rule, and what the dashboard shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app import ROOT
from app.content.exercises import load_exercise
from app.core.db import Database
from app.grading import grade_submission
from app.learning import progress
from app.models import ExerciseProgress, Learner, Regrade, Submission, SubmissionVerdict
from app.submissions.finish import finish
from tests.helpers import TEST_PASSWORD, create_account, make_settings, with_csrf

pytestmark = pytest.mark.slow

SLUG = "same-device"
LESSON = """---
title: The CPU/GPU border
slug: cpu-gpu-border
order: 1
summary: A copy of the first lesson's front matter, placing the exercise under test.
estimated_minutes: 5
exercises:
  - same-device
---

## Start

Tensors live on one device.
"""
# appended to the real checks.py: the checks as they were before the fix
OLD_CHECKS = '''

_fixed_evaluate = evaluate


def evaluate(facts):
    """Before the fix: y_value passed any y, and y_on_device refused a move made with .cuda()."""
    results = []
    for result in _fixed_evaluate(facts):
        if result.id == "y_value":
            result = check("y_value", True)
        elif result.id == "y_on_device" and any(e.get("op") == "cuda" for e in facts.events("move")):
            result = check("y_on_device", False, "move tensors with .to(device), not .cuda().")
        results.append(result)
    return results
'''
PROGRAMS = {
    "solution": ROOT / "exercises" / SLUG / "solution.py",
    "placeholder": ROOT / "exercises" / SLUG / "wrong" / "placeholder_y.py",
    "cuda_method": ROOT / "tests" / "grading" / "variants" / SLUG / "cuda_method.py",
    "starter": ROOT / "exercises" / SLUG / "wrong" / "unchanged_starter.py",
}
# what each program got under the old checks, and gets under the fixed ones
OLD = {"solution": "passed", "placeholder": "passed", "cuda_method": "failed", "starter": "failed"}
NEW = {"solution": "passed", "placeholder": "failed", "cuda_method": "passed", "starter": "failed"}
# four groups of fifteen learners; submission k of every learner was made on day k
GROUPS = {
    "kept": ["starter", "placeholder", "placeholder", "placeholder"],  # passed only with a placeholder
    "given": ["starter", "cuda_method", "cuda_method", "cuda_method"],  # never passed, but was right
    "steady": ["starter", "starter", "solution", "solution"],
    "mixed": ["placeholder", "solution", "starter", "cuda_method"],
}
PER_GROUP = 15
DAY_1 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def day(k: int) -> datetime:
    return DAY_1 + timedelta(days=k - 1)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A temp course: one lesson and a copy of same-device whose checks.py is the old, buggy one."""
    folder = tmp_path_factory.mktemp("regrade") / "course"
    shutil.copytree(ROOT / "exercises" / SLUG, folder / "exercises" / SLUG)
    (folder / "lessons").mkdir()
    (folder / "lessons" / "01-border.md").write_text(LESSON)
    checks = folder / "exercises" / SLUG / "checks.py"
    checks.write_text(checks.read_text() + OLD_CHECKS)
    return folder


@pytest.fixture(scope="module")
def old_verdicts(course, sandbox) -> dict[str, dict]:
    """Grade each distinct program once under the old checks, through the sandbox."""
    exercise = load_exercise(course / "exercises" / SLUG)
    verdicts = {}
    for name, path in PROGRAMS.items():
        verdict = sandbox.call(grade_submission(exercise, path.read_text(), sandbox.runner)).model_dump(mode="json")
        assert verdict["status"] == OLD[name], (name, verdict["checks"])
        verdicts[name] = verdict
    return verdicts


@pytest.fixture(scope="module")
def stored(course, old_verdicts, tmp_path_factory):
    """A migrated database holding 240 submissions graded under the old checks; returns (settings, learners)."""
    settings = make_settings(tmp_path_factory.mktemp("db"), course=course, migrate=True)
    db = Database(settings.database_url)
    learners = {group: [f"{group[:4]}{i:02d}".ljust(32, "0") for i in range(PER_GROUP)] for group in GROUPS}
    with db.session(write=True) as session, session.begin():
        for group, programs in GROUPS.items():
            for learner in learners[group]:
                _store(session, learner, programs, old_verdicts)
    db.dispose()
    return settings, learners


def _store(session, learner: str, programs: list[str], old_verdicts: dict[str, dict]) -> None:
    """Store one learner's submissions as the site would have, dated day 1, 2, ... and their pass dated too."""
    for k, name in enumerate(programs, start=1):
        submission = progress.record_submission(session, learner_id=learner, exercise_slug=SLUG,
                                                code=PROGRAMS[name].read_text())
        finish(session, submission_id=submission.id, verdict=old_verdicts[name])
        submission.created_at = day(k)
    first_pass = next((k for k, name in enumerate(programs, start=1) if OLD[name] == "passed"), None)
    row = session.get(ExerciseProgress, (learner, SLUG))
    row.passed_at = day(first_pass) if first_pass else None
    session.get(Learner, learner).last_activity_at = day(len(programs))


def regrade(settings, *args: str) -> subprocess.CompletedProcess:
    """Run `course regrade` as an instructor would, against the temp course and database."""
    env = {**os.environ, "COURSE_ENV": "test", "COURSE_SECRET_KEY": settings.secret_key,
           "COURSE_DATABASE_URL": settings.database_url, "COURSE_EXERCISES_DIR": str(settings.exercises_dir),
           "COURSE_LESSONS_DIR": str(settings.lessons_dir), "COURSE_RUNNER_CONCURRENCY": "2"}
    return subprocess.run([sys.executable, "-m", "app.cli", "regrade", SLUG, *args], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


@pytest.fixture(scope="module")
def regraded(course, stored):
    """Fix checks.py (the real one again) and regrade every stored submission from the command line."""
    settings, learners = stored
    shutil.copy(ROOT / "exercises" / SLUG / "checks.py", course / "exercises" / SLUG / "checks.py")
    done = regrade(settings)
    print(done.stdout, done.stderr)  # the summary line says how long the regrade took
    return settings, learners, done


def test_the_command_regrades_every_stored_submission_and_says_what_changed(regraded):
    _settings, _learners, done = regraded
    assert done.returncode == 0, done.stderr
    assert "same-device: regraded 240 submissions in" in done.stdout
    assert "changed: 120 (60 now pass, 60 now fail); errors: 0" in done.stdout
    assert "progress: 15 learners given a pass; 15 keep a pass no current verdict supports" in done.stdout
    assert "regrade #1" in done.stderr  # the progress bar's label (a bar proper on a terminal)


def test_new_verdicts_follow_the_fixed_checks_and_the_old_ones_are_kept(regraded, old_verdicts):
    settings, _learners, _done = regraded
    db = Database(settings.database_url)
    with db.session() as session:
        submissions = session.scalars(select(Submission)).all()
        rows = session.scalars(select(SubmissionVerdict)).all()
        regrade_row = session.scalars(select(Regrade)).one()
    db.dispose()
    program = {s.id: next(n for n, p in PROGRAMS.items() if p.read_text() == s.code) for s in submissions}
    by_revision = {(r.submission_id, r.revision): r for r in rows}
    assert len(submissions) == 240 and len(rows) == 480
    for submission in submissions:
        name = program[submission.id]
        assert submission.status == OLD[name] and submission.verdict == old_verdicts[name]  # never overwritten
        run, regraded_row = by_revision[(submission.id, 0)], by_revision[(submission.id, 1)]
        assert run.status == OLD[name] and run.regrade_id is None and run.verdict is None
        assert regraded_row.status == NEW[name] and regraded_row.regrade_id == regrade_row.id
        assert regraded_row.verdict["status"] == NEW[name]
    placeholder = next(r for r in rows if r.revision == 1 and program[r.submission_id] == "placeholder")
    assert placeholder.first_failed_check == "y_value"
    assert (regrade_row.status, regrade_row.total, regrade_row.done, regrade_row.changed) == ("finished", 240, 240, 120)
    assert (regrade_row.now_passing, regrade_row.now_failing, regrade_row.errors) == (60, 60, 0)
    assert (regrade_row.passes_added, regrade_row.passes_kept) == (15, 15)


def test_progress_rule_gives_passes_and_never_takes_one_away(regraded):
    settings, learners, _done = regraded
    db = Database(settings.database_url)
    with db.session() as session:
        passed = {r.learner_id: r.passed_at for r in session.scalars(select(ExerciseProgress))}
        activity = {r.id: r.last_activity_at for r in session.scalars(select(Learner))}
    db.dispose()
    for learner in learners["kept"]:
        assert passed[learner] == day(2)  # their placeholder fails now; the pass they saw stays
    for learner in learners["given"]:
        assert passed[learner] == day(2)  # dated by their earliest code that passes
        assert activity[learner] == day(4)  # a regrade is not the learner's activity
    for learner in learners["steady"]:
        assert passed[learner] == day(3)
    for learner in learners["mixed"]:
        assert passed[learner] == day(1)  # an earlier pass stays, even one whose code fails now


def test_the_dashboard_shows_the_current_verdicts_the_history_and_who_keeps_a_pass(regraded):
    settings, learners, _done = regraded
    from app.main import create_app

    app = create_app(settings)
    create_account(app, "ines@example.org", name="Ines", role="instructor")
    with TestClient(app) as browser:
        with_csrf(browser)
        assert browser.post("/api/auth/login", json={"email": "ines@example.org",
                                                     "password": TEST_PASSWORD}).status_code == 200
        figures = {f["slug"]: f for f in browser.get("/api/instructor/exercises").json()}[SLUG]
        # today's verdicts: 'given', 'steady' and 'mixed' pass (at attempts 2, 3 and 2); the 75 unchanged starters
        # fail 'runs' first (they raise) and the 60 placeholders fail 'y_value'; a learner's second run of the same
        # code ran nothing new and is counted apart ('steady' starts twice, 'kept' sends its placeholder thrice)
        assert figures == {"slug": SLUG, "learners": 60, "passed_learners": 45, "pass_rate": 0.75, "attempts": 240,
                           "median_attempts_to_pass": 2, "failing_checks": {"runs": 60, "y_value": 30},
                           "uncounted_failures": {"repeat": 45}, "passed_after_seeing_solution": 0,
                           "late_passes": None}
        page = browser.get(f"/instructor/exercises/{SLUG}?check=y_value")
        assert page.status_code == 200
        assert "regrade #1" in page.text and "Regrade #1" in page.text
        assert page.text.count('class="submission"') == 20  # one page, every one failing y_value first now
        kept = page.text.split('id="kept-passes"')[1].split("</ul>")[0]
        assert kept.count("<li>") == 15 and f"anonymous {learners['kept'][0][:8]}" in kept
    app.state.db.dispose()


def test_since_regrades_only_newer_submissions_and_adds_a_revision(regraded):
    settings, _learners, _done = regraded
    done = regrade(settings, "--since", "2026-03-04")
    assert done.returncode == 0, done.stderr
    assert "regraded 60 submissions" in done.stdout and "changed: 0 (0 now pass, 0 now fail)" in done.stdout
    db = Database(settings.database_url)
    with db.session() as session:
        second = session.scalars(select(SubmissionVerdict).where(SubmissionVerdict.revision == 2)).all()
        dates = {session.get(Submission, r.submission_id).created_at for r in second}
    db.dispose()
    assert len(second) == 60 and dates == {day(4)}


def test_a_regrade_of_an_unknown_exercise_is_a_usage_error(stored):
    settings, _learners = stored
    env = {**os.environ, "COURSE_DATABASE_URL": settings.database_url,
           "COURSE_EXERCISES_DIR": str(settings.exercises_dir)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "regrade", "no-such-exercise"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "no exercise `no-such-exercise`; known: same-device" in done.stderr
