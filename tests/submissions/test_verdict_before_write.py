"""A live run's verdict is shown as soon as it is known and stored beside it (app/submissions/live.py): what the
learner is shown is what is stored, their next request finds it stored, and stopping the app stores a shown verdict
as shown. Real app, real sandbox, real database; the write is held (a busy disk cannot be arranged here) until the
test lets it go, so that it is still going on when the verdict arrives however slow the machine is (a fixed sleep
raced a loaded 2-core machine's clean-clone `make test`)."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from app.learning import progress
from app.main import create_app
from app.submissions.live import LiveHub
from tests.helpers import make_settings, parse_sse, with_csrf

EXERCISE = "same-device"
HOLD_LIMIT_S = 30.0  # a held write goes on by itself after this: a failing test must not hang the suite
LET_GO_AFTER_S = 0.3  # a request sent right after the write is let go has this long to start waiting for it
# each job first sleeps this long, so that the test's events request is open before its verdict is known: one that
# comes after waits for the learner's verdict writes like any other request, and would find the verdict stored
# (a job that printed at once raced a loaded 2-core machine's clean-clone `make test`)
OPEN_FIRST = "import time\ntime.sleep(1.5)\n"


class Held:
    """hub's _finish, held until `let_go()`; `written` is set once the row is stored."""

    def __init__(self, hub: LiveHub):
        self.store = hub._finish
        self.release = threading.Event()
        self.written = threading.Event()

    def __call__(self, *args, **kwargs):
        self.release.wait(HOLD_LIMIT_S)
        stored = self.store(*args, **kwargs)
        self.written.set()
        return stored

    def let_go(self) -> None:
        """Let the write go a moment from now: the request the test sends next is already waiting for it."""
        threading.Timer(LET_GO_AFTER_S, self.release.set).start()


def submit(browser, code: str) -> dict:
    response = browser.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": OPEN_FIRST + code})
    assert response.status_code == 202, response.text
    return response.json()


def test_the_verdict_shown_is_the_one_stored_and_the_next_request_finds_it(live_app, learner, monkeypatch):
    held = Held(live_app.state.live)
    monkeypatch.setattr(live_app.state.live, "_finish", held)
    # a NUL in the output: the row holds U+FFFD in its place, and so must the verdict shown before the write
    started = submit(learner, 'import sys\nsys.stdout.write("before\\x00after\\n")\nraise SystemExit(1)\n')

    events = parse_sse(learner.get(started["events"]).text)
    assert not held.written.is_set(), "the verdict came after its write: nothing to test"
    assert events[-1][0] == "verdict"
    shown = events[-1][1]

    held.let_go()
    stored = learner.get(started["url"])  # waits for the write: this learner's verdict is being stored
    assert held.written.is_set()
    assert stored.json() == shown
    attempts = learner.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"]
    assert attempts[0]["id"] == started["id"] and attempts[0]["status"] == shown["status"] != "running"


def test_a_submission_right_after_a_verdict_is_stored_after_that_verdict(live_app, learner, monkeypatch):
    held = Held(live_app.state.live)
    monkeypatch.setattr(live_app.state.live, "_finish", held)
    first = submit(learner, "print('one')\n")
    parse_sse(learner.get(first["events"]).text)
    assert not held.written.is_set()

    # the route does not wait up front (its job starts at once); its row, which counts it against the attempts
    # before it, is written after the first verdict's
    held.let_go()
    second = submit(learner, "print('two')\n")
    assert held.written.is_set()
    assert parse_sse(learner.get(second["events"]).text)[-1][0] == "verdict"
    attempts = learner.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"]
    assert [a["id"] for a in attempts[:2]] == [second["id"], first["id"]]
    assert "running" not in {a["status"] for a in attempts[:2]}


def test_stopping_the_app_stores_a_shown_verdict_as_shown(tmp_path):
    app = create_app(make_settings(tmp_path, migrate=True))
    with TestClient(app) as first:
        held = app.state.live._finish = Held(app.state.live)  # the app is this test's own
        browser = with_csrf(first)
        started = submit(browser, "print('hello')\n")
        events = parse_sse(browser.get(started["events"]).text)
        assert not held.written.is_set()
        held.let_go()
    # the lifespan's end (LiveHub.close) waited for the write instead of storing an error over it
    assert held.written.is_set()
    with app.state.db.session() as session:
        row = progress.get_submission(session, started["id"])
        assert row.status == events[-1][1]["status"] != "error"
        assert row.verdict["stdout"] == events[-1][1]["stdout"]
    app.state.db.dispose()
