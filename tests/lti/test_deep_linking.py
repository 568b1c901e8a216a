"""Deep linking against TestOnlyPlatform (an LMS that exists only in the tests, over real HTTP): an LMS instructor
picks an exercise, and the course's signed answer is one the platform accepts (it checks the signature against the
course's /lti/jwks); learners cannot open the picker. The picker in Chromium: tests/e2e/test_lti_picker.py."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from tests.helpers import FIXTURES
from tests.lti.conftest import SITE, launch

GOOD = {"course": FIXTURES / "good"}  # two lessons and the exercise demo-move


def _csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


@pytest.mark.parametrize("lti_settings", [GOOD], indirect=True)
def test_an_instructor_picks_an_exercise_and_the_platform_accepts_the_signed_answer(platform, new_browser):
    teacher = new_browser()
    response = launch(teacher, platform, "ines", message="LtiDeepLinkingRequest")
    assert response.status_code == 303 and response.headers["location"] == "/lti/deep-link"
    picker = teacher.get("/lti/deep-link")
    assert picker.status_code == 200
    assert 'value="exercise:demo-move"' in picker.text and 'value="lesson:first-steps"' in picker.text
    answer = teacher.post("/lti/deep-link", data={"csrf_token": _csrf(picker.text), "item": ["exercise:demo-move"]})
    assert answer.status_code == 200
    policy = answer.headers["content-security-policy"]
    assert f"form-action 'self' {platform.url}" in policy  # the one page whose form may leave the site
    action = html.unescape(re.search(r'action="([^"]+)" id="lti-return"', answer.text).group(1))
    token = html.unescape(re.search(r'name="JWT" value="([^"]+)"', answer.text).group(1))
    assert action == f"{platform.url}/deep-link-return"
    accepted = httpx.post(action, data={"JWT": token})  # what the page's form does in a browser
    assert accepted.status_code == 200, accepted.text
    [item] = platform.deep_link_items
    assert item["type"] == "ltiResourceLink" and item["url"] == f"{SITE}/lessons/first-steps#exercise-demo-move"
    assert item["lineItem"]["resourceId"] == "demo-move" and item["lineItem"]["scoreMaximum"] == 100
    # answered once: the picker is gone until the LMS asks again
    assert teacher.get("/lti/deep-link").status_code == 400


@pytest.mark.parametrize("lti_settings", [GOOD], indirect=True)
def test_a_launch_of_the_linked_item_opens_the_exercise(platform, new_browser):
    browser = new_browser()
    response = launch(browser, platform, "ann", target=f"{SITE}/lessons/first-steps#exercise-demo-move")
    assert response.headers["location"] == "/lessons/first-steps#exercise-demo-move"


@pytest.mark.parametrize("lti_settings", [GOOD], indirect=True)
def test_a_learner_cannot_deep_link(platform, new_browser):
    browser = new_browser()
    response = launch(browser, platform, "ann", message="LtiDeepLinkingRequest")
    assert response.status_code == 403 and "instructors" in response.json()["detail"]


@pytest.mark.parametrize("lti_settings", [GOOD], indirect=True)
def test_the_picker_without_a_waiting_lms_says_where_to_open_it(platform, new_browser):
    teacher = new_browser()
    launch(teacher, platform, "ines")  # a plain launch: nothing to answer
    response = teacher.get("/lti/deep-link")
    assert response.status_code == 400 and "open the picker from the LMS" in response.json()["detail"]
