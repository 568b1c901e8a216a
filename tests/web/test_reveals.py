"""Attempts and reveals that mean something, through the front door (the real app, real SQLite, the real sandbox):
five junk runs do not unlock the solution and stay out of the checks that fail most; every look at a hint or at
the solution is recorded on the server; the CSV and the dashboard mark a learner who saw the solution before
passing."""

from __future__ import annotations

import csv
import io

import pytest

from app import ROOT
from app.core.unlock import parse_unlock
from app.learning.attempts import digest
from app.learning.reveals import rule_for
from tests.helpers import TEST_PASSWORD, create_account, parse_sse

pytestmark = pytest.mark.slow

LOOP = "training-loop"
LOOP_STARTER = (ROOT / "exercises" / LOOP / "starter.py").read_text(encoding="utf-8")
SAME = "same-device"
SAME_SOLUTION = (ROOT / "exercises" / SAME / "solution.py").read_text(encoding="utf-8")
SAME_WRONG = (ROOT / "exercises" / SAME / "wrong" / "placeholder_y.py").read_text(encoding="utf-8")


def run(browser, slug: str, code: str) -> dict:
    response = browser.post(f"/api/exercises/{slug}/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    events = parse_sse(browser.get(response.json()["events"]).text)
    assert events[-1][0] == "verdict"
    return events[-1][1]


def sign_in(app, email: str, role: str = "learner"):
    create_account(app, email, name=email.split("@")[0].title(), role=role)
    browser = app.browsers.new()
    response = browser.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
    assert response.status_code == 200, response.text
    browser.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return browser


def state(browser, slug: str) -> dict:
    return browser.get(f"/api/exercises/{slug}/submissions").json()


def test_five_junk_attempts_do_not_unlock_the_solution_nor_top_the_failing_checks(live_app):
    """The issue's report: five runs of `pass` on training-loop then offered the solution. Now the first `pass`
    is one failed attempt; the four repeats, the unchanged starter and a syntax error count for nothing."""
    junk = live_app.browsers.new()
    for code in ["pass\n"] * 5 + ["pass  # again, with a comment\n", LOOP_STARTER, "def broken(:\n"]:
        verdict = run(junk, LOOP, code)
        assert verdict["status"] != "passed"
    mine = state(junk, LOOP)
    assert len(mine["attempts"]) == 8 and mine["failed_attempts"] == 1
    assert not mine["solution_unlocked"] and mine["solution"] is None and mine["failures_to_unlock"] == 4
    refused = junk.post(f"/api/exercises/{LOOP}/solution")
    assert refused.status_code == 403
    assert "after 4 more failed attempts" in refused.json()["detail"] and "do not count" in refused.json()["detail"]

    teacher = sign_in(live_app, "ines@example.org", role="instructor")
    figures = {f["slug"]: f for f in teacher.get("/api/instructor/exercises").json()}[LOOP]
    assert sum(figures["failing_checks"].values()) == 1, figures  # the one `pass` that ran something
    assert figures["uncounted_failures"] == {"repeat": 5, "starter": 1, "syntax": 1}, figures
    page = teacher.get("/instructor").text
    assert "ran nothing new" in page and "same code as an earlier attempt 5" in page


def test_hints_and_solution_looks_are_recorded_and_the_csv_marks_solution_before_passing(live_app):
    ann = sign_in(live_app, "ann@example.org")
    assert ann.post(f"/api/exercises/{SAME}/hints/1").status_code == 200
    assert ann.post(f"/api/exercises/{SAME}/hints/99").status_code == 404
    assert state(ann, SAME)["hints_seen"] == 1
    for attempt in range(5):  # five failed attempts, each new code
        assert run(ann, SAME, SAME_WRONG + f"\nattempt = {attempt}\n")["status"] == "failed"
    before = state(ann, SAME)
    assert before["solution_unlocked"] and before["solution"] is None  # open, not yet seen
    shown = ann.post(f"/api/exercises/{SAME}/solution").json()
    assert shown["solution"] == SAME_SOLUTION and shown["seen_at"]
    assert run(ann, SAME, SAME_SOLUTION)["status"] == "passed"

    ben = sign_in(live_app, "ben@example.org")  # passes first, looks after: not before passing
    assert run(ben, SAME, SAME_SOLUTION)["status"] == "passed"
    assert ben.post(f"/api/exercises/{SAME}/solution").status_code == 200

    teacher = sign_in(live_app, "ivy@example.org", role="instructor")
    rows = {(r["email"], r["exercise"]): r
            for r in csv.DictReader(io.StringIO(teacher.get("/api/instructor/progress.csv").text))}
    assert rows[("ann@example.org", SAME)]["passed"] == "yes"
    assert rows[("ann@example.org", SAME)]["solution_seen_before_passing"] == "yes"
    assert rows[("ann@example.org", SAME)]["hints_seen"] == "1" and rows[("ann@example.org", SAME)]["solution_seen_at"]
    assert rows[("ben@example.org", SAME)]["solution_seen_before_passing"] == "no"
    assert rows[("ben@example.org", SAME)]["solution_seen_at"]
    figures = {f["slug"]: f for f in teacher.get("/api/instructor/exercises").json()}[SAME]
    assert figures["passed_after_seeing_solution"] == 1


def test_the_panel_without_javascript_serves_the_solution_only_after_the_form_asks(live_app):
    cal = live_app.browsers.new()
    assert run(cal, SAME, SAME_SOLUTION)["status"] == "passed"
    lesson = next(lesson for lesson in live_app.state.course.lessons
                  if SAME in lesson.placed_exercises() + lesson.meta.exercises)
    page = cal.get(lesson.url).text
    assert "Show the reference solution" in page and '<div class="exercise-solution-code"></div>' in page
    back = cal.post(f"/exercises/{SAME}/solution", data={"csrf_token": cal.headers["X-CSRF-Token"]},
                    follow_redirects=False)
    assert back.status_code == 303
    page = cal.get(lesson.url).text
    assert "Show the reference solution" not in page and '<div class="exercise-solution-code"><div class="highlight' \
        in page


class _Spec:
    def __init__(self, rule):
        self.solution_unlock = rule


class _Exercise:
    def __init__(self, rule):
        self.spec = _Spec(rule)


def test_the_unlock_rule_is_the_course_s_unless_the_exercise_names_its_own():
    assert str(rule_for(_Exercise(None), "failures:3")) == "failures:3"
    assert str(rule_for(_Exercise("never"), "failures:3")) == "never"
    assert str(rule_for(_Exercise("deadline"), "never")) == "deadline"
    with pytest.raises(ValueError, match="failures:N"):
        parse_unlock("after 3")


def test_the_same_code_is_the_same_syntax_tree():
    assert digest("pass\n") == digest("pass  # a comment\n\n") == digest("\n\npass")
    assert digest("x = 1\n") != digest("x = 2\n")
    assert digest("def f(:\n") == digest("def f(:   \n") != digest("def g(:\n")
