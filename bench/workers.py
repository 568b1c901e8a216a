"""The worker tier (COURSE_RUNNER=celery) against the embedded runner, in the same run on the same machine.

- submit p50: POST /api/exercises/pick-device/submissions until its 202, one submission at a time (each waits
  for its verdict, so no queue builds up), on the local site and on the tier. Both use a SQLite file, so the
  difference is the runner's alone: a Redis LLEN, a Celery publish, and the row's enqueue mark.
- verdicts per second: 8 submitters x 6 submissions through one web server, with one worker process (one job
  slot), then with two. The machine has 2 cores, shared by the web server, Redis and the workers.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tests.support.clients import Learner, solutions
from tests.support.servers import site_server
from tests.support.services import RedisServer
from tests.support.tier import tier

EXERCISE = "pick-device"
SUBMISSIONS = 40
WARM_UP = 3
SUBMITTERS, EACH = 8, 6


async def submit_latencies(base: str) -> list[float]:
    """Return the POST -> 202 times (ms) of SUBMISSIONS sequential submissions (after WARM_UP uncounted ones)."""
    code = solutions()[EXERCISE]
    times = []
    async with Learner(base) as learner:
        for i in range(WARM_UP + SUBMISSIONS):
            t0 = time.perf_counter()
            response = await learner.request("POST", f"/api/exercises/{EXERCISE}/submissions", json={"code": code})
            elapsed = (time.perf_counter() - t0) * 1000
            assert response.status_code == 202, response.text
            verdict = await learner.wait_verdict(response.json()["id"])
            assert verdict and verdict["status"] == "passed", verdict
            if i >= WARM_UP:
                times.append(elapsed)
    return times


async def verdicts_per_s(base: str) -> float:
    """Return verdicts per second for SUBMITTERS learners submitting EACH solutions as fast as verdicts come."""
    code = solutions()[EXERCISE]

    async def submitter() -> int:
        passed = 0
        async with Learner(base, timeout=300) as learner:
            for _ in range(EACH):
                outcome = await learner.submit(EXERCISE, code)
                while outcome.http_status == 429:
                    await asyncio.sleep(int(outcome.retry_after))
                    outcome = await learner.submit(EXERCISE, code)
                passed += bool(outcome.verdict and outcome.verdict["status"] == "passed")
        return passed

    t0 = time.perf_counter()
    passed = sum(await asyncio.gather(*(submitter() for _ in range(SUBMITTERS))))
    assert passed == SUBMITTERS * EACH, f"only {passed} of {SUBMITTERS * EACH} passed"
    return passed / (time.perf_counter() - t0)


def run() -> dict:
    """Measure the local runner's and the tier's submit latency, then the tier's throughput with 1 and 2 workers."""
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        work = Path(tmp)
        (work / "local").mkdir()
        with site_server(work / "local", until_ready=True, COURSE_SUBMISSION_RATE_LIMIT="100000/minute",
                         COURSE_SUBMISSION_ADDRESS_RATE_LIMIT="100000/minute") as (base, _proc):
            local = asyncio.run(submit_latencies(base))
        with RedisServer() as redis, tier(f"sqlite:///{work / 'tier.db'}", redis.url, work, webs=1, workers=1) as t:
            celery = asyncio.run(submit_latencies(t.web[0]))
            one = asyncio.run(verdicts_per_s(t.web[0]))
            t.start_worker()
            two = asyncio.run(verdicts_per_s(t.web[0]))
    local_p50, celery_p50 = statistics.median(local), statistics.median(celery)
    return {"local_submit_p50_ms": round(local_p50, 1), "celery_submit_p50_ms": round(celery_p50, 1),
            "celery_submit_overhead_ms": round(celery_p50 - local_p50, 1),
            "celery_submit_p95_ms": round(statistics.quantiles(celery, n=20)[-1], 1),
            "celery_verdicts_per_s_1w": round(one, 2), "celery_verdicts_per_s_2w": round(two, 2)}
