"""The live submissions API through the front door: real app, real database (SQLite and PostgreSQL), real sandbox, the
course's own exercises. Each test uses a fresh learner on a shared app, so their progress never mixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import ROOT
from tests.helpers import TEST_PASSWORD, create_account, make_settings, output_lines, parse_sse

pytestmark = pytest.mark.both_databases

EXERCISES = ["same-device", "pick-device", "training-loop", "bring-it-back", "model-internals"]


def exercise_file(slug: str, name: str) -> str:
    return (ROOT / "exercises" / slug / name).read_text(encoding="utf-8")


def wrong_files(slug: str) -> list[Path]:
    return sorted((ROOT / "exercises" / slug / "wrong").glob("*.py"))


def expected_check(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect:"), f"{path} does not name its failing check"
    return first.removeprefix("# expect:").strip()


def submit(browser, slug: str, code: str):
    return browser.post(f"/api/exercises/{slug}/submissions", json={"code": code})


def run(browser, slug: str, code: str) -> tuple[str, list[tuple[str, dict]]]:
    """Submit and read the whole event stream; return (submission id, events)."""
    response = submit(browser, slug, code)
    assert response.status_code == 202, response.text
    submission_id = response.json()["id"]
    stream = browser.get(f"/api/submissions/{submission_id}/events")
    assert stream.status_code == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    return submission_id, parse_sse(stream.text)


def assert_well_formed(events: list[tuple[str, dict]]) -> dict:
    """Output events first, then exactly one verdict, last; the streamed lines are the verdict's output."""
    kinds = [kind for kind, _ in events]
    assert kinds.count("verdict") == 1 and kinds[-1] == "verdict", kinds
    assert set(kinds[:-1]) <= {"output"}
    verdict = events[-1][1]
    for stream in ("stdout", "stderr"):
        streamed = output_lines(events, stream)
        assert streamed == verdict[stream].splitlines(), f"{stream} lines differ or are out of order"
    return verdict


@pytest.mark.parametrize("slug", EXERCISES)
def test_solution_passes_streams_is_stored_and_counts_as_progress(learner, slug):
    code = exercise_file(slug, "solution.py")
    before = learner.get("/api/progress").json()["exercises"].get(slug)
    assert before is None or not before["passed"]

    submission_id, events = run(learner, slug, code)

    verdict = assert_well_formed(events)
    assert verdict["status"] == "passed", verdict
    assert verdict["exercise"] == slug and all(check["passed"] for check in verdict["checks"])
    stored = learner.get(f"/api/submissions/{submission_id}").json()
    assert stored["status"] == "passed" and stored["code"] == code
    assert stored["checks"] == verdict["checks"] and stored["stdout"] == verdict["stdout"]
    assert stored["finished_at"] >= stored["created_at"] and isinstance(stored["duration_ms"], int)
    after = learner.get("/api/progress").json()["exercises"][slug]
    assert after["passed"] and after["attempts"] == 1
    state = learner.get(f"/api/exercises/{slug}/submissions").json()
    assert state["solution_unlocked"] and state["solution"] is None  # open, but served only when asked for
    assert state["latest_code"] == code and [a["id"] for a in state["attempts"]] == [submission_id]
    shown = learner.post(f"/api/exercises/{slug}/solution")
    assert shown.status_code == 200 and shown.json()["solution"] == exercise_file(slug, "solution.py")
    state = learner.get(f"/api/exercises/{slug}/submissions").json()
    assert state["solution"] == exercise_file(slug, "solution.py") and state["solution_seen_at"]


@pytest.mark.parametrize("slug", EXERCISES)
def test_wrong_file_fails_its_named_check_and_progress_records_the_attempt(learner, slug):
    wrong = wrong_files(slug)[0]
    _, events = run(learner, slug, wrong.read_text(encoding="utf-8"))

    verdict = assert_well_formed(events)
    assert verdict["status"] != "passed"
    failed = {check["id"] for check in verdict["checks"] if not check["passed"]}
    assert expected_check(wrong) in failed, (wrong.name, verdict)
    row = learner.get("/api/progress").json()["exercises"][slug]
    assert row["attempts"] == 1 and not row["passed"]
    state = learner.get(f"/api/exercises/{slug}/submissions").json()
    assert not state["solution_unlocked"] and state["solution"] is None


