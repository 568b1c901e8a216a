"""Many people commenting at once against one SQLite file, through a real uvicorn server: nothing lost, no
"database is locked"."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

SESSIONS, PER_SESSION = 10, 5


@pytest.fixture
def settings(settings):
    # ten sign-ups from one address in a second would trip the real limit; this test is about the database
    return settings.model_copy(update={"signup_rate_limit": "1000/minute", "login_rate_limit": "1000/minute",
                                       "comment_address_rate_limit": "1000/minute"})


def open_session(base: str, n: int) -> httpx.Client:
    browser = httpx.Client(base_url=base, timeout=60)
    token = browser.get("/api/auth/csrf").json()["csrf_token"]
    response = browser.post("/api/auth/signup", headers={"X-CSRF-Token": token},
                            json={"display_name": f"Person {n}", "email": f"p{n}@example.org",
                                  "password": "a long enough password"})  # fmt: skip
    assert response.status_code == 201, response.text
    browser.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return browser


@pytest.mark.slow
def test_fifty_comments_from_ten_sessions_all_land(live_server, caplog):
    caplog.set_level(logging.WARNING)
    browsers = [open_session(live_server, n) for n in range(SESSIONS)]
    start = threading.Barrier(SESSIONS * PER_SESSION)

    def post(i: int) -> tuple[int, str]:
        browser = browsers[i % SESSIONS]
        start.wait()  # all fifty leave together
        response = browser.post("/api/lessons/alpha/comments", json={"body": f"comment number {i}"})
        return response.status_code, response.text

    with ThreadPoolExecutor(max_workers=SESSIONS * PER_SESSION) as pool:
        results = list(pool.map(post, range(SESSIONS * PER_SESSION)))

    assert [status for status, _ in results] == [201] * 50, [text for status, text in results if status != 201]
    reader = httpx.Client(base_url=live_server)
    thread = reader.get("/api/lessons/alpha/comments").json()
    assert thread["count"] == 50
    bodies = {c["body"] for c in thread["comments"]}
    assert bodies == {f"comment number {i}" for i in range(50)}
    authors = {c["author"]["display_name"] for c in thread["comments"]}
    assert len(authors) == SESSIONS
    assert "locked" not in caplog.text.lower()
    for browser in browsers + [reader]:
        browser.close()
