"""People-sized limits: a full sandbox queue answers 429 with Retry-After (the page retries), and a learner who
submits too fast is rate-limited with a clear message. An app with one sandbox slot and no queue."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.helpers import Browsers, make_settings, parse_sse

SLEEPER = "import time\nprint('holding the only sandbox', flush=True)\ntime.sleep(3)\n"


@pytest.fixture(scope="module")
def small_app(tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("small"), migrate=True, runner_concurrency=1,
                             runner_queue_size=0, submission_rate_limit="3/minute")
    app = create_app(settings)
    with TestClient(app) as first:
        first.portal.call(app.state.runner.ready)  # fork server up, so the held slot counts as running
        app.browsers = Browsers(app, first.portal, "10.1.0")
        yield app
    app.state.db.dispose()


def wait_for_verdict(browser, submission_id: str) -> dict:
    events = parse_sse(browser.get(f"/api/submissions/{submission_id}/events").text)
    assert events[-1][0] == "verdict"
    return events[-1][1]


def test_full_queue_is_429_with_retry_after_and_costs_no_attempt(small_app):
    holder, other = small_app.browsers.new(), small_app.browsers.new()
    held = holder.post("/api/exercises/same-device/submissions", json={"code": SLEEPER})
    assert held.status_code == 202, held.text

    refused = other.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})

    assert refused.status_code == 429, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    body = refused.json()
    assert body["reason"] == "busy" and "busy" in body["detail"] and body["retry_after"] >= 1
    assert other.get("/api/progress").json()["exercises"] == {}
    assert other.get("/api/exercises/same-device/submissions").json()["attempts"] == []
    wait_for_verdict(holder, held.json()["id"])
    retried = other.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})
    assert retried.status_code == 202  # once the slot is free, the retry the page makes goes through
    wait_for_verdict(other, retried.json()["id"])


def test_submitting_too_fast_is_rate_limited_per_learner(small_app):
    fast, calm = small_app.browsers.new(), small_app.browsers.new()
    for _ in range(3):
        response = fast.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})
        assert response.status_code == 202, response.text
        wait_for_verdict(fast, response.json()["id"])

    limited = fast.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})

    assert limited.status_code == 429
    assert "Too many submissions" in limited.json()["detail"] and "3 per 1 minute" in limited.json()["detail"]
    assert int(limited.headers["Retry-After"]) >= 1
    assert "reason" not in limited.json()  # not the queue: the page shows the message instead of retrying
    ok = calm.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})
    assert ok.status_code == 202  # the limit is per learner, not per site
    wait_for_verdict(calm, ok.json()["id"])
