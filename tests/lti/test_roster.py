"""Roles and sections from the LMS, against TestOnlyPlatform (an LMS that exists only in the tests, over real
HTTP): a launch puts its person in the section of their LMS course (a TeachingAssistant as the section's TA), and
Names and Role Provisioning fills the section with the whole roster before anyone launches."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from app.cli import main
from app.core.config import get_settings
from app.learning import sections
from app.lti import roster, services
from app.models import LtiContext, User
from tests.helpers import SECRET
from tests.lti.conftest import launch
from tests.lti.platform import LEARNER, TEACHING_ASSISTANT, Person

pytestmark = pytest.mark.small_course

SECTION = "Deep Learning 101"  # the TestOnlyPlatform's course-101


@pytest.fixture(autouse=True)
def _fresh_tokens():
    services.forget_tokens()
    yield
    services.forget_tokens()


def _user(app, browser) -> User:
    user_id = browser.get("/api/me").json()["user"]["id"]
    with app.state.db.session() as session:
        return session.get(User, user_id)


def test_a_teaching_assistants_launch_makes_a_ta_of_their_section(lti_app, platform, new_browser):
    platform.people["tom"] = Person(sub="lms-user-tom", name="Tom Assistant",
                                    roles=[TEACHING_ASSISTANT, "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"])
    ta, learner = new_browser(), new_browser()
    launch(ta, platform, "tom")
    launch(learner, platform, "ann")
    tom, ann = _user(lti_app, ta), _user(lti_app, learner)
    assert tom.role == "ta"  # not an instructor, though LMSs send #Instructor beside the sub-role
    with lti_app.state.db.session() as session:
        assert sections.sections_of(session, tom.learner_id, role="ta") == [SECTION]
        assert sections.sections_of(session, ann.learner_id) == [SECTION]


def test_a_ta_sees_the_learners_of_their_lms_course_and_not_anothers(lti_app, platform, new_browser):
    platform.contexts["course-202"] = "Deep Learning 202"
    platform.people["tom"] = Person(sub="lms-user-tom", name="Tom Assistant", roles=[TEACHING_ASSISTANT])
    platform.people["bea"] = Person(sub="lms-user-bea", name="Bea Elsewhere", roles=[LEARNER], context="course-202")
    browsers = {name: new_browser() for name in ("tom", "ann", "bea")}
    for name, browser in browsers.items():
        launch(browser, platform, name)
    tom, ann, bea = (_user(lti_app, browsers[name]) for name in ("tom", "ann", "bea"))
    with lti_app.state.db.session() as session:
        assert sections.may_see(session, tom, ann.learner_id)
        assert not sections.may_see(session, tom, bea.learner_id)


def test_the_roster_fills_the_section_before_anyone_launches_and_follows_the_lms(lti_app, platform, new_browser):
    teacher = new_browser()
    launch(teacher, platform, "ines")  # one launch tells the course where the roster is
    platform.people["bob"] = Person(sub="lms-user-bob", name="Bob Never-Launched", roles=[LEARNER])
    platform.people["tom"] = Person(sub="lms-user-tom", name="Tom Assistant", roles=[TEACHING_ASSISTANT])
    with lti_app.state.db.session() as session:
        context_id = session.scalar(select(LtiContext.id))
    done = roster.sync(lti_app.state.db, lti_app.state.settings, context_id)
    assert (done.section, done.learners, done.tas, done.new_accounts) == (SECTION, 2, 1, 3)  # ann, bob; tom
    again = roster.sync(lti_app.state.db, lti_app.state.settings, context_id)
    assert (again.learners, again.tas, again.new_accounts) == (2, 1, 0)  # the same roster changes nothing
    del platform.people["bob"]  # dropped the LMS course
    roster.sync(lti_app.state.db, lti_app.state.settings, context_id)
    with lti_app.state.db.session() as session:
        names = {user.display_name: user for user in session.scalars(select(User))}
        assert sections.sections_of(session, names["Bob Never-Launched"].learner_id) == []
        assert sections.sections_of(session, names["Ann Learner"].learner_id) == [SECTION]
        assert names["Tom Assistant"].role == "ta"
    # ann's later launch is the account the roster made
    browser = new_browser()
    launch(browser, platform, "ann")
    assert browser.get("/api/me").json()["user"]["display_name"] == "Ann Learner"
    with lti_app.state.db.session() as session:
        assert len(session.scalars(select(User)).all()) == 4  # ines, ann, tom, and bob: his account (and work) stays


def test_course_lti_roster_lists_and_fetches(lti_app, lti_settings, platform, new_browser, monkeypatch):
    launch(new_browser(), platform, "ines")
    for name, value in {"COURSE_ENV": "test", "COURSE_SECRET_KEY": SECRET,
                        "COURSE_DATABASE_URL": lti_settings.database_url}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        listed = CliRunner().invoke(main, ["lti", "roster"])
        assert listed.exit_code == 0 and f"{SECTION} (test-lms)" in listed.output
        fetched = CliRunner().invoke(main, ["lti", "roster", "--all"])
        assert fetched.exit_code == 0, fetched.output
        assert f"section '{SECTION}': 1 learners, 0 TAs" in fetched.output
    finally:
        get_settings.cache_clear()
