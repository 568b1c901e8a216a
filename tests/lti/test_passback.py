"""Grades to the LMS through the after-verdict hook and the outbox, against TestOnlyPlatform (an LMS that exists
only in the tests, over real HTTP): a pass posts a score once, a lower score never lowers it, an LMS that is down
gets the score afterwards, a regrade that grants a pass posts it, and one line item per exercise."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import delete, select

from app.learning import progress
from app.lti import passback, services
from app.models import LtiGrade, LtiLineItem, Regrade, User, utcnow
from app.submissions.finish import finish
from tests.helpers import parse_sse
from tests.lti.conftest import launch

pytestmark = pytest.mark.small_course

EXERCISE = "device-basics"


@pytest.fixture(autouse=True)
def _fresh_tokens():
    services.forget_tokens()  # each test's platform is a new one
    yield
    services.forget_tokens()


def verdict(status: str, passed_checks: int = 0, checks: int = 4) -> dict:
    return {"exercise": EXERCISE, "status": status, "stdout": "", "stderr": "", "duration_ms": 5, "device": "cpu",
            "checks": [{"id": f"c{i}", "passed": i < passed_checks, "message": ""} for i in range(checks)]}


def learner_of(app, browser) -> str:
    user_id = browser.get("/api/me").json()["user"]["id"]
    with app.state.db.session() as session:
        return session.get(User, user_id).learner_id


def run(app, learner: str, result: dict, *, exercise: str = EXERCISE) -> str:
    """A learner's run, stored by finish() as every runner stores one (the hooks run in its transaction)."""
    with app.state.db.session(write=True) as session:
        submission = progress.record_submission(session, learner_id=learner, exercise_slug=exercise, code="x = 1")
        session.commit()
        stored = finish(session, submission_id=submission.id, verdict={**result, "exercise": exercise})
        assert stored is not None
        session.commit()
        return submission.id


def send(app, **kwargs) -> passback.Sent:
    return passback.send_due(app.state.db, app.state.settings, **kwargs)


@pytest.fixture
def ann(lti_app, platform, new_browser) -> str:
    browser = new_browser()
    assert launch(browser, platform, "ann").status_code == 303
    return learner_of(lti_app, browser)


def test_a_pass_posts_its_score_once(lti_app, platform, ann):
    run(lti_app, ann, verdict("passed", 4))
    assert send(lti_app).sent == 1
    assert send(lti_app).sent == 0  # nothing new: nothing posted again
    [score] = platform.scores
    assert (score["userId"], score["scoreGiven"], score["scoreMaximum"]) == ("lms-user-ann", 100.0, 100.0)
    assert score["activityProgress"] == "Completed" and score["gradingProgress"] == "FullyGraded"
    [item] = platform.line_items.values()
    assert (item["resourceId"], item["scoreMaximum"], item["context"]) == (EXERCISE, 100.0, "course-101")


def test_a_later_lower_score_does_not_lower_it_and_a_rise_is_posted_on_the_same_line_item(lti_app, platform, ann):
    run(lti_app, ann, verdict("failed", 2))  # 2 of 4 checks
    send(lti_app)
    run(lti_app, ann, verdict("failed", 1))  # worse: nothing to send
    assert send(lti_app).sent == 0
    run(lti_app, ann, verdict("passed", 4))
    run(lti_app, ann, verdict("error", 0, 0))  # after the pass, a broken run changes nothing
    assert send(lti_app).sent == 1
    assert [score["scoreGiven"] for score in platform.scores] == [50.0, 100.0]
    assert len(platform.line_items) == 1 and {s["lineitem"] for s in platform.scores} == set(platform.line_items)


