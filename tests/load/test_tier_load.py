"""Load on the worker tier: 32 submitters x 10 submissions through two web servers and two `course worker`
processes. Nothing is lost (every accepted submission ends with a verdict) and nothing is stored twice (one
verdict per submission in its stream, one row per acceptance, attempts counted once). A full queue answers 429
with Retry-After, and a submitter waits that long and sends again, as the page does."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, text

from tests.support.clients import EXERCISES, Learner, solutions

pytestmark = pytest.mark.slow

SUBMITTERS = 32
SUBMISSIONS = 10
# tries per submission while the queue is full; each waits the Retry-After the site gave
MAX_TRIES = 200
# seconds the whole load may take at most (a lost verdict must fail the test, not hang it)
BOUND_S = 600


async def submitter(n: int, base: str, code: dict[str, str]) -> list:
    outcomes = []
    async with Learner(base, timeout=300) as learner:
        for i in range(SUBMISSIONS):
            slug = EXERCISES[(n + i) % len(EXERCISES)]
            for _ in range(MAX_TRIES):
                outcome = await learner.submit(slug, code[slug])
                if outcome.http_status != 429:
                    break
                await asyncio.sleep(int(outcome.retry_after))
            outcomes.append(outcome)
    return outcomes


def test_32_submitters_x_10_submissions_lose_nothing_and_store_nothing_twice(running_tier):
    code = solutions()

    async def scenario():
        runs = [submitter(n, running_tier.web[n % 2], code) for n in range(SUBMITTERS)]
        return [o for outcomes in await asyncio.gather(*runs) for o in outcomes]

    with ThreadPoolExecutor(1) as pool:
        outcomes = pool.submit(asyncio.run, asyncio.wait_for(scenario(), BOUND_S)).result()
    assert len(outcomes) == SUBMITTERS * SUBMISSIONS
    assert {o.http_status for o in outcomes} == {202}
    assert all(o.verdict and o.verdict["status"] == "passed" for o in outcomes), \
        [o.verdict for o in outcomes if not o.verdict or o.verdict["status"] != "passed"][:3]
    ids = [o.submission_id for o in outcomes]
    assert len(set(ids)) == len(ids)
    for submission_id in ids:
        entries = running_tier.redis.xrange(f"course:events:{submission_id}")
        assert [json.loads(f[b"e"])["kind"] for _, f in entries].count("verdict") == 1, submission_id
    engine = create_engine(running_tier.env["COURSE_DATABASE_URL"])
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT status, count(*) FROM submissions GROUP BY status")).all()
        attempts = conn.execute(text("SELECT sum(attempts) FROM exercise_progress")).scalar()
    engine.dispose()
    assert dict(stored) == {"passed": len(ids)} and attempts == len(ids)
