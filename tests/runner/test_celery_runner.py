"""CeleryRunner's refusals through the front door, against a real Redis (no worker needed): a full queue is 429
with Retry-After, a queue no worker takes and a stopped Redis are 503 with a sentence, and nothing is stored for
any of them. Jobs actually running on workers: tests/worker and tests/load/test_tier_*."""

from __future__ import annotations

import json

import pytest
import redis
from fastapi.testclient import TestClient

from app.harness.contract import host_for
from app.runner import Job
from app.runner.celery_runner import WORKER_PREFIX, job_message
from app.submissions.finish import error_verdict
from tests.helpers import make_settings, with_csrf

CODE = {"code": "print('hi')\n"}
QUEUE_SIZE = 3


@pytest.fixture
def tier_app(tmp_path, redis_server):
    """The real app with COURSE_RUNNER=celery on a real Redis, serving the course's exercises."""
    from app.main import create_app

    settings = make_settings(tmp_path, migrate=True, runner="celery", celery_broker_url=redis_server.url,
                             runner_queue_size=QUEUE_SIZE, runner_concurrency=1)
    app = create_app(settings)
    with TestClient(app) as client:
        yield app, with_csrf(client), redis.Redis.from_url(redis_server.url)
    app.state.db.dispose()


def pretend_worker(client: redis.Redis, queues=("cpu",)) -> None:
    """Write a live worker's report, as `course worker` does each heartbeat."""
    client.set(WORKER_PREFIX + "test:1:abc", json.dumps({"queues": list(queues), "concurrency": 1, "running": 0}),
               ex=60)


def stored(app) -> int:
    from sqlalchemy import func, select

    from app.models import Submission

    with app.state.db.session() as session:
        return session.scalar(select(func.count()).select_from(Submission))


def test_a_queue_no_worker_takes_is_503_and_nothing_is_stored(tier_app):
    app, client, _redis = tier_app
    response = client.post("/api/exercises/pick-device/submissions", json=CODE)
    assert response.status_code == 503 and response.headers["retry-after"] == "30"
    assert "no machine takes `cpu` jobs" in response.json()["detail"]
    assert "course worker --queues cpu" in response.json()["detail"] and stored(app) == 0


def test_a_full_queue_is_429_with_retry_after(tier_app):
    app, client, broker = tier_app
    pretend_worker(broker)
    accepted = [client.post("/api/exercises/pick-device/submissions", json=CODE) for _ in range(QUEUE_SIZE)]
    assert [r.status_code for r in accepted] == [202] * QUEUE_SIZE  # nobody runs them: they wait on `cpu`
    assert broker.llen("cpu") == QUEUE_SIZE
    refused = client.post("/api/exercises/pick-device/submissions", json=CODE)
    assert refused.status_code == 429 and refused.json()["reason"] == "busy"
    assert int(refused.headers["retry-after"]) >= 1 and stored(app) == QUEUE_SIZE


def test_a_gpu_exercise_goes_to_the_gpu_queue(tier_app):
    app, client, broker = tier_app
    pretend_worker(broker, queues=("cpu", "gpu"))
    response = client.post("/api/exercises/training-loop/submissions", json=CODE)
    assert response.status_code == 202 and broker.llen("gpu") == 1 and broker.llen("cpu") == 0


def test_redis_stopped_is_503_naming_no_host_to_the_learner_and_nothing_is_stored(tier_app, redis_server, caplog):
    app, client, broker = tier_app
    pretend_worker(broker)
    redis_server.stop()
    with caplog.at_level("WARNING", logger="app.web.errors"):
        response = client.post("/api/exercises/pick-device/submissions", json=CODE)
    assert response.status_code == 503 and response.json()["reason"] == "unavailable"
    detail = response.json()["detail"]
    assert detail.startswith("The course cannot take code right now: its job queue cannot be reached.")
    assert "Redis" not in detail and "127.0.0.1" not in detail and str(redis_server.port) not in detail
    assert "Nothing was stored" in detail and stored(app) == 0
    assert f"Redis at redis://127.0.0.1:{redis_server.port}/0" in caplog.text  # the operator's log has it


def test_the_events_of_a_job_nobody_ran_wait_and_a_stored_verdict_ends_them(tier_app):
    """With nothing in the stream, the stored row decides: here an error stored by the sweep, say."""
    from app.submissions import leases
    from tests.helpers import parse_sse

    app, client, broker = tier_app
    pretend_worker(broker)
    submission_id = client.post("/api/exercises/pick-device/submissions", json=CODE).json()["id"]
    with app.state.db.session(write=True) as session, session.begin():
        leases.claim(session, submission_id=submission_id, attempt=1, worker="w", lease_s=30)
        leases.finish_attempt(session, submission_id=submission_id, attempt=1, worker="w",
                              verdict=error_verdict("pick-device", "run it again"))
    events = parse_sse(client.get(f"/api/submissions/{submission_id}/events").text)
    assert [kind for kind, _ in events] == ["output", "verdict"]  # the stored stderr line, then the verdict
    assert events[-1][1]["status"] == "error" and events[-1][1]["id"] == submission_id


def test_a_jobs_ranks_and_simulated_host_survive_the_trip_to_a_worker():
    """What `course run --nproc 2` sends: the worker rebuilds the same Job from the JSON it receives."""
    job = Job(code="print(1)\n", filename="ranks.py", host=host_for(gpus=2), nproc=2)
    message = json.loads(json.dumps(job_message(job, None)))  # Celery's json serializer, both ways
    assert Job.from_payload(message["payload"]) == job


def test_a_graded_jobs_report_key_travels_beside_its_payload():
    """Without it the worker's run reports under another key and every plain graded job on the tier fails."""
    job = Job(code="print(1)\n", mode="grade", grade={"probe": "x"}, key="k3y")
    message = json.loads(json.dumps(job_message(job, None)))
    assert message["key"] == "k3y" and "k3y" not in json.dumps(message["payload"])  # never in the payload
