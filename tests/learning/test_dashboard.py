"""The dashboard's queries on a class: as many statements for fifty learners as for five (no query per learner),
and the verdict summaries they read (first failing check, exception line) taken from each verdict once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, select

from app.content.course import load_course
from app.core.db import Database
from app.learning import dashboard, progress
from app.models import Submission
from app.submissions import history
from app.submissions.finish import finish
from tests.helpers import make_settings, small_course

EXERCISE = "demo"


def verdict(status: str, failing: str | None = None, stderr: str = "") -> dict:
    checks = [{"id": check, "passed": check != failing, "message": "", "line": None} for check in ("runs", "moved")]
    return {"exercise": EXERCISE, "status": status, "checks": checks if status != "error" else [], "stdout": "",
            "stderr": stderr, "duration_ms": 5, "device": "cpu"}


def fill(db: Database, learners: int) -> None:
    """Each learner: a run that raises, one that fails `moved`, a pass; every third also an `error` run."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    with db.session(write=True) as session, session.begin():
        for n in range(learners):
            learner = f"{n:032d}"
            runs = [verdict("failed", "runs", "Traceback (most recent call last):\n  File \"main.py\", line 3\n"
                                              "RuntimeError: Expected all tensors to be on the same device"),
                    verdict("failed", "moved"), verdict("passed")]
            if n % 3 == 0:
                runs.append(verdict("error", stderr="The sandbox process was killed from outside"))
            for k, result in enumerate(runs):
                submission = progress.record_submission(session, learner_id=learner, exercise_slug=EXERCISE,
                                                        code=f"print({k})")
                finish(session, submission_id=submission.id, verdict=result)
                submission.created_at = start + timedelta(minutes=n + 10 * k)
            progress.mark_lesson_read(session, learner_id=learner, lesson_slug="alpha")


def statements(db: Database, work) -> int:
    """Count the SQL statements `work(session)` sends."""
    sent = []
    listener = lambda *args: sent.append(args[2])  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", listener)
    try:
        with db.session() as session:
            work(session)
    finally:
        event.remove(db.engine, "before_cursor_execute", listener)
    return len(sent)


def everything(course):
    exercises = dashboard.exercises_in_order(course)
    return lambda session: (dashboard.exercise_figures(session, exercises=exercises),
                            dashboard.lesson_figures(session, course=course),
                            dashboard.progress_rows(session, course=course),
                            dashboard.recent_submissions(session, exercise_slug=EXERCISE))


@pytest.fixture
def course(tmp_path):
    folder = small_course(tmp_path)
    demo = folder / "exercises" / EXERCISE
    demo.mkdir()
    (demo / "exercise.yaml").write_text("title: Demo\nlesson: alpha\nchecks:\n  - id: runs\n    description: Runs.\n"
                                        "  - id: moved\n    description: Moved.\n")
    for name in ("prompt.md", "starter.py", "solution.py"):
        (demo / name).write_text("x = 1\n")
    return load_course(folder / "lessons", folder / "exercises")


@pytest.mark.parametrize("learners", [5, 50])
def test_the_number_of_queries_does_not_grow_with_the_class(tmp_path, course, learners):
    settings = make_settings(tmp_path, migrate=True)
    db = Database(settings.database_url)
    fill(db, 5)
    with db.session(write=True) as session, session.begin():
        history.summarise_new_runs(session)
    few = statements(db, everything(course))
    fill(db, learners)
    with db.session(write=True) as session, session.begin():
        assert history.summarise_new_runs(session) == learners * 3 + (learners + 2) // 3
    many = statements(db, everything(course))
    db.dispose()
    assert many == few


