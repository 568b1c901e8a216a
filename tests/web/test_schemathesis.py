"""Fuzz the JSON API from its own OpenAPI schema (schemathesis, in process over ASGI): whatever a client sends,
the site answers without a 5xx and every answer matches what the schema documents (schemathesis's default
checks: status codes, content types, response bodies and headers, valid data accepted, invalid data refused).

The app is the real one (real SQLite file, real sandbox runner started by the ASGI lifespan), and every request
carries a signed-in learner's session cookie and CSRF token, so unsafe routes get past the CSRF check and the
comment and account routes past 401. Logging out ends the cookie's session on the server (its `user_sessions`
row) and "log out everywhere" raises the account's session version, so after either case the row and the version
are put back and the cookie every case sends works again; signing up leaves it as it is. The fuzzer never knows its own
password, so it cannot change it or delete its account. Half the generated path parameters are swapped for slugs and ids
that exist, so routes run past their 404 (a random slug is never a lesson): comments are posted, edited and
deleted, and submissions run in the sandbox.
"""

from __future__ import annotations

import logging

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi
from sqlalchemy import select, update

from app.community import comments
from app.content import machine_choices
from app.core.config import Settings
from app.learning import progress
from app.main import create_app
from app.models import User, UserSession
from app.submissions.finish import error_verdict, finish
from app.web.routes.comments import MAX_ID
from tests.helpers import TEST_PASSWORD, create_account, make_settings

# examples per operation; enough to reach each refusal, small enough for `make test` on 2 cores
MAX_EXAMPLES = 25
FUZZER_EMAIL = "fuzz@example.org"


def openapi_document() -> dict:
    """Return the site's OpenAPI document (routes only: this app is never served, its database never opened)."""
    quiet = logging.getLogger("app.web.deps")  # it warns that the unused in-memory database is not migrated
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return create_app(Settings(env="test", secret_key="schema-only", database_url="sqlite://")).openapi()
    finally:
        quiet.setLevel(level)


class AppSlot:
    """The ASGI app schemathesis calls: forwards to the app the module fixture built on its own database."""

    app = None

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)


# schemathesis needs the schema when pytest collects the test, before any fixture runs: the document comes from
# an app built here, the requests go to the real one that the fixture puts in the slot
SLOT = AppSlot()
# A reply is refused with 400 ("Bad reply", documented) when its parent, valid by the schema, is in another lesson
# or is itself a reply: a rule about stored comments that no schema can state, so 400 is an answer there too
# (the rest of the list is the check's default; 5xx is not_a_server_error's to report).
MACHINE_IDS = {c.id for c in machine_choices.CHOICES}
REPLY_STATUSES = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
CONFIG = SchemathesisConfig.from_dict({"operations": [{
    "include-path": "/api/lessons/{slug}/comments", "include-method": "POST",
    "checks": {"positive_data_acceptance": {"expected-statuses": REPLY_STATUSES}},
}]})  # fmt: skip
schema = schemathesis.openapi.from_dict(openapi_document(), config=CONFIG)
schema.app = SLOT
# path parameter -> values that exist in the fuzzed app's database and course (filled in by `fuzzed_app`)
EXISTING: dict[str, list] = {}
# (user id, token hash) of the fuzzing learner's server-side session, put back after a case logs it out
SIGNED_IN: list[tuple[int, str]] = []


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """Half the time, use slugs and ids that exist instead of generated ones that are valid but unknown.

    A value generated to be invalid (a negative test: an id of 0, or not a number) is left alone, so the
    request stays one the API must refuse.
    """
    if not isinstance(path_parameters, dict):
        return st.just(path_parameters)
    path = context.operation.path
    real = {name: EXISTING[key] for name, key in (("slug", "lesson" if "/lessons/" in path else "exercise"),
                                                  ("comment_id", "comment"), ("submission_id", "submission"))
            if _valid(path_parameters.get(name)) and EXISTING.get(key)}  # fmt: skip
    if not real:
        return st.just(path_parameters)
    chosen = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in real.items()})
    return st.one_of(st.just(path_parameters), chosen.map(lambda values: {**path_parameters, **values}))


def _valid(value) -> bool:
    """Say whether a generated path value is one the schema allows (a string, or an id from 1 up)."""
    if isinstance(value, bool) or value is None:
        return False
    return isinstance(value, str) or (isinstance(value, int) and 1 <= value <= MAX_ID)


