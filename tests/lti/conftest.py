"""Fixtures of the LTI tests: the course's app (small course) and a TestOnlyPlatform registered with it.

The LMS is what cannot exist here; tests/lti/platform.py stands in for one over real HTTP.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.lti import keys, platforms
from app.main import create_app
from tests.helpers import Browsers, make_settings, small_course
from tests.lti.platform import INSTRUCTOR, LEARNER, Person, TestOnlyPlatform

SITE = "http://testserver"  # the TestClient's base URL: the site's public URL in these tests


@pytest.fixture
def lti_settings(request, tmp_path):
    """The site's settings; the site's own grade sender waits an hour between passes unless a test parametrizes
    this fixture (indirectly) with other values."""
    extra = {"lti_send_interval_s": 3600, "lti_retry_s": 0, **getattr(request, "param", {})}
    course = extra.pop("course", None) or small_course(tmp_path)
    # "the course": its own lessons and exercises (real checks, for a run through the sandbox)
    return make_settings(tmp_path, course=None if course == "the course" else course, migrate=True,
                         public_url=SITE, **extra)


@pytest.fixture
def lti_app(lti_settings):  # lti_settings migrated its database
    application = create_app(lti_settings)
    yield application
    application.state.db.dispose()


@pytest.fixture
def tool(lti_app):
    """A browser on the running app (no CSRF header: the LMS's posts carry none)."""
    with TestClient(lti_app) as client:
        yield client


@pytest.fixture
def new_browser(lti_app, tool):
    return lambda: Browsers(lti_app, tool.portal, "10.0.1").new(csrf=False)


def register(app, platform: TestOnlyPlatform, name: str = "test-lms") -> None:
    with app.state.db.session(write=True) as session:
        platforms.add_platform(session, name=name, **platform.registration())
        keys.signing_key(session)
        session.commit()


@pytest.fixture
def platform(lti_app, tool):
    """A TestOnlyPlatform over HTTP, registered with the course, with a learner and an instructor."""
    with TestOnlyPlatform(tool_jwks=lambda: tool.get("/lti/jwks").json()) as lms:
        lms.people["ann"] = Person(sub="lms-user-ann", name="Ann Learner", roles=[LEARNER])
        lms.people["ines"] = Person(sub="lms-user-ines", name="Ines Teacher", roles=[INSTRUCTOR])
        register(lti_app, lms)
        yield lms


def start_login(browser, platform: TestOnlyPlatform, hint: str, *, target: str = f"{SITE}/lessons/alpha",
                message: str = "LtiResourceLinkRequest", method: str = "get") -> str:  # fmt: skip
    """The LMS's first step: send the browser to /lti/login; return where the tool sends it (the platform)."""
    params = {"iss": platform.issuer, "login_hint": hint, "target_link_uri": target, "client_id": platform.client_id,
              "lti_message_hint": f"{message}|{target}", "lti_deployment_id": platform.deployment}
    response = (browser.get("/lti/login", params=params, follow_redirects=False) if method == "get" else
                browser.post("/lti/login", data=params, follow_redirects=False))
    assert response.status_code == 302, response.text
    return response.headers["location"]


def launch(browser, platform: TestOnlyPlatform, hint: str, **kwargs):
    """A whole launch as the browser makes it: login, the platform's authorization endpoint, the posted id_token."""
    action, fields = platform.authorize(start_login(browser, platform, hint, **kwargs))
    assert action == f"{SITE}/lti/launch"
    return browser.post("/lti/launch", data=fields, follow_redirects=False)