def test_figures_of_a_class(tmp_path, course):
    settings = make_settings(tmp_path, migrate=True)
    db = Database(settings.database_url)
    fill(db, 9)
    with db.session(write=True) as session, session.begin():
        assert history.needs_catch_up(session)
        history.summarise_new_runs(session)
        assert not history.needs_catch_up(session)
    with db.session() as session:
        [figures] = dashboard.exercise_figures(session, exercises=[course.exercises[EXERCISE]])
        [alpha, _beta] = dashboard.lesson_figures(session, course=course)
    db.dispose()
    assert (figures.learners, figures.passed_learners, figures.attempts) == (9, 9, 27)  # errors are no attempts
    assert figures.median_attempts_to_pass == 3 and figures.median_seconds_to_pass == 20 * 60
    assert figures.failing_checks == {"moved": 9, "runs": 9}
    assert figures.exceptions == [("RuntimeError: Expected all tensors to be on the same device", 9)]
    assert alpha.readers == 9


@pytest.mark.parametrize("stderr,line", [
    ("Traceback (most recent call last):\n  File \"main.py\", line 9, in <module>\nKeyError: 'x'\n", "KeyError: 'x'"),
    ("torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory."),
    ("ValueError: first\n\nDuring handling...\nTypeError: second", "TypeError: second"),
    ("warning: something\n", None),
    ("", None),
])  # fmt: skip
def test_the_exception_line_is_the_last_one_python_printed(stderr, line):
    assert history.exception_line(stderr) == line


def test_a_catch_up_that_meets_rows_written_meanwhile_reads_again(tmp_path, monkeypatch):
    """Two processes summarising at once (PostgreSQL lets their reads overlap): the later one's insert clashes on
    (submission_id, revision) and it reads again, writing only what is still missing."""
    settings = make_settings(tmp_path, migrate=True)
    db = Database(settings.database_url)
    fill(db, 2)
    with db.session(write=True) as session, session.begin():
        assert history.summarise_new_runs(session) == 7
    fill(db, 1)  # learner 0 again: four more runs, not summarised yet
    real, calls = history._unsummarised, []

    def stale_first(exercise_slug):
        """The first read sees every finished run, as if none had been summarised yet."""
        calls.append(exercise_slug)
        if len(calls) > 1:
            return real(exercise_slug)
        return select(Submission.id, Submission.status, Submission.verdict, Submission.finished_at)

    monkeypatch.setattr(history, "_unsummarised", stale_first)
    with db.session(write=True) as session, session.begin():
        assert history.summarise_new_runs(session) == 4
    db.dispose()
    assert len(calls) == 2


# what a two-rank job's stderr ends with when rank 1 fails first (ddp-training graded in the sandbox)
DDP_STDERR = """[default1]:[rank1]: Traceback (most recent call last):
[default1]:[rank1]:   File "main.py", line 21, in <module>
[default1]:[rank1]:     loader = DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=True)
[default1]:[rank1]: ValueError: sampler option is mutually exclusive with shuffle
[default0]:[rank0]: Traceback (most recent call last):
[default0]:[rank0]:   File "main.py", line 23, in <module>
[default0]:[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp, invalid usage
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
main.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 5)
============================================================
"""


def test_a_crash_in_any_rank_of_a_ddp_attempt_counts_as_its_exception(tmp_path, course):
    assert history.exception_line(DDP_STDERR) == "ValueError: sampler option is mutually exclusive with shuffle"
    rank0_only = DDP_STDERR.replace("[default1]:[rank1]: ValueError", "[default1]:[rank1]: X")
    assert history.exception_line(rank0_only).startswith("torch.distributed.DistBackendError: NCCL error in")
    settings = make_settings(tmp_path, migrate=True)
    db = Database(settings.database_url)
    with db.session(write=True) as session, session.begin():
        submission = progress.record_submission(session, learner_id="1" * 32, exercise_slug=EXERCISE, code="")
        finish(session, submission_id=submission.id,
                                   verdict=verdict("failed", "runs", DDP_STDERR))
    with db.session(write=True) as session, session.begin():
        history.summarise_new_runs(session)
    with db.session() as session:
        [figures] = dashboard.exercise_figures(session, exercises=[course.exercises[EXERCISE]])
    db.dispose()
    assert figures.exceptions == [("ValueError: sampler option is mutually exclusive with shuffle", 1)]
