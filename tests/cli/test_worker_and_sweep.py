"""`course worker` and `course sweep` as a person types them (the worker's jobs themselves: tests/worker)."""

from __future__ import annotations

import os
import subprocess
import sys

import redis
from click.testing import CliRunner

from app import ROOT
from app.cli import main as course
from app.core.db import Database
from app.learning import progress


def test_worker_refuses_an_unknown_queue():
    result = CliRunner().invoke(course, ["worker", "--queues", "cpu,tpu"])
    assert result.exit_code == 2 and "tpu is not a queue; use cpu or gpu" in result.output


def test_sweep_sends_a_submission_that_was_stored_but_never_queued(tmp_path, redis_server):
    from tests.helpers import make_settings

    settings = make_settings(tmp_path, migrate=True)
    db = Database(settings.database_url)
    with db.session(write=True) as session, session.begin():
        submission_id = progress.record_submission(session, learner_id="l1", exercise_slug="pick-device",
                                                   code="pass").id
    db.dispose()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("COURSE_")},
           "COURSE_DATABASE_URL": settings.database_url, "COURSE_CELERY_BROKER_URL": redis_server.url,
           "COURSE_RUNNER_LEASE_S": "0.001"}  # seconds: the row is already "a lease old"
    result = subprocess.run([sys.executable, "-m", "app.cli", "sweep"], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "re-queued 1, stored 0 as errors" in result.stdout
    queued = redis.Redis.from_url(redis_server.url).lrange("cpu", 0, -1)
    assert len(queued) == 1 and f"{submission_id}-1".encode() in queued[0]
