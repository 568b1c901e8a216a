"""Every write goes through the one replacement of text no column can hold (app/core/storable.py), on SQLite and on a
real PostgreSQL: ORM inserts, Core updates, bulk inserts and JSON values, in the tables that take learner text."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import insert, select, update

from app.accounts import users as accounts
from app.core.db import Database, upgrade
from app.core.storable import REPLACEMENT, _storable_value, storable_json, storable_text
from app.models import Comment, Learner, Regrade, Submission, SubmissionVerdict, User

pytestmark = pytest.mark.both_databases

RAW = "a\x00b\ud83dc"  # a NUL and half a surrogate pair
STORED = f"a{REPLACEMENT}b{REPLACEMENT}c"


@pytest.fixture
def db(settings):
    upgrade(settings.database_url)
    database = Database(settings.database_url)
    yield database
    database.dispose()


def test_storable_text_replaces_nul_and_lone_surrogates_only():
    assert storable_text(RAW) == STORED
    assert storable_text("plain ascii") == "plain ascii"
    assert storable_text("é → 🙂 \ud83d\ude42") == "é → 🙂 " + REPLACEMENT * 2  # a pair in a str is two halves


@pytest.mark.parametrize("text", ["plain", "é → 🙂", RAW, "\x00", "\udfff", "a literal \\u0000 and \\ud800", ""])
def test_json_values_serialise_as_if_every_string_were_walked(text):
    # storable_json serialises once and walks only when the text shows an escape it may have to replace
    value = {"stdout": text, text: [text, 1, 2.5, None, True], "nested": ({"k": (text,)},), 3: "int key"}
    assert storable_json(value) == json.dumps(_storable_value(value))


def test_learner_text_in_every_table_is_stored_with_replacements(db):
    with db.session(write=True) as session:
        user = accounts.create_user(session, email="nul@example.org", password="a long password",
                                    display_name=RAW)  # fmt: skip
        session.add(Submission(id="s1", learner_id=user.learner_id, exercise_slug="same-device", code=RAW,
                               status="failed", verdict={"stderr": RAW, RAW: [RAW, 1]}))  # fmt: skip
        session.flush()
        session.add(SubmissionVerdict(submission_id="s1", revision=0, status="failed", error_line=RAW))
        session.add(Comment(lesson_slug="alpha", author_id=user.id, body=RAW))
        session.add(Regrade(exercise_slug="same-device", status="failed", message=RAW))
        session.commit()
    with db.session() as session:
        assert session.scalar(select(User.display_name)) == STORED
        submission = session.get(Submission, "s1")
        assert submission.code == STORED and submission.verdict == {"stderr": STORED, STORED: [STORED, 1]}
        assert session.scalar(select(SubmissionVerdict.error_line)) == STORED
        assert session.scalar(select(Comment.body)) == STORED
        assert session.scalar(select(Regrade.message)) == STORED


def test_core_updates_and_bulk_inserts_are_replaced_too(db):
    with db.session(write=True) as session:
        session.execute(insert(Learner), [{"id": "l1"}, {"id": "l2"}])
        session.execute(insert(Submission), [
            {"id": f"s{i}", "learner_id": "l1", "exercise_slug": "same-device", "code": RAW} for i in range(3)])
        session.execute(update(Submission).where(Submission.id == "s0").values(verdict={"stdout": RAW}))
        session.commit()
    with db.session() as session:
        assert set(session.scalars(select(Submission.code))) == {STORED}
        assert session.get(Submission, "s0").verdict == {"stdout": STORED}
