"""Export and deletion, checked in the database: the export holds every row about the learner, and deleting the
account removes exactly that learner's rows (their comments stay, authorless, as "deleted user")."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import select, text

from app.accounts import password_reset
from app.accounts.data import OMITTED
from app.learning import progress, reveals, sections
from app.models import Base, Learner, LtiContext, LtiIdentity, LtiMember, LtiPlatform, User
from app.submissions import history
from app.submissions.finish import error_verdict, finish
from tests.helpers import TEST_PASSWORD

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

# The rows about an account, table by table, written out by hand (app/accounts/data.py finds them by foreign keys).
ABOUT = {
    "users": "id = :uid",
    "learners": "id = :lid",
    "lesson_reads": "learner_id = :lid",
    "exercise_progress": "learner_id = :lid",
    "submissions": "learner_id = :lid",
    "comments": "author_id = :uid",
    "password_resets": "user_id = :uid",
    "user_sessions": "user_id = :uid",
    "comment_reports": "reporter_id = :uid",
    "regrades": "requested_by = :uid",
    "submission_verdicts": "submission_id IN (SELECT id FROM submissions WHERE learner_id = :lid)",
    "reveals": "learner_id = :lid",
    "section_members": "learner_id = :lid",
    "lti_identities": "user_id = :uid",
    "lti_members": "user_id = :uid",
}
# rows about the account that deletion keeps, and the column that then forgets the account: comments stay
# authorless ("deleted user"), an instructor's regrades stay with no requester
KEPT = {"comments": "author_id", "regrades": "requested_by"}
INSTRUCTORS_ONLY = {"regrades"}  # a learner has no rows there


def ids(browser) -> dict:
    user = browser.get("/api/me").json()["user"]
    return {"uid": user["id"], "lid": user["learner_id"]}


def snapshot(app) -> dict[str, dict[tuple, dict]]:
    """Every row of every table, keyed by table and primary key."""
    with app.state.db.session() as session:
        return {table.name: {tuple(row[c.name] for c in table.primary_key.columns): dict(row)
                             for row in session.execute(select(table)).mappings()}
                for table in Base.metadata.sorted_tables}  # fmt: skip


def rows_about(app, who: dict) -> dict[str, dict[tuple, dict]]:
    """The rows about one account, by the hand-written conditions above."""
    found = {}
    with app.state.db.session() as session:
        for name, condition in ABOUT.items():
            table = Base.metadata.tables[name]
            rows = session.execute(select(table).where(text(condition)), who).mappings()
            found[name] = {tuple(row[c.name] for c in table.primary_key.columns): dict(row) for row in rows}
    return found


def add_progress(app, learner_id: str, exercise: str) -> None:
    """Two graded attempts on an exercise (the small course has none to run: stored as the runner would)."""
    with app.state.db.session(write=True) as session:
        for n in range(2):
            sub = progress.record_submission(session, learner_id=learner_id, exercise_slug=exercise,
                                             code=f"print({n})")  # fmt: skip
            finish(session, submission_id=sub.id, verdict=error_verdict(exercise, "seeded"))
        history.summarise_new_runs(session)  # what the dashboard does: each run's verdict enters its history
        session.commit()


def add_reset_link(app, user_id: int) -> None:
    with app.state.db.session(write=True) as session:
        password_reset.issue_token(session, user=session.get(User, user_id), ttl_s=600)
        session.commit()


def add_lti_rows(session, who: dict) -> None:
    """An LMS account linked to this one and its place in an LMS course (as a launch would leave them)."""
    platform = LtiPlatform(name=f"lms-{who['uid']}", issuer=f"https://lms{who['uid']}.example.org", client_id="c",
                           auth_login_url="https://lms.example.org/a", auth_token_url="https://lms.example.org/t",
                           jwks_url="https://lms.example.org/j", deployment_ids=["d"])
    session.add(platform)
    session.flush()
    context = LtiContext(platform_id=platform.id, context_id="course-1", deployment_id="d")
    session.add(context)
    session.flush()
    session.add_all([LtiIdentity(platform_id=platform.id, sub=f"sub-{who['uid']}", user_id=who["uid"]),
                     LtiMember(context_id=context.id, user_id=who["uid"], learner_id=who["lid"], roles=["Learner"])])


def busy_learner(app, browser, other_comment: int | None = None) -> int:
    """Give a signed-in learner rows in every table; return the id of their top-level comment."""
    who = ids(browser)
    assert browser.post("/api/lessons/alpha/read").status_code == 200
    add_progress(app, who["lid"], "demo-one")
    add_reset_link(app, who["uid"])
    assert browser.post("/api/exercises/demo-one/hints/1").status_code in (200, 404)  # a small course's hint, if any
    with app.state.db.session(write=True) as session:
        reveals.record_reveal(session, learner_id=who["lid"], exercise_slug="demo-one", kind="solution")
        sections.add_member(session, "Lab A", who["lid"])
        add_lti_rows(session, who)
        session.commit()
    own = browser.post("/api/lessons/alpha/comments", json={"body": "My question"}).json()["id"]
    if other_comment is not None:
        assert browser.post("/api/lessons/alpha/comments", json={"body": "A reply", "parent_id": other_comment}) \
            .status_code == 201  # fmt: skip
        assert browser.post(f"/api/comments/{other_comment}/report", json={"reason": "Off topic"}).status_code == 201
    return own


@pytest.fixture
def two_learners(app, signed_in_client):
    """Ann and Bob, each with rows in every table, replying under each other's comments."""
    ann, bob = signed_in_client("ann@example.org", name="Ann"), signed_in_client("bob@example.org", name="Bob")
    bob_comment = busy_learner(app, bob)
    ann_comment = busy_learner(app, ann, other_comment=bob_comment)
    bob.post("/api/lessons/alpha/comments", json={"body": "Bob answers Ann", "parent_id": ann_comment})
    return ann, bob, ann_comment


