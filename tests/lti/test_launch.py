"""LTI 1.3 login and launch against TestOnlyPlatform (an LMS that exists only in the tests; tests/lti/platform.py):
a good launch signs the LMS's person in and opens what they launched; every bad one is refused with a sentence."""

from __future__ import annotations

import time

import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import select

from app.models import LtiContext, LtiIdentity, LtiMember, User
from tests.lti.conftest import SITE, launch, register, start_login
from tests.lti.platform import INSTRUCTOR, TestOnlyPlatform, query_of

pytestmark = pytest.mark.small_course


def test_a_launch_signs_the_learner_in_and_opens_the_lesson(lti_app, platform, new_browser):
    browser = new_browser()
    response = launch(browser, platform, "ann")
    assert response.status_code == 303 and response.headers["location"] == "/lessons/alpha"
    me = browser.get("/api/me").json()["user"]
    assert me["display_name"] == "Ann Learner" and me["role"] == "learner"
    with lti_app.state.db.session() as session:
        context = session.scalar(select(LtiContext))
        assert (context.context_id, context.title) == ("course-101", "Deep Learning 101")
        assert context.lineitems_url == f"{platform.url}/contexts/course-101/lineitems"
        assert session.scalar(select(LtiMember)).roles == platform.people["ann"].roles


def test_a_second_launch_is_the_same_account_and_an_instructor_is_an_instructor(lti_app, platform, new_browser):
    first, second = new_browser(), new_browser()
    launch(first, platform, "ann")
    launch(second, platform, "ann")
    assert first.get("/api/me").json()["user"]["id"] == second.get("/api/me").json()["user"]["id"]
    teacher = new_browser()
    launch(teacher, platform, "ines")
    assert teacher.get("/api/me").json()["user"]["role"] == "instructor"
    assert teacher.get("/instructor").status_code == 200
    with lti_app.state.db.session() as session:
        assert session.scalar(select(LtiIdentity).where(LtiIdentity.sub == "lms-user-ann")) is not None
        assert len(session.scalars(select(User)).all()) == 2


def test_the_login_may_be_a_post_too(platform, new_browser):
    browser = new_browser()
    action, fields = platform.authorize(start_login(browser, platform, "ann", method="post"))
    assert browser.post("/lti/launch", data=fields, follow_redirects=False).status_code == 303


def test_the_login_sends_the_browser_to_the_platform_with_state_and_nonce(platform, new_browser):
    location = start_login(new_browser(), platform, "ann")
    query = query_of(location)
    assert location.startswith(f"{platform.url}/auth?")
    assert query["redirect_uri"] == f"{SITE}/lti/launch" and query["response_mode"] == "form_post"
    assert len(query["state"]) > 30 and len(query["nonce"]) > 30 and query["state"] != query["nonce"]


