"""Progress over HTTP and the functions the exercises area calls: reads, attempts, passes, anonymous merges."""

from __future__ import annotations

import pytest

from app.learning import progress
from app.models import ExerciseProgress, Learner, LessonRead, Submission
from app.submissions.finish import finish

pytestmark = [pytest.mark.small_course, pytest.mark.both_databases]  # two small lessons of its own

PASSWORD = "a long enough password"
VERDICT_PASSED = {"exercise": "same-device", "status": "passed", "checks": [], "stdout": "", "stderr": "",
                  "duration_ms": 42, "device": "cpu"}  # fmt: skip
VERDICT_FAILED = {**VERDICT_PASSED, "status": "failed", "duration_ms": 40}


def submit(app, learner_id, slug="same-device", verdict=VERDICT_FAILED):
    """What the exercises area does for one graded submission."""
    with app.state.db.session(write=True) as session:
        sub = progress.record_submission(session, learner_id=learner_id, exercise_slug=slug, code="print(1)\n")
        session.commit()
    with app.state.db.session(write=True) as session:
        progress.start_submission(session, submission_id=sub.id)
        finish(session, submission_id=sub.id, verdict=verdict)
        session.commit()
    return sub.id


def test_the_read_beacon_marks_a_lesson_once(client):
    first = client.post("/api/lessons/alpha/read")
    assert first.status_code == 200 and first.json() == {"lesson": "alpha", "read": True, "first_time": True}
    assert client.post("/api/lessons/alpha/read").json()["first_time"] is False
    assert client.post("/api/lessons/nope/read").status_code == 404
    body = client.get("/api/progress").json()
    assert list(body["lessons"]) == ["alpha"] and body["last_activity_at"]
    page = client.get("/lessons/alpha").text
    assert "You have read this lesson." in page and 'src="/static/js/progress.js' in page


def test_submissions_attempts_and_passes(app, client):
    learner = client.get("/api/me").json()["learner_id"]
    first = submit(app, learner)
    submit(app, learner, verdict=VERDICT_PASSED)
    submit(app, learner, verdict=VERDICT_FAILED)  # failing after a pass keeps the pass
    exercise = client.get("/api/progress").json()["exercises"]["same-device"]
    assert exercise["attempts"] == 3 and exercise["passed"] is True and exercise["passed_at"]

    with app.state.db.session() as session:
        stored = progress.get_submission(session, first)
        assert stored.status == "failed" and stored.verdict == VERDICT_FAILED and stored.duration_ms == 40
        assert stored.finished_at >= stored.created_at
        history = progress.list_submissions(session, learner_id=learner, exercise_slug="same-device")
        assert len(history) == 3
        assert progress.latest_submission(session, learner_id=learner, exercise_slug="same-device").code
    assert "3" in client.get("/progress").text


def test_finishing_twice_changes_nothing(app, client):
    learner = client.get("/api/me").json()["learner_id"]
    sub_id = submit(app, learner, verdict=VERDICT_FAILED)
    with app.state.db.session(write=True) as session:
        again = finish(session, submission_id=sub_id, verdict=VERDICT_PASSED)
        session.commit()
        assert again is None  # nothing stored
        assert progress.get_submission(session, sub_id).status == "failed"
    assert client.get("/api/progress").json()["exercises"]["same-device"]["passed"] is False


def test_a_verdict_with_an_unknown_status_is_refused(app):
    with app.state.db.session(write=True) as session:
        sub = progress.record_submission(session, learner_id="a" * 32, exercise_slug="x", code="")
        with pytest.raises(ValueError, match="verdict status"):
            finish(session, submission_id=sub.id, verdict={"status": "queued"})


def test_anonymous_progress_merges_on_sign_up(app, client):
    anonymous = client.get("/api/me").json()["learner_id"]
    client.post("/api/lessons/alpha/read")
    submit(app, anonymous)
    submit(app, anonymous, verdict=VERDICT_PASSED)

    response = client.post("/api/auth/signup", json={"display_name": "Ann", "email": "ann@example.org",
                                                     "password": PASSWORD})  # fmt: skip
    assert response.status_code == 201
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    me = client.get("/api/me").json()
    assert me["learner_id"] == me["user"]["learner_id"] != anonymous
    mine = client.get("/api/progress").json()
    assert list(mine["lessons"]) == ["alpha"]
    assert mine["exercises"]["same-device"]["attempts"] == 2 and mine["exercises"]["same-device"]["passed"]
    with app.state.db.session() as session:
        assert session.get(Learner, anonymous) is None  # nothing left behind to merge twice
        assert {s.learner_id for s in session.query(Submission)} == {me["learner_id"]}


def test_log_in_merges_without_losing_or_double_counting(app, client, make_client):
    # the account already has progress of its own
    owner = make_client()
    signed = owner.post("/api/auth/signup", json={"display_name": "Ann", "email": "ann@example.org",
                                                  "password": PASSWORD}).json()  # fmt: skip
    owner.headers["X-CSRF-Token"] = signed["csrf_token"]
    account = signed["user"]["learner_id"]
    owner.post("/api/lessons/alpha/read")
    submit(app, account)

    # the same person, anonymous on another browser, reads both lessons and tries twice
    anonymous = client.get("/api/me").json()["learner_id"]
    client.post("/api/lessons/alpha/read")
    client.post("/api/lessons/beta/read")
    submit(app, anonymous)
    submit(app, anonymous, verdict=VERDICT_PASSED)

    response = client.post("/api/auth/login", json={"email": "ann@example.org", "password": PASSWORD})
    assert response.status_code == 200
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    mine = client.get("/api/progress").json()
    assert sorted(mine["lessons"]) == ["alpha", "beta"]  # alpha once, not twice
    assert mine["exercises"]["same-device"]["attempts"] == 3 and mine["exercises"]["same-device"]["passed"]

    # logging out and back in on the same browser merges nothing more
    client.headers["X-CSRF-Token"] = client.post("/api/auth/logout").json()["csrf_token"]
    client.headers["X-CSRF-Token"] = client.post(
        "/api/auth/login", json={"email": "ann@example.org", "password": PASSWORD}).json()["csrf_token"]  # fmt: skip
    assert client.get("/api/progress").json()["exercises"]["same-device"]["attempts"] == 3
    with app.state.db.session() as session:
        assert session.query(LessonRead).count() == 2 and session.query(ExerciseProgress).count() == 1


def test_switching_accounts_does_not_hand_progress_over(app, signed_in_client):
    ann = signed_in_client("ann@example.org", name="Ann")
    ann.post("/api/lessons/alpha/read")
    signed_in_client("bob@example.org", name="Bob")  # makes the account
    login = {"email": "bob@example.org", "password": "correct horse battery staple"}
    response = ann.post("/api/auth/login", json=login)
    assert response.status_code == 200
    ann.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    assert ann.get("/api/progress").json()["lessons"] == {}  # Bob does not get Ann's read


def test_progress_page_lists_lessons_for_anonymous_visitors(client):
    client.post("/api/lessons/beta/read")
    page = client.get("/progress")
    assert page.status_code == 200
    assert "Alpha lesson" in page.text and "Beta lesson" in page.text and "Lessons read: 1 of 2" in page.text
    assert "this progress lives in this browser only" in page.text


def test_index_shows_progress_per_lesson(client):
    client.post("/api/lessons/alpha/read")
    index = client.get("/").text
    assert index.count('class="progress-badge"') == 2 and "Not read yet" in index and "✓</span> Read" in index