def test_every_table_that_points_at_an_account_is_listed_here():
    owners = {"users", "learners"}
    pointing = {table.name for table in Base.metadata.sorted_tables
                if table.name in owners or any(fk.column.table.name in owners for fk in table.foreign_keys)}
    missing = sorted(pointing - set(ABOUT))
    assert not missing, (f"tables {missing} hold rows about an account: add their condition to ABOUT here, and make "
                         "sure deleting an account removes those rows (ON DELETE CASCADE) or keeps them on purpose "
                         "(KEPT, and say so in docs/security.md)")  # fmt: skip


def plain(value):
    return value.isoformat() if isinstance(value, datetime) else value


def test_the_export_holds_every_row_about_the_learner_and_no_secret(app, two_learners):
    ann = two_learners[0]
    response = ann.get("/api/account/export")
    assert response.status_code == 200
    assert response.headers["content-disposition"].startswith("attachment;")
    export = response.json()
    expected = rows_about(app, ids(ann))
    for name, rows in expected.items():
        assert rows or name in INSTRUCTORS_ONLY, f"the fixture should give Ann rows in {name}"
        table = Base.metadata.tables[name]
        exported = {tuple(row[c.name] for c in table.primary_key.columns): row for row in export["tables"][name]}
        assert set(exported) == set(rows), name
        for key, row in rows.items():
            shown = {column: plain(value) for column, value in row.items() if f"{name}.{column}" not in OMITTED}
            assert exported[key] == shown, (name, key)
    assert set(OMITTED) == {"users.password_hash", "password_resets.token_hash", "user_sessions.token_hash"}
    secrets = [row["password_hash"] for row in expected["users"].values()] + \
        [row["token_hash"] for table in ("password_resets", "user_sessions") for row in expected[table].values()]
    assert not [secret for secret in secrets if secret in response.text]


def test_deleting_removes_exactly_the_learners_rows_and_keeps_their_comments_authorless(app, two_learners, client):
    ann, bob, ann_comment = two_learners
    who = ids(ann)
    before, about = snapshot(app), rows_about(app, who)

    assert ann.request("DELETE", "/api/account", json={"password": "wrong password"}).status_code == 403
    assert snapshot(app) == before
    response = ann.request("DELETE", "/api/account", json={"password": TEST_PASSWORD})
    assert response.status_code == 204

    expected = {name: dict(rows) for name, rows in before.items()}
    for name, rows in about.items():
        for key in rows:
            if name in KEPT:
                expected[name][key] = {**expected[name][key], KEPT[name]: None}
            else:
                del expected[name][key]
    assert snapshot(app) == expected
    assert ann.get("/api/me").json()["user"] is None  # this browser goes on as a new anonymous learner
    thread = client.get("/api/lessons/alpha/comments").json()["comments"]
    mine = next(c for c in thread if c["id"] == ann_comment)
    assert mine["author"] == {"id": None, "display_name": "deleted user"} and mine["body"] == "My question"
    assert [r["body"] for r in mine["replies"]] == ["Bob answers Ann"]  # the thread keeps its shape
    assert "deleted user" in client.get("/lessons/alpha", headers={"accept": "text/html"}).text
    assert bob.get("/api/me").json()["user"]["email"] == "bob@example.org"


def test_the_delete_form_without_javascript(app, two_learners, make_client):
    ann = two_learners[0]
    who = ids(ann)
    token = ann.headers["X-CSRF-Token"]
    response = ann.post("/account/delete", data={"csrf_token": token, "password": TEST_PASSWORD})
    assert response.status_code == 200 and "Your account is deleted" in response.text
    with app.state.db.session() as session:
        assert session.get(User, who["uid"]) is None and session.get(Learner, who["lid"]) is None
    assert make_client().post("/api/auth/login", json={"email": "ann@example.org", "password": TEST_PASSWORD}) \
        .status_code == 401  # fmt: skip


def test_an_instructors_moderation_outlives_their_account(app, two_learners, instructor_client, client):
    _ann, bob, _ = two_learners
    bobs = next(c for c in client.get("/api/lessons/alpha/comments").json()["comments"]
                if c["author"]["display_name"] == "Bob")  # fmt: skip
    assert instructor_client.post(f"/api/comments/{bobs['id']}/hide", json={"hidden": True}).status_code == 200
    response = instructor_client.request("DELETE", "/api/account", json={"password": TEST_PASSWORD})
    assert response.status_code == 204
    assert bobs["id"] not in [c["id"] for c in client.get("/api/lessons/alpha/comments").json()["comments"]]
    own = next(c for c in bob.get("/api/lessons/alpha/comments").json()["comments"] if c["id"] == bobs["id"])
    assert own["hidden"] is True  # still hidden from learners; Bob sees his own
