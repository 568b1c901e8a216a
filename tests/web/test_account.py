"""The account page and its JSON API: display name, password, "log out everywhere", and the session version that
ends every other session at once (old cookies are refused), with the current browser staying signed in."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import TEST_PASSWORD

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

NEW_PASSWORD = "a brand new passphrase"


def log_in(make_client, email: str, password: str = TEST_PASSWORD) -> TestClient:
    """Sign in to an existing account in a new browser."""
    browser = make_client()
    response = browser.post("/api/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    browser.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return browser


def who(browser: TestClient) -> str | None:
    user = browser.get("/api/me").json()["user"]
    return user and user["email"]


def with_cookie(app, portal, cookie: str) -> TestClient:
    """A new browser that sends exactly this session cookie (one kept from before)."""
    browser = TestClient(app, cookies={"course_session": cookie})
    browser.portal = portal
    return browser


@pytest.fixture
def ann(signed_in_client):
    return signed_in_client("ann@example.org", name="Ann")


# --- the JSON API -------------------------------------------------------------------------------------------


def test_every_account_route_needs_an_account(client):
    assert client.post("/api/account/profile", json={"display_name": "X"}).status_code == 401
    assert client.post("/api/account/password", json={"current_password": "x", "new_password": "y" * 8}).status_code \
        == 401  # fmt: skip
    assert client.post("/api/account/logout-all").status_code == 401
    assert client.get("/api/account/export").status_code == 401
    assert client.request("DELETE", "/api/account", json={"password": "x"}).status_code == 401


def test_change_the_display_name(ann):
    response = ann.post("/api/account/profile", json={"display_name": "  Ann Lee "})
    assert response.status_code == 200
    assert response.json()["user"]["display_name"] == "Ann Lee"
    assert ann.get("/api/me").json()["user"]["display_name"] == "Ann Lee"
    assert ann.post("/api/account/profile", json={"display_name": " "}).status_code == 422
    assert ann.post("/api/account/profile", json={"display_name": "x" * 81}).status_code == 422


def test_a_password_change_ends_every_other_session_and_old_cookies(app, ann, make_client, client):
    laptop = log_in(make_client, "ann@example.org")
    old_cookie = ann.cookies["course_session"]
    response = ann.post("/api/account/password", json={"current_password": TEST_PASSWORD,
                                                       "new_password": NEW_PASSWORD})  # fmt: skip
    assert response.status_code == 200, response.text
    assert who(ann) == "ann@example.org"  # this browser stays signed in
    assert who(laptop) is None  # the other one is signed out on its next request
    assert who(with_cookie(app, client.portal, old_cookie)) is None  # and a copy of the old cookie is refused
    assert make_client().post("/api/auth/login", json={"email": "ann@example.org", "password": TEST_PASSWORD}) \
        .status_code == 401  # fmt: skip
    assert who(log_in(make_client, "ann@example.org", NEW_PASSWORD)) == "ann@example.org"


def test_a_wrong_current_password_changes_nothing(ann, make_client):
    laptop = log_in(make_client, "ann@example.org")
    response = ann.post("/api/account/password", json={"current_password": "not it at all",
                                                       "new_password": NEW_PASSWORD})  # fmt: skip
    assert response.status_code == 403
    assert "password is wrong" in response.json()["detail"]
    assert who(laptop) == "ann@example.org"
    assert ann.post("/api/account/password", json={"current_password": TEST_PASSWORD, "new_password": "short"}) \
        .status_code == 422  # fmt: skip


def test_log_out_everywhere_keeps_this_browser(app, ann, make_client, client):
    laptop, phone = log_in(make_client, "ann@example.org"), log_in(make_client, "ann@example.org")
    old_cookie = ann.cookies["course_session"]
    response = ann.post("/api/account/logout-all")
    assert response.status_code == 200 and response.json()["user"]["email"] == "ann@example.org"
    assert who(ann) == "ann@example.org"
    assert who(laptop) is None and who(phone) is None
    assert who(with_cookie(app, client.portal, old_cookie)) is None
    assert laptop.post("/api/account/logout-all").status_code == 403  # its CSRF token went with its session


def test_an_ended_session_keeps_browsing_as_a_new_anonymous_learner(ann, make_client):
    laptop = log_in(make_client, "ann@example.org")
    account_learner = laptop.get("/api/me").json()["learner_id"]
    ann.post("/api/account/logout-all")
    me = laptop.get("/api/me").json()
    assert me["user"] is None and me["learner_id"] != account_learner


def test_other_accounts_are_not_touched(ann, signed_in_client):
    bob = signed_in_client("bob@example.org", name="Bob")
    ann.post("/api/account/logout-all")
    assert who(bob) == "bob@example.org"


# --- the page and its forms, without JavaScript ---------------------------------------------------------------


def form(browser: TestClient, path: str, **fields):
    token = browser.headers.pop("X-CSRF-Token")
    try:
        return browser.post(path, data={"csrf_token": token, **fields}, follow_redirects=False)
    finally:
        browser.headers["X-CSRF-Token"] = token


def test_the_page_sends_visitors_to_log_in(client):
    response = client.get("/account", follow_redirects=False)
    assert (response.status_code, response.headers["location"]) == (303, "/login?next=/account")
    assert form(client, "/account/logout-all").headers["location"] == "/login?next=/account"


def test_the_page_shows_every_form(ann):
    page = ann.get("/account").text
    for action in ("/account/profile", "/account/password", "/account/logout-all", "/account/delete"):
        assert f'action="{action}"' in page
    assert 'href="/api/account/export"' in page
    assert "ann@example.org" in page


def test_forms_work_and_say_so(ann, make_client):
    laptop = log_in(make_client, "ann@example.org")
    response = form(ann, "/account/profile", display_name="Ann the Second")
    assert (response.status_code, response.headers["location"]) == (303, "/account?done=profile")
    assert "display name is changed" in ann.get("/account?done=profile").text
    response = form(ann, "/account/password", current_password=TEST_PASSWORD, new_password=NEW_PASSWORD)
    assert response.headers["location"] == "/account?done=password"
    assert who(ann) == "ann@example.org" and who(laptop) is None
    laptop = log_in(make_client, "ann@example.org", NEW_PASSWORD)
    assert form(ann, "/account/logout-all").headers["location"] == "/account?done=logout-all"
    assert who(ann) == "ann@example.org" and who(laptop) is None


def test_a_form_refusal_shows_the_page_again_with_the_problem(ann):
    response = form(ann, "/account/password", current_password="wrong one", new_password=NEW_PASSWORD)
    assert response.status_code == 403
    assert "password is wrong" in response.text and 'action="/account/password"' in response.text
    response = form(ann, "/account/profile", display_name="")
    assert response.status_code == 400 and "display_name" in response.text
    response = form(ann, "/account/delete", password="wrong one")
    assert response.status_code == 403 and who(ann) == "ann@example.org"


def test_password_checks_are_rate_limited_like_log_in(app, ann):
    limit = int(app.state.settings.login_rate_limit.split("/")[0])
    wrong = {"current_password": "guess", "new_password": NEW_PASSWORD}
    assert {ann.post("/api/account/password", json=wrong).status_code for _ in range(limit)} == {403}
    refused = ann.request("DELETE", "/api/account", json={"password": TEST_PASSWORD})
    assert refused.status_code == 429 and "Retry-After" in refused.headers
    assert who(ann) == "ann@example.org"
