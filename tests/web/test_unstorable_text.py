"""Text PostgreSQL refuses (NUL, lone surrogates) never breaks a write or a page, on SQLite and PostgreSQL: a
program whose exception message or output holds a NUL is stored with U+FFFD in its place, code with a NUL is
refused with a sentence, and the instructor's pages, which read every stored verdict, still answer afterwards.
Real app, real sandbox, real databases (a fresh learner per test on an app shared by the module)."""

from __future__ import annotations

import pytest

from app.core.storable import REPLACEMENT
from tests.helpers import TEST_PASSWORD, create_account, parse_sse

pytestmark = pytest.mark.both_databases

EXERCISE = "same-device"
INSTRUCTOR_PAGES = ["/instructor", f"/instructor/exercises/{EXERCISE}", "/api/instructor/exercises",
                    "/api/instructor/progress.csv"]


@pytest.fixture(scope="module")
def instructor(live_app):
    create_account(live_app, "nul-ines@example.org", name="Ines", role="instructor")
    browser = live_app.browsers.new()
    login = browser.post("/api/auth/login", json={"email": "nul-ines@example.org", "password": TEST_PASSWORD})
    assert login.status_code == 200, login.text
    browser.headers["X-CSRF-Token"] = login.json()["csrf_token"]
    return browser


def run(browser, code: str) -> dict:
    """Submit code and read its stream to the verdict; return the stored submission."""
    response = browser.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    events = parse_sse(browser.get(response.json()["events"]).text)
    assert events[-1][0] == "verdict", events
    stored = browser.get(response.json()["url"])
    assert stored.status_code == 200, stored.text
    return stored.json()


def assert_instructor_pages_answer(instructor) -> None:
    for path in INSTRUCTOR_PAGES:
        response = instructor.get(path)
        assert response.status_code == 200, f"{path}: {response.status_code} {response.text[:300]}"


def test_an_exception_message_with_a_nul_is_stored_and_the_dashboard_answers(learner, instructor):
    stored = run(learner, 'raise ValueError("x\\x00y")\n')

    assert stored["status"] == "failed"
    assert f"ValueError: x{REPLACEMENT}y" in stored["stderr"] and "\x00" not in stored["stderr"]
    assert_instructor_pages_answer(instructor)
    page = instructor.get(f"/instructor/exercises/{EXERCISE}").text
    assert f"ValueError: x{REPLACEMENT}y" in page, "the exercise's common errors count it, NUL replaced"


def test_a_nul_printed_to_stdout_is_stored_and_the_dashboard_answers(learner, instructor):
    stored = run(learner, 'import sys\nsys.stdout.write("before\\x00after\\n")\n')

    assert f"before{REPLACEMENT}after" in stored["stdout"] and "\x00" not in stored["stdout"]
    assert learner.get(f"/api/exercises/{EXERCISE}/submissions").status_code == 200
    assert_instructor_pages_answer(instructor)


def test_code_with_a_nul_is_refused_with_where_it_is_and_what_to_do(learner, instructor):
    response = learner.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": "x = 1\ny = '\x00'\n"})

    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert "NUL character" in detail and "line 2, column 6" in detail and "Remove it" in detail
    assert learner.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"] == []  # it cost no attempt
    assert_instructor_pages_answer(instructor)


def test_code_with_a_nul_from_the_form_is_refused_too(learner):
    response = learner.post(f"/exercises/{EXERCISE}/run", data={"code": "print(1)\x00",
                                                                "csrf_token": learner.headers["X-CSRF-Token"]})

    assert response.status_code == 400 and "NUL character" in response.text


def test_a_comment_with_a_lone_surrogate_is_stored_with_a_replacement(live_app, learner):
    create_account(live_app, "surrogate@example.org", name="Sue")
    login = learner.post("/api/auth/login", json={"email": "surrogate@example.org", "password": TEST_PASSWORD})
    learner.headers["X-CSRF-Token"] = login.json()["csrf_token"]
    lesson = live_app.state.course.lessons[0].slug

    posted = learner.post(f"/api/lessons/{lesson}/comments", content=b'{"body": "half a pair: \\ud83d!"}',
                          headers={"content-type": "application/json"})

    assert posted.status_code == 201, posted.text
    bodies = [c["body"] for c in learner.get(f"/api/lessons/{lesson}/comments").json()["comments"]]
    assert f"half a pair: {REPLACEMENT}!" in bodies
