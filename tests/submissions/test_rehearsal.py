"""The warm-up's rehearsal (LiveHub.rehearse, app/web/readiness.py): a submission and its passing verdict go through
every statement a run's storage uses, and nothing of it stays: no submission, no progress, no learner."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.core.db import Database
from app.models import Base
from app.submissions.live import LiveHub

pytestmark = [pytest.mark.small_course, pytest.mark.both_databases]

PASSED = {"exercise": "alpha", "status": "passed", "checks": [], "stdout": "", "stderr": "", "duration_ms": 12,
          "device": "cpu"}


@pytest.fixture
def db(settings):
    from tests.helpers import migrate_database

    migrate_database(settings.database_url)
    database = Database(settings.database_url)
    yield database
    database.dispose()


def test_a_rehearsal_leaves_nothing_behind(db):
    LiveHub(db, runner=None).rehearse(exercise_slug="alpha", code="pass", verdict=PASSED)
    with db.session() as session:
        counts = {table.name: session.scalar(select(func.count()).select_from(table))
                  for table in Base.metadata.sorted_tables}
    assert set(counts.values()) == {0}, counts  # every table: no submission, attempt, pass or learner activity