def test_output_lines_arrive_in_order(learner):
    code = "for i in range(40):\n    print('line', i)\nimport sys\nprint('oops', file=sys.stderr)\n"
    _, events = run(learner, "same-device", code)
    assert output_lines(events, "stdout") == [f"line {i}" for i in range(40)]
    assert output_lines(events, "stderr") == ["oops"]
    assert_well_formed(events)
    assert len(events) < 10  # forty lines in a few batches, not an event each


def test_an_output_flood_is_batched_capped_and_complete(learner):
    """A flood stopped by the output limit: a handful of batches carry its first lines and its last, count the
    rest, and end with the verdict; the stored verdict keeps the whole megabyte."""
    code = "i = 0\nwhile True:\n    print('spam', i)\n    i += 1\n"
    _, events = run(learner, "same-device", code)
    verdict = events[-1][1]
    printed = verdict["stdout"].splitlines() + verdict["stderr"].splitlines()
    batches = [data for kind, data in events if kind == "output"]
    assert len(printed) > 50_000 and len(events) < 30, (len(printed), len(events))
    streamed = output_lines(events)
    skipped = sum(data.get("skipped", 0) for data in batches)
    assert len(streamed) + skipped == len(printed)  # every line is either sent or counted
    assert streamed[:100] == printed[:100] and streamed[-50:] == printed[-50:]  # the head, and the last words
    assert any(data.get("capped") for data in batches)


def test_late_subscribers_replay_from_memory_and_from_the_database(live_app, learner):
    submission_id, first = run(learner, "same-device", exercise_file("same-device", "solution.py"))
    again = parse_sse(learner.get(f"/api/submissions/{submission_id}/events").text)
    assert again == first
    live_app.state.live.runs.pop(submission_id, None)  # as after the linger time: served from the stored row
    stored = parse_sse(learner.get(f"/api/submissions/{submission_id}/events").text)
    assert [kind for kind, _ in stored] == [kind for kind, _ in first]
    assert stored[-1][1]["status"] == "passed" and stored[-1][1]["checks"] == first[-1][1]["checks"]


def test_reconnecting_event_source_gets_only_the_rest(live_app, learner):
    """Event ids say how far into stdout and stderr a page has read, so the rest is exact: from the live run,
    and rebuilt from the stored row once the run has left memory."""
    code = "import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')\nprint('c', file=sys.stderr)\n"
    submission_id, _ = run(learner, "same-device", code)
    url = f"/api/submissions/{submission_id}/events"
    events = parse_sse(learner.get(url).text, ids=True)
    first_id = events[0][0]
    assert first_id == "1:0" and events[0][2] == {"lines": [{"stream": "stdout", "line": "a"}]}
    rest = parse_sse(learner.get(url, headers={"Last-Event-ID": first_id}).text, ids=True)
    assert rest == events[1:]
    live_app.state.live.runs.pop(submission_id, None)  # as after the linger time: rebuilt from the stored row
    stored = parse_sse(learner.get(url, headers={"Last-Event-ID": first_id}).text)
    assert output_lines(stored) == ["b", "c"] and stored[-1][0] == "verdict"
    assert parse_sse(learner.get(url, headers={"Last-Event-ID": "verdict"}).text) == []


def test_solution_unlocks_after_five_failed_attempts(learner):
    wrong = wrong_files("same-device")[0].read_text(encoding="utf-8")
    for attempt in range(1, 6):
        state = learner.get("/api/exercises/same-device/submissions").json()
        assert not state["solution_unlocked"] and state["solution"] is None
        assert state["failures_to_unlock"] == 6 - attempt
        refused = learner.post("/api/exercises/same-device/solution")
        assert refused.status_code == 403 and f"after {6 - attempt} more failed" in refused.json()["detail"]
        run(learner, "same-device", wrong + f"\nattempt = {attempt}\n")  # new code each time
    state = learner.get("/api/exercises/same-device/submissions").json()
    assert state["solution_unlocked"] and len(state["attempts"]) == 5 and state["failed_attempts"] == 5
    shown = learner.post("/api/exercises/same-device/solution").json()
    assert shown["solution"] == exercise_file("same-device", "solution.py")


def test_code_over_the_source_limit_is_413(live_app, learner):
    limit = live_app.state.settings.sandbox_source_bytes
    response = submit(learner, "same-device", "#" * (limit + 1))
    assert response.status_code == 413
    assert "limit is 64 KiB" in response.json()["detail"]
    huge = learner.post("/api/exercises/same-device/submissions", content=b'{"code": "' + b"x" * (limit * 8) + b'"}',
                        headers={"content-type": "application/json"})
    assert huge.status_code == 413  # refused from Content-Length, before the body is read


