"""Load, short version: learners submitting while others read, then more submissions than the queue holds.

Real uvicorn, real SQLite file, real sandbox; traffic only to 127.0.0.1; every loop bounded. The full version
(32 x 10 submissions, 50 readers) runs in `make bench` (bench/load.py). No wall-clock assertions here.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.load import load_run, lost, summarise
from tests.support.clients import EXERCISES, Learner, solutions
from tests.support.servers import site_server

pytestmark = pytest.mark.slow


def test_submitters_and_readers_all_get_stored_verdicts(tmp_path):
    with site_server(tmp_path, COURSE_SUBMISSION_RATE_LIMIT="10000/minute",
                     COURSE_SUBMISSION_ADDRESS_RATE_LIMIT="10000/minute") as (base, _):
        run = asyncio.run(load_run(base, submitters=8, per_submitter=2, readers=10))
    figures = summarise(run)
    print("load (short):", figures)
    assert figures["submissions"] == 16
    assert figures["verdicts"] == 16 and figures["passed"] == 16, figures
    assert figures["lost_submissions"] == 0
    assert figures["server_errors"] == 0
    assert figures["page_reads"] > 0 and set(run["reads"].statuses) == {200}
    for learner in run["learners"]:
        passed = {o.exercise for o in learner["outcomes"] if o.verdict["status"] == "passed"}
        recorded = {slug for slug, row in learner["progress"]["exercises"].items() if row.get("passed")}
        attempts = sum(row["attempts"] for row in learner["progress"]["exercises"].values())
        assert recorded == passed, learner["progress"]
        assert attempts == len(learner["outcomes"])
        assert lost(learner) == 0


async def _burst(base: str, n: int) -> list:
    code = solutions()["same-device"]

    async def one():
        async with Learner(base) as learner:
            return await learner.submit("same-device", code)
    return await asyncio.gather(*(one() for _ in range(n)))


def test_past_the_queue_capacity_extra_submissions_get_429_and_accepted_ones_finish(tmp_path):
    env = {"COURSE_RUNNER_QUEUE_SIZE": "2", "COURSE_RUNNER_CONCURRENCY": "1",
           "COURSE_SUBMISSION_RATE_LIMIT": "10000/minute", "COURSE_SUBMISSION_ADDRESS_RATE_LIMIT": "10000/minute"}
    with site_server(tmp_path, **env) as (base, _):
        outcomes = asyncio.run(_burst(base, 12))
    refused = [o for o in outcomes if o.http_status == 429]
    accepted = [o for o in outcomes if o.http_status == 202]
    assert refused, "12 submissions at once into 1 running + 2 queued slots: some must be refused"
    assert accepted, "the queue's capacity must still be used"
    assert len(refused) + len(accepted) == 12, [o.http_status for o in outcomes]
    assert all(o.retry_after and int(o.retry_after) >= 1 for o in refused)
    assert all(o.verdict and o.verdict["status"] == "passed" for o in accepted), [o.verdict for o in accepted]


def test_every_exercise_is_in_the_mix():
    assert set(EXERCISES) == set(solutions())