def test_an_lms_down_for_30_seconds_gets_the_score_afterwards_and_the_verdict_never_waited(lti_app, platform, ann):
    lti_app.state.settings.lti_retry_s = 5  # doubling: tries at 0, 5, 15 s, then 35 s
    platform.down = True
    started = time.monotonic()
    run(lti_app, ann, verdict("passed", 4))
    assert time.monotonic() - started < 5  # the verdict was stored without asking the LMS anything
    t0 = utcnow()
    for seconds in (0, 5, 15):
        result = send(lti_app, now=t0 + timedelta(seconds=seconds))
        assert result.sent == 0 and "503" in result.failed[0]
        assert send(lti_app, now=t0 + timedelta(seconds=seconds + 1)).failed == []  # not due again yet
    with lti_app.state.db.session() as session:
        grade = session.scalar(select(LtiGrade))
        assert (grade.best, grade.sent, grade.tries) == (100.0, None, 3) and "503" in grade.last_error
    platform.down = False  # back after 30 s
    assert send(lti_app, now=t0 + timedelta(seconds=30)).sent == 0  # its next try is at 35 s
    assert send(lti_app, now=t0 + timedelta(seconds=35)).sent == 1
    assert [score["scoreGiven"] for score in platform.scores] == [100.0]
    with lti_app.state.db.session() as session:
        grade = session.scalar(select(LtiGrade))
        assert (grade.sent, grade.tries, grade.last_error) == (100.0, 0, None)


def test_a_regrade_that_grants_a_pass_posts_it(lti_app, platform, ann):
    submission = run(lti_app, ann, verdict("failed", 0))
    send(lti_app)
    with lti_app.state.db.session(write=True) as session:
        regrade = Regrade(exercise_slug=EXERCISE)
        session.add(regrade)
        session.flush()
        assert finish(session, submission_id=submission, verdict=verdict("passed", 4), regrade_id=regrade.id)
        session.commit()
    assert send(lti_app).sent == 1
    assert [score["scoreGiven"] for score in platform.scores] == [0.0, 100.0]


def test_a_line_item_the_course_forgot_is_found_in_the_lms_not_made_twice(lti_app, platform, ann):
    run(lti_app, ann, verdict("failed", 1))
    send(lti_app)
    with lti_app.state.db.session(write=True) as session:
        session.execute(delete(LtiLineItem))
        session.commit()
    run(lti_app, ann, verdict("passed", 4))
    send(lti_app)
    assert len(platform.line_items) == 1 and len(platform.scores) == 2


def test_an_instructors_run_is_not_sent(lti_app, platform, new_browser):
    teacher = new_browser()
    launch(teacher, platform, "ines")
    run(lti_app, learner_of(lti_app, teacher), verdict("passed", 4))
    assert send(lti_app).sent == 0
    with lti_app.state.db.session() as session:
        assert session.scalar(select(LtiGrade)) is None


@pytest.mark.parametrize("lti_settings", [{"lti_send_interval_s": 0}], indirect=True)
def test_the_sites_own_sender_posts_without_anyone_asking(lti_app, platform, ann):
    run(lti_app, ann, verdict("passed", 4))
    deadline = time.monotonic() + 20
    while not platform.scores and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [score["scoreGiven"] for score in platform.scores] == [100.0]


@pytest.mark.slow
@pytest.mark.parametrize("lti_settings", [{"course": "the course"}], indirect=True)
def test_a_pass_through_the_real_sandbox_reaches_the_lms(lti_app, platform, new_browser):
    """The front door: a learner launched from the LMS runs the exercise's solution in the real sandbox; the
    verdict's hook queues the score and the sender posts it to the line item named after the exercise."""
    browser = new_browser()
    exercise = lti_app.state.course.exercises["training-loop"]
    launch(browser, platform, "ann", target=f"http://testserver/lessons/{exercise.lesson}#exercise-training-loop")
    browser.headers["X-CSRF-Token"] = browser.get("/api/auth/csrf").json()["csrf_token"]
    submitted = browser.post("/api/exercises/training-loop/submissions", json={"code": exercise.solution})
    assert submitted.status_code == 202, submitted.text
    events = parse_sse(browser.get(f"/api/submissions/{submitted.json()['id']}/events").text)
    assert events[-1][0] == "verdict" and events[-1][1]["status"] == "passed", events[-1]
    # the verdict is sent while it is stored; the page's next request (its attempts) waits for the write
    assert browser.get("/api/exercises/training-loop/submissions").status_code == 200
    assert send(lti_app, label=lambda slug: lti_app.state.course.exercises[slug].title).sent == 1
    [score] = platform.scores
    assert score["scoreGiven"] == 100.0
    [item] = platform.line_items.values()
    assert (item["resourceId"], item["label"]) == ("training-loop", exercise.title)
