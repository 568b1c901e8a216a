"""The deep-linking picker in Debian's Chromium, between the course over HTTP and TestOnlyPlatform (an LMS that
exists only in the tests; tests/lti/platform.py): an LMS instructor launches the picker from the LMS, picks an
exercise, and the page takes the signed answer back to the LMS by itself (its CSP lets that one form leave)."""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import expect

from app.main import create_app
from tests.helpers import ARTIFACTS, FIXTURES, LiveServer, make_settings
from tests.lti.conftest import register
from tests.lti.platform import INSTRUCTOR, Person, TestOnlyPlatform

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def lti_site(tmp_path):
    settings = make_settings(tmp_path, course=FIXTURES / "good", migrate=True, lti_send_interval_s=3600)
    app = create_app(settings)
    server = LiveServer(app)
    settings.public_url = server.url  # the LMS is told this address; set before the server starts
    with server, TestOnlyPlatform(tool_jwks=lambda: httpx.get(f"{server.url}/lti/jwks").json()) as lms:
        lms.people["ines"] = Person(sub="lms-user-ines", name="Ines Teacher", roles=[INSTRUCTOR])
        register(app, lms)
        yield server.url, lms
    app.state.db.dispose()


def test_an_instructor_adds_an_exercise_from_the_picker(lti_site, browser_page):
    base, lms = lti_site
    page = browser_page
    target = f"{base}/lti/launch"
    page.goto(f"{base}/lti/login?" + urlencode({
        "iss": lms.issuer, "login_hint": "ines", "target_link_uri": target, "client_id": lms.client_id,
        "lti_message_hint": f"LtiDeepLinkingRequest|{target}"}))
    assert page.url.startswith(f"{lms.url}/auth?")  # the LMS's authorization endpoint
    with page.expect_navigation():
        page.click("text=Continue")  # the LMS's page posts the id_token to the course
    assert page.url == f"{base}/lti/deep-link"
    expect(page.locator("h1")).to_have_text("Add lessons and exercises to your LMS")
    expect(page.locator(".lti-choice")).to_have_count(3)  # two lessons, one exercise placed in the first
    page.get_by_label("Exercise: Move the tensor").check()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lti-picker.png"), full_page=True)
    with page.expect_navigation(url=f"{lms.url}/deep-link-return"):
        page.click("text=Add to the LMS")  # the answer page posts itself to the LMS
    expect(page.locator("body")).to_contain_text("Added to the module.")
    [item] = lms.deep_link_items
    assert item["url"] == f"{base}/lessons/first-steps#exercise-demo-move"
    assert page.console_errors == []  # no CSP refusal on the way
