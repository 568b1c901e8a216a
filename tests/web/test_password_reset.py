"""Password reset without an email server: `course users reset-link EMAIL` prints a one-time link that expires
(only a hash of its token is stored); with COURSE_SMTP_URL set, /forgot mails the same kind of link (to a real SMTP
server on 127.0.0.1, aiosmtpd), and answers unknown addresses exactly as known ones."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.accounts.password_reset import token_hash
from app.cli import main as course
from app.core.config import get_settings
from app.main import create_app
from app.models import PasswordReset, utcnow
from tests.helpers import TEST_PASSWORD, with_csrf

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

PUBLIC_URL = "https://course.example.org"
NEW_PASSWORD = "a brand new passphrase"
LINK = re.compile(re.escape(PUBLIC_URL) + r"/reset/([A-Za-z0-9_-]+)")


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"public_url": PUBLIC_URL})


@pytest.fixture
def reset_link(settings, monkeypatch):
    """Run `course users reset-link EMAIL` against the test's database; return the printed link's path."""
    monkeypatch.setenv("COURSE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("COURSE_PUBLIC_URL", PUBLIC_URL)
    get_settings.cache_clear()

    def run(email: str) -> str:
        result = CliRunner().invoke(course, ["users", "reset-link", email])
        assert result.exit_code == 0, result.output
        return LINK.fullmatch(result.stdout.strip()).group(0).removeprefix(PUBLIC_URL)

    yield run
    get_settings.cache_clear()


@pytest.fixture
def ann(signed_in_client):
    return signed_in_client("ann@example.org", name="Ann")


def form(browser: TestClient, path: str, **fields):
    return browser.post(path, data={"csrf_token": browser.headers["X-CSRF-Token"], **fields}, follow_redirects=False)


def without_nonce(html: str) -> str:
    return re.sub(r'nonce="[^"]*"', "", html)


def logs_in(make_client, password: str) -> bool:
    return make_client().post("/api/auth/login", json={"email": "ann@example.org", "password": password}) \
        .status_code == 200  # fmt: skip


def test_a_printed_link_works_once(app, ann, make_client, reset_link):
    path = reset_link("ANN@example.org")
    stranger = make_client()
    page = stranger.get(path)
    assert page.status_code == 200 and f'action="{path}"' in page.text

    response = form(stranger, path, new_password=NEW_PASSWORD)
    assert (response.status_code, response.headers["location"]) == (303, "/account?done=reset")
    assert stranger.get("/api/me").json()["user"]["email"] == "ann@example.org"  # signed in by the link
    assert ann.get("/api/me").json()["user"] is None  # every other session ended
    assert logs_in(make_client, NEW_PASSWORD) and not logs_in(make_client, TEST_PASSWORD)

    again = make_client()
    assert again.get(path).status_code == 410
    response = form(again, path, new_password="yet another password")
    assert response.status_code == 410 and "expired or was used" in response.text
    assert logs_in(make_client, NEW_PASSWORD)


def test_only_a_hash_of_the_token_is_stored(app, ann, reset_link):
    token = reset_link("ann@example.org").rsplit("/", 1)[1]
    with app.state.db.session() as session:
        rows = session.scalars(select(PasswordReset)).all()
    assert [row.token_hash for row in rows] == [token_hash(token)]
    assert token not in repr([vars(row) for row in rows])


def test_an_expired_link_does_not_work(app, ann, make_client, reset_link):
    path = reset_link("ann@example.org")
    with app.state.db.session(write=True) as session:
        session.execute(update(PasswordReset).values(expires_at=utcnow() - timedelta(seconds=1)))
        session.commit()
    browser = make_client()
    assert browser.get(path).status_code == 410
    assert form(browser, path, new_password=NEW_PASSWORD).status_code == 410
    assert logs_in(make_client, TEST_PASSWORD)


def test_a_newer_link_or_a_password_change_voids_older_links(app, ann, make_client, reset_link):
    first = reset_link("ann@example.org")
    second = reset_link("ann@example.org")
    browser = make_client()
    assert browser.get(first).status_code == 410 and browser.get(second).status_code == 200
    ann.post("/api/account/password", json={"current_password": TEST_PASSWORD, "new_password": NEW_PASSWORD})
    assert browser.get(second).status_code == 410


def test_a_short_password_is_refused_and_the_link_still_works(app, ann, make_client, reset_link):
    path = reset_link("ann@example.org")
    browser = make_client()
    response = form(browser, path, new_password="short")
    assert response.status_code == 400 and "at least 8 characters" in response.text
    assert form(browser, path, new_password=NEW_PASSWORD).status_code == 303


def test_the_command_refuses_an_unknown_email(app, reset_link):
    result = CliRunner().invoke(course, ["users", "reset-link", "nobody@example.org"])
    assert result.exit_code == 1 and "no account for nobody@example.org" in result.output


def test_without_mail_forgot_says_whom_to_ask_and_the_operator_finds_the_command_in_the_log(client, caplog):
    with caplog.at_level(logging.INFO, logger="app.web.routes.reset"):
        page = client.get("/forgot").text
    assert "Ask your instructor, or whoever runs the course" in page and 'action="/forgot"' not in page
    assert "course users" not in page  # an operator's command is no use to a learner (issue 29)
    assert "`course users reset-link EMAIL`" in caplog.text


# --- with a mail server -------------------------------------------------------------------------------------


@pytest.fixture
def mailing_site(settings, smtp_sink, app):
    """The site with COURSE_SMTP_URL pointing at the local SMTP sink (same database as `app`)."""
    site = create_app(settings.model_copy(update={"smtp_url": smtp_sink.url, "forgot_rate_limit": "3/minute"}))
    with TestClient(site) as browser:
        yield with_csrf(browser)
    site.state.db.dispose()


def test_forgot_mails_a_link_that_works_and_answers_unknown_addresses_the_same(mailing_site, ann, smtp_sink,
                                                                                make_client):  # fmt: skip
    known = form(mailing_site, "/forgot", email="Ann@Example.org")
    unknown = form(mailing_site, "/forgot", email="nobody@example.org")
    assert known.status_code == unknown.status_code == 200
    assert without_nonce(known.text) == without_nonce(unknown.text)  # the same page, but for the fresh CSP nonce
    assert "If an account uses that address" in known.text
    assert len(smtp_sink.messages) == 1
    mail = smtp_sink.messages[0]
    assert mail["To"] == "ann@example.org" and mail["Subject"] == "Reset your password"
    path = LINK.search(mail.get_content()).group(0).removeprefix(PUBLIC_URL)
    assert form(mailing_site, path, new_password=NEW_PASSWORD).status_code == 303
    assert logs_in(make_client, NEW_PASSWORD)


def test_forgot_is_rate_limited_per_address(mailing_site):
    for _ in range(3):
        assert form(mailing_site, "/forgot", email="someone@example.org").status_code == 200
    refused = form(mailing_site, "/forgot", email="someone@example.org")
    assert refused.status_code == 429 and "Retry-After" in refused.headers


def test_a_mail_server_that_is_down_changes_nothing_for_the_visitor(settings, app, ann, caplog):
    site = create_app(settings.model_copy(update={"smtp_url": "smtp://127.0.0.1:9"}))  # nothing listens on 9
    with TestClient(site) as browser:
        response = form(with_csrf(browser), "/forgot", email="ann@example.org")
    site.state.db.dispose()
    assert response.status_code == 200 and "If an account uses that address" in response.text
    assert "could not be sent through COURSE_SMTP_URL" in caplog.text