class Identity:
    """What every fuzzed request carries: the session cookie and its CSRF token."""

    def __init__(self, cookies: dict[str, str], csrf: str) -> None:
        self.cookies = cookies
        self.headers = {"X-CSRF-Token": csrf}


def sign_in(app) -> tuple[Identity, User]:
    """Create the fuzzing learner's account and sign in over HTTP; return its identity and the user."""
    create_account(app, FUZZER_EMAIL, name="Fuzz Learner")
    browser = TestClient(app)  # no lifespan here: schemathesis starts the app's own, once, in its event loop
    browser.headers["X-CSRF-Token"] = browser.get("/api/auth/csrf").json()["csrf_token"]
    response = browser.post("/api/auth/login", json={"email": FUZZER_EMAIL, "password": TEST_PASSWORD})
    assert response.status_code == 200, response.text
    with app.state.db.session() as session:
        user = session.get(User, response.json()["user"]["id"])
        SIGNED_IN.extend((row.user_id, row.token_hash) for row in session.scalars(select(UserSession)))
    return Identity(dict(browser.cookies), response.json()["csrf_token"]), user


def seed(app, user: User) -> None:
    """Give the fuzzer things to find: its comments, its finished submission, and another learner's."""
    lesson = app.state.course.lessons[0].slug
    exercise = sorted(app.state.course.exercises)[0]
    with app.state.db.session(write=True) as session:
        author = session.get(User, user.id)
        ids = [comments.post_comment(session, author=author, lesson_slug=lesson, body=f"fuzz comment {n}",
                                     max_chars=app.state.settings.comment_max_chars).id for n in range(3)]
        subs = [progress.record_submission(session, learner_id=learner, exercise_slug=exercise, code="print(1)")
                for learner in (user.learner_id, "another-learner")]  # fmt: skip
        for sub in subs:
            finish(session, submission_id=sub.id, verdict=error_verdict(exercise, "seeded"))
        session.commit()
        EXISTING.update(lesson=[each.slug for each in app.state.course.lessons],
                        exercise=sorted(app.state.course.exercises), comment=ids,
                        submission=[sub.id for sub in subs])  # fmt: skip


@pytest.fixture(scope="module")
def fuzzed_app(tmp_path_factory):
    """The real app on a fresh migrated SQLite file, with a signed-in learner's identity in `.identity`."""
    # submissions per minute: high, so the fuzzer reaches the sandbox rather than the rate limit every time
    app = create_app(make_settings(tmp_path_factory.mktemp("fuzz"), migrate=True, submission_rate_limit="1000/minute",
                                   submission_address_rate_limit="1000/minute", comment_rate_limit="1000/minute",
                                   comment_address_rate_limit="1000/minute"))
    app.identity, user = sign_in(app)
    seed(app, user)
    SLOT.app = app
    yield app
    asgi.shutdown_lifespans()  # stop the runner that schemathesis's client started
    EXISTING.clear()
    SIGNED_IN.clear()
    app.state.db.dispose()


@pytest.mark.slow
@schema.parametrize()
# deadline None: one case may run a sandbox job on a loaded 2-core machine; pytest-timeout bounds the whole test.
# No example database: each run starts fresh and writes nothing into the checkout.
@settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
def test_api_answers_without_5xx_and_as_documented(case, fuzzed_app):
    identity = fuzzed_app.identity
    if case.operation.path == "/api/exercises/{slug}/submissions" and isinstance(case.body, dict) \
            and isinstance(case.body.get("machine"), str) and case.body["machine"] in MACHINE_IDS:
        # every machine id is valid by the schema, and an exercise that does not offer one answers 422: which
        # exercise offers which machine is course data no schema states (tests/web/test_machine_picker.py tests
        # that 422); fuzz the rest of the body (an id that is no machine stays: it must be refused)
        case.body.pop("machine", None)
    try:
        case.call_and_validate(headers=identity.headers, cookies=identity.cookies)
    finally:
        if case.operation.path in ("/api/account/logout-all", "/api/auth/logout"):
            restore_session(fuzzed_app)


def restore_session(app) -> None:
    """Undo "log out" and "log out everywhere" for the fuzzing learner, so the cookie every case sends signs in."""
    with app.state.db.session(write=True) as session:
        session.execute(update(User).where(User.email == FUZZER_EMAIL).values(session_version=0))
        known = set(session.scalars(select(UserSession.token_hash)))
        session.add_all(UserSession(user_id=user_id, token_hash=token_hash)
                        for user_id, token_hash in SIGNED_IN if token_hash not in known)  # fmt: skip
        session.commit()
