"""GET /readyz through the front door: a real `uvicorn` site (production mode, the embedded sandbox runner, its own
SQLite file) says 503 and what it waits for while it warms, then 200; and the first learner's job after that finds
the sandbox already up (the runner counts jobs that had to wait for a sandbox server to start: none), not a cold
start. No wall-clock threshold here: bench/first_job.py measures what the first learner waits for.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest

from app.core.config import ROOT
from tests.support.clients import Learner, solutions
from tests.support.servers import site_server

pytestmark = pytest.mark.slow

WARM_TIMEOUT_S = 300  # torch's import and the first children, on a machine other sessions load


def poll_until_ready(base: str) -> list[dict]:
    """Poll /readyz until it answers 200; return every answer seen, each with its status code."""
    seen, deadline = [], time.monotonic() + WARM_TIMEOUT_S
    while time.monotonic() < deadline:
        response = httpx.get(base + "/readyz", timeout=10)
        seen.append({"code": response.status_code, **response.json()})
        assert response.status_code in (200, 503), seen[-1]
        if response.status_code == 200:
            return seen
        assert response.headers["retry-after"] == "1" and seen[-1]["waiting_for"], seen[-1]
        time.sleep(0.05)
    raise AssertionError(f"/readyz did not answer 200 within {WARM_TIMEOUT_S} s; last: {seen[-1]}")


async def submit_once(base: str, slug: str):
    async with Learner(base) as learner:
        return await learner.submit(slug, solutions()[slug])


def test_readyz_says_warming_then_ready_and_the_first_job_is_warm(tmp_path):
    with site_server(tmp_path) as (base, _proc):
        seen = poll_until_ready(base)
        warming, ready = seen[0], seen[-1]
        # pages answered before the sandbox was warm: the first /readyz found it still warming, and said on what
        assert warming["code"] == 503 and warming["status"] == "warming", warming
        assert any("sandbox" in w for w in warming["waiting_for"]), warming
        assert ready["status"] == "ready" and ready["waiting_for"] == [], ready
        assert ready["warm_job"]["status"] == "passed", ready  # the warm-up graded a solution, and it passed
        assert ready["cold_starts"] == 0, ready

        outcome = asyncio.run(submit_once(base, "pick-device"))
        assert outcome.http_status == 202 and outcome.verdict["status"] == "passed", outcome

        after = httpx.get(base + "/readyz", timeout=10).json()
        assert after["cold_starts"] == 0, after  # the learner's job did not wait for a sandbox server to start


def test_the_web_process_does_not_import_torch():
    # it runs no job: torch (and torch._dynamo, which the harness's wording warm-up pulls in) is the fork server's
    code = ("import sys\nimport app.main, app.grading.grader, app.submissions.live, app.submissions.views\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout[:500]