def test_code_that_is_not_utf8_is_400(learner):
    raw = learner.post("/api/exercises/same-device/submissions", content=b'{"code": "print(\xff)"}',
                       headers={"content-type": "application/json"})
    assert raw.status_code == 400 and "UTF-8" in raw.json()["detail"]
    surrogate = learner.post("/api/exercises/same-device/submissions", content=b'{"code": "x = \\"\\ud800\\""}',
                             headers={"content-type": "application/json"})
    assert surrogate.status_code == 400 and "UTF-8" in surrogate.json()["detail"]
    assert learner.get("/api/progress").json()["exercises"] == {}  # refusals cost no attempt


def test_unknown_exercise_and_unknown_submission_are_404(learner):
    response = submit(learner, "no-such-exercise", "print(1)")
    assert response.status_code == 404 and "same-device" in response.json()["detail"]
    assert learner.get("/api/submissions/0123456789abcdef0123456789abcdef").status_code == 404
    assert learner.get("/api/submissions/0123456789abcdef0123456789abcdef/events").status_code == 404


def test_submitting_needs_the_csrf_token(learner):
    response = learner.post("/api/exercises/same-device/submissions", json={"code": "print(1)"},
                            headers={"X-CSRF-Token": "not-the-token"})
    assert response.status_code == 403


def test_a_learner_cannot_read_another_learners_submission_but_an_instructor_can(live_app, learner):
    submission_id, _ = run(learner, "same-device", "print('mine')")
    other = live_app.browsers.new()
    assert other.get(f"/api/submissions/{submission_id}").status_code == 404
    assert other.get(f"/api/submissions/{submission_id}/events").status_code == 404
    assert other.get("/api/exercises/same-device/submissions").json()["attempts"] == []

    create_account(live_app, "ines@example.org", name="Ines", role="instructor")
    instructor = live_app.browsers.new()
    login = instructor.post("/api/auth/login", json={"email": "ines@example.org", "password": TEST_PASSWORD})
    assert login.status_code == 200, login.text
    response = instructor.get(f"/api/submissions/{submission_id}")
    assert response.status_code == 200 and response.json()["code"] == "print('mine')"


def test_no_javascript_form_runs_and_the_lesson_shows_the_verdict(learner):
    token = learner.headers.pop("X-CSRF-Token")  # a plain form sends its token as a field, not a header
    wrong = wrong_files("same-device")[0]
    response = learner.post("/exercises/same-device/run", data={"code": wrong.read_text(), "csrf_token": token},
                            follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"].endswith("#exercise-same-device")
    page = learner.get(response.headers["location"].split("#")[0], headers={"accept": "text/html"}).text
    panel = page[page.index('id="exercise-same-device"'):]
    assert f'data-check="{expected_check(wrong)}"' in panel and "Last run: failed" in panel


def test_a_run_cut_short_by_a_shutdown_is_stored_as_an_error(tmp_path):
    from fastapi.testclient import TestClient

    from app.learning import progress
    from app.main import create_app

    app = create_app(make_settings(tmp_path, migrate=True))
    with TestClient(app) as browser:  # leaving the block stops the app while the program still sleeps
        browser.headers["X-CSRF-Token"] = browser.get("/api/auth/csrf").json()["csrf_token"]
        response = submit(browser, "same-device", "import time\ntime.sleep(30)\n")
        assert response.status_code == 202
    with app.state.db.session() as session:
        row = progress.get_submission(session, response.json()["id"])
        assert row.status == "error" and "server stopped" in row.verdict["stderr"]
    app.state.db.dispose()


def test_while_it_runs_only_its_learner_follows_it(live_app, learner):
    """The stream's owner check reads a running job's row from the hub (no database read): the owner follows it,
    another learner gets the same 404 as for a finished one, and the stream ends with the verdict."""
    submission_id = submit(learner, "same-device", "import time\ntime.sleep(1.5)\nprint('slow')\n").json()["id"]
    assert live_app.state.live.running_row(submission_id) is not None
    other = live_app.browsers.new()
    assert other.get(f"/api/submissions/{submission_id}/events").status_code == 404
    events = parse_sse(learner.get(f"/api/submissions/{submission_id}/events").text)
    assert events[-1][0] == "verdict" and "slow" in output_lines(events)
