"""Sign-up, log-in, log-out over HTTP against a real SQLite file."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.core.config import DEFAULT_SECRET, Settings

pytestmark = [pytest.mark.small_course, pytest.mark.both_databases]  # two small lessons of its own

PASSWORD = "a long enough password"


def signup(browser, email="ann@example.org", name="Ann", password=PASSWORD):
    return browser.post("/api/auth/signup", json={"display_name": name, "email": email, "password": password})


def test_sign_up_log_out_log_in(client):
    assert client.get("/api/me").json()["user"] is None

    response = signup(client)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["user"]["display_name"] == "Ann" and body["user"]["role"] == "learner"
    client.headers["X-CSRF-Token"] = body["csrf_token"]
    assert client.get("/api/me").json()["user"]["email"] == "ann@example.org"

    response = client.post("/api/auth/logout")
    assert response.status_code == 200
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    assert client.get("/api/me").json()["user"] is None

    response = client.post("/api/auth/login", json={"email": "ANN@example.org ", "password": PASSWORD})
    assert response.status_code == 200, response.text
    assert client.get("/api/me").json()["user"]["display_name"] == "Ann"


@pytest.mark.parametrize("log_out", ["api", "form"])
def test_a_copy_of_the_cookie_signs_no_one_in_after_log_out(client, make_client, log_out):
    client.headers["X-CSRF-Token"] = signup(client).json()["csrf_token"]
    thief = make_client(csrf=False)
    thief.cookies.set("course_session", client.cookies["course_session"])  # copied while signed in
    assert thief.get("/api/me").json()["user"]["email"] == "ann@example.org"
    other_browser = make_client()  # Ann on a second computer
    login = other_browser.post("/api/auth/login", json={"email": "ann@example.org", "password": PASSWORD})
    assert login.status_code == 200

    if log_out == "api":
        assert client.post("/api/auth/logout").status_code == 200
    else:
        form = {"csrf_token": client.headers["X-CSRF-Token"]}
        assert client.post("/logout", data=form, follow_redirects=False).status_code == 303

    assert thief.get("/api/me").json()["user"] is None, "the session ended on the server, not only in the browser"
    assert thief.get("/api/me").json()["user"] is None  # and stays ended
    assert other_browser.get("/api/me").json()["user"]["email"] == "ann@example.org", "only that session ended"


def test_csrf_token_changes_on_log_in_and_the_old_one_stops_working(client):
    old = client.headers["X-CSRF-Token"]
    new = signup(client).json()["csrf_token"]
    assert new != old
    assert client.post("/api/auth/logout", headers={"X-CSRF-Token": old}).status_code == 403
    assert client.post("/api/auth/logout", headers={"X-CSRF-Token": new}).status_code == 200


def test_wrong_password_and_unknown_email_get_the_same_answer(client, make_client):
    signup(make_client())
    wrong = client.post("/api/auth/login", json={"email": "ann@example.org", "password": "not the password"})
    unknown = client.post("/api/auth/login", json={"email": "nobody@example.org", "password": "not the password"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json() == {"detail": "Email or password is incorrect."}
    assert client.get("/api/me").json()["user"] is None


def test_taken_email_is_409_in_any_case(client, make_client):
    assert signup(make_client()).status_code == 201
    response = signup(client, email="Ann@Example.org")
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]


@pytest.mark.parametrize(
    "field, value",
    [("email", "not-an-email"), ("password", "short"), ("display_name", "   "), ("display_name", "x" * 81)],
)
def test_bad_sign_up_is_422_with_detail(client, field, value):
    data = {"display_name": "Ann", "email": "ann@example.org", "password": PASSWORD, field: value}
    response = client.post("/api/auth/signup", json=data)
    assert response.status_code == 422
    assert response.json()["detail"]


def test_log_in_is_rate_limited_with_retry_after(client, settings):
    limit = int(settings.login_rate_limit.split("/")[0])
    for _ in range(limit):
        assert client.post("/api/auth/login", json={"email": "x@example.org", "password": "nope"}).status_code == 401
    response = client.post("/api/auth/login", json={"email": "x@example.org", "password": "nope"})
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 1
    assert "Try again in" in response.json()["detail"]


def test_sign_up_is_rate_limited(client, settings):
    limit = int(settings.signup_rate_limit.split("/")[0])
    for i in range(limit):
        response = signup(client, email=f"user{i}@example.org")
        assert response.status_code == 201
        client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    response = signup(client, email="one-more@example.org")
    assert response.status_code == 429 and "Retry-After" in response.headers


def test_forms_work_without_javascript(client):
    page = client.get("/signup")
    assert page.status_code == 200 and 'name="csrf_token"' in page.text
    token = client.headers.pop("X-CSRF-Token")
    form = {"display_name": "Bo", "email": "bo@example.org", "password": PASSWORD, "csrf_token": token, "next": "/"}
    response = client.post("/signup", data=form, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"
    home = client.get("/")
    assert "Bo" in home.text and "Log out" in home.text

    token = client.get("/api/auth/csrf").json()["csrf_token"]
    assert client.post("/logout", data={"csrf_token": token}, follow_redirects=False).status_code == 303
    assert "Log in" in client.get("/").text

    token = client.get("/api/auth/csrf").json()["csrf_token"]
    bad = client.post("/login", data={"email": "bo@example.org", "password": "wrong", "csrf_token": token})
    assert bad.status_code == 401 and "Email or password is incorrect." in bad.text
    good = {"email": "bo@example.org", "password": PASSWORD, "csrf_token": token, "next": "//evil.example/"}
    response = client.post("/login", data=good, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"  # never off-site


def test_sign_up_form_shows_what_to_fix(client):
    token = client.headers["X-CSRF-Token"]
    form = {"display_name": "Bo", "email": "bo", "password": "short", "csrf_token": token}
    response = client.post("/signup", data=form)
    assert response.status_code == 400
    assert "email address" in response.text and "at least 8 characters" in response.text


def test_passwords_are_stored_hashed(app, client):
    signup(client)
    from app.models import User

    with app.state.db.session() as session:
        user = session.query(User).one()
    assert user.password_hash.startswith("$argon2id$") and PASSWORD not in user.password_hash


@pytest.mark.parametrize("env", ["production", "test"])
def test_the_shipped_secret_is_refused_outside_development(env, tmp_path):
    with pytest.raises(ValidationError, match="COURSE_SECRET_KEY"):
        Settings(env=env, secret_key=DEFAULT_SECRET, database_url=f"sqlite:///{tmp_path / 'x.db'}")
    assert Settings(env="development", secret_key=DEFAULT_SECRET).secret_key == DEFAULT_SECRET


def test_session_cookie_is_httponly_and_lax(client):
    response = client.get("/api/auth/csrf")
    client.cookies.clear()
    response = client.get("/api/auth/csrf")
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie


def test_an_unknown_email_costs_as_much_as_a_wrong_password(app, client):
    """The failure path verifies a dummy hash, so timing does not tell which emails have accounts."""
    import statistics
    import time

    from app.accounts import users as accounts

    signup(client)

    def timed(email: str) -> float:
        with app.state.db.session() as session:
            start = time.perf_counter()
            assert accounts.authenticate(session, email=email, password="not the password") is None
            return time.perf_counter() - start

    timed("nobody@example.org")  # the dummy hash is made on first use
    known = statistics.median(timed("ann@example.org") for _ in range(3))
    unknown = statistics.median(timed("nobody@example.org") for _ in range(3))
    assert 0.5 < unknown / known < 2, (known, unknown)
