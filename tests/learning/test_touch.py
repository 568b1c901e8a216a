"""A learner's last activity (app/learning/progress.py `touch`), on a real SQLite file: stored, and a copy the session
holds agrees with what is stored, whether the session holds one (the ORM's UPDATE) or not (the table's, built once);
a learner added but not yet written is written first, not made twice."""

from __future__ import annotations

from datetime import timedelta

from app.core.db import Database
from app.learning import progress
from app.models import Learner, utcnow
from tests.helpers import make_settings


def stored_activity(db: Database, learner_id: str):
    with db.session() as session:
        return session.get(Learner, learner_id).last_activity_at


def test_touch_stores_the_time_and_a_held_copy_reads_it(tmp_path):
    db = Database(make_settings(tmp_path, migrate=True).database_url)
    then = utcnow() - timedelta(days=1)
    with db.session(write=True) as session, session.begin():
        progress.touch(session, "new", then)  # no row yet: made
        session.add(Learner(id="held"))
        session.add(Learner(id="other"))
    assert stored_activity(db, "new") == then

    now = utcnow()
    with db.session(write=True) as session, session.begin():
        held = session.get(Learner, "held")
        progress.touch(session, "held", now)
        assert held.last_activity_at == now  # the copy the session holds, updated with the row
        progress.touch(session, "other", now)  # none held
    assert stored_activity(db, "held") == now and stored_activity(db, "other") == now

    with db.session(write=True) as session, session.begin():
        session.add(Learner(id="pending"))  # not written yet: the touch writes it first and updates it
        progress.touch(session, "pending", then)
    assert stored_activity(db, "pending") == then
