"""Limits that count people, not cookies: submissions and comments are limited per learner and per client address,
so fresh cookies (or fresh accounts) from one address share one limit; and the address is the peer's own unless
the peer is one of COURSE_TRUSTED_PROXIES, whose X-Forwarded-For is read (real uvicorn, `course serve`'s options).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from app.cli.serve import uvicorn_options
from app.main import create_app
from tests.helpers import TEST_PASSWORD, _free_port, create_account, make_settings, parse_sse, with_csrf

ATTACKER = "203.0.113.7"  # one address (TEST-NET-3) behind which every fresh cookie and account comes
SUBMISSIONS_PER_ADDRESS, COMMENTS_PER_ADDRESS, COMMENTS_PER_LEARNER = 20, 10, 6


@pytest.fixture(scope="module")
def limited_app(tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("limits"), migrate=True,
                             submission_address_rate_limit=f"{SUBMISSIONS_PER_ADDRESS}/minute",
                             comment_address_rate_limit=f"{COMMENTS_PER_ADDRESS}/minute",
                             comment_rate_limit=f"{COMMENTS_PER_LEARNER}/minute",
                             login_rate_limit="1000/minute")  # signing in is not what this module limits
    app = create_app(settings)
    with TestClient(app) as first:
        app.portal = first.portal
        yield app
    app.state.db.dispose()


def fresh_browser(app, address: str = ATTACKER) -> TestClient:
    """A new anonymous browser (its own cookie, so its own learner id) at `address`."""
    browser = TestClient(app, client=(address, 50000))
    browser.portal = app.portal  # the event loop where the app's runner started
    return with_csrf(browser)


def signed_in(app, email: str, address: str = ATTACKER) -> TestClient:
    create_account(app, email)
    browser = fresh_browser(app, address)
    login = browser.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
    assert login.status_code == 200, login.text
    browser.headers["X-CSRF-Token"] = login.json()["csrf_token"]
    return browser


def assert_limited(response, what: str) -> None:
    assert response.status_code == 429, response.text
    assert int(response.headers["Retry-After"]) >= 1
    detail = response.json()["detail"]
    assert f"Too many {what}" in detail and "Try again in" in detail, detail


def test_forty_submissions_from_forty_fresh_cookies_on_one_address_are_limited(limited_app):
    answers = []
    for _ in range(40):
        browser = fresh_browser(limited_app)
        answers.append((browser, browser.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})))

    statuses = [response.status_code for _, response in answers]
    assert statuses == [202] * SUBMISSIONS_PER_ADDRESS + [429] * (40 - SUBMISSIONS_PER_ADDRESS), statuses
    assert_limited(answers[-1][1], "submissions from your address")
    assert "everyone behind it shares this limit" in answers[-1][1].json()["detail"]
    elsewhere = fresh_browser(limited_app, "198.51.100.9")
    accepted = elsewhere.post("/api/exercises/same-device/submissions", json={"code": "print(1)"})
    assert accepted.status_code == 202, "another address has its own limit"
    for browser, response in answers[:SUBMISSIONS_PER_ADDRESS] + [(elsewhere, accepted)]:
        assert parse_sse(browser.get(response.json()["events"]).text)[-1][0] == "verdict"


def test_ipv6_addresses_in_one_64_share_a_limit(limited_app):
    # code with a NUL is refused (400) without running; the limits count the request before its body is read
    def submit(address: str):
        return fresh_browser(limited_app, address).post("/api/exercises/same-device/submissions",
                                                        json={"code": "\x00"})  # fmt: skip

    statuses = [submit(f"2001:db8:1:2::{n:x}").status_code for n in range(1, SUBMISSIONS_PER_ADDRESS + 1)]
    assert statuses == [400] * SUBMISSIONS_PER_ADDRESS
    assert_limited(submit("2001:db8:1:2:ffff:ffff:ffff:ffff"), "submissions from your address")
    assert submit("2001:db8:1:3::1").status_code == 400, "the next /64 is someone else"
    for _ in range(SUBMISSIONS_PER_ADDRESS):
        submit("203.0.113.50")
    assert_limited(submit("::ffff:203.0.113.50"), "submissions")  # an IPv4 client seen through an IPv6 socket


def test_lesson_block_runs_share_the_limit_of_exercise_runs_per_address(limited_app):
    # one budget of sandbox runs per person: fresh cookies on one address, half exercise runs, half lesson blocks
    # (code with a NUL is refused without running; the limits count the request before its body is read)
    address = "203.0.113.80"
    for n in range(SUBMISSIONS_PER_ADDRESS):
        url = "/api/exercises/same-device/submissions" if n % 2 else "/api/lessons/cpu-gpu-border/blocks/1/runs"
        assert fresh_browser(limited_app, address).post(url, json={"code": "\x00"}).status_code == 400
    over = fresh_browser(limited_app, address).post("/api/lessons/cpu-gpu-border/blocks/1/runs", json={})
    assert_limited(over, "runs from your address")


def test_comments_from_fresh_accounts_on_one_address_are_limited(limited_app):
    lesson = limited_app.state.course.lessons[0].slug
    statuses = []
    for n in range(COMMENTS_PER_ADDRESS + 3):
        browser = signed_in(limited_app, f"spammer{n}@example.org", address="203.0.113.8")
        response = browser.post(f"/api/lessons/{lesson}/comments", json={"body": f"buy now {n}"})
        statuses.append(response.status_code)

    assert statuses == [201] * COMMENTS_PER_ADDRESS + [429] * 3, statuses
    assert_limited(response, "comments from your address")
    form = browser.post(f"/lessons/{lesson}/comments", data={"body": "and by form",
                                                             "csrf_token": browser.headers["X-CSRF-Token"]})
    assert form.status_code == 429, "the form without JavaScript shares the limit"


def test_one_learner_posting_comments_too_fast_is_limited(limited_app):
    lesson = limited_app.state.course.lessons[0].slug
    ann = signed_in(limited_app, "fast-ann@example.org", address="203.0.113.9")
    for n in range(COMMENTS_PER_LEARNER):
        assert ann.post(f"/api/lessons/{lesson}/comments", json={"body": f"thought {n}"}).status_code == 201

    limited = ann.post(f"/api/lessons/{lesson}/comments", json={"body": "one more"})

    assert_limited(limited, "comments")
    assert f"{COMMENTS_PER_LEARNER} per 1 minute" in limited.json()["detail"]


# --- the address the limits count, through real uvicorn --------------------------------------------------------


class Served:
    """The site under a real uvicorn with `course serve`'s options, on 127.0.0.1 in a thread."""

    def __init__(self, tmp, **settings) -> None:
        self.settings = make_settings(tmp, migrate=True, login_rate_limit="3/minute", **settings)
        self.app = create_app(self.settings)
        port = _free_port()
        options = uvicorn_options(self.settings, host="127.0.0.1", port=port) | {"log_level": "warning"}
        self.server = uvicorn.Server(uvicorn.Config(self.app, **options))
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> Served:
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60  # seconds; the runner's fork server starts before start-up ends
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.app.state.db.dispose()

    def logins(self, forwarded_for: list[str]) -> list[int]:
        """Try a wrong password once per X-Forwarded-For value; return the statuses."""
        with httpx.Client(base_url=self.url, timeout=30) as browser:
            token = browser.get("/api/auth/csrf").json()["csrf_token"]
            return [browser.post("/api/auth/login", json={"email": "a@example.org", "password": "wrong"},
                                 headers={"X-CSRF-Token": token, "X-Forwarded-For": address}).status_code
                    for address in forwarded_for]  # fmt: skip