def _refused(browser, response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    for word in words:
        assert word in detail, detail
    assert browser.get("/api/me").json()["user"] is None  # nobody signed in
    return detail


def _nonce_and_state(browser, platform) -> dict[str, str]:
    return query_of(start_login(browser, platform, "ann"))


def test_a_bad_signature_is_refused(platform, new_browser):
    browser = new_browser()
    query = _nonce_and_state(browser, platform)
    forger = RSAKey.generate_key(2048, parameters={"kid": platform.key.kid})  # the platform's key id, not its key
    token = platform.id_token(platform.people["ann"], nonce=query["nonce"], key=forger)
    _refused(browser, browser.post("/lti/launch", data={"id_token": token, "state": query["state"]}), 401,
             "not signed by a key of test-lms")


def test_an_expired_token_is_refused(platform, new_browser):
    browser = new_browser()
    query = _nonce_and_state(browser, platform)
    past = int(time.time()) - 3600
    token = platform.id_token(platform.people["ann"], nonce=query["nonce"], iat=past - 300, exp=past)
    _refused(browser, browser.post("/lti/launch", data={"id_token": token, "state": query["state"]}), 401,
             "expired")


def test_a_replayed_launch_is_refused(platform, new_browser):
    browser = new_browser()
    action, fields = platform.authorize(start_login(browser, platform, "ann"))
    assert browser.post("/lti/launch", data=fields, follow_redirects=False).status_code == 303
    thief = new_browser()
    _refused(thief, thief.post("/lti/launch", data=fields), 400, "used already")
    # the same id_token (and so its nonce) with a fresh state of the thief's own
    query = _nonce_and_state(thief, platform)
    _refused(thief, thief.post("/lti/launch", data={"id_token": fields["id_token"], "state": query["state"]}), 401,
             "replayed")


def test_another_deployment_is_refused(platform, new_browser):
    browser = new_browser()
    query = _nonce_and_state(browser, platform)
    token = platform.id_token(platform.people["ann"], nonce=query["nonce"],
                              **{"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "deployment-9"})
    detail = _refused(browser, browser.post("/lti/launch", data={"id_token": token, "state": query["state"]}), 403,
                      "deployment-9", "not registered")
    assert "course lti add-platform" in detail


def test_an_unknown_platform_is_refused_at_login(platform, new_browser):
    browser = new_browser()
    params = {"iss": "https://moodle.elsewhere.invalid", "login_hint": "x", "target_link_uri": f"{SITE}/"}
    response = browser.get("/lti/login", params=params, follow_redirects=False)
    _refused(browser, response, 400, "https://moodle.elsewhere.invalid", "is registered")


def test_a_token_of_another_registered_platform_is_refused(lti_app, platform, tool, new_browser):
    with TestOnlyPlatform(issuer="https://moodle.test.invalid", client_id="moodle-client") as other:
        register(lti_app, other, name="moodle")
        browser = new_browser()
        query = _nonce_and_state(browser, platform)  # a login at the first platform
        token = other.id_token(platform.people["ann"], nonce=query["nonce"])  # answered by the other
        _refused(browser, browser.post("/lti/launch", data={"id_token": token, "state": query["state"]}), 401)


def test_a_launch_with_no_login_or_garbage_is_refused(platform, new_browser):
    browser = new_browser()
    _refused(browser, browser.post("/lti/launch", data={"id_token": "x", "state": "nope"}), 400, "unknown state")
    query = _nonce_and_state(browser, platform)
    _refused(browser, browser.post("/lti/launch", data={"id_token": "not.a.jwt", "state": query["state"]}), 400,
             "not a JWT")


def test_a_browser_is_shown_a_page_saying_why(platform, new_browser):
    browser = new_browser()
    response = browser.post("/lti/launch", data={"id_token": "x", "state": "nope"}, headers={"Accept": "text/html"})
    assert response.status_code == 400 and "The launch from your LMS was refused" in response.text
    assert "open the activity again from the LMS" in response.text


def test_a_target_elsewhere_is_refused_at_login(platform, new_browser):
    browser = new_browser()
    params = {"iss": platform.issuer, "login_hint": "ann", "target_link_uri": "https://evil.invalid/"}
    _refused(browser, browser.get("/lti/login", params=params), 400, "not on this site")


def test_the_jwks_publishes_the_signing_key_and_the_one_before_it_after_rotation(lti_app, platform, tool):
    from app.lti import keys

    before = {key["kid"] for key in tool.get("/lti/jwks").json()["keys"]}
    assert len(before) == 1
    with lti_app.state.db.session(write=True) as session:
        newest = keys.rotate(session).kid
        session.commit()
    published = [key for key in tool.get("/lti/jwks").json()["keys"]]
    assert {key["kid"] for key in published} == before | {newest}
    assert all("d" not in key for key in published)  # public halves only
    with lti_app.state.db.session(write=True) as session:
        keys.rotate(session)
        session.commit()
    assert before.isdisjoint(key["kid"] for key in tool.get("/lti/jwks").json()["keys"])


def test_instructor_role_does_not_come_from_a_learner_launch(lti_app, platform, new_browser):
    platform.people["ann"].roles = ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"]
    browser = new_browser()
    launch(browser, platform, "ann")
    assert browser.get("/instructor").status_code == 403
    assert INSTRUCTOR not in platform.people["ann"].roles
