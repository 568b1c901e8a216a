"""A live run's verdict is shown as soon as it is known and stored beside it (app/submissions/live.py): what the
learner is shown is what is stored, their next request finds it stored, and stopping the app stores a shown verdict
as shown. Real app, real sandbox, real database; the write is slowed (a busy disk cannot be arranged here) so that
it is still going on when the verdict arrives."""

from __future__ import annotations

import threading
import time

from fastapi.testclient import TestClient

from app.learning import progress
from app.main import create_app
from app.submissions.live import LiveHub
from tests.helpers import make_settings, parse_sse, with_csrf

EXERCISE = "same-device"
SLOW_WRITE_S = 1.0


def slowed(hub: LiveHub, written: threading.Event):
    """Return hub's _finish, `SLOW_WRITE_S` slower, setting `written` once the row is stored."""
    store = hub._finish

    def slow(*args, **kwargs):
        time.sleep(SLOW_WRITE_S)
        stored = store(*args, **kwargs)
        written.set()
        return stored

    return slow


def submit(browser, code: str) -> dict:
    response = browser.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    return response.json()


def test_the_verdict_shown_is_the_one_stored_and_the_next_request_finds_it(live_app, learner, monkeypatch):
    written = threading.Event()
    monkeypatch.setattr(live_app.state.live, "_finish", slowed(live_app.state.live, written))
    # a NUL in the output: the row holds U+FFFD in its place, and so must the verdict shown before the write
    started = submit(learner, 'import sys\nsys.stdout.write("before\\x00after\\n")\nraise SystemExit(1)\n')

    events = parse_sse(learner.get(started["events"]).text)
    assert not written.is_set(), "the verdict came after its write: nothing to test"
    assert events[-1][0] == "verdict"
    shown = events[-1][1]

    stored = learner.get(started["url"])  # waits for the write: this learner's verdict is being stored
    assert written.is_set()
    assert stored.json() == shown
    attempts = learner.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"]
    assert attempts[0]["id"] == started["id"] and attempts[0]["status"] == shown["status"] != "running"


def test_a_submission_right_after_a_verdict_is_stored_after_that_verdict(live_app, learner, monkeypatch):
    written = threading.Event()
    monkeypatch.setattr(live_app.state.live, "_finish", slowed(live_app.state.live, written))
    first = submit(learner, "print('one')\n")
    parse_sse(learner.get(first["events"]).text)
    assert not written.is_set()

    # the route does not wait up front (its job starts at once); its row, which counts it against the attempts
    # before it, is written after the first verdict's
    second = submit(learner, "print('two')\n")
    assert written.is_set()
    assert parse_sse(learner.get(second["events"]).text)[-1][0] == "verdict"
    attempts = learner.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"]
    assert [a["id"] for a in attempts[:2]] == [second["id"], first["id"]]
    assert "running" not in {a["status"] for a in attempts[:2]}


def test_stopping_the_app_stores_a_shown_verdict_as_shown(tmp_path):
    app = create_app(make_settings(tmp_path, migrate=True))
    written = threading.Event()
    with TestClient(app) as first:
        app.state.live._finish = slowed(app.state.live, written)  # the app is this test's own
        browser = with_csrf(first)
        started = submit(browser, "print('hello')\n")
        events = parse_sse(browser.get(started["events"]).text)
        assert not written.is_set()
    # the lifespan's end (LiveHub.close) waited for the write instead of storing an error over it
    assert written.is_set()
    with app.state.db.session() as session:
        row = progress.get_submission(session, started["id"])
        assert row.status == events[-1][1]["status"] != "error"
        assert row.verdict["stdout"] == events[-1][1]["stdout"]
    app.state.db.dispose()