FORWARDED = [f"192.0.2.{n}" for n in range(1, 6)]  # five addresses a client claims to be


def test_x_forwarded_for_is_ignored_by_default(tmp_path):
    with Served(tmp_path) as served:
        assert served.logins(FORWARDED) == [401, 401, 401, 429, 429], "one peer, one limit, whatever it claims"


def test_x_forwarded_for_is_ignored_from_a_peer_that_is_not_a_trusted_proxy(tmp_path):
    with Served(tmp_path, trusted_proxies="10.0.0.2") as served:
        assert served.logins(FORWARDED) == [401, 401, 401, 429, 429]


def test_x_forwarded_for_names_the_client_behind_a_trusted_proxy(tmp_path):
    with Served(tmp_path, trusted_proxies="127.0.0.1") as served:
        assert served.logins(FORWARDED) == [401] * 5, "five clients behind the proxy, each with its own limit"
        assert served.logins(["192.0.2.77"] * 4) == [401, 401, 401, 429], "and one of them is still limited"


def test_course_serve_trusts_no_proxy_unless_told(tmp_path):
    default = uvicorn_options(make_settings(tmp_path), host="127.0.0.1", port=8000)
    assert default["proxy_headers"] is False and default["forwarded_allow_ips"] == ""
    told = uvicorn_options(make_settings(tmp_path, trusted_proxies="10.0.0.2, 10.1.0.0/16"), host="h", port=1)
    assert told["proxy_headers"] is True and told["forwarded_allow_ips"] == "10.0.0.2,10.1.0.0/16"


def test_a_trusted_proxy_that_is_no_address_is_refused_at_start(tmp_path):
    with pytest.raises(ValueError, match="'proxy.example' is not an IP address or network"):
        make_settings(tmp_path, trusted_proxies="10.0.0.2,proxy.example")


def test_counting_starts_no_thread_and_a_passed_window_counts_afresh(monkeypatch):
    """limits' memory storage sweeps from a new threading.Timer on nearly every hit; ours sweeps inline (deps.Counters):
    a thread start was 0.6-0.8 ms of the event loop's time per hit. The fixed window still counts as limits' does."""
    from limits import parse
    from limits.storage import memory

    from app.web import deps

    limiter = deps.make_limiter()
    started = []
    monkeypatch.setattr(memory.threading.Timer, "start", lambda timer: started.append(timer))
    now = [1_000.0]
    monkeypatch.setattr(memory.time, "time", lambda: now[0])
    item = parse("3/minute")
    assert [limiter.hit(item, "submit", "learner") for _ in range(4)] == [True, True, True, False]
    assert limiter.get_window_stats(item, "submit", "learner").remaining == 0
    assert limiter.hit(item, "submit", "another learner")
    now[0] += 61  # the window has passed
    assert limiter.hit(item, "submit", "learner")
    assert not started
